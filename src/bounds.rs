//! The bounds a caller may give, on every surface alike: their defaults, and the one way a bound
//! becomes a deadline or a wait on a file (`crate::input::intake` refuses a bound that cannot be one).

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;

/// How long a request may spend probing by default (R6).
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a kill, or a wait for a scope to empty, may take by default (R15): a scope's
/// processes get this long to be reaped.
pub const DEFAULT_KILL_TIMEOUT: Duration = Duration::from_secs(5);

/// `now + bound`, saturating: a bound too large for the clock (a caller's `Duration::MAX`, Python's
/// `1e19` seconds) means as late as a century from now, never a panic.
pub(crate) fn deadline_after(bound: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(bound)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(now)
}

/// Waits at most `at_most` for `fd` to be ready for `flags`: `Ok(true)` when it is, `Ok(false)`
/// when the time passed or a signal came first (the caller looks at its deadline again).
pub(crate) fn wait_ready(
    fd: impl AsFd,
    flags: PollFlags,
    at_most: Duration,
) -> Result<bool, Errno> {
    // Only a wait of more than i64::MAX seconds fails the conversion; it waits as long as poll can.
    let timeout = Timespec::try_from(at_most).unwrap_or(Timespec {
        tv_sec: i64::MAX,
        tv_nsec: 0,
    });
    let mut fds = [PollFd::new(&fd, flags)];
    match poll(&mut fds, Some(&timeout)) {
        Ok(0) | Err(Errno::INTR) => Ok(false),
        Ok(_) => Ok(true),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::{deadline_after, wait_ready};
    use rustix::event::PollFlags;
    use std::time::{Duration, Instant};

    #[test]
    fn a_bound_too_large_for_the_clock_saturates() {
        let far = deadline_after(Duration::MAX);
        assert!(far > Instant::now() + Duration::from_secs(365 * 86_400));
        let near = deadline_after(Duration::from_millis(10));
        assert!(near <= Instant::now() + Duration::from_millis(10));
    }

    #[test]
    fn a_wait_on_a_file_ends_when_it_is_ready_or_at_its_bound() {
        let (read, mut write) = std::os::unix::net::UnixStream::pair().unwrap();
        let started = Instant::now();
        assert_eq!(
            wait_ready(&read, PollFlags::IN, Duration::from_millis(50)),
            Ok(false)
        );
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        std::io::Write::write_all(&mut write, b"x").unwrap();
        // Ready at once, even with a bound beyond what poll's timeout can hold.
        assert_eq!(wait_ready(&read, PollFlags::IN, Duration::MAX), Ok(true));
    }
}

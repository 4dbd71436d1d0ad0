//! Running a helper process (`systemd-run --version`, the one the library still starts) with a
//! hard deadline (R6): on time-out it is killed and reaped, and the caller is never held past the
//! deadline.

use std::os::fd::OwnedFd;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rustix::event::PollFlags;
use rustix::io::Errno;

use crate::bounds::wait_ready;

/// How much of its output is kept; the rest is read and dropped so the child never blocks on a
/// full pipe.
const CAPTURE_LIMIT: usize = 16 * 1024;

/// Why a helper gave no answer.
#[derive(Debug)]
pub(crate) enum RunFailure {
    /// It could not be started.
    Spawn(std::io::Error),
    /// It was still running at the deadline, and was killed and reaped.
    TimedOut(Duration),
}

impl std::fmt::Display for RunFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunFailure::Spawn(e) => write!(f, "could not be started: {e}"),
            RunFailure::TimedOut(after) => write!(f, "timed out after {} ms", after.as_millis()),
        }
    }
}

/// Runs `cmd` (stdin and stderr null) until it exits or `deadline` passes, and returns what it
/// wrote on stdout. The pipe is read here, a few milliseconds at a time, while the child's exit is
/// watched: once it has exited, what it wrote is in the pipe and is taken without waiting for the
/// pipe to close, which a grandchild holding it would put off until the deadline (and a request
/// would then meet the manager with no time left).
pub(crate) fn run(mut cmd: Command, deadline: Instant) -> Result<Vec<u8>, RunFailure> {
    let started = Instant::now();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().map_err(RunFailure::Spawn)?;
    let stdout = match child.stdout.take() {
        Some(pipe) => read_until_exit(OwnedFd::from(pipe), &mut child, deadline),
        None => Vec::new(),
    };
    match reap_by(&mut child, deadline) {
        Some(_) => Ok(stdout),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(RunFailure::TimedOut(started.elapsed()))
        }
    }
}

/// How long one wait on the pipe lasts before the child's exit is looked at again.
const LOOK_EVERY: Duration = Duration::from_millis(5);

/// Reads `pipe` until it closes, `child` has exited and the pipe holds nothing more, or
/// `deadline`; keeps the first [`CAPTURE_LIMIT`] bytes and drops the rest, so that the child never
/// blocks on a full pipe.
fn read_until_exit(pipe: OwnedFd, child: &mut Child, deadline: Instant) -> Vec<u8> {
    let mut kept = Vec::new();
    if rustix::io::ioctl_fionbio(&pipe, true).is_err() {
        return kept;
    }
    let mut buf = [0u8; 4096];
    let mut exited = false;
    loop {
        match rustix::io::read(&pipe, &mut buf) {
            Ok(0) => return kept,
            Ok(n) => {
                let room = CAPTURE_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                continue;
            }
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) if !exited => {}
            // Empty with the child gone (a grandchild holds the pipe), or unreadable.
            Err(_) => return kept,
        }
        let now = Instant::now();
        if now >= deadline {
            return kept;
        }
        let wait = LOOK_EVERY.min(deadline - now);
        let _ = wait_ready(&pipe, PollFlags::IN, wait);
        // Whatever it wrote before exiting is in the pipe by now: the next read takes it.
        exited = matches!(child.try_wait(), Ok(Some(_)));
    }
}

/// Reaps `child` if it exits by `deadline`. The child has normally exited already (its pipes
/// closed), so the first check succeeds; the short sleeps only cover a child that closed its
/// pipes early or a grandchild that still holds them.
fn reap_by(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    let mut pause = Duration::from_micros(50);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_stdout_only() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let stdout = run(cmd, Instant::now() + Duration::from_secs(5)).unwrap();
        assert_eq!(stdout, b"out\n");
    }

    #[test]
    fn a_hung_child_is_killed_at_the_deadline() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let start = Instant::now();
        let failure = run(cmd, start + Duration::from_millis(200)).unwrap_err();
        assert!(matches!(failure, RunFailure::TimedOut(_)), "{failure}");
        assert!(
            start.elapsed() < Duration::from_millis(700),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_grandchild_holding_the_pipe_does_not_hold_the_caller() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 5 & echo out"]);
        let start = Instant::now();
        assert_eq!(run(cmd, start + Duration::from_secs(3)).unwrap(), b"out\n");
        // Not the deadline: the output is taken once the child has exited.
        assert!(
            start.elapsed() < Duration::from_millis(500),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn output_beyond_the_limit_is_drained_and_dropped() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "head -c 1000000 /dev/zero"]);
        let stdout = run(cmd, Instant::now() + Duration::from_secs(5)).unwrap();
        assert_eq!(stdout.len(), CAPTURE_LIMIT);
    }

    #[test]
    fn a_missing_program_is_a_spawn_failure() {
        let cmd = Command::new("/nonexistent/synaps-scope-test");
        assert!(matches!(
            run(cmd, Instant::now() + Duration::from_secs(1)),
            Err(RunFailure::Spawn(_))
        ));
    }
}

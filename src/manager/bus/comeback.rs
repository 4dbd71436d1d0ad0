//! Waiting for a manager that is away for a moment. A distribution's upgrade re-executes every
//! user manager (`systemctl --user daemon-reexec`), and a manager may be restarted: for about
//! 0.1 s its private socket refuses connections and its name on the session bus has no owner.
//! A request that met that, with nothing sent to the manager, waits for it within its own bound
//! and tries again, rather than launch unscoped or be refused.
//!
//! A manager that died stays away, and its socket refuses for as long as its file lasts. So the
//! wait is for [`COMEBACK`] from the moment a manager was first found away, shared by every
//! process through a mark in the runtime directory: a burst that meets a re-exec waits for the
//! same moment, and once a manager has been away longer than that, requests give up at once
//! until one reaches a manager again and clears the mark.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use super::Route;

/// How long a manager may be away and still be waited for: a re-exec takes about 0.1 s, a
/// restart of `user@UID.service` a few tenths.
pub(crate) const COMEBACK: Duration = Duration::from_millis(1500);

/// The first pause between tries; each doubles, up to [`LONGEST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(2);
const LONGEST_PAUSE: Duration = Duration::from_millis(25);

/// A try with less than this left of its bound is not worth making.
const LEAST_FOR_A_TRY: Duration = Duration::from_millis(5);

/// The mark's name in the runtime directory: there since a request first found the manager away.
const MARK: &str = "synaps-scope.manager-away";

/// One request's waiting for a manager that is away.
pub(crate) struct Comeback {
    /// Where the mark is (the runtime directory), if the route has one.
    mark: Option<PathBuf>,
    /// When this request found the manager away, where there is no mark to share.
    first_away: Option<SystemTime>,
    pause: Duration,
}

impl Comeback {
    pub(crate) fn new(route: &Route) -> Self {
        Comeback {
            mark: route.runtime_dir().map(mark_in),
            first_away: None,
            pause: FIRST_PAUSE,
        }
    }

    /// After a try that found the manager away: waits a moment and says to try again, or says
    /// not to (the manager has been away longer than [`COMEBACK`], or `deadline` is too near).
    pub(crate) fn wait(&mut self, deadline: Instant) -> bool {
        let now = SystemTime::now();
        let away_since = match &self.mark {
            Some(mark) => marked_since(mark).unwrap_or_else(|| {
                // Made once, by the first to find it away: a later one does not move it on.
                let _ = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(mark);
                marked_since(mark).unwrap_or(now)
            }),
            None => *self.first_away.get_or_insert(now),
        };
        // A mark from the future (a clock set back) counts as made now.
        let away_for = now.duration_since(away_since).unwrap_or_default();
        let Some(comeback_left) = COMEBACK.checked_sub(away_for) else {
            return false;
        };
        let bound_left = deadline.saturating_duration_since(Instant::now());
        let pause = self.pause.min(comeback_left);
        if bound_left < pause + LEAST_FOR_A_TRY {
            return false;
        }
        std::thread::sleep(pause);
        self.pause = (self.pause * 2).min(LONGEST_PAUSE);
        true
    }

    /// The manager answered: whatever was marked of its absence goes.
    pub(crate) fn reached(&self) {
        if let Some(mark) = &self.mark {
            let _ = std::fs::remove_file(mark);
        }
    }
}

fn mark_in(runtime: &OsStr) -> PathBuf {
    PathBuf::from(runtime).join(MARK)
}

fn marked_since(mark: &PathBuf) -> Option<SystemTime> {
    std::fs::metadata(mark).ok()?.modified().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::inputs::UserBus;
    use crate::manager::bus::Fallback;

    fn route_in(dir: &std::path::Path) -> Route {
        Route::to(
            UserBus {
                runtime_dir: Some(dir.as_os_str()),
                bus_address: None,
            },
            Fallback::SessionFirst,
        )
    }

    #[test]
    fn a_manager_away_is_waited_for_until_the_comeback_time_shared_through_the_mark() {
        let dir = std::env::temp_dir().join(format!("synaps-comeback-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let route = route_in(&dir);
        let far = Instant::now() + Duration::from_secs(60);

        let mut first = Comeback::new(&route);
        assert!(first.wait(far), "a manager just found away is waited for");
        assert!(dir.join(MARK).exists());
        // Another request (another process) shares the moment it was first found away.
        let mut second = Comeback::new(&route);
        assert!(second.wait(far));

        // Away for longer than COMEBACK: given up at once, by everyone.
        let long_ago = SystemTime::now() - COMEBACK - Duration::from_millis(1);
        std::fs::File::options()
            .write(true)
            .open(dir.join(MARK))
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        let started = Instant::now();
        assert!(!Comeback::new(&route).wait(far));
        assert!(started.elapsed() < Duration::from_millis(5));

        // A bound too near for another try is not slept out.
        first.reached();
        assert!(
            !dir.join(MARK).exists(),
            "reaching the manager clears the mark"
        );
        assert!(!Comeback::new(&route).wait(Instant::now() + Duration::from_millis(3)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn without_a_runtime_directory_a_request_waits_from_its_own_first_finding() {
        let route = Route::to(
            UserBus {
                runtime_dir: None,
                bus_address: Some(OsStr::new("unix:path=/nonexistent/bus")),
            },
            Fallback::SessionFirst,
        );
        let mut alone = Comeback::new(&route);
        let far = Instant::now() + Duration::from_secs(60);
        assert!(alone.wait(far));
        alone.first_away = Some(SystemTime::now() - COMEBACK);
        assert!(!alone.wait(far));
    }
}

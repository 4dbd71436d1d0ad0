//! A slice without limits (R12): the manager is asked for the slice's limits on a background thread
//! that never delays a launch, and a slice with none is warned about once per slice name per
//! process. A check that could not get an answer (a busy or stopped manager) is tried again by a
//! later request, after a pause that doubles each time, so the warning still comes once the manager
//! answers; a check that keeps failing is reported once at WARN, with the slice and why.

use std::ffi::OsString;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::diag::TARGET;
use crate::systemctl::systemctl_show;
use crate::warn::Shared;

/// The limits whose absence makes a slice suspicious (R12).
const LIMIT_PROPERTIES: [&str; 5] = [
    "MemoryMax",
    "MemoryHigh",
    "MemorySwapMax",
    "CPUQuotaPerSecUSec",
    "TasksMax",
];

/// The pause before a failed check may be tried again; it doubles after each failure, up to
/// [`LONGEST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LONGEST_PAUSE: Duration = Duration::from_secs(60);

/// After this many failed checks of one slice in a row, the failure is reported at WARN (once).
const FAILURES_BEFORE_WARNING: u32 = 3;

/// Where the check of one slice name stands.
enum Check {
    /// A thread is asking the manager now; the slice is named for a WARN should it not finish.
    Running {
        slice: String,
        unfinished_warned: bool,
    },
    /// The manager answered, and any warning due was given: never checked again.
    Answered,
    /// The last attempt got no answer; a request after `retry_at` tries again.
    Failed {
        failures: u32,
        /// The WARN for this failure, should it be the last.
        warning: String,
        retry_at: Instant,
        failure_warned: bool,
    },
}

/// Every slice name's check (the last [`crate::warn::NAMES_REMEMBERED`] names).
static CHECKS: Shared<Check> = Shared::new();

/// How many checks are running, so that a program about to exit can wait for their warnings.
static RUNNING: Mutex<usize> = Mutex::new(0);
static RUNNING_CHANGED: Condvar = Condvar::new();

/// The R12 check for `slice`, on a background thread that reports to the caller's current
/// `tracing` dispatcher, unless it was answered already, is running, or failed too recently.
/// Never delays the caller.
pub(crate) fn check_slice_limits_in_background(
    slice: &str,
    env: &[(OsString, OsString)],
    bound: Duration,
) {
    let now = Instant::now();
    let (failures, failure_warned) = {
        let mut checks = CHECKS.lock();
        let attempt = match checks.get_mut(slice) {
            None => (0, false),
            Some(Check::Failed {
                failures,
                retry_at,
                failure_warned,
                ..
            }) if *retry_at <= now => (*failures, *failure_warned),
            Some(_) => return,
        };
        checks.insert(
            slice,
            Check::Running {
                slice: slice.to_owned(),
                unfinished_warned: false,
            },
        );
        attempt
    };
    *lock_running() += 1;
    let dispatch = tracing::dispatcher::get_default(|d| d.clone());
    let (name, env) = (slice.to_owned(), env.to_vec());
    let spawned = std::thread::Builder::new()
        .name("synaps-slice-check".into())
        .spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || {
                check_slice_limits(&name, &env, bound, failures, failure_warned)
            });
            finished_running();
        });
    if let Err(e) = spawned {
        record_failure(
            slice,
            format!("the check could not start: {e}"),
            failures,
            failure_warned,
        );
        finished_running();
    }
}

fn check_slice_limits(
    slice: &str,
    env: &[(OsString, OsString)],
    bound: Duration,
    failures: u32,
    failure_warned: bool,
) {
    match read_slice_limits(slice, env, bound) {
        Ok(limits) => {
            CHECKS.lock().insert(slice, Check::Answered);
            if let Some(warning) = slice_warning(slice, &limits) {
                tracing::warn!(target: TARGET, "{warning}");
            }
            tracing::debug!(target: TARGET, slice, limited = !limits.set.is_empty(), "slice check finished");
        }
        Err(why) => {
            tracing::debug!(target: TARGET, slice, "could not read the limits of slice {slice}: {why}");
            record_failure(slice, why, failures, failure_warned);
        }
    }
}

/// Records a failed check: the next one may start after a pause; the [`FAILURES_BEFORE_WARNING`]th
/// failure in a row is reported at WARN, unless [`flush_warnings`] already reported this one.
fn record_failure(slice: &str, why: String, failures: u32, failure_warned: bool) {
    let failures = failures.saturating_add(1);
    let warning = check_failed_warning(slice, failures, &why);
    let pause = FIRST_PAUSE
        .saturating_mul(1 << (failures - 1).min(6))
        .min(LONGEST_PAUSE);
    let warn_now = {
        let mut checks = CHECKS.lock();
        let flushed = matches!(
            checks.get_mut(slice),
            Some(Check::Running {
                unfinished_warned: true,
                ..
            })
        );
        let warned = failure_warned || flushed;
        let warn_now = !warned && failures >= FAILURES_BEFORE_WARNING;
        checks.insert(
            slice,
            Check::Failed {
                failures,
                warning: warning.clone(),
                retry_at: Instant::now() + pause,
                failure_warned: warned || warn_now,
            },
        );
        warn_now
    };
    // Logged with no lock held: a host's log callback may call back into the library.
    if warn_now {
        tracing::warn!(target: TARGET, "{warning}");
    }
}

fn check_failed_warning(slice: &str, failures: u32, why: &str) -> String {
    format!(
        "could not check whether slice {slice} sets any limits ({failures} attempt{}, the last: \
         {why}); scopes in it may be uncapped; later launches will ask again",
        if failures == 1 { "" } else { "s" },
    )
}

fn lock_running() -> std::sync::MutexGuard<'static, usize> {
    RUNNING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn finished_running() {
    *lock_running() -= 1;
    RUNNING_CHANGED.notify_all();
}

/// For a program about to exit (the command line, a script): waits at most `bound` for the slice
/// checks still running, so that their warnings are logged, then reports at WARN each slice whose
/// check failed or is still unanswered and was not reported yet, since no later request of this
/// process will ask again. Returns whether every check had finished.
pub fn flush_warnings(bound: Duration) -> bool {
    let deadline = crate::bounded::deadline_after(bound);
    let mut running = lock_running();
    while *running > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        running = RUNNING_CHANGED
            .wait_timeout(running, left)
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .0;
    }
    let all_finished = *running == 0;
    drop(running);
    let mut due = Vec::new();
    for check in CHECKS.lock().values_mut() {
        match check {
            Check::Failed {
                warning,
                failure_warned: failure_warned @ false,
                ..
            } => {
                *failure_warned = true;
                due.push(warning.clone());
            }
            Check::Running {
                slice,
                unfinished_warned: unfinished_warned @ false,
            } => {
                *unfinished_warned = true;
                let why = format!("no answer within {bound:?}");
                due.push(check_failed_warning(slice, 1, &why));
            }
            _ => {}
        }
    }
    // Logged with no lock held: a host's log callback may call back into the library.
    for warning in due {
        tracing::warn!(target: TARGET, "{warning}");
    }
    all_finished
}

/// The R12 warning for a slice whose limits are `limits`, or None when one is set.
pub(crate) fn slice_warning(slice: &str, limits: &SliceLimits) -> Option<String> {
    if !limits.set.is_empty() {
        return None;
    }
    let unit_file = match &limits.fragment {
        Some(path) => format!("its unit file is {path}"),
        None => "no unit file defines it".to_owned(),
    };
    Some(format!(
        "slice {slice} sets no limits ({}): systemd created it on the fly or its unit file sets none, \
         so scopes in it are separate but uncapped; it may be a typo, or a unit file not yet \
         loaded (systemctl --user daemon-reload); {unit_file}",
        LIMIT_PROPERTIES.join(", "),
    ))
}

/// What the user manager says of a slice's limits (R12).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceLimits {
    /// `(property, value)` for each limit that is set.
    pub set: Vec<(String, String)>,
    /// The unit file, when one exists.
    pub fragment: Option<String>,
}

/// Asks the manager for `slice`'s limits and unit file, within `bound`.
pub(crate) fn read_slice_limits(
    slice: &str,
    env: &[(OsString, OsString)],
    bound: Duration,
) -> Result<SliceLimits, String> {
    let properties = format!("{},FragmentPath", LIMIT_PROPERTIES.join(","));
    systemctl_show(Some(slice), &properties, env, bound).map(|show| parse_slice_limits(&show))
}

/// Reads `Property=value` lines; a limit is set unless it is `infinity` or empty.
pub(crate) fn parse_slice_limits(show: &str) -> SliceLimits {
    let mut limits = SliceLimits {
        set: Vec::new(),
        fragment: None,
    };
    for (key, value) in show.lines().filter_map(|l| l.split_once('=')) {
        if key == "FragmentPath" {
            limits.fragment = Some(value.to_owned()).filter(|v| !v.is_empty());
        } else if LIMIT_PROPERTIES.contains(&key) && !matches!(value, "" | "infinity") {
            limits.set.push((key.to_owned(), value.to_owned()));
        }
    }
    limits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_set_unless_infinity_or_empty() {
        let none = parse_slice_limits(
            "MemoryMax=infinity\nMemoryHigh=infinity\nMemorySwapMax=infinity\nCPUQuotaPerSecUSec=infinity\nTasksMax=infinity\nFragmentPath=\n",
        );
        assert_eq!(
            none,
            SliceLimits {
                set: vec![],
                fragment: None
            }
        );
        let some = parse_slice_limits(
            "MemoryMax=1073741824\nTasksMax=infinity\nFragmentPath=/u/a.slice\n",
        );
        assert_eq!(
            some,
            SliceLimits {
                set: vec![("MemoryMax".into(), "1073741824".into())],
                fragment: Some("/u/a.slice".into())
            }
        );
    }
}

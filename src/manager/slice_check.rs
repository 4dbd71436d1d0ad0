//! A slice without limits (R12): the manager is asked for the slice's limits on a background thread
//! that never delays a launch, and a slice with none is warned about once per slice name per
//! process. A check that gets no answer (a busy or stopped manager) asks again on its own, after a
//! pause that doubles each time, so the warning still comes once the manager answers, with no
//! further request; a check that keeps failing is reported once at WARN, with the slice and why.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::diag::{self, TARGET};
use crate::manager::bus::wire::Value;
use crate::manager::bus::Route;
use crate::manager::{self, format_timespan, SLICE, UNIT};
use crate::memo::Shared;
use crate::per_process::{lock, PerProcess};

/// The limits whose absence makes a slice suspicious (R12).
const LIMIT_PROPERTIES: [&str; 5] = [
    "MemoryMax",
    "MemoryHigh",
    "MemorySwapMax",
    "CPUQuotaPerSecUSec",
    "TasksMax",
];

/// The pause before a failed check asks again; it doubles after each failure, up to
/// [`LONGEST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LONGEST_PAUSE: Duration = Duration::from_secs(60);

/// After this many failed attempts in a row, the failure is reported at WARN (once).
const FAILURES_BEFORE_WARNING: u32 = 3;
/// After this many (about eight minutes of pauses), the thread stops asking; a later request of
/// the slice starts again.
const ATTEMPTS_PER_THREAD: u32 = 14;

/// Where the check of one slice name stands.
enum Check {
    /// A thread is asking the manager now, or pausing before it asks again. The slice is named
    /// (and the last failure kept) for a WARN should the process exit first.
    Running {
        slice: String,
        last_failure: Option<String>,
        warned: bool,
    },
    /// The manager answered, and any warning due was given: never checked again.
    Answered,
    /// The thread gave up; a request after `retry_at` starts one again.
    GaveUp {
        failures: u32,
        retry_at: Instant,
        warned: bool,
    },
}

/// Every slice name's check (the last [`crate::memo::NAMES_REMEMBERED`] names).
static CHECKS: Shared<Check> = Shared::new();

/// How many checks are asking the manager right now (not pausing), so that a program about to
/// exit can wait for their warnings.
static ASKING: PerProcess<Asking> = PerProcess::new();

#[derive(Default)]
struct Asking {
    count: Mutex<usize>,
    changed: Condvar,
}

/// The R12 check for `slice`, asked on `route` (the request's own, so a kept connection serves
/// it) on a background thread that reports to the caller's logging, unless it was answered
/// already, is running, or gave up too recently. Never delays the caller.
pub(crate) fn check_slice_limits_in_background(slice: &str, route: &Route, bound: Duration) {
    let now = Instant::now();
    let attempt = CHECKS.with(|checks| {
        let attempt = match checks.get_mut(slice) {
            None => (0, false),
            Some(Check::GaveUp {
                failures,
                retry_at,
                warned,
            }) if *retry_at <= now => (*failures, *warned),
            Some(_) => return None,
        };
        checks.insert(
            slice,
            Check::Running {
                slice: slice.to_owned(),
                last_failure: None,
                warned: attempt.1,
            },
        );
        Some(attempt)
    });
    let Some((failures, warned)) = attempt else {
        return;
    };
    // Counted before the thread starts, so that a flush right after this request waits for it.
    started_asking();
    let dispatch = diag::dispatch_for_another_thread();
    let (name, route) = (slice.to_owned(), route.clone());
    let spawned = std::thread::Builder::new()
        .name("synaps-slice-check".into())
        .spawn(move || {
            diag::with_dispatch(dispatch.as_ref(), || {
                keep_checking(&name, &route, bound, failures, warned)
            })
        });
    if let Err(e) = spawned {
        finished_asking();
        let why = format!("the check could not start: {e}");
        CHECKS.with(|checks| {
            checks.insert(
                slice,
                Check::GaveUp {
                    failures: failures + 1,
                    retry_at: now + FIRST_PAUSE,
                    warned,
                },
            )
        });
        tracing::debug!(target: TARGET, slice, "{why}");
    }
}

/// Asks until the manager answers, pausing longer after each failure; warns once after
/// [`FAILURES_BEFORE_WARNING`] failures in a row, and gives up after [`ATTEMPTS_PER_THREAD`].
/// The first attempt was counted as asking by the caller.
fn keep_checking(slice: &str, route: &Route, bound: Duration, mut failures: u32, mut warned: bool) {
    for attempt in 1..=ATTEMPTS_PER_THREAD {
        if attempt > 1 {
            started_asking();
        }
        // An attempt counts as asking until what it found is logged: a flush that saw it end
        // must find its warning said.
        let why = match read_slice_limits(slice, route, bound) {
            Ok(limits) => {
                CHECKS.with(|checks| checks.insert(slice, Check::Answered));
                if let Some(warning) = slice_warning(slice, &limits) {
                    tracing::warn!(target: TARGET, "{warning}");
                }
                tracing::debug!(target: TARGET, slice, limited = !limits.set.is_empty(), "slice check finished");
                finished_asking();
                return;
            }
            Err(why) => why,
        };
        tracing::debug!(target: TARGET, slice, "could not read the limits of slice {slice}: {why}");
        failures = failures.saturating_add(1);
        let warning = check_failed_warning(slice, failures, &why);
        let pause = FIRST_PAUSE
            .saturating_mul(1 << (failures - 1).min(6))
            .min(LONGEST_PAUSE);
        let giving_up = attempt == ATTEMPTS_PER_THREAD;
        let warn_now = CHECKS.with(|checks| {
            // flush_warnings may have reported this check meanwhile.
            warned |= matches!(
                checks.get_mut(slice),
                Some(Check::Running { warned: true, .. })
            );
            let warn_now = !warned && failures >= FAILURES_BEFORE_WARNING;
            warned |= warn_now;
            let check = if giving_up {
                Check::GaveUp {
                    failures,
                    retry_at: Instant::now() + pause,
                    warned,
                }
            } else {
                Check::Running {
                    slice: slice.to_owned(),
                    last_failure: Some(warning.clone()),
                    warned,
                }
            };
            checks.insert(slice, check);
            warn_now
        });
        // Logged with no lock held: a host's log callback may call back into the library.
        if warn_now {
            tracing::warn!(target: TARGET, "{warning}");
        }
        finished_asking();
        if !giving_up {
            std::thread::sleep(pause);
        }
    }
}

fn check_failed_warning(slice: &str, failures: u32, why: &str) -> String {
    format!(
        "could not check whether slice {slice} sets any limits ({failures} attempt{}, the last: \
         {why}); scopes in it may be uncapped; the library keeps asking in the background",
        if failures == 1 { "" } else { "s" },
    )
}

/// Counts one more check asking the manager.
fn started_asking() {
    *lock(&ASKING.get().count) += 1;
}

fn finished_asking() {
    let asking = ASKING.get();
    *lock(&asking.count) -= 1;
    asking.changed.notify_all();
}

/// For a program about to exit (the command line, a script): waits at most `bound` for the slice
/// checks asking the manager right now, so that their warnings are logged, then reports at WARN
/// each slice whose check is still without an answer and was not reported yet, since this process
/// may exit before the check asks again. Returns whether no check was still asking.
pub fn flush_warnings(bound: Duration) -> bool {
    let deadline = crate::bounds::deadline_after(bound);
    let checks_asking = ASKING.get();
    let mut asking = lock(&checks_asking.count);
    while *asking > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        asking = checks_asking
            .changed
            .wait_timeout(asking, left)
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .0;
    }
    let all_finished = *asking == 0;
    drop(asking);
    let mut due = Vec::new();
    CHECKS.with(|checks| {
        for check in checks.values_mut() {
            if let Check::Running {
                slice,
                last_failure,
                warned: warned @ false,
            } = check
            {
                *warned = true;
                due.push(last_failure.clone().unwrap_or_else(|| {
                    check_failed_warning(slice, 1, &format!("no answer within {bound:?}"))
                }));
            }
        }
    });
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

/// Asks the manager on `route` for `slice`'s limits and unit file, within `bound`.
pub(crate) fn read_slice_limits(
    slice: &str,
    route: &Route,
    bound: Duration,
) -> Result<SliceLimits, String> {
    let asked: Vec<(&str, &str)> = LIMIT_PROPERTIES
        .iter()
        .map(|name| (SLICE, *name))
        .chain([(UNIT, "FragmentPath")])
        .collect();
    let deadline = crate::bounds::deadline_after(bound);
    let values = manager::properties(route, &manager::unit_path(slice), &asked, deadline)
        .map_err(|e| e.to_string())?;
    slice_limits(&values)
}

/// The limits among `values` (the [`LIMIT_PROPERTIES`], then `FragmentPath`), each shown as
/// `systemctl show` shows it; a limit is set unless it is infinity.
fn slice_limits(values: &[Value]) -> Result<SliceLimits, String> {
    let mut limits = SliceLimits {
        set: Vec::new(),
        fragment: None,
    };
    for (name, value) in LIMIT_PROPERTIES.iter().zip(values) {
        let number = value
            .as_u64()
            .ok_or_else(|| format!("the manager's {name} is not a number"))?;
        if number != u64::MAX {
            let shown = if name.ends_with("USec") {
                format_timespan(number)
            } else {
                number.to_string()
            };
            limits.set.push(((*name).to_owned(), shown));
        }
    }
    let fragment = values
        .get(LIMIT_PROPERTIES.len())
        .and_then(Value::as_str)
        .ok_or("the manager gave no FragmentPath")?;
    limits.fragment = Some(fragment.to_owned()).filter(|f| !f.is_empty());
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_set_unless_infinity() {
        let none: Vec<Value> = [u64::MAX; 5]
            .into_iter()
            .map(|n| Value::Int(n.into()))
            .chain([Value::Str(String::new())])
            .collect();
        assert_eq!(
            slice_limits(&none),
            Ok(SliceLimits {
                set: vec![],
                fragment: None
            })
        );
        let some = [1 << 30, u64::MAX, u64::MAX, 500_000, 100]
            .into_iter()
            .map(|n| Value::Variant(Box::new(Value::Int(n.into()))))
            .chain([Value::Str("/u/a.slice".into())])
            .collect::<Vec<_>>();
        assert_eq!(
            slice_limits(&some),
            Ok(SliceLimits {
                set: vec![
                    ("MemoryMax".into(), "1073741824".into()),
                    ("CPUQuotaPerSecUSec".into(), "500ms".into()),
                    ("TasksMax".into(), "100".into()),
                ],
                fragment: Some("/u/a.slice".into())
            })
        );
        assert!(slice_limits(&[Value::Bool(true)]).is_err());
    }
}

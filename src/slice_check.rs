//! A slice without limits (R12): once per slice name per process, on a background thread that
//! never delays a launch, the manager is asked for the slice's limits, and a slice with none is
//! warned about.

use std::ffi::OsString;
use std::time::Duration;

use crate::diag::TARGET;
use crate::systemctl::systemctl_show;
use crate::warn::WarnedSet;

/// The limits whose absence makes a slice suspicious (R12).
const LIMIT_PROPERTIES: [&str; 5] = [
    "MemoryMax",
    "MemoryHigh",
    "MemorySwapMax",
    "CPUQuotaPerSecUSec",
    "TasksMax",
];

/// Slices whose limits have been (or are being) checked.
static SLICE_CHECKS: WarnedSet = WarnedSet::new();

/// The R12 check, once per slice name per process, on a background thread that reports to the
/// caller's current `tracing` dispatcher. Never delays the caller.
pub(crate) fn check_slice_limits_in_background(
    slice: &str,
    env: &[(OsString, OsString)],
    bound: Duration,
) {
    if !SLICE_CHECKS.first_time(slice) {
        return;
    }
    let dispatch = tracing::dispatcher::get_default(|d| d.clone());
    let (name, env) = (slice.to_owned(), env.to_vec());
    let spawned = std::thread::Builder::new()
        .name("synaps-slice-check".into())
        .spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || check_slice_limits(&name, &env, bound))
        });
    if let Err(e) = spawned {
        tracing::debug!(target: TARGET, slice, "the slice check could not start: {e}");
    }
}

fn check_slice_limits(slice: &str, env: &[(OsString, OsString)], bound: Duration) {
    let limits = read_slice_limits(slice, env, bound);
    match &limits {
        Ok(limits) => {
            if let Some(warning) = slice_warning(slice, limits) {
                tracing::warn!(target: TARGET, "{warning}");
            }
        }
        Err(reason) => {
            tracing::debug!(target: TARGET, "could not read the limits of slice {slice}: {reason}");
        }
    }
    let limited = limits.is_ok_and(|l| !l.set.is_empty());
    tracing::debug!(target: TARGET, slice, limited, "slice check finished");
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

//! Once-per-name warnings: the sets of names already warned about, and the probe-failure warning
//! (R11), given once per slice name per process. What is remembered is `memo`'s.

use crate::diag::TARGET;
use crate::memo::Shared;

/// Which once-per-name warnings have been given; keyed by what makes a warning distinct (a slice
/// name, a config message).
pub(crate) struct WarnedSet(Shared<()>);

impl WarnedSet {
    pub(crate) const fn new() -> Self {
        WarnedSet(Shared::new())
    }

    /// True the first time `key` is seen in this process (or since it was forgotten, see
    /// [`crate::memo::NAMES_REMEMBERED`]), false otherwise.
    pub(crate) fn first_time(&self, key: &str) -> bool {
        self.0.with(|seen| {
            if seen.get_mut(key).is_some() {
                return false;
            }
            seen.insert(key, ());
            true
        })
    }
}

/// Slices whose probe failure has been warned about (None, the default slice, is "").
static PROBE_WARNINGS: WarnedSet = WarnedSet::new();

/// How a slice is named in warnings.
pub(crate) fn slice_label(slice: Option<&str>) -> String {
    match slice {
        Some(name) => format!("slice {name}"),
        None => "the default slice".to_owned(),
    }
}

/// Slices whose launches went direct because systemd-run cannot reach the manager from this
/// process's pid namespace: a warning of its own, which a probe failure's does not stand for.
static PID_NAMESPACE_WARNINGS: WarnedSet = WarnedSet::new();

/// The R11 warning: once per slice name per process.
pub(crate) fn warn_probe_failed_once(slice: Option<&str>, reason: &str) {
    warn_direct_once(&PROBE_WARNINGS, slice, reason);
}

/// The warning that systemd-run cannot reach the manager from this pid namespace: once per slice
/// name per process, whatever probe failures were warned about.
pub(crate) fn warn_systemd_run_in_pid_namespace_once(slice: Option<&str>, reason: &str) {
    warn_direct_once(&PID_NAMESPACE_WARNINGS, slice, reason);
}

fn warn_direct_once(warned: &WarnedSet, slice: Option<&str>, reason: &str) {
    if warned.first_time(slice.unwrap_or("")) {
        tracing::warn!(
            target: TARGET,
            "process scopes unavailable for {}: {reason}; launching directly (warned once per slice)",
            slice_label(slice),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_failure_and_the_pid_namespace_are_each_warned_once_per_slice() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let warned = Arc::new(AtomicUsize::new(0));
        let counting = Arc::clone(&warned);
        let sink = crate::diag::CallbackSubscriber::new(
            tracing::Level::WARN,
            move |_: &tracing::Level, _: &str, _: &str| {
                counting.fetch_add(1, Ordering::SeqCst);
            },
        );
        tracing::subscriber::with_default(sink, || {
            let slice = Some("synaps-warn-kinds.slice");
            warn_probe_failed_once(slice, "the manager did not answer");
            warn_systemd_run_in_pid_namespace_once(slice, "systemd-run cannot reach it");
            warn_probe_failed_once(slice, "again");
            warn_systemd_run_in_pid_namespace_once(slice, "again");
        });
        assert_eq!(warned.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_warned_set_says_yes_once_per_key() {
        static SET: WarnedSet = WarnedSet::new();
        assert!(SET.first_time("a"));
        assert!(!SET.first_time("a"));
        assert!(SET.first_time("b"));
    }
}

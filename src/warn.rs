//! Once-per-name warnings: the sets of names already warned about, and the probe-failure warning
//! (R11), given once per slice name per process.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use crate::diag::TARGET;

/// Which once-per-process warnings have been given; each set is keyed by what makes a
/// warning distinct (a slice name, a config message).
pub(crate) struct WarnedSet(OnceLock<Mutex<HashSet<String>>>);

impl WarnedSet {
    pub(crate) const fn new() -> Self {
        WarnedSet(OnceLock::new())
    }

    /// True the first time `key` is seen in this process, false ever after.
    pub(crate) fn first_time(&self, key: &str) -> bool {
        let set = self.0.get_or_init(|| Mutex::new(HashSet::new()));
        let mut set = set.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        set.insert(key.to_owned())
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

/// The R11 warning: once per slice name per process.
pub(crate) fn warn_probe_failed_once(slice: Option<&str>, reason: &str) {
    if PROBE_WARNINGS.first_time(slice.unwrap_or("")) {
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
    fn a_warned_set_says_yes_once_per_key() {
        static SET: WarnedSet = WarnedSet::new();
        assert!(SET.first_time("a"));
        assert!(!SET.first_time("a"));
        assert!(SET.first_time("b"));
    }
}

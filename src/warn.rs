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

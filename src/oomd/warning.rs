//! What a watch tells its caller: a warning before systemd-oomd acts (its rule, figure, limit and
//! how sure), and why a scope cannot be warned.

use std::fmt;
use std::time::Duration;

use crate::oomd::rules::OomdRule;

/// A warning that systemd-oomd is on its way to kill a scope.
#[derive(Clone, Debug, PartialEq)]
pub struct OomdWarning {
    /// The scope's unit.
    pub unit: String,
    /// The rule on its way to firing.
    pub rule: OomdRule,
    /// The unit the rule is set on (`user@1000.service` for the pressure rule as Debian and Fedora
    /// ship it, `-.slice` for the swap rule).
    pub monitored: String,
    /// In percent: the monitored unit's memory pressure (`full avg10`), or the share of swap used.
    pub figure: f64,
    /// In percent: the figure at which oomd acts.
    pub limit: f64,
    /// How long the pressure has been over its limit (zero under the swap rule).
    pub held_for: Duration,
    /// How long it must hold before oomd acts (zero under the swap rule, which acts at once).
    pub duration: Duration,
    /// How sure the warning is.
    pub sure: Sureness,
}

/// How sure a warning is.
///
/// Exhaustive on purpose: every surface maps each, and a new one must not compile unmapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sureness {
    /// The rule's figure is past its limit (pressure) or within 10 points of it or 10 s (swap), and the
    /// scope ranks first among oomd's candidates: oomd acts if it goes on so.
    Possible,
    /// The pressure has held past its limit for half the rule's duration with reclaim going on, or
    /// swap is within 3 points of its limit: oomd acts soon unless it eases.
    Likely,
}

impl Sureness {
    /// The word on every surface: `possible` or `likely`.
    pub fn as_str(self) -> &'static str {
        match self {
            Sureness::Possible => "possible",
            Sureness::Likely => "likely",
        }
    }
}

impl fmt::Display for OomdWarning {
    /// One line that names oomd, the rule and the scope's unit, with the figures.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "systemd-oomd's {} rule is on its way to killing {} ({}): ",
            self.rule.as_str(),
            self.unit,
            self.sure.as_str()
        )?;
        match self.rule {
            OomdRule::MemoryPressure => write!(
                f,
                "the memory pressure of {} is {:.2}%, over its limit of {:.2}% for {:.0} s of {:.0} s",
                self.monitored,
                self.figure,
                self.limit,
                self.held_for.as_secs_f64(),
                self.duration.as_secs_f64()
            ),
            OomdRule::Swap => write!(
                f,
                "swap is {:.2}% used, and {}'s rule acts past {:.2}%",
                self.figure, self.monitored, self.limit
            ),
        }
    }
}

impl CannotWarn {
    /// Whether oomd may still act on the scope, unseen: a rule covers it but cannot be followed
    /// here (not: no oomd, no rule, no swap for the swap rule, the scope gone).
    pub fn oomd_may_act(&self) -> bool {
        matches!(
            self.kind,
            CannotWarnKind::NoPsi
                | CannotWarnKind::Unreadable
                | CannotWarnKind::NoMemoryController
                | CannotWarnKind::CannotAsk
        )
    }
}

/// Why a scope cannot be warned about.
///
/// Exhaustive on purpose: every surface maps each, and a new one must not compile unmapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CannotWarnKind {
    /// systemd-oomd is not running (nothing owns `org.freedesktop.oom1`), or the system bus that
    /// would tell cannot be reached.
    NoOomd,
    /// No rule of oomd's covers the scope: oomd does not act on it.
    NoRule,
    /// The kernel has no pressure stall information (PSI), which the pressure rule reads.
    NoPsi,
    /// A file oomd reads cannot be read here.
    Unreadable,
    /// The machine has no swap: the swap rule cannot fire.
    NoSwap,
    /// The scope has no memory controller: oomd cannot rank it, nor kill it by rule.
    NoMemoryController,
    /// The scope is gone.
    ScopeGone,
    /// A manager could not say which rules cover the scope.
    CannotAsk,
}

impl CannotWarnKind {
    /// The word on every surface.
    pub fn as_str(self) -> &'static str {
        match self {
            CannotWarnKind::NoOomd => "no-oomd",
            CannotWarnKind::NoRule => "no-rule",
            CannotWarnKind::NoPsi => "no-psi",
            CannotWarnKind::Unreadable => "unreadable",
            CannotWarnKind::NoSwap => "no-swap",
            CannotWarnKind::NoMemoryController => "no-memory-controller",
            CannotWarnKind::ScopeGone => "scope-gone",
            CannotWarnKind::CannotAsk => "cannot-ask",
        }
    }
}

/// Why a scope cannot be warned about, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CannotWarn {
    /// The scope's unit.
    pub unit: String,
    /// Why, as a kind.
    pub kind: CannotWarnKind,
    /// Why, in words.
    pub message: String,
}

impl fmt::Display for CannotWarn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} cannot be warned about: {}", self.unit, self.message)
    }
}

impl std::error::Error for CannotWarn {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_is_distinct() {
        let kinds = [
            CannotWarnKind::NoOomd,
            CannotWarnKind::NoRule,
            CannotWarnKind::NoPsi,
            CannotWarnKind::Unreadable,
            CannotWarnKind::NoSwap,
            CannotWarnKind::NoMemoryController,
            CannotWarnKind::ScopeGone,
            CannotWarnKind::CannotAsk,
        ];
        let words: std::collections::HashSet<_> = kinds.iter().map(|k| k.as_str()).collect();
        assert_eq!(words.len(), kinds.len());
        assert_ne!(Sureness::Possible.as_str(), Sureness::Likely.as_str());
    }
}

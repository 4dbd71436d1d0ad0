//! Which of the embedding application's scopes a launch makes.

use std::fmt;
use std::str::FromStr;

/// Which kind of scope a launch makes. Each kind reads its own slice key from the config (R10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScopeKind {
    /// Shell tool commands and PTY shells; slice from `tool_scope_slice`.
    Tool,
    /// The daemon's own detached scope; slice from `daemon_scope_slice`.
    Daemon,
}

impl ScopeKind {
    /// Every kind.
    pub const ALL: [ScopeKind; 2] = [ScopeKind::Tool, ScopeKind::Daemon];

    /// The kind's name as it appears in unit names and descriptions: `tool` or `daemon`.
    pub fn as_str(self) -> &'static str {
        match self {
            ScopeKind::Tool => "tool",
            ScopeKind::Daemon => "daemon",
        }
    }

    /// The kind's number in the C ABI (`SCOPE_KIND_*`), which never changes.
    pub fn code(self) -> u32 {
        match self {
            ScopeKind::Tool => 0,
            ScopeKind::Daemon => 1,
        }
    }

    /// The config key naming this kind's slice.
    pub fn slice_key(self) -> &'static str {
        match self {
            ScopeKind::Tool => "tool_scope_slice",
            ScopeKind::Daemon => "daemon_scope_slice",
        }
    }
}

impl fmt::Display for ScopeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind name that is neither `tool` nor `daemon`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownKind(pub String);

impl fmt::Display for UnknownKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        unknown_kind(f, &format_args!("{:?}", self.0))
    }
}

/// The words for a kind that is none, `given` as the caller gave it (a quoted name, a number).
pub(crate) fn unknown_kind(f: &mut fmt::Formatter<'_>, given: &dyn fmt::Display) -> fmt::Result {
    write!(
        f,
        "unknown scope kind {given} (expected \"tool\" or \"daemon\")"
    )
}

impl std::error::Error for UnknownKind {}

impl FromStr for ScopeKind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "tool" => Ok(ScopeKind::Tool),
            "daemon" => Ok(ScopeKind::Daemon),
            other => Err(UnknownKind(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for kind in [ScopeKind::Tool, ScopeKind::Daemon] {
            assert_eq!(kind.as_str().parse::<ScopeKind>(), Ok(kind));
        }
        assert_eq!("Tool".parse::<ScopeKind>(), Err(UnknownKind("Tool".into())));
        assert_eq!(ScopeKind::Daemon.slice_key(), "daemon_scope_slice");
    }
}

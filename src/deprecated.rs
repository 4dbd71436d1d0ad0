//! The 1.0 names whose work moved to [`crate::input::intake`], kept so that code written against 1.0
//! still builds: each says what replaced it, and does its work through it.
#![allow(deprecated)]

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use crate::input::intake::{self, BadInput};
use crate::scope::handle::HandleError;

/// A bound a caller gave that cannot be one.
#[deprecated(since = "1.1.0", note = "use synaps_scope::intake::BadInput")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadBound(String);

impl fmt::Display for BadBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadBound {}

/// A bound given in milliseconds; `what` names it in the error.
#[deprecated(since = "1.1.0", note = "use synaps_scope::intake::bound_from_millis")]
pub fn bound_from_millis(ms: u64, what: &str) -> Result<Duration, BadBound> {
    intake::bound_from_millis(ms, what).map_err(|e| BadBound(e.to_string()))
}

/// A bound given in seconds; `what` names it in the error.
#[deprecated(since = "1.1.0", note = "use synaps_scope::intake::bound_from_secs")]
pub fn bound_from_secs(seconds: f64, what: &str) -> Result<Duration, BadBound> {
    intake::bound_from_secs(seconds, what).map_err(|e| BadBound(e.to_string()))
}

/// Why a `KEY=VALUE` environment entry was refused.
#[deprecated(
    since = "1.1.0",
    note = "use synaps_scope::intake::CheckedEnv::from_entries"
)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvEntryError {
    /// The entry has no `=`.
    NoEquals,
    /// The entry starts with `=`: its key is empty.
    EmptyKey,
}

impl fmt::Display for EnvEntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EnvEntryError::NoEquals => "it has no '=' (expected KEY=VALUE)",
            EnvEntryError::EmptyKey => "its key is empty (expected KEY=VALUE)",
        })
    }
}

impl std::error::Error for EnvEntryError {}

/// Splits one `KEY=VALUE` entry at its first `=`.
#[deprecated(
    since = "1.1.0",
    note = "use synaps_scope::intake::CheckedEnv::from_entries"
)]
pub fn parse_env_entry(entry: &[u8]) -> Result<(OsString, OsString), EnvEntryError> {
    match entry.iter().position(|&b| b == b'=') {
        None => Err(EnvEntryError::NoEquals),
        Some(0) => Err(EnvEntryError::EmptyKey),
        Some(at) => Ok((
            OsStr::from_bytes(&entry[..at]).to_owned(),
            OsStr::from_bytes(&entry[at + 1..]).to_owned(),
        )),
    }
}

/// `pid` as a process id: a whole number from 1 to [`crate::PID_MAX`].
///
/// # Errors
/// [`HandleError::InvalidPid`] for any other number.
#[deprecated(since = "1.1.0", note = "use synaps_scope::intake::pid")]
pub fn checked_pid(pid: i64) -> Result<u32, HandleError> {
    intake::pid(pid).map_err(|_: BadInput| HandleError::InvalidPid { pid })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_1_0_names_still_answer_as_they_did() {
        assert_eq!(
            bound_from_millis(0, "t").unwrap_err().to_string(),
            "t is 0 ms"
        );
        assert!(bound_from_secs(0.5, "t").is_ok());
        assert_eq!(parse_env_entry(b"NOEQUALS"), Err(EnvEntryError::NoEquals));
        assert_eq!(parse_env_entry(b"=v"), Err(EnvEntryError::EmptyKey));
        assert_eq!(parse_env_entry(b"A=b=c").unwrap().1, "b=c");
        assert!(matches!(
            checked_pid(0),
            Err(HandleError::InvalidPid { pid: 0 })
        ));
        assert_eq!(checked_pid(7).unwrap(), 7);
    }
}

//! What class of failure an error is. Every error the core hands a caller has a class, and each
//! surface turns classes into its own result codes or exceptions in one place (the C ABI's
//! `scope_result`, Python's exceptions, and through the C codes Node's errors), so that a new
//! error cannot reach a caller as something it is not: each `class()` below matches every variant,
//! with no arm for "the rest".

use std::io;

use crate::bounds::BadBound;
use crate::decide::ScopeError;
use crate::env::{EnvEntryError, RefusedEnv};
use crate::handle::HandleError;
use crate::kind::UnknownKind;

/// The classes of failure, as every surface tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// Bad input, refused before anything ran: an environment entry no process can hold, a bound
    /// that is no bound, an unknown kind.
    InvalidInput,
    /// No program to run by that name from the child's PATH and working directory.
    NoSuchProgram,
    /// No such scope is running.
    NoSuchScope,
    /// A scope refused: not one of this library's, the caller's own, or another user's.
    Refused,
    /// The process is not in the scope named.
    NotInScope,
    /// Scopes are required (`process_scopes = required`) and unavailable.
    Unavailable,
    /// The deadline passed first.
    TimedOut,
    /// The user manager could not answer.
    Manager,
    /// No cgroup2 hierarchy is mounted.
    NoCgroup2,
    /// Reading or writing a cgroup failed.
    Io,
}

/// An error the core hands a caller, and its class.
pub trait Classified: std::error::Error {
    /// What class of failure this is.
    fn class(&self) -> ErrorClass;
}

impl Classified for HandleError {
    fn class(&self) -> ErrorClass {
        match self {
            HandleError::NotOurs { .. }
            | HandleError::HoldsCaller { .. }
            | HandleError::OtherUsers { .. } => ErrorClass::Refused,
            HandleError::NotInScope { .. } => ErrorClass::NotInScope,
            HandleError::NotFound { .. } => ErrorClass::NoSuchScope,
            HandleError::NoCgroup2 => ErrorClass::NoCgroup2,
            HandleError::InvalidPid { .. } => ErrorClass::InvalidInput,
            HandleError::Manager(_) => ErrorClass::Manager,
            HandleError::TimedOut { .. } => ErrorClass::TimedOut,
            HandleError::Io(_) => ErrorClass::Io,
        }
    }
}

impl Classified for ScopeError {
    fn class(&self) -> ErrorClass {
        match self {
            ScopeError::Unavailable { .. } => ErrorClass::Unavailable,
            ScopeError::InvalidEnvironment(_) => ErrorClass::InvalidInput,
        }
    }
}

impl Classified for RefusedEnv {
    fn class(&self) -> ErrorClass {
        ErrorClass::InvalidInput
    }
}

impl Classified for EnvEntryError {
    fn class(&self) -> ErrorClass {
        ErrorClass::InvalidInput
    }
}

impl Classified for BadBound {
    fn class(&self) -> ErrorClass {
        ErrorClass::InvalidInput
    }
}

impl Classified for UnknownKind {
    fn class(&self) -> ErrorClass {
        ErrorClass::InvalidInput
    }
}

/// The errors of [`crate::resolve_program`]: a refused environment is bad input; anything else
/// (no such file on the PATH, not executable, no such working directory) means execvp would find
/// nothing to run.
impl Classified for io::Error {
    fn class(&self) -> ErrorClass {
        if self.kind() == io::ErrorKind::InvalidInput {
            ErrorClass::InvalidInput
        } else {
            ErrorClass::NoSuchProgram
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::{OsStr, OsString};

    use super::*;

    #[test]
    fn resolving_tells_bad_input_from_a_missing_program() {
        let refused = vec![(OsString::from(""), OsString::from("x"))];
        let error = crate::resolve_program(OsStr::new("sh"), &refused, None).unwrap_err();
        assert_eq!(error.class(), ErrorClass::InvalidInput, "{error}");
        let error =
            crate::resolve_program(OsStr::new("no-such-program-here"), &[], None).unwrap_err();
        assert_eq!(error.class(), ErrorClass::NoSuchProgram, "{error}");
    }
}

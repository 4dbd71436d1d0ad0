//! What class of failure an error is. Every error the core hands a caller has a class, and each
//! surface turns classes into its own result codes or exceptions in one place (the C ABI's
//! `scope_result`, Python's exceptions, and through the C codes Node's errors), so that a new
//! error cannot reach a caller as something it is not: each `class()` below matches every variant,
//! with no arm for "the rest".

use std::io;

#[allow(deprecated)]
use crate::deprecated::{BadBound, EnvEntryError};
use crate::input::intake::BadInput;
use crate::input::intake::RefusedEnv;
use crate::input::kind::UnknownKind;
use crate::input::resolve::ResolveError;
use crate::launch::refusal::ScopeError;
use crate::scope::handle::HandleError;

/// The classes of failure, as every surface tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// Bad input, refused before anything ran ([`BadInput`]): an environment entry no process can
    /// hold, a bound that is no bound, a number that is no pid, an unknown kind or shell words.
    InvalidInput,
    /// No program that can be run by that name from the child's PATH and working directory
    /// ([`ResolveError`]): none there, not executable, or no such working directory.
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
    /// The system refused an operation: reading or writing a cgroup, or starting a thread.
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

impl Classified for BadInput {
    fn class(&self) -> ErrorClass {
        ErrorClass::InvalidInput
    }
}

impl Classified for RefusedEnv {
    fn class(&self) -> ErrorClass {
        ErrorClass::InvalidInput
    }
}

impl Classified for UnknownKind {
    fn class(&self) -> ErrorClass {
        ErrorClass::InvalidInput
    }
}

impl Classified for ResolveError {
    fn class(&self) -> ErrorClass {
        match self {
            ResolveError::NotFound { .. }
            | ResolveError::NotExecutable { .. }
            | ResolveError::NoSuchDirectory { .. } => ErrorClass::NoSuchProgram,
            ResolveError::InvalidEnvironment(_) => ErrorClass::InvalidInput,
        }
    }
}

#[allow(deprecated)]
impl Classified for EnvEntryError {
    fn class(&self) -> ErrorClass {
        ErrorClass::InvalidInput
    }
}

#[allow(deprecated)]
impl Classified for BadBound {
    fn class(&self) -> ErrorClass {
        ErrorClass::InvalidInput
    }
}

/// An `io::Error` is classed by the error of this crate it carries (the 1.0 `resolve_program`'s
/// carry a [`ResolveError`]), never by its kind; any other, a failed system call, is `Io`.
impl Classified for io::Error {
    fn class(&self) -> ErrorClass {
        self.get_ref()
            .and_then(|inner| inner.downcast_ref::<ResolveError>())
            .map_or(ErrorClass::Io, Classified::class)
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::{OsStr, OsString};

    use super::*;

    #[test]
    fn resolving_tells_bad_input_from_a_missing_program() {
        let refused = vec![(OsString::from(""), OsString::from("x"))];
        let error = crate::find_program(OsStr::new("sh"), &refused, None).unwrap_err();
        assert_eq!(error.class(), ErrorClass::InvalidInput, "{error}");
        let error = crate::find_program(OsStr::new("no-such-program-here"), &[], None).unwrap_err();
        assert_eq!(error.class(), ErrorClass::NoSuchProgram, "{error}");
        let gone = crate::find_program(OsStr::new("./x"), &[], Some("/no/such/dir".as_ref()));
        assert!(
            matches!(gone, Err(ResolveError::NoSuchDirectory { .. })),
            "{gone:?}"
        );
        // An io::Error is classed by what it carries, never by its kind.
        assert_eq!(io::Error::from(error).class(), ErrorClass::NoSuchProgram);
        let plain = io::Error::new(io::ErrorKind::NotFound, "a cgroup file");
        assert_eq!(plain.class(), ErrorClass::Io);
    }
}

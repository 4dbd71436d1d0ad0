//! The one map from the core's classes of failure to Python's exceptions, and the exceptions.

use pyo3::exceptions::{PyFileNotFoundError, PyValueError};
use pyo3::prelude::*;
use synaps_scope::{Classified, ErrorClass};

// The exception classes live in Python (synaps_scope/_errors.py) so that each can also derive
// from the matching built-in (TimeoutError, LookupError, PermissionError).
pyo3::import_exception!(synaps_scope._errors, ScopeError);
pyo3::import_exception!(synaps_scope._errors, ScopeRequiredError);
pyo3::import_exception!(synaps_scope._errors, NotOurScopeError);
pyo3::import_exception!(synaps_scope._errors, NotInScopeError);
pyo3::import_exception!(synaps_scope._errors, ScopeNotFoundError);
pyo3::import_exception!(synaps_scope._errors, ScopeTimeoutError);

/// `errno` of a FileNotFoundError, as execvp would set it.
const ENOENT: i32 = 2;

/// The one map from the core's classes of failure to Python's exceptions (each of ours also
/// derives from the built-in a caller would catch: `synaps_scope/_errors.py`).
pub(crate) fn py_error(error: &(impl Classified + ?Sized)) -> PyErr {
    let message = error.to_string();
    match error.class() {
        ErrorClass::InvalidInput => PyValueError::new_err(message),
        ErrorClass::NoSuchProgram => PyFileNotFoundError::new_err((ENOENT, message)),
        ErrorClass::NoSuchScope => ScopeNotFoundError::new_err(message),
        ErrorClass::Refused => NotOurScopeError::new_err(message),
        ErrorClass::NotInScope => NotInScopeError::new_err(message),
        ErrorClass::Unavailable => ScopeRequiredError::new_err(message),
        ErrorClass::TimedOut => ScopeTimeoutError::new_err(message),
        ErrorClass::Manager | ErrorClass::NoCgroup2 | ErrorClass::Io => {
            ScopeError::new_err(message)
        }
    }
}

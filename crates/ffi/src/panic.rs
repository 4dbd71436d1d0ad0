//! The panic boundary every export runs behind: a panic becomes `SCOPE_RESULT_PANIC` (or a
//! getter's fallback), never an unwind into C.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{scope_result, set_last_error, Failure};
use crate::log;

/// The message of a panic caught at the boundary.
pub(crate) const PANIC_MESSAGE: &str = "synaps-scope panicked; this is a bug";

/// Runs a fallible export behind the panic boundary, recording the message of a failure.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Failure>) -> scope_result {
    log::ensure_installed();
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => scope_result::Ok,
        Ok(Err(Failure(code, message))) => {
            set_last_error(message);
            code
        }
        Err(_) => {
            set_last_error(PANIC_MESSAGE.into());
            scope_result::Panic
        }
    }
}

/// Runs an infallible export (a getter) behind the panic boundary; `fallback` on panic.
pub(crate) fn guard_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

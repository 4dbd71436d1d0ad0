//! The panic boundary: a panic inside the library is caught here and never unwinds into C. What
//! a caught panic becomes (a result code, a getter's fallback) is the caller's to say.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// The message of a panic caught at the boundary.
pub(crate) const PANIC_MESSAGE: &str = "synaps-scope panicked; this is a bug";

/// Runs `body`; `None` when it panicked.
pub(crate) fn caught<T>(body: impl FnOnce() -> T) -> Option<T> {
    catch_unwind(AssertUnwindSafe(body)).ok()
}

/// Runs an infallible export (a getter) behind the panic boundary; `fallback` on panic.
pub(crate) fn guard_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    caught(body).unwrap_or(fallback)
}

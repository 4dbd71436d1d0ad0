//! Requests answered on a thread of their own, for hosts whose callers must not block on them (an
//! event loop, a GUI's main thread): no pool and no queue, so each request keeps its own bound
//! however many run at once, and no host's shared threads (Node's libuv pool) wait on it. The
//! callback runs exactly once, on that thread; a panic in the request is caught and handed to it
//! as `SCOPE_RESULT_PANIC`.

use std::ffi::{c_char, c_void, CString};
use std::ptr;

use crate::error::{scope_result, Failure};
use crate::panic::caught;

/// A `userdata` pointer that the request's thread hands back to the caller's callback.
pub(crate) struct Userdata(pub(crate) *mut c_void);

// SAFETY: the pointer is only handed back to the caller's callback, which the caller made for
// exactly that (the header says the callback runs on another thread).
unsafe impl Send for Userdata {}

/// Runs `work` on a thread of its own and hands its outcome to `deliver` there, exactly once: a
/// panic in `work` as [`Failure::panicked`]. Returns once the thread has started; the failure to
/// start one (then `deliver` never runs) is the caller's to return.
pub(crate) fn answered_on_own_thread<T: 'static>(
    work: impl FnOnce() -> Result<T, Failure> + Send + 'static,
    deliver: impl FnOnce(Result<T, Failure>) + Send + 'static,
) -> Result<(), Failure> {
    std::thread::Builder::new()
        .name("synaps-scope request".into())
        .spawn(move || {
            let outcome = caught(work).unwrap_or_else(|| Err(Failure::panicked()));
            deliver(outcome);
        })
        .map(drop)
        .map_err(|e| Failure::new(scope_result::Io, format!("cannot start a thread: {e}")))
}

/// The result code and the error message (for the callback: NULL on success) of `outcome`.
pub(crate) fn result_and_error<T>(outcome: &Result<T, Failure>) -> (scope_result, Option<CString>) {
    match outcome {
        Ok(_) => (scope_result::Ok, None),
        Err(Failure(code, message)) => (
            *code,
            Some(CString::new(message.replace('\0', " ")).unwrap_or_default()),
        ),
    }
}

/// The pointer of an optional message, valid while `message` lives.
pub(crate) fn message_ptr(message: &Option<CString>) -> *const c_char {
    message.as_ref().map_or(ptr::null(), |m| m.as_ptr())
}

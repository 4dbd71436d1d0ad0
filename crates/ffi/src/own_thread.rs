//! Requests answered on a thread of their own, for hosts whose callers must not block on them (an
//! event loop, a GUI's main thread): no pool and no queue, so each request keeps its own bound
//! however many run at once, and no host's shared threads (Node's libuv pool) wait on it. The
//! callback runs exactly once, on that thread; a panic in the request is caught and handed to it
//! as `SCOPE_RESULT_PANIC`.

use std::ffi::{c_char, c_void};
use std::ptr;

use crate::error::{c_text, scope_result, Failure};
use crate::panic::caught;

/// A `userdata` pointer that the request's thread hands back to the caller's callback.
pub(crate) struct Userdata(pub(crate) *mut c_void);

// SAFETY: the pointer is only handed back to the caller's callback, which the caller made for
// exactly that (the header says the callback runs on another thread).
unsafe impl Send for Userdata {}

/// Runs `work` on a thread of its own and hands its outcome to `deliver` there, exactly once, as
/// a C callback takes it ([`hand_over`]), with `userdata`: a panic in `work` as
/// [`Failure::panicked`]. Returns once the thread has started; the failure to start one (then
/// `deliver` never runs) is the caller's to return.
pub(crate) fn answered_on_own_thread<T: 'static>(
    userdata: *mut c_void,
    work: impl FnOnce() -> Result<T, Failure> + Send + 'static,
    deliver: impl FnOnce(*mut c_void, scope_result, Option<T>, *const c_char) + Send + 'static,
) -> Result<(), Failure> {
    let userdata = Userdata(userdata);
    std::thread::Builder::new()
        .name("synaps-scope request".into())
        .spawn(move || {
            let userdata = userdata;
            let outcome = caught(work).unwrap_or_else(|| Err(Failure::panicked()));
            hand_over(outcome, |result, value, error| {
                deliver(userdata.0, result, value, error);
            });
        })
        .map(drop)
        .map_err(|e| Failure::new(scope_result::Io, format!("cannot start a thread: {e}")))
}

/// Hands `outcome` to `call` as a C callback takes it: the result code, the value on success,
/// and the error message (NULL on success; a NUL in it written `\0`, as in the last error), valid
/// during the call.
pub(crate) fn hand_over<T>(
    outcome: Result<T, Failure>,
    call: impl FnOnce(scope_result, Option<T>, *const c_char),
) {
    match outcome {
        Ok(value) => call(scope_result::Ok, Some(value), ptr::null()),
        Err(Failure(code, message)) => {
            let message = c_text(&message);
            call(code, None, message.as_ptr());
        }
    }
}

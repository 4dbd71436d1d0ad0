//! The scope handle's waits on a thread of their own (the `own_thread` module): how the scope ended
//! (which may wait for systemd-oomd's signal and ask the managers which rule acted), a kill and
//! the wait until the scope is empty. Each works on a copy of the handle taken before the export
//! returns, so the caller may free its handle at once.

use std::ffi::{c_char, c_void};
use std::ptr;

use crate::args::{env_arg, timeout_arg};
use crate::boxed::borrow;
use crate::error::{scope_result, Failure};
use crate::export::guard;
use crate::handle::{scope_ending, scope_handle};
use crate::own_thread::answered_on_own_thread;

/// Receives the answer of [`scope_handle_ending_async`], exactly once, on the request's own
/// thread: `result` as `scope_handle_ending` returns it; on success `ending` is
/// the answer, on failure NULL and `error` the message (each valid during the call only).
pub type scope_ending_ready = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        result: scope_result,
        ending: *const scope_ending,
        error: *const c_char,
    ),
>;

/// Receives the answer of [`scope_handle_kill_async`], exactly once, on the request's own thread:
/// `result` as `scope_handle_kill_pids` returns it; on success the `len` pids that
/// were in the scope when the kill began (NULL when none), on failure `error` the message (each
/// valid during the call only).
pub type scope_pids_ready = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        result: scope_result,
        pids: *const u32,
        len: usize,
        error: *const c_char,
    ),
>;

/// Receives the outcome of [`scope_handle_wait_empty_async`], exactly once, on the request's own
/// thread: `result` as `scope_handle_wait_empty` returns it, and on failure
/// `error` the message (valid during the call only).
pub type scope_done_ready =
    Option<unsafe extern "C" fn(userdata: *mut c_void, result: scope_result, error: *const c_char)>;

/// `scope_handle_ending` on a thread of its own, which calls `ready` with the
/// answer. Returns `SCOPE_RESULT_OK` once the request has started (then `ready` runs exactly
/// once), or the error for bad arguments (then `ready` never runs). `handle` may be freed as soon
/// as this returns.
///
/// # Safety
/// `handle` is NULL or a live handle; `envp` is NULL or a NULL-terminated array of C strings;
/// `ready` is safe to call from another thread with `userdata`, which must stay valid until it
/// has been called.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_ending_async(
    handle: *const scope_handle,
    envp: *const *const c_char,
    timeout_ms: u32,
    ready: scope_ending_ready,
    userdata: *mut c_void,
) -> scope_result {
    guard(|| {
        let ready = ready.ok_or_else(|| Failure::null("ready"))?;
        // SAFETY: NULL or live per the caller.
        let handle = unsafe { borrow(handle, "handle") }?.inner().clone();
        // SAFETY: forwarded from the caller.
        let env = unsafe { env_arg(envp) }?;
        let timeout = timeout_arg(timeout_ms, "timeout_ms")?;
        answered_on_own_thread(
            userdata,
            move || Ok(scope_ending::from(handle.ending(env.as_pairs(), timeout))),
            move |userdata, result, ending, error| {
                let ending = ending.as_ref().map_or(ptr::null(), |e| e as *const _);
                // SAFETY: the caller promised `ready` may be called from this thread with its
                // userdata; `ending` and `error` outlive the call.
                unsafe { ready(userdata, result, ending, error) };
            },
        )
    })
}

/// `scope_handle_kill_pids` on a thread of its own, which calls `ready` with the
/// pids that were in the scope when the kill began. Returns as
/// [`scope_handle_ending_async`] does; `handle` may be freed as soon as this returns.
///
/// # Safety
/// `handle` is NULL or a live handle; `ready` is safe to call from another thread with
/// `userdata`, which must stay valid until it has been called.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_kill_async(
    handle: *const scope_handle,
    timeout_ms: u32,
    ready: scope_pids_ready,
    userdata: *mut c_void,
) -> scope_result {
    guard(|| {
        let ready = ready.ok_or_else(|| Failure::null("ready"))?;
        // SAFETY: NULL or live per the caller.
        let handle = unsafe { borrow(handle, "handle") }?.inner().clone();
        let timeout = timeout_arg(timeout_ms, "timeout_ms")?;
        answered_on_own_thread(
            userdata,
            move || handle.kill(timeout).map_err(|e| Failure::of(&e)),
            move |userdata, result, pids, error| {
                let pids = pids.unwrap_or_default();
                let array = if pids.is_empty() {
                    ptr::null()
                } else {
                    pids.as_ptr()
                };
                // SAFETY: the caller promised `ready` may be called from this thread with its
                // userdata; the pids and `error` outlive the call.
                unsafe { ready(userdata, result, array, pids.len(), error) };
            },
        )
    })
}

/// `scope_handle_wait_empty` on a thread of its own, which calls `ready` once the
/// scope is empty or the wait timed out. Returns as [`scope_handle_ending_async`] does; `handle`
/// may be freed as soon as this returns.
///
/// # Safety
/// `handle` is NULL or a live handle; `ready` is safe to call from another thread with
/// `userdata`, which must stay valid until it has been called.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_wait_empty_async(
    handle: *const scope_handle,
    timeout_ms: u32,
    ready: scope_done_ready,
    userdata: *mut c_void,
) -> scope_result {
    guard(|| {
        let ready = ready.ok_or_else(|| Failure::null("ready"))?;
        // SAFETY: NULL or live per the caller.
        let handle = unsafe { borrow(handle, "handle") }?.inner().clone();
        let timeout = timeout_arg(timeout_ms, "timeout_ms")?;
        answered_on_own_thread(
            userdata,
            move || handle.wait_empty(timeout).map_err(|e| Failure::of(&e)),
            move |userdata, result, _, error| {
                // SAFETY: the caller promised `ready` may be called from this thread with its
                // userdata; `error` outlives the call.
                unsafe { ready(userdata, result, error) };
            },
        )
    })
}

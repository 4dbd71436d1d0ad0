//! The scope handle's waits on a thread of their own (the `own_thread` module, or answered to a
//! queue: the `queue` module): how the scope ended
//! (which may wait for systemd-oomd's signal and ask the managers which rule acted), a kill and
//! the wait until the scope is empty. Each works on a copy of the handle taken before the export
//! returns, so the caller may free its handle at once.

use std::ffi::{c_char, c_void};
use std::ptr;
use std::time::Duration;

use synaps_scope::intake::CheckedEnv;
use synaps_scope::ScopeHandle;

use crate::args::{env_arg, str_arg, timeout_arg};
use crate::boxed::borrow;
use crate::error::{scope_result, Failure};
use crate::export::guard;
use crate::handle::{scope_ending, scope_handle};
use crate::own_thread::answered_on_own_thread;
use crate::queue::{
    answered_to_queue, queue_arg, scope_answer, scope_answer_kind, scope_queue, Payload,
};

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

/// [`scope_handle_ending_async`] for a host that takes its answers from `queue`: the answer comes
/// as a `SCOPE_ANSWER_KIND_ENDING` answer with `token` (`scope_answer_ending`). The library never
/// calls the host. Returns `SCOPE_RESULT_OK` once the request has started (then exactly one answer
/// comes), or the error for bad arguments (then none); `handle` may be freed as soon as this
/// returns.
///
/// # Safety
/// `handle` is NULL or a live handle; `envp` is NULL or a NULL-terminated array of C strings;
/// `queue` is NULL or a live queue.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_ending_queued(
    handle: *const scope_handle,
    envp: *const *const c_char,
    timeout_ms: u32,
    queue: *const scope_queue,
    token: u64,
) -> scope_result {
    guard(|| {
        // SAFETY: forwarded from the caller.
        let env = || unsafe { env_arg(envp) };
        let work = |handle: ScopeHandle, timeout, env: CheckedEnv| {
            let ending = scope_ending::from(handle.ending(env.as_pairs(), timeout));
            Ok(Payload::Ending(ending))
        };
        let kind = scope_answer_kind::Ending;
        // SAFETY: forwarded from the caller.
        unsafe { queued_on_handle(handle, timeout_ms, queue, token, kind, env, work) }
    })
}

/// [`scope_handle_kill_async`] for a host that takes its answers from `queue`: a
/// `SCOPE_ANSWER_KIND_PIDS` answer with `token` (`scope_answer_pids`). Returns as
/// [`scope_handle_ending_queued`] does.
///
/// # Safety
/// `handle` is NULL or a live handle; `queue` is NULL or a live queue.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_kill_queued(
    handle: *const scope_handle,
    timeout_ms: u32,
    queue: *const scope_queue,
    token: u64,
) -> scope_result {
    let work = |handle: ScopeHandle, timeout, ()| {
        let pids = handle.kill(timeout).map_err(|e| Failure::of(&e));
        pids.map(Payload::Pids)
    };
    let kind = scope_answer_kind::Pids;
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { queued_on_handle(handle, timeout_ms, queue, token, kind, || Ok(()), work) })
}

/// [`scope_handle_wait_empty_async`] for a host that takes its answers from `queue`: a
/// `SCOPE_ANSWER_KIND_DONE` answer with `token`. Returns as [`scope_handle_ending_queued`] does.
///
/// # Safety
/// `handle` is NULL or a live handle; `queue` is NULL or a live queue.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_wait_empty_queued(
    handle: *const scope_handle,
    timeout_ms: u32,
    queue: *const scope_queue,
    token: u64,
) -> scope_result {
    let work = |handle: ScopeHandle, timeout, ()| {
        let done = handle.wait_empty(timeout).map_err(|e| Failure::of(&e));
        done.map(|()| Payload::Nothing)
    };
    let kind = scope_answer_kind::Done;
    // SAFETY: forwarded from the caller.
    guard(|| unsafe { queued_on_handle(handle, timeout_ms, queue, token, kind, || Ok(()), work) })
}

/// What the queued requests on a handle share: the queue, a copy of the handle, what `more`
/// reads of the request's other arguments, and the bound, checked in that order before the
/// export returns (so the caller may free its handle at once), then `work` on a thread of its
/// own, answered to the queue as `kind` with `token`.
///
/// # Safety
/// `handle` is NULL or a live handle; `queue` is NULL or a live queue.
unsafe fn queued_on_handle<More: Send + 'static>(
    handle: *const scope_handle,
    timeout_ms: u32,
    queue: *const scope_queue,
    token: u64,
    kind: scope_answer_kind,
    more: impl FnOnce() -> Result<More, Failure>,
    work: impl FnOnce(ScopeHandle, Duration, More) -> Result<Payload, Failure> + Send + 'static,
) -> Result<(), Failure> {
    // SAFETY: NULL or live per the caller.
    let queue = unsafe { queue_arg(queue) }?;
    // SAFETY: NULL or live per the caller.
    let handle = unsafe { borrow(handle, "handle") }?.inner().clone();
    let more = more()?;
    let timeout = timeout_arg(timeout_ms, "timeout_ms")?;
    answered_to_queue(queue, token, kind, move || {
        scope_answer::of(token, kind, work(handle, timeout, more))
    })
}

/// `scope_handle_from_manager` on a thread of its own, for a host that takes its answers from
/// `queue`: a `SCOPE_ANSWER_KIND_HANDLE` answer with `token` (`scope_answer_take_handle`).
/// Returns as [`scope_handle_ending_queued`] does.
///
/// # Safety
/// `unit` is NULL or a NUL-terminated string; `envp` is NULL or a NULL-terminated array of C
/// strings; `queue` is NULL or a live queue.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_from_manager_queued(
    unit: *const c_char,
    envp: *const *const c_char,
    timeout_ms: u32,
    queue: *const scope_queue,
    token: u64,
) -> scope_result {
    guard(|| {
        // SAFETY: NULL or live per the caller.
        let queue = unsafe { queue_arg(queue) }?;
        // SAFETY: forwarded from the caller.
        let unit = unsafe { str_arg(unit, "unit") }?.to_owned();
        // SAFETY: forwarded from the caller.
        let env = unsafe { env_arg(envp) }?;
        let timeout = timeout_arg(timeout_ms, "timeout_ms")?;
        let kind = scope_answer_kind::Handle;
        answered_to_queue(queue, token, kind, move || {
            let handle = ScopeHandle::from_manager(&unit, env.as_pairs(), timeout)
                .map_err(|e| Failure::of(&e))
                .and_then(scope_handle::new);
            scope_answer::of(
                token,
                kind,
                handle.map(|h| Payload::Handle(Some(Box::new(h)))),
            )
        })
    })
}

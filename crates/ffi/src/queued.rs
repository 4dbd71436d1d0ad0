//! The requests of other modules answered to a queue (the `queue` module) rather than through a
//! callback: the launcher's probe and the oomd watch. Kept apart from their modules so that the
//! queue, which holds what they make, and they never import each other.

use std::ffi::c_char;
use std::sync::Arc;

use synaps_scope::__surfaces::decide_on_own_thread;
use synaps_scope::LauncherOptions;

use crate::abi::scope_kind;
use crate::args::{env_arg, kind_arg, timeout_arg};
use crate::error::{scope_result, Failure};
use crate::export::guard;
use crate::handle::scope_handle;
use crate::launcher::launcher_of;
use crate::oomd_watch::{scope_cannot_warn_kind, scope_oomd_last_cannot_warn, Request, Warned};
use crate::panic::caught;
use crate::queue::{
    answered_to_queue, queue_arg, scope_answer, scope_answer_kind, scope_queue, Payload,
};

/// `scope_launcher_for_env_async` for a host that takes its answers from `queue`: the answer
/// comes as a `SCOPE_ANSWER_KIND_LAUNCHER` answer with `token` (`scope_answer_take_launcher`), and
/// the library never calls the host. Returns `SCOPE_RESULT_OK` once the request has started (then
/// exactly one answer comes), or the error for bad arguments (then none).
///
/// # Safety
/// `envp` as for `scope_launcher_for_env`; `queue` is NULL or a live queue.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_for_env_queued(
    envp: *const *const c_char,
    kind: scope_kind,
    probe_timeout_ms: u32,
    queue: *const scope_queue,
    token: u64,
) -> scope_result {
    guard(|| {
        // SAFETY: NULL or live per the caller.
        let queue = unsafe { queue_arg(queue) }?;
        let kind = kind_arg(kind)?;
        let probe_timeout = timeout_arg(probe_timeout_ms, "probe_timeout_ms")?;
        // SAFETY: forwarded from the caller.
        let env = unsafe { env_arg(envp) }?;
        let options = LauncherOptions { probe_timeout };
        decide_on_own_thread(env, kind, options, move |answer| {
            // Outside the export's guard: a panic in the request (caught by the core) or in
            // handing its answer out is caught here, so that exactly one answer comes.
            let launcher = caught(|| answer.map(launcher_of))
                .and_then(Result::ok)
                .unwrap_or_else(|| Err(Failure::panicked()));
            let payload = launcher.map(|launcher| Payload::Launcher(Some(launcher.map(Box::new))));
            queue.push(scope_answer::of(
                token,
                scope_answer_kind::Launcher,
                payload,
            ));
        })
        .map_err(|e| Failure::new(scope_result::Io, format!("cannot start a thread: {e}")))
    })
}

/// `scope_oomd_watch_new` on a thread of its own, for a host that takes its answers from
/// `queue` (`scope_queue_new`): the watch comes as a
/// `SCOPE_ANSWER_KIND_OOMD_WATCH` answer with `token`, and each of its warnings as a
/// `SCOPE_ANSWER_KIND_OOMD_WARNING` answer with the same token, until the watch is freed (taken
/// answers already queued may still come). The library never calls the host. Returns
/// `SCOPE_RESULT_OK` once the request has started (then exactly one watch answer comes), or the
/// error for bad arguments (then none). The handles may be freed as soon as this returns.
///
/// # Safety
/// `handles` holds `count` pointers, each NULL or a live handle; `envp` is NULL or a
/// NULL-terminated array of C strings; `queue` is NULL or a live queue.
#[no_mangle]
pub unsafe extern "C" fn scope_oomd_watch_new_queued(
    handles: *const *const scope_handle,
    count: usize,
    envp: *const *const c_char,
    timeout_ms: u32,
    queue: *const scope_queue,
    token: u64,
) -> scope_result {
    guard(|| {
        // SAFETY: NULL or live per the caller.
        let queue = unsafe { queue_arg(queue) }?;
        let warnings = Arc::clone(&queue);
        let warned = Warned::Taker(Arc::new(move |warning| {
            warnings.push(scope_answer::warning(token, warning));
        }));
        // SAFETY: forwarded from the caller.
        let request = unsafe { Request::take(handles, count, envp, timeout_ms, warned) }?;
        let kind = scope_answer_kind::OomdWatch;
        let stopper = Arc::clone(&queue);
        answered_to_queue(queue, token, kind, move || match request.make() {
            Ok(watch) => {
                stopper.stop_when_gone(&watch.inner);
                let payload =
                    Payload::OomdWatch(Some(Box::new(watch)), scope_cannot_warn_kind::None);
                scope_answer::of(token, kind, Ok(payload))
            }
            // The request's own thread: `make` set the kind there.
            Err(failure) if failure.0 == scope_result::CannotWarn => {
                scope_answer::cannot_warn(token, failure, scope_oomd_last_cannot_warn())
            }
            Err(failure) => scope_answer::of(token, kind, Err(failure)),
        })
    })
}

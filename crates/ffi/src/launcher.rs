//! `scope_launcher` across the C ABI: the requests that make one (blocking, on the caller's worker
//! thread, or on a thread of the request's own), and what a launcher tells.

use std::ffi::{c_char, c_void, CString};
use std::ptr;

use crate::abi::{scope_kind, scope_wrapper, SCOPE_DEFAULT_PROBE_TIMEOUT_MS, SCOPE_KIND_TOOL};
use crate::args::{c_string, env_arg, kind_arg, out_arg, str_arg, timeout_arg};
use crate::boxed::{borrow, free, read_or, write_out};
use crate::error::{copy_error, scope_result, Failure};
use crate::export::guard;
use crate::own_thread::{hand_over, Userdata};
use crate::panic::caught;
use synaps_scope::__surfaces::{decide, decide_on_own_thread};
use synaps_scope::intake;
use synaps_scope::{direct_for_user_switch, Decision, LauncherOptions, ScopeError, ScopeLauncher};

/// A launcher: turns an argv into one that runs in a new scope. Immutable, so one launcher may be
/// shared by any number of threads. Free with [`scope_launcher_free`].
pub struct scope_launcher {
    pub(crate) inner: ScopeLauncher,
    slice: Option<CString>,
    /// The limits that will not be enforced, in words, for `scope_launcher_unenforced`.
    pub(crate) unenforced: Vec<CString>,
}

impl scope_launcher {
    /// The handle of `inner`, with the words of its unenforced limits.
    pub(crate) fn with(inner: ScopeLauncher, unenforced: Vec<CString>) -> Result<Self, Failure> {
        let slice = inner
            .slice()
            .map(|s| c_string(s.as_bytes().to_vec()))
            .transpose()?;
        Ok(scope_launcher {
            inner,
            slice,
            unenforced,
        })
    }
}

/// Runs a fresh, bounded (3 s) availability check for a launch of `kind` with the environment
/// `envp` (a NULL-terminated `KEY=VALUE` array as execve takes, or NULL for this process's).
/// On success `*out` is a launcher, or NULL when the launch should go direct. In `required` mode,
/// unavailable scopes return `SCOPE_RESULT_REQUIRED_UNAVAILABLE`. May block up to the bound.
///
/// # Safety
/// `envp` is NULL or a NULL-terminated array of NUL-terminated strings; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_for_env(
    envp: *const *const c_char,
    kind: scope_kind,
    out: *mut *mut scope_launcher,
) -> scope_result {
    // SAFETY: forwarded from the caller.
    unsafe { scope_launcher_for_env_timeout(envp, kind, SCOPE_DEFAULT_PROBE_TIMEOUT_MS, out) }
}

/// [`scope_launcher_for_env`] with a probe bound of `probe_timeout_ms` (at least 1).
///
/// # Safety
/// As [`scope_launcher_for_env`].
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_for_env_timeout(
    envp: *const *const c_char,
    kind: scope_kind,
    probe_timeout_ms: u32,
    out: *mut *mut scope_launcher,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        let kind = kind_arg(kind)?;
        let probe_timeout = timeout_arg(probe_timeout_ms, "probe_timeout_ms")?;
        // SAFETY: forwarded from the caller.
        let env = unsafe { env_arg(envp) }?;
        let handle = launcher_out(decide(&env, kind, &LauncherOptions { probe_timeout }))?;
        // SAFETY: `out` was checked non-NULL; the caller guarantees it is writable.
        unsafe { write_out(out, handle) };
        Ok(())
    })
}

/// A request's decision as the C caller takes it: a launcher, or none for "launch directly".
pub(crate) fn launcher_of(
    decision: Result<Decision, ScopeError>,
) -> Result<Option<scope_launcher>, Failure> {
    match decision.map_err(|e| Failure::of(&e))? {
        Decision::Scoped(inner) => scope_launcher::with(inner, Vec::new()).map(Some),
        Decision::Direct(_) => Ok(None),
    }
}

/// [`launcher_of`] as a handle: NULL for "launch directly".
fn launcher_out(decision: Result<Decision, ScopeError>) -> Result<*mut scope_launcher, Failure> {
    Ok(launcher_of(decision)?.map_or(ptr::null_mut(), |launcher| {
        Box::into_raw(Box::new(launcher))
    }))
}

/// Frees a launcher (NULL is accepted and ignored).
///
/// # Safety
/// `launcher` is NULL or from [`scope_launcher_for_env`], not yet freed, and not in use.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_free(launcher: *mut scope_launcher) {
    // SAFETY: NULL or a launcher not yet freed and not in use, per the caller.
    unsafe { free(launcher) }
}

/// The kind named `name` (`"tool"` or `"daemon"`, as config files and command lines name them)
/// into `*out`; any other name is `SCOPE_RESULT_INVALID_KIND`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_kind_from_name(
    name: *const c_char,
    out: *mut scope_kind,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: forwarded from the caller.
        let name = unsafe { str_arg(name, "name") }?;
        let kind = intake::kind_from_name(name).map_err(|e| Failure::bad_input(&e))?;
        // SAFETY: `out` was checked non-NULL; the caller guarantees it is writable.
        unsafe { write_out(out, kind.code()) };
        Ok(())
    })
}

/// The launcher's kind (`SCOPE_KIND_TOOL` for NULL).
///
/// # Safety
/// `launcher` is NULL or a live launcher.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_kind(launcher: *const scope_launcher) -> scope_kind {
    // SAFETY: NULL or a live launcher per the caller.
    unsafe { read_or(launcher, SCOPE_KIND_TOOL, |l| l.inner.kind().code()) }
}

/// The slice passed as `--slice` (NULL when none, or for a NULL launcher); valid while the
/// launcher lives.
///
/// # Safety
/// `launcher` is NULL or a live launcher.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_slice(launcher: *const scope_launcher) -> *const c_char {
    // SAFETY: NULL or a live launcher per the caller.
    unsafe {
        read_or(launcher, ptr::null(), |l| {
            l.slice.as_ref().map_or(ptr::null(), |s| s.as_ptr())
        })
    }
}

/// Whether `process_scopes = required` was in force for the launcher (false for NULL): a launch
/// it cannot scope must then fail rather than run directly.
///
/// # Safety
/// `launcher` is NULL or a live launcher.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_required(launcher: *const scope_launcher) -> bool {
    // SAFETY: NULL or a live launcher per the caller.
    unsafe { read_or(launcher, false, |l| l.inner.required()) }
}

/// Which program makes the launcher's scopes (0 for a NULL launcher).
///
/// # Safety
/// `launcher` is NULL or a live launcher.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_wrapper(launcher: *const scope_launcher) -> scope_wrapper {
    // SAFETY: NULL or a live launcher per the caller.
    unsafe { read_or(launcher, 0, |l| l.inner.wrapper().code()) }
}

/// The major version of the systemd-run in use (0 with the launcher program, when unknown, or for
/// a NULL launcher).
///
/// # Safety
/// `launcher` is NULL or a live launcher.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_systemd_version(launcher: *const scope_launcher) -> u32 {
    // SAFETY: NULL or a live launcher per the caller.
    unsafe { read_or(launcher, 0, |l| l.inner.systemd_version().unwrap_or(0)) }
}

/// For a child that runs as another user or group: `switches` names the spawn options that
/// switch (UTF-8, for the message, e.g. "uid=65534"). A scope of this user's manager cannot hold
/// another user's process, so such a child runs directly: `SCOPE_RESULT_OK` says so, and the
/// first call in a process logs why at WARN. In `required` mode the spawn is refused instead:
/// `SCOPE_RESULT_REQUIRED_UNAVAILABLE`. The launcher stays the caller's to free.
///
/// # Safety
/// `launcher` is NULL or a live launcher; `switches` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_user_switch(
    launcher: *const scope_launcher,
    switches: *const c_char,
) -> scope_result {
    guard(|| {
        // SAFETY: NULL or a live launcher per the caller.
        let launcher = unsafe { launcher_arg(launcher) }?;
        // SAFETY: NULL or a NUL-terminated string per the caller.
        let switches = unsafe { str_arg(switches, "switches") }?;
        direct_for_user_switch(&launcher.inner, switches)
            .map(drop)
            .map_err(|e| Failure::of(&e))
    })
}

/// The launcher a call is given; NULL is refused with a reminder that a NULL launcher from a
/// request means "launch directly".
///
/// # Safety
/// `launcher` is NULL or a live launcher.
pub(crate) unsafe fn launcher_arg<'a>(
    launcher: *const scope_launcher,
) -> Result<&'a scope_launcher, Failure> {
    // SAFETY: NULL or live per the caller.
    unsafe { borrow(launcher, "launcher") }.map_err(|Failure(code, message)| {
        Failure(
            code,
            format!(
                "{message} (a NULL launcher from scope_launcher_for_env means: launch directly)"
            ),
        )
    })
}

/// [`scope_launcher_for_env_timeout`] that also copies a failure's message into `error`
/// (`error_len` bytes, NUL-terminated, truncated): for callers that run it on a worker thread,
/// where `scope_last_error` of their own thread would not hold it.
///
/// # Safety
/// As [`scope_launcher_for_env`]; `error` is NULL or writable for `error_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_for_env_r(
    envp: *const *const c_char,
    kind: scope_kind,
    probe_timeout_ms: u32,
    out: *mut *mut scope_launcher,
    error: *mut c_char,
    error_len: usize,
) -> scope_result {
    // SAFETY: forwarded from the caller.
    unsafe {
        copy_error(
            scope_launcher_for_env_timeout(envp, kind, probe_timeout_ms, out),
            error,
            error_len,
        )
    }
}

/// Receives the outcome of [`scope_launcher_for_env_async`], exactly once, on the request's own
/// thread: `result` as [`scope_launcher_for_env`] returns it; on success `launcher` is the
/// caller's to free (NULL: launch directly); on failure `error` is the message (valid during the
/// call only).
pub type scope_launcher_ready = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        result: scope_result,
        launcher: *mut scope_launcher,
        error: *const c_char,
    ),
>;

/// [`scope_launcher_for_env_timeout`] on a thread of its own, which calls `ready` when the answer
/// is in: within the bound, whatever other requests are doing (no pool, no queue). Returns
/// `SCOPE_RESULT_OK` once the request has started (then `ready` runs exactly once), or the error
/// for bad arguments (then `ready` never runs).
///
/// # Safety
/// `envp` as for [`scope_launcher_for_env`]; `ready` is safe to call from another thread with
/// `userdata`, which must stay valid until it has been called.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_for_env_async(
    envp: *const *const c_char,
    kind: scope_kind,
    probe_timeout_ms: u32,
    ready: scope_launcher_ready,
    userdata: *mut c_void,
) -> scope_result {
    guard(|| {
        let ready = ready.ok_or_else(|| Failure::null("ready"))?;
        let kind = kind_arg(kind)?;
        let probe_timeout = timeout_arg(probe_timeout_ms, "probe_timeout_ms")?;
        // SAFETY: forwarded from the caller.
        let env = unsafe { env_arg(envp) }?;
        let userdata = Userdata(userdata);
        #[cfg(test)]
        let panic_asked = tests::panic_asked(env.as_pairs());
        let options = LauncherOptions { probe_timeout };
        decide_on_own_thread(env, kind, options, move |answer| {
            let userdata = userdata;
            // This thread is outside the export's guard: a panic in the request (caught by the
            // core) or in handing its answer out is caught here, so that `ready` still runs
            // exactly once (a Node promise always settles).
            let outcome = caught(|| {
                #[cfg(test)]
                tests::panic_if(panic_asked);
                answer.map(launcher_out)
            })
            .and_then(Result::ok)
            .unwrap_or_else(|| Err(Failure::panicked()));
            hand_over(outcome, |result, launcher, error| {
                let launcher = launcher.unwrap_or(ptr::null_mut());
                // SAFETY: the caller promised `ready` may be called from this thread with its
                // userdata; `error` outlives the call.
                unsafe { ready(userdata.0, result, launcher, error) };
            });
        })
        .map_err(|e| Failure::new(scope_result::Io, format!("cannot start a thread: {e}")))?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::{c_char, c_void, CStr, CString, OsString};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::{scope_launcher, scope_launcher_for_env_async, scope_result, SCOPE_KIND_TOOL};

    /// The environment variable that, set to 1, makes a request of this test build panic.
    const PANIC_VARIABLE: &str = "SYNAPS_FFI_TEST_PANIC";

    /// Whether the test asks the request of `env` to panic.
    pub(super) fn panic_asked(env: &[(OsString, OsString)]) -> bool {
        env.iter().any(|(k, v)| k == PANIC_VARIABLE && v == "1")
    }

    pub(super) fn panic_if(asked: bool) {
        if asked {
            panic!("a panic inside the request, as asked by the test");
        }
    }

    type Called = (scope_result, bool, String);

    unsafe extern "C" fn ready(
        userdata: *mut c_void,
        result: scope_result,
        launcher: *mut scope_launcher,
        error: *const c_char,
    ) {
        // SAFETY: the test passes a Sender that outlives the request, and `error` is NULL or a
        // NUL-terminated string valid during this call.
        let (sender, error) = unsafe {
            (
                &*(userdata as *const mpsc::Sender<Called>),
                if error.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(error).to_string_lossy().into_owned()
                },
            )
        };
        let _ = sender.send((result, launcher.is_null(), error));
    }

    #[test]
    fn ready_runs_exactly_once_even_when_the_request_panics() {
        let (sender, receiver) = mpsc::channel::<Called>();
        let entry = CString::new(format!("{PANIC_VARIABLE}=1")).unwrap();
        let envp = [entry.as_ptr(), std::ptr::null()];
        // SAFETY: `envp` is NULL-terminated and outlives the call; `ready` may run on another
        // thread with the Sender, which lives until the receiver has seen the call.
        let started = unsafe {
            scope_launcher_for_env_async(
                envp.as_ptr(),
                SCOPE_KIND_TOOL,
                1000,
                Some(ready),
                &sender as *const mpsc::Sender<Called> as *mut c_void,
            )
        };
        assert_eq!(started, scope_result::Ok);
        let (result, launcher_null, error) = receiver
            .recv_timeout(Duration::from_secs(10))
            .expect("ready was called");
        assert_eq!(result, scope_result::Panic);
        assert!(launcher_null, "no launcher on a panic");
        assert_eq!(error, crate::panic::PANIC_MESSAGE);
        assert!(
            receiver.recv_timeout(Duration::from_millis(500)).is_err(),
            "ready was called a second time"
        );
    }
}

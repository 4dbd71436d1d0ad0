//! `scope_launcher`, `scope_argv` and program resolution across the C ABI.

use std::ffi::{c_char, c_void, CString};
use std::os::unix::ffi::OsStringExt;
use std::ptr;

use crate::abi::{
    scope_kind, scope_wrapper, SCOPE_DEFAULT_PROBE_TIMEOUT_MS, SCOPE_KIND_DAEMON, SCOPE_KIND_TOOL,
    SCOPE_WRAPPER_EXEC, SCOPE_WRAPPER_SYSTEMD_RUN,
};
use crate::args::{argv_arg, c_string, env_arg, kind_arg, out_arg, path_arg, str_arg, timeout_arg};
use crate::boxed::{borrow, free, hand_out, read_or, write_out};
use crate::error::{copy_error, scope_result, Failure};
use crate::export::guard;
use crate::panic::{caught, guard_value};
use synaps_scope::{
    decide, decide_on_own_thread, Decision, LauncherOptions, ScopeError, ScopeLauncher,
};
use synaps_scope::{direct_for_user_switch, resolve_program};
use synaps_scope::{ScopeKind, Wrapper};

/// A launcher: turns an argv into one that runs in a new scope. Immutable, so one launcher may be
/// shared by any number of threads. Free with [`scope_launcher_free`].
pub struct scope_launcher {
    inner: ScopeLauncher,
    slice: Option<CString>,
}

/// A wrapped command line. Free with [`scope_argv_free`]; not to be shared between threads
/// while one of them frees it.
pub struct scope_argv {
    args: Vec<CString>,
    /// Pointers into `args`, then NULL: what execve and posix_spawn take.
    pointers: Vec<*mut c_char>,
    unit: Option<CString>,
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

/// A request's decision as the C caller takes it: a launcher handle, or NULL for "launch
/// directly".
fn launcher_out(decision: Result<Decision, ScopeError>) -> Result<*mut scope_launcher, Failure> {
    Ok(match decision.map_err(|e| Failure::of(&e))? {
        Decision::Scoped(inner) => {
            let slice = inner
                .slice()
                .map(|s| c_string(s.as_bytes().to_vec()))
                .transpose()?;
            Box::into_raw(Box::new(scope_launcher { inner, slice }))
        }
        Decision::Direct(_) => ptr::null_mut(),
    })
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

/// The launcher's kind (`SCOPE_KIND_TOOL` for NULL).
///
/// # Safety
/// `launcher` is NULL or a live launcher.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_kind(launcher: *const scope_launcher) -> scope_kind {
    // SAFETY: NULL or a live launcher per the caller.
    unsafe {
        read_or(launcher, SCOPE_KIND_TOOL, |l| match l.inner.kind() {
            ScopeKind::Daemon => SCOPE_KIND_DAEMON,
            ScopeKind::Tool => SCOPE_KIND_TOOL,
        })
    }
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
    unsafe {
        read_or(launcher, 0, |l| match l.inner.wrapper() {
            Wrapper::Exec { .. } => SCOPE_WRAPPER_EXEC,
            _ => SCOPE_WRAPPER_SYSTEMD_RUN,
        })
    }
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
        let launcher = unsafe { borrow(launcher, "launcher") }.map_err(Failure::with_hint)?;
        // SAFETY: NULL or a NUL-terminated string per the caller.
        let switches = unsafe { str_arg(switches, "switches") }?;
        direct_for_user_switch(&launcher.inner, switches)
            .map(drop)
            .map_err(|e| Failure::of(&e))
    })
}

/// Rewrites `argv` (NULL-terminated; arguments are bytes, not necessarily UTF-8) to run in a new
/// scope. `envp` (NULL: this process's environment) and `cwd` (NULL: this process's) are the
/// child's: the program is resolved with them. A program that cannot be resolved, or an empty
/// argv, is left unwrapped, so the spawn fails as it would without scopes; [`scope_argv_unit`] is
/// then NULL.
/// After a successful probe, a failure of the wrapped launch must be reported, never retried
/// as a direct launch: the command may already have run.
///
/// # Safety
/// `launcher` is a live launcher; `argv` and `envp` are NULL or NULL-terminated arrays of
/// NUL-terminated strings; `cwd` is NULL or a NUL-terminated string; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_wrap_argv(
    launcher: *const scope_launcher,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    out: *mut *mut scope_argv,
) -> scope_result {
    // SAFETY: forwarded from the caller; a NULL program means argv[0].
    unsafe { scope_wrap_program(launcher, ptr::null(), argv, envp, cwd, out) }
}

/// [`scope_wrap_argv`] for a program other than `argv[0]` (a login shell's `-bash`, like
/// `execv(program, argv)`): `program` (NULL: `argv[0]`) is resolved and run, and `argv`, its
/// `argv[0]` included, is what it sees. With systemd-run as the wrapper, which cannot pass an
/// `argv[0]`, the program sees its own path as `argv[0]`.
///
/// # Safety
/// As [`scope_wrap_argv`]; `program` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn scope_wrap_program(
    launcher: *const scope_launcher,
    program: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    out: *mut *mut scope_argv,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: NULL or a live launcher per the caller.
        let launcher = unsafe { borrow(launcher, "launcher") }.map_err(Failure::with_hint)?;
        // SAFETY: forwarded from the caller.
        let argv = unsafe { argv_arg(argv) }?;
        // SAFETY: forwarded from the caller.
        let env = unsafe { env_arg(envp) }?;
        // SAFETY: forwarded from the caller.
        let cwd = unsafe { path_arg(cwd) };
        // SAFETY: NULL or a NUL-terminated string per the caller.
        let program = unsafe { path_arg(program) };
        let wrapped = match program {
            Some(program) => {
                launcher
                    .inner
                    .wrap_program(program.as_os_str(), &argv, &env, cwd.as_deref())
            }
            None => launcher.inner.wrap(&argv, &env, cwd.as_deref()),
        };
        let args = wrapped
            .argv
            .into_iter()
            .map(|a| c_string(a.into_vec()))
            .collect::<Result<Vec<_>, _>>()?;
        let unit = wrapped.unit.map(|u| c_string(u.into_bytes())).transpose()?;
        let mut pointers: Vec<*mut c_char> = args.iter().map(|a| a.as_ptr().cast_mut()).collect();
        pointers.push(ptr::null_mut());
        let wrapped = scope_argv {
            args,
            pointers,
            unit,
        };
        // SAFETY: `out` was checked non-NULL; the caller guarantees it is writable.
        unsafe { hand_out(wrapped, out) };
        Ok(())
    })
}

impl Failure {
    /// The launcher argument is NULL also when the request said "launch directly".
    fn with_hint(self) -> Self {
        Failure(
            self.0,
            format!(
                "{} (a NULL launcher from scope_launcher_for_env means: launch directly)",
                self.1
            ),
        )
    }
}

/// The number of arguments (0 for NULL).
///
/// # Safety
/// `argv` is NULL or a live `scope_argv`.
#[no_mangle]
pub unsafe extern "C" fn scope_argv_len(argv: *const scope_argv) -> usize {
    // SAFETY: NULL or live per the caller.
    unsafe { read_or(argv, 0, |a| a.args.len()) }
}

/// The arguments as a NULL-terminated array ready for `execve`/`posix_spawn` (NULL for NULL),
/// valid while `argv` lives. The strings must not be modified.
///
/// # Safety
/// `argv` is NULL or a live `scope_argv`.
#[no_mangle]
pub unsafe extern "C" fn scope_argv_ptr(argv: *const scope_argv) -> *const *mut c_char {
    // SAFETY: NULL or live per the caller.
    unsafe { read_or(argv, ptr::null(), |a| a.pointers.as_ptr()) }
}

/// Argument `index` (NULL when out of range), its byte length in `*len` when `len` is not NULL.
/// Arguments are bytes and may not be UTF-8. Valid while `argv` lives.
///
/// # Safety
/// `argv` is NULL or a live `scope_argv`; `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn scope_argv_get(
    argv: *const scope_argv,
    index: usize,
    len: *mut usize,
) -> *const c_char {
    guard_value(ptr::null(), || {
        // SAFETY: NULL or live per the caller.
        let Some(arg) = unsafe { argv.as_ref() }.and_then(|a| a.args.get(index)) else {
            return ptr::null();
        };
        if !len.is_null() {
            // SAFETY: non-NULL and writable per the caller.
            unsafe { *len = arg.as_bytes().len() };
        }
        arg.as_ptr()
    })
}

/// The size of the buffer [`scope_argv_copy`] fills: every argument's bytes, each followed by a
/// NUL (0 for NULL).
///
/// # Safety
/// `argv` is NULL or a live `scope_argv`.
#[no_mangle]
pub unsafe extern "C" fn scope_argv_size(argv: *const scope_argv) -> usize {
    // SAFETY: NULL or live per the caller.
    unsafe {
        read_or(argv, 0, |a| {
            a.args.iter().map(|arg| arg.as_bytes_with_nul().len()).sum()
        })
    }
}

/// Copies every argument of `argv`, each followed by a NUL, into `buffer`, which holds
/// `buffer_len` bytes, at least [`scope_argv_size`]: the whole argv in one call, for a binding
/// that copies it out (Node) rather than reading the library's memory argument by argument.
/// `SCOPE_RESULT_INVALID_ARGUMENT` when the buffer is too short; nothing is written then.
///
/// # Safety
/// `argv` is NULL or a live `scope_argv`; `buffer` is NULL or holds `buffer_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn scope_argv_copy(
    argv: *const scope_argv,
    buffer: *mut u8,
    buffer_len: usize,
) -> scope_result {
    guard(|| {
        // SAFETY: NULL or live per the caller.
        let argv = unsafe { borrow(argv, "argv") }?;
        // SAFETY: NULL or live per the caller.
        let needed = unsafe { scope_argv_size(argv) };
        if needed == 0 {
            return Ok(());
        }
        if buffer.is_null() {
            return Err(Failure::new(scope_result::NullParameter, "buffer is NULL"));
        }
        if buffer_len < needed {
            return Err(Failure::new(
                scope_result::InvalidArgument,
                format!("the buffer holds {buffer_len} bytes; the argv needs {needed}"),
            ));
        }
        // SAFETY: non-NULL with at least `needed` writable bytes, per the caller and the check.
        let out = unsafe { std::slice::from_raw_parts_mut(buffer, needed) };
        let mut at = 0;
        for arg in &argv.args {
            let bytes = arg.as_bytes_with_nul();
            out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        }
        Ok(())
    })
}

/// The scope's unit name (`synaps-<kind>-<32 hex>.scope`), or NULL when the argv was left
/// unwrapped (or for NULL). Valid while `argv` lives.
///
/// # Safety
/// `argv` is NULL or a live `scope_argv`.
#[no_mangle]
pub unsafe extern "C" fn scope_argv_unit(argv: *const scope_argv) -> *const c_char {
    // SAFETY: NULL or live per the caller.
    unsafe {
        read_or(argv, ptr::null(), |a| {
            a.unit.as_ref().map_or(ptr::null(), |u| u.as_ptr())
        })
    }
}

/// Frees a wrapped argv (NULL is accepted and ignored).
///
/// # Safety
/// `argv` is NULL or from [`scope_wrap_argv`], not yet freed.
#[no_mangle]
pub unsafe extern "C" fn scope_argv_free(argv: *mut scope_argv) {
    // SAFETY: NULL or an argv not yet freed, per the caller.
    unsafe { free(argv) }
}

/// Resolves `program` as execvp in a child with environment `envp` (NULL: this process's) and
/// working directory `cwd` (NULL: this process's) would. On success `*out` is the absolute path,
/// to be freed with `scope_string_free`; a missing program is `SCOPE_RESULT_NOT_FOUND`.
///
/// # Safety
/// `program` and `cwd` are NULL or NUL-terminated strings; `envp` as for
/// [`scope_launcher_for_env`]; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_resolve_program(
    program: *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    out: *mut *mut c_char,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: NULL or a NUL-terminated string per the caller.
        let program = unsafe { path_arg(program) }.ok_or_else(|| Failure::null("program"))?;
        // SAFETY: forwarded from the caller.
        let env = unsafe { env_arg(envp) }?;
        // SAFETY: forwarded from the caller.
        let cwd = unsafe { path_arg(cwd) };
        let path = resolve_program(program.as_os_str(), &env, cwd.as_deref())
            .map_err(|e| Failure::of(&e))?;
        let path = c_string(path.into_os_string().into_vec())?;
        // SAFETY: `out` was checked non-NULL; the caller guarantees it is writable.
        unsafe { write_out(out, path.into_raw()) };
        Ok(())
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

/// A `userdata` pointer that the request's thread hands back to the caller's callback.
struct Userdata(*mut c_void);
// SAFETY: the pointer is only handed back to the caller's callback, which the caller made for
// exactly that (the header says `ready` runs on another thread).
unsafe impl Send for Userdata {}

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
        let panic_asked = tests::panic_asked(&env);
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
            let (result, launcher, error) = match outcome {
                Ok(launcher) => (scope_result::Ok, launcher, None),
                Err(Failure(code, message)) => (code, ptr::null_mut(), Some(message)),
            };
            let error = error.map(|m| CString::new(m.replace('\0', " ")).unwrap_or_default());
            let error_ptr = error.as_ref().map_or(ptr::null(), |e| e.as_ptr());
            // SAFETY: the caller promised `ready` may be called from this thread with its
            // userdata; `error` outlives the call.
            unsafe { ready(userdata.0, result, launcher, error_ptr) };
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

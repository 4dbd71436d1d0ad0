//! `scope_doctor`: the report `synaps-scope doctor` prints, for hosts that have no command line
//! at hand (which launcher program a library uses, and why a launch would go direct).

use std::ffi::c_char;
use std::os::unix::ffi::OsStringExt;

use crate::args::{c_string, env_arg, out_arg, timeout_arg};
use crate::boxed::write_out;
use crate::error::{copy_error, scope_result};
use crate::export::guard;
use synaps_scope::doctor::diagnose;
use synaps_scope::{LauncherOptions, ScopeKind};

/// Runs every check a launcher request runs, for both kinds, with the environment `envp` (NULL:
/// this process's) and a bound of `timeout_ms` per probe, and writes the report for a person to
/// `*out` (free it with `scope_string_free`). May block up to a few bounds.
///
/// # Safety
/// `envp` is NULL or a NULL-terminated array of NUL-terminated strings; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_doctor(
    envp: *const *const c_char,
    timeout_ms: u32,
    out: *mut *mut c_char,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        let probe_timeout = timeout_arg(timeout_ms, "timeout_ms")?;
        // SAFETY: forwarded from the caller.
        let env = unsafe { env_arg(envp) }?;
        let report = diagnose(
            &env,
            &[ScopeKind::Tool, ScopeKind::Daemon],
            &LauncherOptions { probe_timeout },
        );
        let text = c_string(std::ffi::OsString::from(report.to_text()).into_vec())?;
        // SAFETY: `out` was checked non-NULL; the caller guarantees it is writable.
        unsafe { write_out(out, text.into_raw()) };
        Ok(())
    })
}

/// [`scope_doctor`] that also copies a failure's message into `error` (`error_len` bytes,
/// NUL-terminated, truncated), for callers that run it on a worker thread.
///
/// # Safety
/// As [`scope_doctor`]; `error` is NULL or writable for `error_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn scope_doctor_r(
    envp: *const *const c_char,
    timeout_ms: u32,
    out: *mut *mut c_char,
    error: *mut c_char,
    error_len: usize,
) -> scope_result {
    // SAFETY: forwarded from the caller.
    let result = unsafe { scope_doctor(envp, timeout_ms, out) };
    // SAFETY: forwarded from the caller.
    unsafe { copy_error(result, error, error_len) }
}

//! `scope_diagnose`: the report `synaps-scope doctor` prints and its verdict as a value, for hosts
//! that have no command line at hand (which launcher program a library uses, and why a launch
//! would go direct).

use std::ffi::{c_char, CString};
use std::os::unix::ffi::OsStringExt;
use std::sync::OnceLock;

use crate::abi::scope_verdict;
use crate::args::{c_string, env_arg, out_arg, timeout_arg};
use crate::boxed::write_out;
use crate::error::{copy_error, scope_result};
use crate::export::guard;
use crate::panic::guard_value;
use synaps_scope::__surfaces::diagnose;
use synaps_scope::doctor::Verdict;
use synaps_scope::{LauncherOptions, ScopeKind};

/// Runs every check a launcher request runs, for both kinds, with the environment `envp` (NULL:
/// this process's) and a bound of `timeout_ms` per probe; writes the report for a person to
/// `*out` (free it with `scope_string_free`) and the verdict (`SCOPE_VERDICT_*`, numbered as
/// `synaps-scope doctor` exits) to `*verdict`. May block up to a few bounds.
///
/// # Safety
/// `envp` is NULL or a NULL-terminated array of NUL-terminated strings; `out` and `verdict` are
/// writable.
#[no_mangle]
pub unsafe extern "C" fn scope_diagnose(
    envp: *const *const c_char,
    timeout_ms: u32,
    out: *mut *mut c_char,
    verdict: *mut scope_verdict,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        out_arg(verdict, "verdict")?;
        let probe_timeout = timeout_arg(timeout_ms, "timeout_ms")?;
        // SAFETY: forwarded from the caller.
        let env = unsafe { env_arg(envp) }?;
        let report = diagnose(
            &env,
            &[ScopeKind::Tool, ScopeKind::Daemon],
            &LauncherOptions { probe_timeout },
        );
        let text = c_string(std::ffi::OsString::from(report.to_text()).into_vec())?;
        // SAFETY: both were checked non-NULL; the caller guarantees they are writable.
        unsafe {
            write_out(out, text.into_raw());
            write_out(verdict, report.overall().code().into());
        }
        Ok(())
    })
}

/// [`scope_diagnose`] that also copies a failure's message into `error` (`error_len` bytes,
/// NUL-terminated, truncated), for callers that run it on a worker thread.
///
/// # Safety
/// As [`scope_diagnose`]; `error` is NULL or writable for `error_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn scope_diagnose_r(
    envp: *const *const c_char,
    timeout_ms: u32,
    out: *mut *mut c_char,
    verdict: *mut scope_verdict,
    error: *mut c_char,
    error_len: usize,
) -> scope_result {
    // SAFETY: forwarded from the caller.
    let result = unsafe { scope_diagnose(envp, timeout_ms, out, verdict) };
    // SAFETY: forwarded from the caller.
    unsafe { copy_error(result, error, error_len) }
}

/// The words of `verdict` for a person, as the report's last line has them (static, never NULL;
/// "unknown verdict" for numbers not listed).
#[no_mangle]
pub extern "C" fn scope_verdict_words(verdict: scope_verdict) -> *const c_char {
    guard_value(c"unknown verdict".as_ptr(), || {
        let words = VERDICT_WORDS.get_or_init(|| {
            Verdict::ALL.map(|v| {
                let words = CString::new(v.words()).expect("a verdict's words hold no NUL");
                (u32::from(v.code()), words)
            })
        });
        words
            .iter()
            .find(|(code, _)| *code == verdict)
            .map_or(c"unknown verdict", |(_, words)| words.as_c_str())
            .as_ptr()
    })
}

/// The core's words of each verdict, as C strings that live as long as the library.
static VERDICT_WORDS: OnceLock<[(scope_verdict, CString); 4]> = OnceLock::new();

/// [`scope_diagnose`] without the verdict: the 1.0 call, kept for its callers.
///
/// # Safety
/// As [`scope_diagnose`], without `verdict`.
#[no_mangle]
pub unsafe extern "C" fn scope_doctor(
    envp: *const *const c_char,
    timeout_ms: u32,
    out: *mut *mut c_char,
) -> scope_result {
    let mut verdict = 0;
    // SAFETY: forwarded from the caller; `verdict` is a local.
    unsafe { scope_diagnose(envp, timeout_ms, out, &mut verdict) }
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

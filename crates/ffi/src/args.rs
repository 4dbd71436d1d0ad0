//! Argument decoding: C strings and argv and envp arrays turned into bytes, and handed with kinds,
//! shell words, bounds and pids to the core's intake, which checks them as on every surface; each
//! failure with its result code and a message that names the argument.

use std::ffi::{c_char, CStr, CString, OsString};
use std::path::PathBuf;
use std::time::Duration;

use synaps_scope::intake::{self, CheckedEnv};
use synaps_scope::{ScopeKind, ShellWords};

use crate::abi::{scope_kind, scope_shell_words};
use crate::error::{scope_result, Failure};

/// More entries than any real argv or environment; beyond it the array is taken to be missing
/// its NULL terminator.
const MAX_ARRAY_ENTRIES: usize = 1 << 20;

/// The entries of a NULL-terminated array of C strings, as bytes.
///
/// # Safety
/// `array` is non-NULL and points to NUL-terminated strings followed by a NULL pointer, all
/// living at least as long as `'a`.
unsafe fn c_string_array<'a>(
    array: *const *const c_char,
    what: &str,
) -> Result<Vec<&'a [u8]>, Failure> {
    let mut entries = Vec::new();
    loop {
        if entries.len() == MAX_ARRAY_ENTRIES {
            return Err(Failure::new(
                scope_result::InvalidArgument,
                format!("{what} has no NULL terminator within {MAX_ARRAY_ENTRIES} entries"),
            ));
        }
        // SAFETY: the caller guarantees the array is NULL-terminated, and we stop at the NULL.
        let entry = unsafe { *array.add(entries.len()) };
        if entry.is_null() {
            return Ok(entries);
        }
        // SAFETY: each entry before the terminator is a NUL-terminated string.
        entries.push(unsafe { CStr::from_ptr(entry) }.to_bytes());
    }
}

/// An `envp` argument: NULL means this process's environment.
///
/// # Safety
/// As [`c_string_array`] when non-NULL.
pub(crate) unsafe fn env_arg(envp: *const *const c_char) -> Result<CheckedEnv, Failure> {
    let checked = if envp.is_null() {
        CheckedEnv::inherited()
    } else {
        // SAFETY: forwarded from the caller.
        CheckedEnv::from_entries(unsafe { c_string_array(envp, "envp") }?)
    };
    checked.map_err(|e| Failure::bad_input(&e).naming("envp"))
}

/// An `argv` argument: non-NULL (an empty array is an empty argv).
///
/// # Safety
/// As [`c_string_array`] when non-NULL.
pub(crate) unsafe fn argv_arg(argv: *const *const c_char) -> Result<Vec<OsString>, Failure> {
    if argv.is_null() {
        return Err(Failure::null("argv"));
    }
    // SAFETY: forwarded from the caller.
    let entries = unsafe { c_string_array(argv, "argv") }?;
    Ok(entries.into_iter().map(os_from_bytes).collect())
}

/// An optional path argument (NULL: None), as bytes.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
pub(crate) unsafe fn path_arg(path: *const c_char) -> Option<PathBuf> {
    // SAFETY: non-NULL is a NUL-terminated string per the caller.
    (!path.is_null())
        .then(|| PathBuf::from(os_from_bytes(unsafe { CStr::from_ptr(path) }.to_bytes())))
}

/// A required UTF-8 string argument.
///
/// # Safety
/// `s` is NULL or a NUL-terminated string living at least as long as `'a`.
pub(crate) unsafe fn str_arg<'a>(s: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if s.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: non-NULL is a NUL-terminated string per the caller.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .map_err(|_| Failure::new(scope_result::InvalidUtf8, format!("{what} is not UTF-8")))
}

pub(crate) fn kind_arg(kind: scope_kind) -> Result<ScopeKind, Failure> {
    intake::kind_from_code(kind).map_err(|e| Failure::bad_input(&e))
}

pub(crate) fn shell_words_arg(how: scope_shell_words) -> Result<ShellWords, Failure> {
    intake::shell_words_from_code(how).map_err(|e| Failure::bad_input(&e))
}

pub(crate) fn timeout_arg(ms: u32, what: &str) -> Result<Duration, Failure> {
    intake::bound_from_millis(ms.into(), what).map_err(|e| Failure::bad_input(&e))
}

/// Checks an out-parameter before any work is done.
pub(crate) fn out_arg<T>(out: *mut T, what: &str) -> Result<(), Failure> {
    if out.is_null() {
        Err(Failure::null(what))
    } else {
        Ok(())
    }
}

fn os_from_bytes(bytes: &[u8]) -> OsString {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(bytes).to_owned()
}

/// A C string of `bytes`, which came from C strings or paths and so hold no NUL.
pub(crate) fn c_string(bytes: Vec<u8>) -> Result<CString, Failure> {
    CString::new(bytes)
        .map_err(|_| Failure::new(scope_result::InvalidArgument, "a string holds a NUL byte"))
}

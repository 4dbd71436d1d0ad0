//! `scope_argv` across the C ABI: a command line wrapped to run in a new scope, as `execve` and
//! `posix_spawn` take it, with its scope's unit.

use std::ffi::{c_char, CString, OsString};
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::ptr;

use crate::abi::scope_shell_words;
use crate::args::{argv_arg, c_string, env_arg, out_arg, path_arg, shell_words_arg};
use crate::boxed::{borrow, free, hand_out, read_or};
use crate::error::{scope_result, Failure};
use crate::export::guard;
use crate::launcher::{launcher_arg, scope_launcher};
use crate::panic::guard_value;
use synaps_scope::{shell_argv, ScopeLauncher, Wrapped};

/// A wrapped command line. Free with [`scope_argv_free`]; not to be shared between threads
/// while one of them frees it.
pub struct scope_argv {
    args: Vec<CString>,
    /// Pointers into `args`, then NULL: what execve and posix_spawn take.
    pointers: Vec<*mut c_char>,
    unit: Option<CString>,
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
    let wrap = |launcher: &ScopeLauncher, argv: &[OsString], env: &Env, cwd: Option<&Path>| {
        // SAFETY: NULL or a NUL-terminated string per the caller.
        Ok(match unsafe { path_arg(program) } {
            Some(program) => launcher.wrap_program(program.as_os_str(), argv, env, cwd),
            None => launcher.wrap(argv, env, cwd),
        })
    };
    // SAFETY: forwarded from the caller.
    unsafe { wrap_into(launcher, argv, envp, cwd, out, wrap) }
}

/// [`scope_wrap_argv`] for a shell command: `shell` (NULL: `/bin/sh`) runs `-c` with `words`
/// (NULL-terminated), handed over as `how` says (`SCOPE_SHELL_WORDS_POSITIONAL`: the first word
/// is the command, the others `$0`, `$1`…; `SCOPE_SHELL_WORDS_JOINED`: the words joined with
/// spaces are the command), inside the scope.
///
/// # Safety
/// As [`scope_wrap_argv`], `words` in `argv`'s place; `shell` is NULL or a NUL-terminated
/// string.
#[no_mangle]
pub unsafe extern "C" fn scope_wrap_shell(
    launcher: *const scope_launcher,
    shell: *const c_char,
    words: *const *const c_char,
    how: scope_shell_words,
    envp: *const *const c_char,
    cwd: *const c_char,
    out: *mut *mut scope_argv,
) -> scope_result {
    let wrap = |launcher: &ScopeLauncher, words: &[OsString], env: &Env, cwd: Option<&Path>| {
        let how = shell_words_arg(how)?;
        // SAFETY: NULL or a NUL-terminated string per the caller.
        let shell = unsafe { path_arg(shell) };
        let argv = shell_argv(shell.as_deref().map(Path::as_os_str), words, how);
        Ok(launcher.wrap(&argv, env, cwd))
    };
    // SAFETY: forwarded from the caller.
    unsafe { wrap_into(launcher, words, envp, cwd, out, wrap) }
}

/// An environment as the core takes it.
type Env = [(OsString, OsString)];

/// What every wrap does around its own step `wrap`: the launcher, argv (or words), environment
/// and working directory checked and read, then the wrapped argv handed out through `out`.
///
/// # Safety
/// As [`scope_wrap_argv`].
unsafe fn wrap_into(
    launcher: *const scope_launcher,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    out: *mut *mut scope_argv,
    wrap: impl FnOnce(&ScopeLauncher, &[OsString], &Env, Option<&Path>) -> Result<Wrapped, Failure>,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: NULL or a live launcher per the caller.
        let launcher = unsafe { launcher_arg(launcher) }?;
        // SAFETY: forwarded from the caller.
        let argv = unsafe { argv_arg(argv) }?;
        // SAFETY: forwarded from the caller.
        let env = unsafe { env_arg(envp) }?;
        // SAFETY: forwarded from the caller.
        let cwd = unsafe { path_arg(cwd) };
        let wrapped = wrap(&launcher.inner, &argv, env.as_pairs(), cwd.as_deref())?;
        // SAFETY: `out` was checked non-NULL; the caller guarantees it is writable.
        unsafe { argv_out(wrapped, out) }
    })
}

/// Hands `wrapped` out as a `scope_argv`.
///
/// # Safety
/// `out` is writable.
unsafe fn argv_out(wrapped: Wrapped, out: *mut *mut scope_argv) -> Result<(), Failure> {
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
    // SAFETY: writable per the caller.
    unsafe { hand_out(wrapped, out) };
    Ok(())
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

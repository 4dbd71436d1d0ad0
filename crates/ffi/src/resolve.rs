//! Program resolution across the C ABI, as execvp in the child would find the program.

use std::ffi::c_char;
use std::os::unix::ffi::OsStringExt;

use crate::args::{c_string, env_arg, out_arg, path_arg};
use crate::boxed::write_out;
use crate::error::{scope_result, Failure};
use crate::export::guard;
use synaps_scope::__surfaces::find_program;

/// Resolves `program` as execvp in a child with environment `envp` (NULL: this process's) and
/// working directory `cwd` (NULL: this process's) would. On success `*out` is the absolute path,
/// to be freed with `scope_string_free`; a missing program is `SCOPE_RESULT_NOT_FOUND`.
///
/// # Safety
/// `program` and `cwd` are NULL or NUL-terminated strings; `envp` as for
/// `scope_launcher_for_env`; `out` is writable.
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
        let path =
            find_program(program.as_os_str(), &env, cwd.as_deref()).map_err(|e| Failure::of(&e))?;
        let path = c_string(path.into_os_string().into_vec())?;
        // SAFETY: `out` was checked non-NULL; the caller guarantees it is writable.
        unsafe { write_out(out, path.into_raw()) };
        Ok(())
    })
}

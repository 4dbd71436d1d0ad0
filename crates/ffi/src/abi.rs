//! The ABI's own facts: its version, the library's, the numbered kinds, wrappers and verdicts, the exit
//! status of a launch that could not be scoped, the default bounds, and freeing a string.

use std::ffi::{c_char, CStr, CString};
use std::os::unix::ffi::OsStringExt;

use synaps_scope::__ffi::PerProcess;
use synaps_scope::own_file;

use crate::panic::guard_value;

/// The version of this ABI. It changes only when a change would break a caller compiled against
/// an earlier header; callers compare it with [`scope_abi_version`] at load time.
pub const SCOPE_ABI_VERSION: u32 = 1;

/// Which kind of scope: [`SCOPE_KIND_TOOL`] or [`SCOPE_KIND_DAEMON`]. A plain integer, so that
/// an out-of-range value from C is an error, not undefined behaviour.
pub type scope_kind = u32;
/// Shell tool commands and PTY shells (`tool_scope_slice`).
pub const SCOPE_KIND_TOOL: scope_kind = 0;
/// The daemon's own scope (`daemon_scope_slice`).
pub const SCOPE_KIND_DAEMON: scope_kind = 1;

/// Which program makes a launcher's scopes: [`SCOPE_WRAPPER_EXEC`] or
/// [`SCOPE_WRAPPER_SYSTEMD_RUN`] (0 for a NULL launcher).
pub type scope_wrapper = u32;
/// The project's launcher program, `synaps-scope-exec`.
pub const SCOPE_WRAPPER_EXEC: scope_wrapper = 1;
/// `systemd-run --user --scope`.
pub const SCOPE_WRAPPER_SYSTEMD_RUN: scope_wrapper = 2;

/// How `scope_wrap_shell` hands the shell a command's words: a plain integer, as
/// [`scope_kind`] is.
pub type scope_shell_words = u32;
/// As `sh -c` and Python's `subprocess` take them: the first word is the command, the others the
/// shell's `$0`, `$1`…
pub const SCOPE_SHELL_WORDS_POSITIONAL: scope_shell_words = 0;
/// As Node's `child_process` takes them: the words joined with spaces are the one command.
pub const SCOPE_SHELL_WORDS_JOINED: scope_shell_words = 1;

/// What `scope_diagnose` concludes, numbered as `synaps-scope doctor` exits: a plain integer, as
/// [`scope_kind`] is.
pub type scope_verdict = u32;
/// Every kind would launch in scopes.
pub const SCOPE_VERDICT_SCOPED: scope_verdict = 0;
/// Some kind would launch directly, not in a scope.
pub const SCOPE_VERDICT_DIRECT: scope_verdict = 1;
/// The environment given is one no process can hold (bad input).
pub const SCOPE_VERDICT_BAD_INPUT: scope_verdict = 2;
/// `required` mode would refuse some kind's launches.
pub const SCOPE_VERDICT_REFUSED: scope_verdict = 3;

/// The exit status of a wrapped launch whose scope could not be made in `required` mode: the
/// command did not run (launcher program only; systemd-run exits 1).
pub const SCOPE_EXEC_FAILED_STATUS: i32 = 125;

/// The bound of a probe when the caller gives none, in milliseconds: what
/// [`crate::launcher::scope_launcher_for_env`] uses.
pub const SCOPE_DEFAULT_PROBE_TIMEOUT_MS: u32 = 3000;

/// The bound of a kill, or of a wait for a scope to empty, that bindings use when the caller
/// gives none, in milliseconds.
pub const SCOPE_DEFAULT_KILL_TIMEOUT_MS: u32 = 5000;

/// The ABI version this library implements ([`SCOPE_ABI_VERSION`] of its header).
#[no_mangle]
pub extern "C" fn scope_abi_version() -> u32 {
    SCOPE_ABI_VERSION
}

/// The library's version, e.g. "1.1.0" (static, never NULL): the version of every artifact of
/// the project (crates, wheel, npm package, this library's soname and pkg-config file).
#[no_mangle]
pub extern "C" fn scope_version() -> *const c_char {
    const VERSION: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(version) => version,
            Err(_) => c"unknown",
        };
    VERSION.as_ptr()
}

/// The file this library was loaded from (static, as the dynamic loader mapped it), or NULL when
/// that cannot be told: for a host that loaded it by its soname and wants to say which copy runs.
#[no_mangle]
pub extern "C" fn scope_library_file() -> *const c_char {
    // Kept for as long as the process lives (a forked child's holds its parent's).
    static FILE: PerProcess<LibraryFile> = PerProcess::new();
    guard_value(std::ptr::null(), || {
        FILE.get_inheriting(|parents| LibraryFile(parents.0.clone()))
            .0
            .as_ref()
            .map_or(std::ptr::null(), |file| file.as_ptr())
    })
}

/// The library's file as a C string, found when first asked for.
struct LibraryFile(Option<CString>);

impl Default for LibraryFile {
    fn default() -> Self {
        LibraryFile(own_file().and_then(|file| CString::new(file.into_os_string().into_vec()).ok()))
    }
}

/// Frees a string this library returned (NULL is accepted and ignored).
///
/// # Safety
/// `s` is NULL or a string from this library not yet freed.
#[no_mangle]
pub unsafe extern "C" fn scope_string_free(s: *mut c_char) {
    guard_value((), || {
        if !s.is_null() {
            // SAFETY: the caller passes a pointer from CString::into_raw, freed at most once.
            drop(unsafe { CString::from_raw(s) });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use synaps_scope::{ScopeKind, ShellWords};

    #[test]
    fn the_header_s_numbers_are_the_core_s() {
        assert_eq!(ScopeKind::Tool.code(), SCOPE_KIND_TOOL);
        assert_eq!(ScopeKind::Daemon.code(), SCOPE_KIND_DAEMON);
        assert_eq!(ShellWords::Positional.code(), SCOPE_SHELL_WORDS_POSITIONAL);
        assert_eq!(ShellWords::Joined.code(), SCOPE_SHELL_WORDS_JOINED);
        let exec = synaps_scope::Wrapper::Exec {
            program: "/x".into(),
        };
        let systemd_run = synaps_scope::Wrapper::SystemdRun {
            path: "/x".into(),
            version: None,
        };
        assert_eq!(exec.code(), SCOPE_WRAPPER_EXEC);
        let verdicts = [
            SCOPE_VERDICT_SCOPED,
            SCOPE_VERDICT_DIRECT,
            SCOPE_VERDICT_BAD_INPUT,
            SCOPE_VERDICT_REFUSED,
        ];
        let codes = synaps_scope::doctor::Verdict::ALL.map(|v| u32::from(v.code()));
        assert_eq!(codes, verdicts);
        assert_eq!(systemd_run.code(), SCOPE_WRAPPER_SYSTEMD_RUN);
    }

    #[test]
    fn the_header_s_default_bounds_are_the_core_s() {
        let millis = |bound: std::time::Duration| u32::try_from(bound.as_millis()).unwrap();
        assert_eq!(
            SCOPE_DEFAULT_PROBE_TIMEOUT_MS,
            millis(synaps_scope::DEFAULT_PROBE_TIMEOUT)
        );
        assert_eq!(
            SCOPE_DEFAULT_KILL_TIMEOUT_MS,
            millis(synaps_scope::DEFAULT_KILL_TIMEOUT)
        );
    }
}

//! Run child processes in their own systemd scope (Linux).
//!
//! systemd-oomd, under memory pressure, kills a whole cgroup at once. Without scopes, everything a
//! daemon, terminal or IDE starts lives in that program's own cgroup, so one runaway child makes
//! the whole cgroup the biggest and oomd kills the child, the daemon and every session with it.
//! A scope per child gives each its own cgroup, so oomd kills only the runaway. A scope is not a
//! memory cap; operators cap a slice.
//!
//! The wrapper in front of the command, the project's launcher program `synaps-scope-exec` (or
//! `systemd-run --user --scope`), registers a transient scope for its own pid and then execs the
//! command in place: same pid, process group, session, environment, fds and stdio. Each request
//! first runs a fresh, bounded probe, one D-Bus conversation with the user manager; when scopes are
//! unavailable (not Linux, no user manager, `process_scopes = off`) the command starts exactly as it
//! would without this crate.
//!
//! The contract, rule by rule (R1-R17, A1-A5), is `docs/spec.md`. The C ABI lives in the
//! `synaps-scope-ffi` crate and the command line in `synaps-scope-cli`; this crate is pure Rust.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod bounds;
mod deprecated;
pub mod diag;
pub mod doctor;
mod error_class;
mod input;
mod kernel;
mod launch;
mod manager;
mod memo;
mod oomd;
mod per_process;
mod scope;
mod warn;

pub use input::{config, intake, limits};
pub use scope::handle;

pub use bounds::{DEFAULT_KILL_TIMEOUT, DEFAULT_PROBE_TIMEOUT};
#[allow(deprecated)]
pub use deprecated::{
    bound_from_millis, bound_from_secs, checked_pid, parse_env_entry, BadBound, EnvEntryError,
};
pub use error_class::{Classified, ErrorClass};
pub use input::env::{inherited_env, set_env, with_overrides};
pub use input::intake::PID_MAX;
pub use input::intake::{check_env, RefusedEnv};
pub use input::kind::{ScopeKind, UnknownKind};
pub use input::limits::{Limit, Limits, Unenforced};
#[allow(deprecated)]
pub use input::resolve::resolve_program;
pub use input::resolve::{find_program, ResolveError};
pub use input::shell::{shell_argv, ShellWords, DEFAULT_SHELL};
pub use kernel::pressure::{Pressure, PressureLine, ScopePressure};
pub use launch::decide::{
    decide, decide_in_place, launcher_for_effective_env, launcher_for_env, launcher_with_options,
    Decision, DirectReason, InPlaceDecision, LauncherOptions, ScopeError,
};
pub use launch::exec_program::{
    own_file, ExecProgram, FoundBy, EXEC_FAILED_STATUS, EXEC_PROGRAM, EXEC_VAR,
};
pub use launch::launcher::{InPlace, ScopeLauncher, Wrapped, Wrapper};
pub use launch::own_scope::NotMade as ScopeNotMade;
pub use launch::request_thread::{decide_on_own_thread, Answer};
pub use launch::spawn::{direct_for_user_switch, Launch};
pub use manager::slice_check::{flush_warnings, SliceLimits};
pub use manager::ManagerVersion;
pub use oomd::rules::OomdRule;
pub use oomd::warning::{CannotWarn, CannotWarnKind, OomdWarning, Sureness};
pub use scope::ending::{Ending, Evidence, ScopeEnding};
pub use scope::handle::{HandleError, KillMethod, ScopeHandle, ScopeStats};
pub use scope::oomd_watch::OomdWatch;

/// Entry points for the fuzz targets in `fuzz/`; not part of the supported API.
#[doc(hidden)]
pub mod __fuzz {
    /// The config file parser: (key, value, line) of each entry, and the malformed line numbers.
    pub fn parse_config(text: &[u8]) -> (Vec<(String, String, usize)>, Vec<usize>) {
        let (entries, malformed) = crate::input::config::parse(text);
        (
            entries
                .into_iter()
                .map(|e| (e.key, e.value, e.line))
                .collect(),
            malformed.into_iter().map(|m| m.line).collect(),
        )
    }

    /// The D-Bus message parser as a reader meets it: the length from the fixed header, then the
    /// message. Whether a whole, valid message was found.
    pub fn parse_bus_message(bytes: &[u8]) -> bool {
        match crate::manager::bus::wire::message_len(bytes) {
            Ok(Some(len)) if len <= bytes.len() => {
                crate::manager::bus::wire::parse(&bytes[..len]).is_ok()
            }
            _ => false,
        }
    }

    /// A conversation with a peer that sends `stream` (read `read_size` bytes at a time, so it
    /// arrives split anywhere) and then hangs up, as the launcher program has it: authentication,
    /// `StartTransientUnit` (with `pipelined`, sent with the authentication, before its answer),
    /// its reply, the wait for the job, all by `bound`. Returns how long it took and what became
    /// of it.
    pub fn converse_with_peer(
        stream: &[u8],
        read_size: usize,
        bound: std::time::Duration,
        pipelined: bool,
    ) -> (std::time::Duration, String) {
        crate::manager::bus::converse_with_peer(stream, read_size, bound, pipelined)
    }

    /// The slice name mangling of systemd-run.
    pub fn mangle_slice(name: &str) -> Result<String, String> {
        crate::input::unit_name::mangle_slice(name)
    }

    /// A scope's Description for a program path of any bytes.
    pub fn description(program: &[u8]) -> String {
        crate::input::unit_name::description(crate::ScopeKind::Tool, program)
    }

    /// The `systemd-run --version` parser.
    pub fn parse_version(output: &[u8]) -> Option<u32> {
        crate::manager::version::parse_version(output)
    }
}

/// What the C ABI (`synaps-scope-ffi`) uses; not part of the supported API.
#[doc(hidden)]
pub mod __ffi {
    pub use crate::per_process::{lock, lock_if_free, Mine, PerProcess};
}

/// What the C ABI and the Python module call once `intake` has checked a request: the work of the
/// public functions of the same names, without checking the environment a second time. Not part
/// of the supported API.
#[doc(hidden)]
pub mod __surfaces {
    use std::ffi::OsStr;
    use std::io;
    use std::path::{Path, PathBuf};

    use crate::doctor::Report;
    use crate::input::intake::CheckedEnv;
    use crate::{Answer, Decision, LauncherOptions, ResolveError, ScopeError, ScopeKind};

    /// [`crate::decide`].
    pub fn decide(
        env: &CheckedEnv,
        kind: ScopeKind,
        options: &LauncherOptions,
    ) -> Result<Decision, ScopeError> {
        crate::launch::decide::decide_checked(env.as_pairs(), kind, options)
    }

    /// [`crate::decide_on_own_thread`].
    pub fn decide_on_own_thread(
        env: CheckedEnv,
        kind: ScopeKind,
        options: LauncherOptions,
        answer: impl FnOnce(Answer) + Send + 'static,
    ) -> io::Result<()> {
        crate::launch::request_thread::decide_checked_on_own_thread(env, kind, options, answer)
    }

    /// [`crate::doctor::diagnose`].
    pub fn diagnose(env: &CheckedEnv, kinds: &[ScopeKind], options: &LauncherOptions) -> Report {
        crate::doctor::diagnose_checked(env, kinds, options)
    }

    /// [`crate::find_program`].
    pub fn find_program(
        program: &OsStr,
        env: &CheckedEnv,
        cwd: Option<&Path>,
    ) -> Result<PathBuf, ResolveError> {
        crate::input::resolve::resolve_in_env(program, env.as_pairs(), cwd)
    }
}

/// What the launcher program (`synaps-scope-exec`) uses; not part of the supported API.
#[doc(hidden)]
pub mod __exec {
    pub use crate::launch::exec_line::{BadExecLine, ExecLine, EXEC_USAGE};
    pub use crate::launch::own_scope::{make_own_scope, NotMade, ScopeRequest};
}

/// What the benchmarks measure against; not part of the supported API.
#[doc(hidden)]
pub mod __bench {
    pub use crate::launch::own_scope::{KeptConnection, ScopeRequest};
}

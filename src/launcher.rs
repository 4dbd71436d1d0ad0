//! The launcher (R1, R2, R5, R8, R13, A1): decides, per request, between a scope and a direct
//! launch, and which program makes the scope; then rewrites `program args…` into
//! `synaps-scope-exec … -- program argv0 args…` or `systemd-run --user --scope … -- program args…`.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::bounds::{deadline_after, DEFAULT_PROBE_TIMEOUT};
use crate::bus::turn::{self, Turn};
use crate::bus::{Fallback, Route};
use crate::config::{Config, LauncherChoice, Mode, Origin};
use crate::diag::TARGET;
use crate::env::{lookup_non_empty, refused_entry};
use crate::exec_line::ExecLine;
use crate::exec_program::{locate_exec_program, EXEC_PROGRAM};
use crate::kind::ScopeKind;
use crate::own_scope::{self, NotMade as ScopeNotMade, ScopeRequest};
use crate::probe;
use crate::resolve::{execve_refuses_format, resolve_program};
use crate::unit_name::{description, mangle_slice, unit_name};
use crate::{slice_check, version, warn};

/// The exit status of the launcher program when it could not make the scope in `required` mode
/// (or was started wrongly): the command has not run. A command's own status 125 is rare (it is
/// what `env`, `nice` and `timeout` use for their own failures, for the same reason).
pub const EXEC_FAILED_STATUS: i32 = 125;

/// Options of a launcher request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LauncherOptions {
    /// The bound on the whole availability check (version query and probe); the request returns
    /// within it (plus scheduling noise) whatever the manager does.
    pub probe_timeout: Duration,
}

impl Default for LauncherOptions {
    fn default() -> Self {
        LauncherOptions {
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
        }
    }
}

/// Why a request decided on a direct launch.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DirectReason {
    /// `process_scopes = off` (or `SYNAPS_PROCESS_SCOPES=off`), set at `origin`.
    Off {
        /// Where the switch was set.
        origin: Origin,
    },
    /// Not Linux: scopes exist only under systemd.
    UnsupportedPlatform,
    /// No `systemd-run` in the effective PATH (and no launcher program found, or systemd-run
    /// chosen).
    NoSystemdRun,
    /// `scope_launcher = synaps-scope-exec`, but the launcher program is not installed.
    NoLauncherProgram {
        /// Where it was looked for.
        why: String,
    },
    /// Neither `XDG_RUNTIME_DIR` nor `DBUS_SESSION_BUS_ADDRESS` is set, so no user manager can be
    /// reached.
    NoUserBus,
    /// The probe (or the version query before it) failed.
    ProbeFailed {
        /// The slice the probe asked for (None: systemd's default).
        slice: Option<String>,
        /// systemd-run's complaint, the time-out, or the exit status.
        detail: String,
    },
    /// The child runs as another user or group, which a scope of this user's manager cannot
    /// hold.
    UserSwitch {
        /// The spawn options that switch, as the caller's surface names them (`uid=65534`).
        switches: String,
    },
}

impl fmt::Display for DirectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirectReason::Off { origin } => write!(f, "process scopes are off ({origin})"),
            DirectReason::UnsupportedPlatform => f.write_str("process scopes need Linux with systemd"),
            DirectReason::NoSystemdRun => f.write_str("no systemd-run in the child's PATH"),
            DirectReason::NoLauncherProgram { why } => {
                write!(f, "the launcher program {EXEC_PROGRAM} was asked for but {why}")
            }
            DirectReason::NoUserBus => f.write_str(
                "no user manager to reach: neither XDG_RUNTIME_DIR nor DBUS_SESSION_BUS_ADDRESS is set",
            ),
            DirectReason::ProbeFailed { slice, detail } => {
                write!(f, "the probe for {} failed: {detail}", warn::slice_label(slice.as_deref()))
            }
            DirectReason::UserSwitch { switches } => write!(
                f,
                "the child switches user ({switches}), and a scope of this user's systemd manager \
                 cannot hold another user's process"
            ),
        }
    }
}

/// The outcome of a request: a launcher, or a direct launch and why.
#[derive(Clone, Debug)]
pub enum Decision {
    /// Launch through this launcher.
    Scoped(ScopeLauncher),
    /// Launch directly.
    Direct(DirectReason),
}

/// A launcher request that cannot be answered with a launcher or "launch directly".
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScopeError {
    /// Scopes are required (`process_scopes = required`) but this launch would have gone direct.
    Unavailable {
        /// The kind of scope asked for.
        kind: ScopeKind,
        /// Why scopes are unavailable.
        reason: DirectReason,
    },
    /// The effective environment has an entry no process environment can hold (an empty key, a
    /// key with `=`, a NUL byte), in any mode: bad input, refused as on every surface.
    InvalidEnvironment {
        /// The key of the first such entry.
        key: OsString,
        /// What is wrong with it.
        problem: &'static str,
    },
}

impl fmt::Display for ScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScopeError::Unavailable { kind, reason } => write!(
                f,
                "process scopes are required but unavailable for a {kind} launch: {reason}"
            ),
            ScopeError::InvalidEnvironment { key, problem } => {
                write!(f, "environment entry {key:?} is refused: {problem}")
            }
        }
    }
}

impl std::error::Error for ScopeError {}

/// The program that makes the scope and then runs the command in place (A1).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wrapper {
    /// The project's own launcher program: makes the scope over D-Bus, then execs the command
    /// with the caller's `argv[0]`.
    Exec {
        /// Its absolute path.
        program: PathBuf,
    },
    /// `systemd-run --user --scope`.
    SystemdRun {
        /// Its absolute path.
        path: PathBuf,
        /// Its major version; None when `--version` could not be read.
        version: Option<u32>,
    },
}

impl Wrapper {
    /// The wrapper's absolute path: the first element of every wrapped argv.
    pub fn program(&self) -> &Path {
        match self {
            Wrapper::Exec { program } => program,
            Wrapper::SystemdRun { path, .. } => path,
        }
    }

    /// `synaps-scope-exec` or `systemd-run`, as the `scope_launcher` setting names them.
    pub fn name(&self) -> &'static str {
        match self {
            Wrapper::Exec { .. } => LauncherChoice::Exec.as_str(),
            Wrapper::SystemdRun { .. } => LauncherChoice::SystemdRun.as_str(),
        }
    }

    /// How this wrapper reaches the manager with the effective environment `env`: every question
    /// of a request goes the same way, so it meets the manager the launch will meet.
    pub(crate) fn route(&self, env: &[(OsString, OsString)]) -> Route {
        let fallback = match self {
            Wrapper::SystemdRun { version, .. } => Fallback::of_systemd_run(*version),
            Wrapper::Exec { .. } => Fallback::Since257,
        };
        Route::from_env(env, fallback)
    }
}

/// Turns `program args…` into an argv that runs it in a new scope of one kind, after a successful
/// probe for exactly that scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeLauncher {
    kind: ScopeKind,
    slice: Option<String>,
    /// The slice as systemd names it (mangled as systemd-run mangles it).
    unit_slice: Option<String>,
    wrapper: Wrapper,
    /// `required` mode: the launcher program fails rather than run the command unscoped.
    required: bool,
    /// The launcher program's bound on making the scope.
    bound: Duration,
}

/// A command line ready to spawn, and the scope it will run in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wrapped {
    /// The argv to spawn: `synaps-scope-exec … -- /abs/program argv0 args…`,
    /// `systemd-run … -- /abs/program args…`, or the caller's argv unchanged.
    pub argv: Vec<OsString>,
    /// The scope's unit name (`synaps-<kind>-<32 hex>.scope`); None when the program could not be
    /// resolved and the argv was left unwrapped, so the spawn fails as it would without scopes.
    pub unit: Option<String>,
}

impl ScopeLauncher {
    /// The kind of scope this launcher makes.
    pub fn kind(&self) -> ScopeKind {
        self.kind
    }

    /// The slice passed as `--slice`, if any.
    pub fn slice(&self) -> Option<&str> {
        self.slice.as_deref()
    }

    /// Whether `process_scopes = required` was in force for this launcher: a launch it cannot
    /// scope must then fail rather than run directly (a bindings' spawn that switches user, say).
    pub fn required(&self) -> bool {
        self.required
    }

    /// The program that makes the scope.
    pub fn wrapper(&self) -> &Wrapper {
        &self.wrapper
    }

    /// The major version of the systemd-run in use; None with the launcher program, or when
    /// `--version` could not be read.
    pub fn systemd_version(&self) -> Option<u32> {
        match &self.wrapper {
            Wrapper::SystemdRun { version, .. } => *version,
            Wrapper::Exec { .. } => None,
        }
    }

    /// The absolute path of the systemd-run in use; None with the launcher program.
    pub fn systemd_run(&self) -> Option<&Path> {
        match &self.wrapper {
            Wrapper::SystemdRun { path, .. } => Some(path),
            Wrapper::Exec { .. } => None,
        }
    }

    /// Whether `--expand-environment=no` is passed (systemd-run 254 and later, R3). The launcher
    /// program expands nothing, ever.
    pub fn disables_environment_expansion(&self) -> bool {
        version::disables_expansion(self.systemd_version())
    }

    /// The options every systemd-run launch passes.
    fn systemd_run_flags(&self) -> Vec<OsString> {
        let mut flags: Vec<OsString> = ["--user", "--scope", "--quiet", "--collect"]
            .into_iter()
            .map(OsString::from)
            .collect();
        if self.disables_environment_expansion() {
            flags.push("--expand-environment=no".into());
        }
        if let Some(slice) = &self.slice {
            flags.push(format!("--slice={slice}").into());
        }
        flags
    }

    /// Rewrites `argv` to run in a new scope. `env` and `cwd` are the child's: the program is
    /// resolved with them first (R4), and a program that cannot be resolved is left unwrapped so
    /// that spawning it fails with the usual error. Arguments pass as bytes, verbatim; with the
    /// launcher program the command also keeps `argv[0]` as given.
    ///
    /// After a successful probe, a failure of the wrapped launch is an error for the caller to
    /// report, never a reason to run the command again directly (R13): it may already have run.
    pub fn wrap(
        &self,
        argv: &[OsString],
        env: &[(OsString, OsString)],
        cwd: Option<&Path>,
    ) -> Wrapped {
        match argv.first() {
            Some(program) => self.wrap_program(program, argv, env, cwd),
            None => Wrapped {
                argv: Vec::new(),
                unit: None,
            },
        }
    }

    /// [`ScopeLauncher::wrap`] for a program other than `argv[0]` (a login shell's `-bash`,
    /// Python's `Popen(executable=…)`): `program` is resolved and run, and `argv` (its `argv[0]`
    /// included) is what it sees. With systemd-run, which cannot pass an `argv[0]`, the program
    /// sees its own path as `argv[0]`. An empty `argv` is given back unwrapped.
    pub fn wrap_program(
        &self,
        program: &OsStr,
        argv: &[OsString],
        env: &[(OsString, OsString)],
        cwd: Option<&Path>,
    ) -> Wrapped {
        let unchanged = || Wrapped {
            argv: argv.to_vec(),
            unit: None,
        };
        let Some((_, args)) = argv.split_first() else {
            return unchanged();
        };
        let Some(program) = scopable_program(program, env, cwd) else {
            return unchanged();
        };
        let unit = unit_name(self.kind);
        let description = description(self.kind, program.as_os_str().as_bytes());
        let mut wrapped = vec![self.wrapper.program().as_os_str().to_owned()];
        match &self.wrapper {
            Wrapper::Exec { .. } => wrapped.extend(
                ExecLine {
                    unit: unit.clone(),
                    slice: self.unit_slice.clone(),
                    description,
                    timeout_ms: u64::try_from(self.bound.as_millis()).unwrap_or(u64::MAX),
                    required: self.required,
                    program: program.into_os_string(),
                    argv: argv.to_vec(),
                }
                .into_args(),
            ),
            Wrapper::SystemdRun { .. } => {
                wrapped.reserve(args.len() + 12);
                wrapped.extend(self.systemd_run_flags());
                wrapped.push(format!("--unit={unit}").into());
                wrapped.push(format!("--description={description}").into());
                wrapped.push("--".into());
                wrapped.push(program.into_os_string());
                wrapped.extend_from_slice(args);
            }
        }
        Wrapped {
            argv: wrapped,
            unit: Some(unit),
        }
    }
}

impl ScopeLauncher {
    /// For a caller that execs the command in place itself (the command line's `run`): resolves
    /// `program` as [`ScopeLauncher::wrap`] would and names its scope, for [`ScopeLauncher::enter`].
    /// None when the program cannot be resolved or execve would refuse it: exec it as given, so
    /// that it fails as it would without scopes (R4).
    pub fn in_place(
        &self,
        program: &OsStr,
        env: &[(OsString, OsString)],
        cwd: Option<&Path>,
    ) -> Option<InPlace> {
        let program = scopable_program(program, env, cwd)?;
        Some(InPlace {
            unit: unit_name(self.kind),
            description: description(self.kind, program.as_os_str().as_bytes()),
            route: Route::from_env(env, Fallback::Since257),
            program,
        })
    }

    /// Puts the calling process in the scope of `launch` now, as the launcher program does before
    /// its exec, within this launcher's bound: one process and one connection to the manager fewer
    /// per launch than running the launcher program (the probe's connection is used again). On
    /// Err the command has not run: the caller runs it anyway with [`ScopeNotMade::message`] on
    /// stderr, or, when [`ScopeLauncher::required`], exits [`EXEC_FAILED_STATUS`] with it.
    ///
    /// # Errors
    /// Why the scope was not made, and whether the manager may still move the process into it.
    pub fn enter(&self, launch: &InPlace) -> Result<(), ScopeNotMade> {
        self.enter_in(None, launch)
    }

    /// [`ScopeLauncher::enter`] in `turn` (None: one taken now), which ends once the scope's job
    /// has run.
    fn enter_in(&self, turn: Option<Turn>, launch: &InPlace) -> Result<(), ScopeNotMade> {
        let request = ScopeRequest {
            unit: &launch.unit,
            slice: self.unit_slice.as_deref(),
            description: &launch.description,
        };
        own_scope::enter_own_scope(&launch.route, turn, &request, deadline_after(self.bound))
    }
}

/// What a request for a command that the caller execs in place comes to ([`decide_in_place`]).
#[derive(Debug)]
pub enum InPlaceDecision {
    /// The launcher program's way, done by the calling process: exec `launch.program` (with the
    /// caller's own `argv[0]`) now. `entered` says whether the process is in its scope; on Err,
    /// say [`ScopeNotMade::message`] on stderr and exec anyway, or, when `launcher` is
    /// [`ScopeLauncher::required`], exit [`EXEC_FAILED_STATUS`] without running the command.
    Entered {
        /// The launcher the request decided on.
        launcher: ScopeLauncher,
        /// The command and its scope.
        launch: InPlace,
        /// Whether the scope was made.
        entered: Result<(), ScopeNotMade>,
    },
    /// Anything else, as [`decide`] decided it: systemd-run as the wrapper (wrap and exec its
    /// argv), a direct launch, or a program that cannot be resolved (exec it as given, R4).
    Decided(Decision),
}

/// For a caller that execs the command in place itself (the command line's `run`): [`decide`],
/// and, when the launcher program would make the scope, [`ScopeLauncher::in_place`] and
/// [`ScopeLauncher::enter`] at once, over the probe's connection, in the same turn with the
/// manager (one conversation per user at a time; see docs/guarantees.md on bursts).
///
/// # Errors
/// As [`decide`].
pub fn decide_in_place(
    env: &[(OsString, OsString)],
    kind: ScopeKind,
    options: &LauncherOptions,
    program: &OsStr,
    cwd: Option<&Path>,
) -> Result<InPlaceDecision, ScopeError> {
    // The probe's turn with the manager is kept for making the scope.
    let (decision, turn) = turn::keeping(|| decide(env, kind, options));
    Ok(match decision? {
        Decision::Scoped(launcher) if matches!(launcher.wrapper, Wrapper::Exec { .. }) => {
            match launcher.in_place(program, env, cwd) {
                Some(launch) => InPlaceDecision::Entered {
                    entered: launcher.enter_in(turn, &launch),
                    launcher,
                    launch,
                },
                None => InPlaceDecision::Decided(Decision::Scoped(launcher)),
            }
        }
        decision => InPlaceDecision::Decided(decision),
    })
}

/// A command to exec in place once the calling process is in its scope ([`ScopeLauncher::enter`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InPlace {
    /// The resolved program to exec (with the caller's own `argv[0]`).
    pub program: PathBuf,
    /// The scope's unit name (`synaps-<kind>-<32 hex>.scope`).
    pub unit: String,
    description: String,
    /// How the launcher program would reach the manager.
    route: Route,
}

/// `program` resolved for a scoped launch; None (and left unwrapped) when it cannot be resolved
/// or execve would refuse it.
fn scopable_program(
    program: &OsStr,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
) -> Option<PathBuf> {
    let program = match resolve_program(program, env, cwd) {
        Ok(path) => path,
        Err(e) => {
            tracing::debug!(target: TARGET, "not wrapping: {e}");
            return None;
        }
    };
    if execve_refuses_format(&program) {
        tracing::debug!(
            target: TARGET,
            "not wrapping {}: neither ELF nor a #! script, so execve refuses it (ENOEXEC)",
            program.display()
        );
        return None;
    }
    Some(program)
}

/// Decides between a scope and a direct launch for one request, with reasons: what
/// [`launcher_for_effective_env`] does, for callers that want to say why a launch went direct.
///
/// # Errors
/// [`ScopeError::Unavailable`] in `required` mode, where the result would otherwise be direct;
/// [`ScopeError::InvalidEnvironment`] in any mode for an environment no process can have.
pub fn decide(
    env: &[(OsString, OsString)],
    kind: ScopeKind,
    options: &LauncherOptions,
) -> Result<Decision, ScopeError> {
    decide_with(env, kind, options, SliceCheck::Background)
}

/// Whether a successful request with a slice starts the background R12 check.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SliceCheck {
    Background,
    /// The caller checks the slice itself (doctor does, synchronously).
    Skip,
}

pub(crate) fn decide_with(
    env: &[(OsString, OsString)],
    kind: ScopeKind,
    options: &LauncherOptions,
    slice_check: SliceCheck,
) -> Result<Decision, ScopeError> {
    if let Some((key, problem)) = refused_entry(env) {
        return Err(ScopeError::InvalidEnvironment {
            key: key.to_owned(),
            problem,
        });
    }
    let config = Config::load(env);
    let mode = config.mode.value;
    if mode == Mode::Off {
        let reason = DirectReason::Off {
            origin: config.mode.origin,
        };
        tracing::debug!(target: TARGET, "launching directly: {reason}");
        return Ok(Decision::Direct(reason));
    }
    let outcome = find_launcher(env, kind, &config, options, slice_check);
    match outcome {
        Ok(launcher) => Ok(Decision::Scoped(launcher)),
        Err(reason) if mode == Mode::Required => Err(ScopeError::Unavailable { kind, reason }),
        Err(reason) => {
            if let DirectReason::ProbeFailed { slice, detail } = &reason {
                warn::warn_probe_failed_once(slice.as_deref(), detail);
            }
            tracing::debug!(target: TARGET, "launching directly: {reason}");
            Ok(Decision::Direct(reason))
        }
    }
}

/// The systemd-run that the effective PATH finds.
pub(crate) fn locate_systemd_run(env: &[(OsString, OsString)]) -> Option<PathBuf> {
    resolve_program(OsStr::new("systemd-run"), env, Some(Path::new("/"))).ok()
}

/// The wrapper a request uses, as `scope_launcher` chooses, or why there is none.
pub(crate) fn choose_wrapper(
    env: &[(OsString, OsString)],
    choice: LauncherChoice,
) -> Result<Wrapper, DirectReason> {
    let systemd_run = || {
        locate_systemd_run(env)
            .map(|path| Wrapper::SystemdRun {
                path,
                version: None,
            })
            .ok_or(DirectReason::NoSystemdRun)
    };
    match choice {
        LauncherChoice::SystemdRun => systemd_run(),
        LauncherChoice::Exec => locate_exec_program(env)
            .map(|found| Wrapper::Exec {
                program: found.path,
            })
            .map_err(|why| DirectReason::NoLauncherProgram { why }),
        LauncherChoice::Auto => match locate_exec_program(env) {
            Ok(found) => Ok(Wrapper::Exec {
                program: found.path,
            }),
            Err(why) => {
                tracing::debug!(target: TARGET, "using systemd-run: {EXEC_PROGRAM}: {why}");
                systemd_run()
            }
        },
    }
}

fn find_launcher(
    env: &[(OsString, OsString)],
    kind: ScopeKind,
    config: &Config,
    options: &LauncherOptions,
    slice_check: SliceCheck,
) -> Result<ScopeLauncher, DirectReason> {
    if !cfg!(target_os = "linux") {
        return Err(DirectReason::UnsupportedPlatform);
    }
    // R7's cheap negative first: without a bus nothing on disk is worth looking for.
    if lookup_non_empty(env, "XDG_RUNTIME_DIR").is_none()
        && lookup_non_empty(env, "DBUS_SESSION_BUS_ADDRESS").is_none()
    {
        return Err(DirectReason::NoUserBus);
    }
    let slice = config.slice_for(kind).map(str::to_owned);
    let mut wrapper = choose_wrapper(env, config.launcher.value)?;
    let deadline = deadline_after(options.probe_timeout);
    let failed = |detail: String| DirectReason::ProbeFailed {
        slice: slice.clone(),
        detail,
    };
    let unit_slice = slice
        .as_deref()
        .map(mangle_slice)
        .transpose()
        .map_err(failed)?;
    if let Wrapper::SystemdRun { path, version } = &mut wrapper {
        *version = version::systemd_version(path, env, deadline).map_err(failed)?;
    }
    let route = wrapper.route(env);
    probe::probe(&route, unit_slice.as_deref(), deadline).map_err(failed)?;
    if let (Some(slice), SliceCheck::Background) = (&slice, slice_check) {
        slice_check::check_slice_limits_in_background(slice, &route, options.probe_timeout);
    }
    Ok(ScopeLauncher {
        kind,
        slice,
        unit_slice,
        wrapper,
        required: config.mode.value == Mode::Required,
        bound: options.probe_timeout,
    })
}

/// A fresh, bounded availability check (R5, R6) for a launch of `kind` with the effective
/// environment `env`. `Ok(None)` means launch directly; `Err` happens in `required` mode, and
/// for an environment no process can hold ([`ScopeError::InvalidEnvironment`]).
///
/// Synchronous callers may wait up to the probe bound (3 s); async callers must offload it (for
/// example with `spawn_blocking`). A failed probe means a direct launch with one WARN per slice.
///
/// ```
/// use std::process::Command;
/// use synaps_scope::{inherited_env, launcher_for_effective_env, set_env, ScopeKind};
///
/// let env = inherited_env();
/// let argv = vec!["sh".into(), "-c".into(), "exit 0".into()];
/// let argv = match launcher_for_effective_env(&env, ScopeKind::Tool)? {
///     Some(launcher) => launcher.wrap(&argv, &env, None).argv,
///     None => argv,
/// };
/// let mut cmd = Command::new(&argv[0]);
/// cmd.args(&argv[1..]);
/// set_env(&mut cmd, &env);
/// assert!(cmd.status()?.success());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn launcher_for_effective_env(
    env: &[(OsString, OsString)],
    kind: ScopeKind,
) -> Result<Option<ScopeLauncher>, ScopeError> {
    launcher_with_options(env, kind, &LauncherOptions::default())
}

/// [`launcher_for_effective_env`] with another probe bound.
pub fn launcher_with_options(
    env: &[(OsString, OsString)],
    kind: ScopeKind,
    options: &LauncherOptions,
) -> Result<Option<ScopeLauncher>, ScopeError> {
    Ok(match decide(env, kind, options)? {
        Decision::Scoped(launcher) => Some(launcher),
        Decision::Direct(_) => None,
    })
}

/// [`launcher_for_effective_env`] for a [`ScopeKind::Tool`] launch, for callers whose child
/// environment is the inherited one or was rebuilt whole.
pub fn launcher_for_env(env: &[(OsString, OsString)]) -> Result<Option<ScopeLauncher>, ScopeError> {
    launcher_for_effective_env(env, ScopeKind::Tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launcher(version: Option<u32>, slice: Option<&str>) -> ScopeLauncher {
        ScopeLauncher {
            kind: ScopeKind::Tool,
            slice: slice.map(str::to_owned),
            unit_slice: slice.map(|s| mangle_slice(s).unwrap()),
            wrapper: Wrapper::SystemdRun {
                path: "/usr/bin/systemd-run".into(),
                version,
            },
            required: false,
            bound: DEFAULT_PROBE_TIMEOUT,
        }
    }

    fn exec_launcher(slice: Option<&str>, required: bool) -> ScopeLauncher {
        ScopeLauncher {
            wrapper: Wrapper::Exec {
                program: "/usr/libexec/synaps-scope/synaps-scope-exec".into(),
            },
            required,
            ..launcher(None, slice)
        }
    }

    #[test]
    fn wrap_with_the_launcher_program_keeps_argv0_and_passes_the_mangled_slice() {
        let env = vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
        let sh = resolve_program(OsStr::new("sh"), &env, None).unwrap();
        for required in [false, true] {
            let argv: Vec<OsString> = vec!["-sh".into(), "-c".into(), "${X}".into()];
            let wrapped = exec_launcher(Some("my tools"), required).wrap_program(
                "sh".as_ref(),
                &argv,
                &env,
                None,
            );
            let unit = wrapped.unit.clone().unwrap();
            let mut expected: Vec<OsString> = vec![
                "/usr/libexec/synaps-scope/synaps-scope-exec".into(),
                format!("--unit={unit}").into(),
                "--slice=my\\x20tools.slice".into(),
                format!("--description=synaps tool: {}", sh.display()).into(),
                "--timeout-ms=3000".into(),
            ];
            if required {
                expected.push("--required".into());
            }
            expected.extend([
                "--".into(),
                sh.clone().into_os_string(),
                "-sh".into(),
                "-c".into(),
                "${X}".into(),
            ]);
            assert_eq!(wrapped.argv, expected);
        }
        let plain = exec_launcher(None, false).wrap(&["sh".into()], &env, None);
        assert_eq!(
            plain.argv[plain.argv.len() - 2..],
            [sh.into_os_string(), "sh".into()]
        );
    }

    #[test]
    fn an_environment_no_process_can_hold_is_refused_in_every_mode() {
        let env = |extra: (&str, &str)| {
            vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("SYNAPS_CONFIG".into(), "/nonexistent".into()),
                (OsString::from(extra.0), OsString::from(extra.1)),
            ]
        };
        for mode in ["on", "off", "required"] {
            for (bad, problem) in [
                (("A=B", "x"), "its key contains '='"),
                (("", "x"), "its key is empty"),
            ] {
                let mut env: Vec<(OsString, OsString)> = env(bad);
                env.insert(0, ("SYNAPS_PROCESS_SCOPES".into(), mode.into()));
                let refused = decide(&env, ScopeKind::Tool, &LauncherOptions::default());
                assert_eq!(
                    refused.err(),
                    Some(ScopeError::InvalidEnvironment {
                        key: bad.0.into(),
                        problem
                    }),
                    "{mode}"
                );
                let resolved = resolve_program("sh".as_ref(), &env, None).unwrap_err();
                assert_eq!(resolved.kind(), std::io::ErrorKind::InvalidInput);
            }
        }
    }

    #[test]
    fn wrap_builds_the_argv_of_r1() {
        let env = vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
        let argv: Vec<OsString> = vec!["sh".into(), "-c".into(), "${X}".into()];
        let wrapped = launcher(Some(254), Some("a.slice")).wrap(&argv, &env, None);
        let unit = wrapped.unit.clone().unwrap();
        let sh = resolve_program(OsStr::new("sh"), &env, None).unwrap();
        let expected: Vec<OsString> = vec![
            "/usr/bin/systemd-run".into(),
            "--user".into(),
            "--scope".into(),
            "--quiet".into(),
            "--collect".into(),
            "--expand-environment=no".into(),
            "--slice=a.slice".into(),
            format!("--unit={unit}").into(),
            format!("--description=synaps tool: {}", sh.display()).into(),
            "--".into(),
            sh.into_os_string(),
            "-c".into(),
            "${X}".into(),
        ];
        assert_eq!(wrapped.argv, expected);
    }

    #[test]
    fn expansion_is_disabled_only_from_254() {
        for (version, expected) in [
            (Some(254), true),
            (Some(300), true),
            (Some(253), false),
            (None, false),
        ] {
            assert_eq!(
                launcher(version, None).disables_environment_expansion(),
                expected
            );
            let flags = launcher(version, None).systemd_run_flags();
            assert_eq!(
                flags.contains(&OsString::from("--expand-environment=no")),
                expected
            );
        }
    }

    #[test]
    fn unresolvable_or_empty_argv_is_left_unwrapped() {
        let env = vec![(OsString::from("PATH"), OsString::from("/nonexistent"))];
        let argv: Vec<OsString> = vec!["sh".into()];
        let wrapped = launcher(Some(252), None).wrap(&argv, &env, None);
        assert_eq!(wrapped, Wrapped { argv, unit: None });
        assert_eq!(
            launcher(Some(252), None).wrap(&[], &env, None),
            Wrapped {
                argv: vec![],
                unit: None
            }
        );
    }
}

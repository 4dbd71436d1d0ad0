//! The decision (R5-R8, R11, R13, A2): per request, a scope or a direct launch and why, and which
//! program makes the scope: the config and switches, R7's cheap negatives, the wrapper, its
//! version, the probe, and the background slice check (R12).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::bounds::{deadline_after, DEFAULT_PROBE_TIMEOUT};
use crate::diag::TARGET;
use crate::input::config::{Config, LauncherChoice, Mode};
use crate::input::inputs::Inputs;
use crate::input::intake::check_env;
use crate::input::kind::ScopeKind;
use crate::input::limits::Limits;
use crate::input::resolve::resolve_in;
use crate::input::unit_name::mangle_slice;
use crate::launch::exec_program::{locate_exec_program, ExecProgram, EXEC_PROGRAM};
use crate::launch::launcher::{InPlace, ScopeLauncher, Wrapper};
use crate::launch::own_scope::NotMade as ScopeNotMade;
pub use crate::launch::refusal::{DirectReason, ScopeError};
use crate::manager::bus::Route;
use crate::manager::probe;
use crate::manager::turn;
use crate::{manager::slice_check, manager::version, warn};

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

/// The outcome of a request: a launcher, or a direct launch and why.
#[derive(Clone, Debug)]
pub enum Decision {
    /// Launch through this launcher.
    Scoped(ScopeLauncher),
    /// Launch directly.
    Direct(DirectReason),
}

/// What a request for a command that the caller execs in place comes to ([`decide_in_place`]).
#[derive(Debug)]
pub enum InPlaceDecision {
    /// The launcher program's way, done by the calling process: exec `launch.program` (with the
    /// caller's own `argv[0]`) now. `entered` says whether the process is in its scope; on Err,
    /// say [`ScopeNotMade::message`] on stderr and exec anyway, or, when `launcher` is
    /// [`ScopeLauncher::required`], exit [`crate::EXEC_FAILED_STATUS`] without running the command.
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
    check_env(env).map_err(ScopeError::InvalidEnvironment)?;
    // The probe's turn with the manager is kept for making the scope.
    let (decision, turn) = turn::keeping(|| decide_checked(env, kind, options));
    Ok(match decision? {
        Decision::Scoped(launcher) if matches!(launcher.wrapper(), Wrapper::Exec { .. }) => {
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
    check_env(env).map_err(ScopeError::InvalidEnvironment)?;
    decide_checked(env, kind, options)
}

/// [`decide`] for an environment already checked ([`crate::input::intake::CheckedEnv`]).
pub(crate) fn decide_checked(
    env: &[(OsString, OsString)],
    kind: ScopeKind,
    options: &LauncherOptions,
) -> Result<Decision, ScopeError> {
    decide_finding(
        env,
        kind,
        options,
        SliceCheck::Background,
        &mut Evidence::default(),
    )
}

/// What a request found on its way to its decision: the decision's own evidence, which `doctor`
/// renders rather than working the decision out a second time. Only a request that asks for it
/// ([`decide_with`]) keeps it; every other leaves it empty and copies nothing.
#[derive(Clone, Debug, Default)]
pub(crate) struct Evidence {
    /// Whether this request keeps its evidence.
    kept: bool,
    /// The launcher program, or where it was looked for (None: not looked for).
    pub exec_program: Option<Result<ExecProgram, String>>,
    /// The systemd-run of the effective PATH (None: not looked for; `Some(None)`: none there).
    pub systemd_run: Option<Option<PathBuf>>,
    /// The wrapper chosen (with systemd-run's version when it was read), or why there is none
    /// (None: none was chosen, for scopes are off or no user bus is named).
    pub wrapper: Option<Result<Wrapper, DirectReason>>,
    /// How the manager was reached, when the probe reached it.
    pub route: Option<Route>,
    /// The manager's own cgroup, as it named it, when the probe reached it.
    pub manager_cgroup: Option<Option<String>>,
}

impl Evidence {
    /// Notes what `note` writes, if this request keeps its evidence.
    fn note(&mut self, note: impl FnOnce(&mut Self)) {
        if self.kept {
            note(self);
        }
    }
}

/// Whether a successful request with a slice starts the background R12 check.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SliceCheck {
    Background,
    /// The caller checks the slice itself (doctor does, synchronously).
    Skip,
}

/// [`decide`], with what the request found on its way, for an environment already checked.
pub(crate) fn decide_with(
    env: &[(OsString, OsString)],
    kind: ScopeKind,
    options: &LauncherOptions,
    slice_check: SliceCheck,
) -> (Result<Decision, ScopeError>, Evidence) {
    let mut evidence = Evidence {
        kept: true,
        ..Evidence::default()
    };
    let decision = decide_finding(env, kind, options, slice_check, &mut evidence);
    (decision, evidence)
}

fn decide_finding(
    env: &[(OsString, OsString)],
    kind: ScopeKind,
    options: &LauncherOptions,
    slice_check: SliceCheck,
    evidence: &mut Evidence,
) -> Result<Decision, ScopeError> {
    let inputs = Inputs::read(env);
    let config = Config::from_inputs(&inputs);
    let mode = config.mode.value;
    if mode == Mode::Off {
        let reason = DirectReason::Off {
            origin: config.mode.origin,
        };
        tracing::debug!(target: TARGET, "launching directly: {reason}");
        return Ok(Decision::Direct(reason));
    }
    let outcome = find_launcher(&inputs, kind, &config, options, slice_check, evidence);
    match outcome {
        Ok(launcher) => Ok(Decision::Scoped(launcher)),
        Err(reason) if mode == Mode::Required => Err(ScopeError::Unavailable { kind, reason }),
        Err(reason) => {
            match &reason {
                DirectReason::ProbeFailed { slice, detail } => {
                    warn::warn_probe_failed_once(slice.as_deref(), detail);
                }
                DirectReason::SystemdRunInPidNamespace { slice } => {
                    warn::warn_systemd_run_in_pid_namespace_once(
                        slice.as_deref(),
                        &reason.to_string(),
                    );
                }
                _ => {}
            }
            tracing::debug!(target: TARGET, "launching directly: {reason}");
            Ok(Decision::Direct(reason))
        }
    }
}

/// The systemd-run that the effective PATH finds.
pub(crate) fn locate_systemd_run(inputs: &Inputs<'_>) -> Option<PathBuf> {
    resolve_in(OsStr::new("systemd-run"), inputs.path, Some(Path::new("/"))).ok()
}

/// The wrapper a request uses, as `scope_launcher` chooses, or why there is none; what was
/// looked for on the way goes to `evidence`.
fn choose_wrapper(
    inputs: &Inputs<'_>,
    choice: LauncherChoice,
    evidence: &mut Evidence,
) -> Result<Wrapper, DirectReason> {
    let systemd_run = |evidence: &mut Evidence| {
        let found = locate_systemd_run(inputs);
        evidence.note(|e| e.systemd_run = Some(found.clone()));
        found
            .map(|path| Wrapper::SystemdRun {
                path,
                version: None,
            })
            .ok_or(DirectReason::NoSystemdRun)
    };
    if choice == LauncherChoice::SystemdRun {
        return systemd_run(evidence);
    }
    let exec_program = locate_exec_program(inputs);
    evidence.note(|e| e.exec_program = Some(exec_program.clone()));
    match (choice, exec_program) {
        (_, Ok(found)) => Ok(Wrapper::Exec {
            program: found.path,
        }),
        (LauncherChoice::Auto, Err(why)) => {
            tracing::debug!(target: TARGET, "using systemd-run: {EXEC_PROGRAM}: {why}");
            systemd_run(evidence)
        }
        (_, Err(why)) => Err(DirectReason::NoLauncherProgram { why }),
    }
}

fn find_launcher(
    inputs: &Inputs<'_>,
    kind: ScopeKind,
    config: &Config,
    options: &LauncherOptions,
    slice_check: SliceCheck,
    evidence: &mut Evidence,
) -> Result<ScopeLauncher, DirectReason> {
    if !cfg!(target_os = "linux") {
        return Err(DirectReason::UnsupportedPlatform);
    }
    // R7's cheap negative first: without a bus nothing on disk is worth looking for.
    if !inputs.has_user_bus() {
        return Err(DirectReason::NoUserBus);
    }
    let slice = config.slice_for(kind).map(str::to_owned);
    let chosen = choose_wrapper(inputs, config.launcher.value, evidence);
    evidence.note(|e| e.wrapper = Some(chosen.clone()));
    let mut wrapper = chosen?;
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
        *version = version::systemd_version(path, inputs.env, deadline).map_err(failed)?;
        evidence.note(|e| e.wrapper = Some(Ok(wrapper.clone())));
    }
    let route = wrapper.route(inputs.bus);
    let reached = probe::probe(&route, unit_slice.as_deref(), deadline).map_err(failed)?;
    evidence.note(|e| e.route = Some(route.clone()));
    evidence.note(|e| e.manager_cgroup = Some(reached.manager_cgroup.clone()));
    if reached.pids_differ && matches!(wrapper, Wrapper::SystemdRun { .. }) {
        return Err(DirectReason::SystemdRunInPidNamespace { slice });
    }
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
        manager_cgroup: reached.manager_cgroup,
        limits: Limits::new(),
        unenforced: Vec::new(),
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
    use crate::input::intake::RefusedEnv;
    use crate::input::resolve::{find_program, ResolveError};

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
                    Some(ScopeError::InvalidEnvironment(RefusedEnv {
                        key: bad.0.into(),
                        problem
                    })),
                    "{mode}"
                );
                let resolved = find_program("sh".as_ref(), &env, None).unwrap_err();
                assert!(
                    matches!(resolved, ResolveError::InvalidEnvironment(_)),
                    "{resolved}"
                );
            }
        }
    }
}

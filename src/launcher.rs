//! The launcher (R1, R2, R5, R8, R13): decides, per request, between a scope and a direct launch,
//! and rewrites `program args…` into `systemd-run --user --scope … -- program args…`.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::config::{Config, Mode, Origin};
use crate::diag::TARGET;
use crate::env::{lookup_non_empty, refused_entry};
use crate::kind::ScopeKind;
use crate::probe;
use crate::resolve::resolve_program;
use crate::unit_name::unit_name;
use crate::{slice_check, version, warn};

/// How long a request may spend probing by default (R6).
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

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
    /// No `systemd-run` in the effective PATH.
    NoSystemdRun,
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
}

impl fmt::Display for DirectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirectReason::Off { origin } => write!(f, "process scopes are off ({origin})"),
            DirectReason::UnsupportedPlatform => f.write_str("process scopes need Linux with systemd"),
            DirectReason::NoSystemdRun => f.write_str("no systemd-run in the child's PATH"),
            DirectReason::NoUserBus => f.write_str(
                "no user manager to reach: neither XDG_RUNTIME_DIR nor DBUS_SESSION_BUS_ADDRESS is set",
            ),
            DirectReason::ProbeFailed { slice, detail } => {
                write!(f, "the probe for {} failed: {detail}", warn::slice_label(slice.as_deref()))
            }
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

/// Turns `program args…` into `systemd-run --user --scope … -- program args…` for one kind of
/// scope, after a successful probe with exactly the flags it will use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeLauncher {
    kind: ScopeKind,
    slice: Option<String>,
    systemd_run: PathBuf,
    systemd_version: Option<u32>,
}

/// A command line ready to spawn, and the scope it will run in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wrapped {
    /// The argv to spawn: `systemd-run … -- /abs/program args…`, or the caller's argv unchanged.
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

    /// The major version of the systemd-run in use; None when `--version` could not be read.
    pub fn systemd_version(&self) -> Option<u32> {
        self.systemd_version
    }

    /// The absolute path of the systemd-run in use.
    pub fn systemd_run(&self) -> &Path {
        &self.systemd_run
    }

    /// Whether `--expand-environment=no` is passed (systemd-run 254 and later, R3).
    pub fn disables_environment_expansion(&self) -> bool {
        version::disables_expansion(self.systemd_version)
    }

    /// The options that both the probe and every wrapped launch pass to systemd-run.
    fn scope_flags(&self) -> Vec<OsString> {
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
    /// that spawning it fails with the usual error. Arguments pass as bytes, verbatim.
    ///
    /// After a successful probe, a failure of the wrapped launch is an error for the caller to
    /// report, never a reason to run the command again directly (R13): it may already have run.
    pub fn wrap(
        &self,
        argv: &[OsString],
        env: &[(OsString, OsString)],
        cwd: Option<&Path>,
    ) -> Wrapped {
        let unchanged = || Wrapped {
            argv: argv.to_vec(),
            unit: None,
        };
        let Some((program, args)) = argv.split_first() else {
            return unchanged();
        };
        let program = match resolve_program(program, env, cwd) {
            Ok(path) => path,
            Err(e) => {
                tracing::debug!(target: TARGET, "not wrapping: {e}");
                return unchanged();
            }
        };
        let unit = unit_name(self.kind);
        let mut wrapped = Vec::with_capacity(args.len() + 12);
        wrapped.push(self.systemd_run.clone().into_os_string());
        wrapped.extend(self.scope_flags());
        wrapped.push(format!("--unit={unit}").into());
        wrapped.push(description(self.kind, &program));
        wrapped.push("--".into());
        wrapped.push(program.into_os_string());
        wrapped.extend_from_slice(args);
        Wrapped {
            argv: wrapped,
            unit: Some(unit),
        }
    }
}

/// `--description=synaps <kind>: <program>`.
fn description(kind: ScopeKind, program: &Path) -> OsString {
    let mut text = OsString::from(format!("--description=synaps {kind}: "));
    text.push(program.as_os_str());
    text
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
    let slice = config.slice_for(kind).map(str::to_owned);
    let outcome = find_launcher(env, kind, slice, options, slice_check);
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

fn find_launcher(
    env: &[(OsString, OsString)],
    kind: ScopeKind,
    slice: Option<String>,
    options: &LauncherOptions,
    slice_check: SliceCheck,
) -> Result<ScopeLauncher, DirectReason> {
    if !cfg!(target_os = "linux") {
        return Err(DirectReason::UnsupportedPlatform);
    }
    let systemd_run = locate_systemd_run(env).ok_or(DirectReason::NoSystemdRun)?;
    if lookup_non_empty(env, "XDG_RUNTIME_DIR").is_none()
        && lookup_non_empty(env, "DBUS_SESSION_BUS_ADDRESS").is_none()
    {
        return Err(DirectReason::NoUserBus);
    }
    let deadline = Instant::now() + options.probe_timeout;
    let failed = |slice: &Option<String>, detail: String| DirectReason::ProbeFailed {
        slice: slice.clone(),
        detail,
    };
    let systemd_version = version::systemd_version(&systemd_run, env, deadline)
        .map_err(|detail| failed(&slice, detail))?;
    let launcher = ScopeLauncher {
        kind,
        slice,
        systemd_run,
        systemd_version,
    };
    probe::probe(
        &launcher.systemd_run,
        &launcher.scope_flags(),
        env,
        deadline,
    )
    .map_err(|detail| failed(&launcher.slice, detail))?;
    if let (Some(slice), SliceCheck::Background) = (&launcher.slice, slice_check) {
        slice_check::check_slice_limits_in_background(slice, env, options.probe_timeout);
    }
    Ok(launcher)
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
            systemd_run: "/usr/bin/systemd-run".into(),
            systemd_version: version,
        }
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
            let flags = launcher(version, None).scope_flags();
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

//! The launcher (R1, R2, R4, A1): a [`ScopeLauncher`], made by a request that decided on a scope
//! (`decide`), rewrites `program args…` into `synaps-scope-exec … -- program argv0 args…` or
//! `systemd-run --user --scope … -- program args…`, or makes the scope for the calling process
//! itself (`in_place`, `enter`).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::bounds::deadline_after;
use crate::diag::TARGET;
use crate::input::config::LauncherChoice;
use crate::input::inputs::UserBus;
use crate::input::kind::ScopeKind;
use crate::input::limits::{controllers_of, Limits, Unenforced};
use crate::input::resolve::{execve_refuses_format, resolve_in_env};
use crate::input::unit_name::{description, unit_name};
use crate::launch::exec_line::ExecLine;
use crate::launch::own_scope::{self, NotMade as ScopeNotMade, ScopeRequest};
use crate::launch::refusal::{DirectReason, ScopeError};
use crate::manager::bus::{Fallback, Route};
use crate::manager::turn::Turn;
use crate::manager::version;
use crate::warn::WarnedSet;

/// The limits that will not hold, warned about: once per property and reason per process.
static LIMIT_WARNINGS: WarnedSet = WarnedSet::new();

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
    /// The wrapper's number in the C ABI (`SCOPE_WRAPPER_*`, 0 being no launcher), which never
    /// changes.
    pub fn code(&self) -> u32 {
        match self {
            Wrapper::Exec { .. } => 1,
            Wrapper::SystemdRun { .. } => 2,
        }
    }

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
    pub(crate) fn route(&self, bus: UserBus<'_>) -> Route {
        let fallback = match self {
            Wrapper::SystemdRun { version, .. } => Fallback::of_systemd_run(*version),
            Wrapper::Exec { .. } => Fallback::SessionFirst,
        };
        Route::to(bus, fallback)
    }
}

/// Turns `program args…` into an argv that runs it in a new scope of one kind, after a successful
/// probe for exactly that scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeLauncher {
    pub(crate) kind: ScopeKind,
    pub(crate) slice: Option<String>,
    /// The slice as systemd names it (mangled as systemd-run mangles it).
    pub(crate) unit_slice: Option<String>,
    pub(crate) wrapper: Wrapper,
    /// `required` mode: the launcher program fails rather than run the command unscoped.
    pub(crate) required: bool,
    /// The launcher program's bound on making the scope.
    pub(crate) bound: Duration,
    /// The manager's own cgroup, as its probe named it: its controllers enforce the limits.
    pub(crate) manager_cgroup: Option<String>,
    /// The limits every launch of this launcher gives its scope ([`ScopeLauncher::with_limits`]).
    pub(crate) limits: Limits,
    /// Those of them that will not hold, and why.
    pub(crate) unenforced: Vec<Unenforced>,
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

    /// How long making a scope may take: the request's probe bound, which the launcher program
    /// is given too.
    pub fn bound(&self) -> Duration {
        self.bound
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

    /// This launcher, with `limits` for the scope of each launch it wraps (A6): `MemoryMax=2G`,
    /// `CPUQuota=200%` and the rest of [`crate::input::limits::Property`], checked when they were made.
    /// A limit that will not hold (the user manager was not given its controller, or the
    /// systemd-run in use cannot pass its value) is said once per property and reason in a
    /// warning and listed by [`ScopeLauncher::unenforced`]; the launch goes on without it, unless
    /// `required` mode is in force. Nothing is asked of the manager: its cgroup was named to the
    /// probe, and its controllers are read from the cgroup tree.
    ///
    /// # Errors
    /// [`ScopeError::Unavailable`] in `required` mode when any limit will not hold.
    ///
    /// ```no_run
    /// use synaps_scope::{inherited_env, launcher_for_env, Limits};
    ///
    /// let env = inherited_env();
    /// if let Some(launcher) = launcher_for_env(&env)? {
    ///     let limits = Limits::parse(["MemoryMax=2G", "CPUQuota=200%", "TasksMax=64"])?;
    ///     let launcher = launcher.with_limits(limits)?;
    ///     let wrapped = launcher.wrap(&["make".into(), "-j4".into()], &env, None);
    ///     # let _ = wrapped;
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_limits(&self, limits: Limits) -> Result<ScopeLauncher, ScopeError> {
        let controllers = controllers_of(self.manager_cgroup.as_deref());
        // A systemd-run whose version could not be read is taken for the oldest supported, so a
        // value an old one cannot read is left out rather than lose the launch.
        let systemd_run = match &self.wrapper {
            Wrapper::SystemdRun { version, .. } => {
                Some(version.unwrap_or(crate::manager::version::OLDEST_SUPPORTED_SYSTEMD))
            }
            Wrapper::Exec { .. } => None,
        };
        let unenforced = crate::input::limits::unenforced(
            &limits,
            &controllers,
            self.manager_cgroup.as_deref(),
            systemd_run,
        );
        if self.required && !unenforced.is_empty() {
            return Err(ScopeError::Unavailable {
                kind: self.kind,
                reason: DirectReason::LimitsNotEnforced { unenforced },
            });
        }
        for limit in &unenforced {
            if LIMIT_WARNINGS.first_time(&limit.to_string()) {
                tracing::warn!(target: TARGET, "{limit} (warned once)");
            }
        }
        Ok(ScopeLauncher {
            limits,
            unenforced,
            ..self.clone()
        })
    }

    /// The limits each launch gives its scope.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Those of [`ScopeLauncher::limits`] that will not hold, and why: each was warned about.
    pub fn unenforced(&self) -> &[Unenforced] {
        &self.unenforced
    }

    /// The limits passed to the wrapper: all but values it cannot carry.
    fn passed_limits(&self) -> Limits {
        let left_out: Vec<_> = self
            .unenforced
            .iter()
            .filter(|u| !u.passed)
            .map(|u| u.property)
            .collect();
        self.limits.without(&left_out)
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
        for limit in self.passed_limits().iter() {
            flags.push(format!("--property={limit}").into());
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
        self.wrap_holding(program, argv, env, cwd, None)
    }

    /// [`ScopeLauncher::wrap_program`] for a parent that watches the scope from its start
    /// (`synaps-scope run --wait`): with the launcher program, once it has made the scope (or
    /// failed to), the launch writes `1` (or `0`) to descriptor `hold_fd` (inherited; one end of a
    /// socket pair, or the read end of a pipe, which gets no word) and reads it to its end before
    /// the command runs, so the parent takes a [`crate::ScopeHandle`] first and then closes its
    /// end. With systemd-run, which cannot wait so, `hold_fd` is not used.
    pub fn wrap_holding(
        &self,
        program: &OsStr,
        argv: &[OsString],
        env: &[(OsString, OsString)],
        cwd: Option<&Path>,
        hold_fd: Option<i32>,
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
                    limits: self.passed_limits(),
                    hold_fd,
                    program: program.into_os_string(),
                    argv: argv.to_vec(),
                }
                .into_args(),
            ),
            Wrapper::SystemdRun { .. } => {
                wrapped.reserve(args.len() + 12 + self.limits.iter().count());
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
            route: self.wrapper.route(UserBus::read(env)),
            program,
        })
    }

    /// Puts the calling process in the scope of `launch` now, as the launcher program does before
    /// its exec, within this launcher's bound: one process and one connection to the manager fewer
    /// per launch than running the launcher program (the probe's connection is used again). On
    /// Err the command has not run: the caller runs it anyway with [`ScopeNotMade::message`] on
    /// stderr, or, when [`ScopeLauncher::required`], exits [`crate::EXEC_FAILED_STATUS`] with it.
    ///
    /// # Errors
    /// Why the scope was not made, and whether the manager may still move the process into it.
    pub fn enter(&self, launch: &InPlace) -> Result<(), ScopeNotMade> {
        self.enter_in(None, launch)
    }

    /// [`ScopeLauncher::enter`] in `turn` (None: one taken now), which ends once the scope's job
    /// has run.
    pub(crate) fn enter_in(
        &self,
        turn: Option<Turn>,
        launch: &InPlace,
    ) -> Result<(), ScopeNotMade> {
        let limits = self.passed_limits();
        let request = ScopeRequest {
            unit: &launch.unit,
            slice: self.unit_slice.as_deref(),
            description: &launch.description,
            limits: &limits,
            required: self.required,
        };
        own_scope::enter_own_scope(&launch.route, turn, &request, deadline_after(self.bound))
    }
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
    let program = match resolve_in_env(program, env, cwd) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::DEFAULT_PROBE_TIMEOUT;
    use crate::input::unit_name::mangle_slice;

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
            manager_cgroup: None,
            limits: Limits::new(),
            unenforced: Vec::new(),
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
        let sh = crate::find_program(OsStr::new("sh"), &env, None).unwrap();
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
    fn wrap_builds_the_argv_of_r1() {
        let env = vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
        let argv: Vec<OsString> = vec!["sh".into(), "-c".into(), "${X}".into()];
        let wrapped = launcher(Some(254), Some("a.slice")).wrap(&argv, &env, None);
        let unit = wrapped.unit.clone().unwrap();
        let sh = crate::find_program(OsStr::new("sh"), &env, None).unwrap();
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

//! `doctor`: what the library finds on this machine and why it would launch as it would: each
//! kind's decision and the evidence the decision itself found (the wrapper, how it was found,
//! the versions, the way to the manager), never worked out a second time, and its rendering for a
//! person (every surface offers it; the command line also renders it as JSON).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use crate::bounds::deadline_after;
use crate::input::config::{Config, LauncherChoice, Origin, Setting, LAUNCHER_KEY, SWITCH_KEY};
use crate::input::inputs::Inputs;
use crate::input::intake::CheckedEnv;
use crate::input::intake::{check_env, RefusedEnv};
use crate::input::kind::ScopeKind;
use crate::input::limits::{controllers_of, Property};
use crate::kernel::cgroup;
use crate::launch::decide::{
    decide_with, locate_systemd_run, Decision, Evidence, LauncherOptions, ScopeError, SliceCheck,
};
use crate::launch::exec_program::{locate_exec_program, ExecProgram, EXEC_PROGRAM};
use crate::launch::launcher::Wrapper;
use crate::manager::slice_check::{self, SliceLimits};
use crate::manager::version;
use crate::manager::{self, ManagerVersion};

#[cfg(feature = "serde")]
mod json;
#[cfg(feature = "serde")]
pub use json::ReportJson;

/// What became of one kind's request.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Launches would run in scopes.
    Scoped,
    /// Launches would go direct, for this reason.
    Direct(crate::DirectReason),
    /// `required` mode would refuse launches.
    Refused(ScopeError),
}

/// One kind's part of the report.
#[derive(Clone, Debug)]
pub struct KindReport {
    /// The kind.
    pub kind: ScopeKind,
    /// Its configured slice.
    pub slice: Setting<Option<String>>,
    /// The decision a launcher request makes now.
    pub outcome: Outcome,
    /// How long the request took, in milliseconds, when it probed the manager.
    pub probe_ms: Option<u64>,
    /// The slice's limits as the manager reports them (R12), or why they could not be read.
    pub slice_limits: Option<Result<SliceLimits, String>>,
    /// The R12 warning for the slice, when one is due.
    pub slice_warning: Option<String>,
}

/// Everything `synaps-scope doctor` reports.
#[derive(Clone, Debug)]
pub struct Report {
    /// `std::env::consts::OS`.
    pub os: &'static str,
    /// The kernel release, where readable.
    pub kernel: Option<String>,
    /// The wrapper the requests chose (the launcher program, or systemd-run with its version), or
    /// why there is none; None when no request chose one (scopes off, no user bus named).
    pub wrapper: Option<Result<Wrapper, crate::DirectReason>>,
    /// The launcher program, or where it was looked for: as the requests found it, else (when
    /// they did not look, for another wrapper was chosen or none) as it would be found.
    pub exec_program: Result<ExecProgram, String>,
    /// The systemd-run of the effective PATH, likewise.
    pub systemd_run: Option<PathBuf>,
    /// systemd-run's major version, when the requests chose systemd-run and could read it.
    pub systemd_version: Option<u32>,
    /// The version the user manager reports, asked only when a probe reached it; the error says
    /// why it could not be read.
    pub manager_version: Option<Result<ManagerVersion, String>>,
    /// The way the requests reach the manager (`session bus unix:path=…` or `private socket …`)
    /// and the order they try the ways in, asked only when a probe reached it; the error says
    /// why no way was open.
    pub route: Option<(Result<String, String>, &'static str)>,
    /// The cgroup controllers the user manager was given, which the limits of a launch need
    /// (`memory` for `MemoryMax`, `cpu` for `CPUQuota`, …), or why they are unknown; asked only
    /// when a probe reached the manager (None otherwise).
    pub controllers: Option<Result<Vec<String>, String>>,
    /// Things worth a person's attention that change no decision (a client and manager of
    /// different versions).
    pub warnings: Vec<String>,
    /// `XDG_RUNTIME_DIR` and `DBUS_SESSION_BUS_ADDRESS` of the effective environment.
    pub bus: Vec<(&'static str, Option<String>)>,
    /// The configuration in force, with where each value came from.
    pub config: Config,
    /// Whether the config file exists.
    pub config_exists: bool,
    /// One entry per kind asked about.
    pub kinds: Vec<KindReport>,
    /// The calling process's cgroup.
    pub cgroup: Option<String>,
}

/// Runs the launcher's checks for each of `kinds` with the effective environment `env`, and the
/// slice-limit check synchronously, and reports all of it.
///
/// An environment no process can hold is refused for every kind
/// (`Outcome::Refused(ScopeError::InvalidEnvironment)`, [`Verdict::BadInput`]).
pub fn diagnose(
    env: &[(OsString, OsString)],
    kinds: &[ScopeKind],
    options: &LauncherOptions,
) -> Report {
    diagnose_with(env, kinds, options, check_env(env).err())
}

/// [`diagnose`] for an environment already checked.
pub(crate) fn diagnose_checked(
    env: &CheckedEnv,
    kinds: &[ScopeKind],
    options: &LauncherOptions,
) -> Report {
    diagnose_with(env.as_pairs(), kinds, options, None)
}

fn diagnose_with(
    env: &[(OsString, OsString)],
    kinds: &[ScopeKind],
    options: &LauncherOptions,
    refused: Option<RefusedEnv>,
) -> Report {
    let inputs = Inputs::read(env);
    let config = Config::from_inputs(&inputs);
    let (kinds, found): (Vec<KindReport>, Vec<Evidence>) = kinds
        .iter()
        .map(|&kind| diagnose_kind(env, kind, &config, options, refused.as_ref()))
        .unzip();
    // The kinds share the wrapper's evidence; the first that chose a wrapper says it.
    let evidence = found
        .iter()
        .find(|evidence| evidence.wrapper.is_some())
        .or(found.first())
        .cloned()
        .unwrap_or_default();
    // Only a manager that answered a probe is asked (the way the probe reached it): one that did
    // not would cost another bound.
    let probed_route = found.iter().find_map(|evidence| evidence.route.as_ref());
    let manager_version = probed_route
        .map(|route| manager::manager_version(route, deadline_after(options.probe_timeout)));
    let route = probed_route.map(|route| {
        let way = manager::way_to_manager(route, deadline_after(options.probe_timeout));
        (way, route.order())
    });
    let systemd_version = match &evidence.wrapper {
        Some(Ok(Wrapper::SystemdRun { version, .. })) => *version,
        _ => None,
    };
    let controllers = found
        .iter()
        .find_map(|evidence| evidence.manager_cgroup.as_ref())
        .map(|cgroup| controllers_of(cgroup.as_deref()));
    let warnings = version_mismatch(systemd_version, manager_version.as_ref())
        .into_iter()
        .chain(older_than_supported(manager_version.as_ref()))
        .collect();
    Report {
        os: std::env::consts::OS,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_owned()),
        config_exists: config.path.as_ref().is_some_and(|p| p.is_file()),
        wrapper: evidence.wrapper,
        // What the requests did not look for is looked for here, to be named as not used.
        exec_program: evidence
            .exec_program
            .unwrap_or_else(|| locate_exec_program(&inputs)),
        systemd_run: evidence
            .systemd_run
            .unwrap_or_else(|| locate_systemd_run(&inputs)),
        systemd_version,
        manager_version,
        route,
        controllers,
        warnings,
        bus: [
            ("XDG_RUNTIME_DIR", inputs.bus.runtime_dir),
            ("DBUS_SESSION_BUS_ADDRESS", inputs.bus.bus_address),
        ]
        .into_iter()
        .map(|(var, value)| (var, value.map(|v| v.to_string_lossy().into_owned())))
        .collect(),
        config,
        kinds,
        cgroup: cgroup::own().ok(),
    }
}

/// Which limits a launch can have enforced, by the controllers the manager was given.
fn limits_line(controllers: &Result<Vec<String>, String>) -> String {
    let have = match controllers {
        Ok(have) => have,
        Err(why) => return format!("cannot tell which the user manager can enforce: {why}"),
    };
    let (held, not): (Vec<Property>, Vec<Property>) = Property::ALL
        .into_iter()
        .partition(|p| have.iter().any(|c| c == p.controller()));
    let names = |ps: &[Property]| ps.iter().map(|p| p.name()).collect::<Vec<_>>().join(" ");
    let mut line = format!(
        "controllers {}",
        if have.is_empty() {
            "none".to_owned()
        } else {
            have.join(" ")
        }
    );
    if !held.is_empty() {
        let _ = write!(line, "; enforced: {}", names(&held));
    }
    if !not.is_empty() {
        let _ = write!(line, "; not enforced: {}", names(&not));
    }
    line
}

pub use crate::manager::version::OLDEST_SUPPORTED_SYSTEMD;

/// The warning for a user manager older than [`OLDEST_SUPPORTED_SYSTEMD`]: what its user gets.
fn older_than_supported(manager: Option<&Result<ManagerVersion, String>>) -> Option<String> {
    let Some(Ok(manager)) = manager else {
        return None;
    };
    let major = manager.major.filter(|&m| m < OLDEST_SUPPORTED_SYSTEMD)?;
    Some(format!(
        "the user manager runs systemd {major}, older than the oldest tested ({OLDEST_SUPPORTED_SYSTEMD}): \
         each launch still asks it first, a scope it makes is used, and any scope it refuses means \
         a direct launch with its reason (an error only in required mode), never a failure from \
         inside the launch"
    ))
}

/// The warning for a systemd-run whose version is not the manager's.
fn version_mismatch(
    client: Option<u32>,
    manager: Option<&Result<ManagerVersion, String>>,
) -> Option<String> {
    let (Some(client), Some(Ok(manager))) = (client, manager) else {
        return None;
    };
    let major = manager.major?;
    (major != client).then(|| {
        format!(
            "systemd-run is from systemd {client} but the user manager runs systemd {major} ({}): \
             launch flags follow systemd-run's version, and a client that differs from its manager \
             is a partial upgrade or a manager not re-executed since one (systemctl --user \
             daemon-reexec)",
            manager.full
        )
    })
}

fn diagnose_kind(
    env: &[(OsString, OsString)],
    kind: ScopeKind,
    config: &Config,
    options: &LauncherOptions,
    refused: Option<&RefusedEnv>,
) -> (KindReport, Evidence) {
    let slice = config.slice_setting(kind).clone();
    let started = Instant::now();
    let (decision, evidence) = match refused {
        Some(refused) => (
            Err(ScopeError::InvalidEnvironment(refused.clone())),
            Evidence::default(),
        ),
        None => decide_with(env, kind, options, SliceCheck::Skip),
    };
    let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (outcome, probed) = match decision {
        Ok(Decision::Scoped(_)) => (Outcome::Scoped, true),
        Ok(Decision::Direct(reason)) => {
            let probed = matches!(reason, crate::DirectReason::ProbeFailed { .. });
            (Outcome::Direct(reason), probed)
        }
        Err(error) => {
            let probed = matches!(
                &error,
                ScopeError::Unavailable {
                    reason: crate::DirectReason::ProbeFailed { .. },
                    ..
                }
            );
            (Outcome::Refused(error), probed)
        }
    };
    let route = &evidence.route;
    let slice_limits = match (&slice.value, &route) {
        (Some(name), Some(route)) => Some(slice_check::read_slice_limits(
            name,
            route,
            options.probe_timeout,
        )),
        _ => None,
    };
    let slice_warning = match (&slice.value, &slice_limits) {
        (Some(name), Some(Ok(limits))) => slice_check::slice_warning(name, limits),
        _ => None,
    };
    let report = KindReport {
        kind,
        slice,
        outcome,
        probe_ms: probed.then_some(elapsed),
        slice_limits,
        slice_warning,
    };
    (report, evidence)
}

/// What `doctor` concludes of every kind asked about: the worst of their outcomes. Each verdict
/// owns its number, which is `synaps-scope doctor`'s exit status, and its words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// Every kind would launch in scopes (exit 0).
    Scoped,
    /// Some kind would launch directly, not in a scope (exit 1).
    Direct,
    /// The request itself is bad input (an environment no process can hold): nothing was asked
    /// (exit 2, as for any bad input or usage error).
    BadInput,
    /// `required` mode would refuse some kind's launches (exit 3, as `run` exits when it refuses).
    Refused,
}

impl Verdict {
    /// Every verdict, best first.
    pub const ALL: [Verdict; 4] = [
        Verdict::Scoped,
        Verdict::Direct,
        Verdict::BadInput,
        Verdict::Refused,
    ];

    /// Its number: `synaps-scope doctor`'s exit status, and the C ABI's `SCOPE_VERDICT_*`.
    pub fn code(self) -> u8 {
        match self {
            Verdict::Scoped => 0,
            Verdict::Direct => 1,
            Verdict::BadInput => 2,
            Verdict::Refused => 3,
        }
    }

    /// Its name, for JSON and for Python's and Node's values: `scoped`, `direct`, `bad-input`,
    /// `refused`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Scoped => "scoped",
            Verdict::Direct => "direct",
            Verdict::BadInput => "bad-input",
            Verdict::Refused => "refused",
        }
    }

    /// Its words for a person.
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Scoped => "scopes will be used",
            Verdict::Direct => "launches will go direct (not in scopes)",
            Verdict::BadInput => "the environment given is one no process can hold",
            Verdict::Refused => "required mode will refuse launches",
        }
    }

    /// The verdict of one kind's outcome.
    fn of(outcome: &Outcome) -> Verdict {
        match outcome {
            Outcome::Scoped => Verdict::Scoped,
            Outcome::Direct(_) => Verdict::Direct,
            Outcome::Refused(ScopeError::InvalidEnvironment(_)) => Verdict::BadInput,
            Outcome::Refused(ScopeError::Unavailable { .. }) => Verdict::Refused,
        }
    }
}

impl Report {
    /// The verdict over every kind asked about: the worst of their outcomes.
    pub fn overall(&self) -> Verdict {
        self.kinds
            .iter()
            .map(|k| Verdict::of(&k.outcome))
            .max()
            .unwrap_or(Verdict::Scoped)
    }

    /// [`Report::overall`]'s number.
    #[deprecated(since = "1.1.0", note = "use overall().code()")]
    pub fn exit_code(&self) -> u8 {
        self.overall().code()
    }

    /// [`Report::overall`]'s words.
    #[deprecated(since = "1.1.0", note = "use overall().words()")]
    pub fn verdict(&self) -> &'static str {
        self.overall().words()
    }

    /// The report for a person, as `synaps-scope doctor` prints it.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let kernel = self.kernel.as_deref().unwrap_or("unknown");
        let _ = writeln!(out, "platform:      {} (kernel {kernel})", self.os);
        let wrapper = match &self.wrapper {
            Some(Ok(wrapper)) => format!("{} {}", wrapper.name(), wrapper.program().display()),
            _ => "none".to_owned(),
        };
        let _ = writeln!(out, "launcher:      {wrapper} ({})", self.wrapper_reason());
        let exec = match &self.exec_program {
            Ok(found) => format!("{} ({})", found.path.display(), found.found_by),
            Err(why) => format!("not found: {why}"),
        };
        let _ = writeln!(out, "  synaps-scope-exec: {exec}");
        match (&self.systemd_run, &self.wrapper) {
            (Some(path), Some(Ok(Wrapper::SystemdRun { version, .. }))) => {
                let version =
                    version.map_or("version unknown".to_owned(), |v| format!("systemd {v}"));
                let expand = if self.expands_off() {
                    "passed"
                } else {
                    "not passed (needs systemd 254)"
                };
                let _ = writeln!(
                    out,
                    "systemd-run:   {} ({version}); --expand-environment=no {expand}",
                    path.display()
                );
            }
            (Some(path), _) => {
                let _ = writeln!(out, "systemd-run:   {} (not used)", path.display());
            }
            (None, _) => out.push_str("systemd-run:   not found in PATH\n"),
        }
        let manager = match &self.manager_version {
            Some(Ok(version)) => format!(
                "systemd {} (oldest supported: {OLDEST_SUPPORTED_SYSTEMD})",
                version.full
            ),
            Some(Err(why)) => format!("version could not be read: {why}"),
            None => "not asked (no probe reached it)".to_owned(),
        };
        let _ = writeln!(out, "user manager:  {manager}");
        if let Some((way, order)) = &self.route {
            let way = match way {
                Ok(way) => way.clone(),
                Err(why) => format!("none open now: {why}"),
            };
            let _ = writeln!(out, "reached by:    {way}");
            let _ = writeln!(out, "  in the order {order}");
        }
        if let Some(controllers) = &self.controllers {
            let _ = writeln!(out, "limits:        {}", limits_line(controllers));
        }
        let bus: Vec<String> = self
            .bus
            .iter()
            .map(|(var, value)| format!("{var}={}", value.as_deref().unwrap_or("(unset)")))
            .collect();
        let _ = writeln!(out, "user bus:      {}", bus.join(", "));
        let file = match &self.config.path {
            Some(path) if self.config_exists => path.display().to_string(),
            Some(path) => format!("{} (not present)", path.display()),
            None => "(none: neither SYNAPS_CONFIG, XDG_CONFIG_HOME nor HOME is set)".to_owned(),
        };
        let _ = writeln!(out, "config file:   {file}");
        for (key, value, origin) in self.settings() {
            let _ = writeln!(
                out,
                "  {key:<20} = {:<24} ({origin})",
                value.as_deref().unwrap_or("(unset)")
            );
        }
        for kind in &self.kinds {
            let what = match &kind.outcome {
                Outcome::Scoped => "scoped".to_owned(),
                Outcome::Direct(reason) => format!("direct: {reason}"),
                Outcome::Refused(error) => format!("refused: {error}"),
            };
            let timing = kind
                .probe_ms
                .map(|ms| format!(" (probe {ms} ms)"))
                .unwrap_or_default();
            let _ = writeln!(out, "{:<14} {what}{timing}", format!("{}:", kind.kind));
            let slice = kind
                .slice
                .value
                .as_deref()
                .unwrap_or("systemd's default (usually app.slice)");
            let _ = writeln!(out, "  slice:       {slice}");
            match &kind.slice_limits {
                Some(Ok(limits)) if !limits.set.is_empty() => {
                    let set: Vec<String> =
                        limits.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    let _ = writeln!(out, "  limits:      {}", set.join(" "));
                }
                Some(Err(why)) => {
                    let _ = writeln!(out, "  limits:      could not be read: {why}");
                }
                _ => {}
            }
            if let Some(warning) = &kind.slice_warning {
                let _ = writeln!(out, "  warning:     {warning}");
            }
        }
        for warning in &self.warnings {
            let _ = writeln!(out, "warning:       {warning}");
        }
        let _ = writeln!(
            out,
            "this process:  cgroup {}",
            self.cgroup.as_deref().unwrap_or("unknown")
        );
        let _ = writeln!(
            out,
            "verdict:       {} (exit {})",
            self.overall().words(),
            self.overall().code()
        );
        out
    }

    /// Whether launches through systemd-run pass `--expand-environment=no` (R3).
    pub fn expands_off(&self) -> bool {
        version::disables_expansion(self.systemd_version)
    }

    /// Which wrapper launches use and why, in words.
    pub fn wrapper_reason(&self) -> String {
        let setting = &self.config.launcher;
        let chosen = format!(
            "{LAUNCHER_KEY} = {} ({})",
            setting.value.as_str(),
            setting.origin
        );
        match (&self.wrapper, setting.value) {
            (Some(Ok(Wrapper::Exec { .. })), _) => chosen,
            (Some(Ok(_)), LauncherChoice::Auto) => match &self.exec_program {
                Err(why) => format!("{chosen}, and {EXEC_PROGRAM} is not installed: {why}"),
                Ok(_) => chosen,
            },
            (Some(Ok(_)), _) => chosen,
            (Some(Err(reason)), _) => format!("{chosen}: {reason}"),
            (None, _) => format!(
                "{chosen}; none chosen: no request went so far (scopes are off, or no user bus is named)"
            ),
        }
    }

    /// The four settings the library reads, each with its value and where it came from.
    pub fn settings(&self) -> [(&'static str, Option<String>, &Origin); 4] {
        let c = &self.config;
        let slice = |kind: ScopeKind| {
            let setting = c.slice_setting(kind);
            (kind.slice_key(), setting.value.clone(), &setting.origin)
        };
        [
            (
                SWITCH_KEY,
                Some(c.mode.value.as_str().to_owned()),
                &c.mode.origin,
            ),
            (
                LAUNCHER_KEY,
                Some(c.launcher.value.as_str().to_owned()),
                &c.launcher.origin,
            ),
            slice(ScopeKind::Tool),
            slice(ScopeKind::Daemon),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manager(full: &str) -> Option<Result<ManagerVersion, String>> {
        Some(Ok(ManagerVersion {
            major: full.split('.').next().and_then(|m| m.parse().ok()),
            full: full.to_owned(),
        }))
    }

    #[test]
    fn a_manager_older_than_the_oldest_supported_is_named_with_what_its_user_gets() {
        let warning = older_than_supported(manager("239").as_ref()).expect("239 is older");
        assert!(warning.contains("systemd 239, older than the oldest tested (247)"));
        assert!(warning.contains("direct launch with its reason"));
        for supported in ["247.3-7+deb11u5", "252.39-1~deb12u2", "262.1-1"] {
            assert_eq!(older_than_supported(manager(supported).as_ref()), None);
        }
        assert_eq!(older_than_supported(None), None);
        assert_eq!(older_than_supported(Some(Err("no".into())).as_ref()), None);
    }
}

//! `doctor`: what the library finds on this machine and why it would launch as it would, for a
//! person (text) or a program (JSON). Built from the same pieces the launcher uses.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use crate::config::{Config, Mode, Origin, Setting};
use crate::env::lookup_non_empty;
use crate::handle::process_cgroup;
use crate::kind::ScopeKind;
use crate::launcher::{
    decide_with, locate_systemd_run, Decision, LauncherOptions, ScopeError, SliceCheck,
};
use crate::probe::{self, ManagerVersion, SliceLimits};

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
    /// The systemd-run the effective PATH finds.
    pub systemd_run: Option<PathBuf>,
    /// Its major version; None when unknown or not asked (no systemd-run, or scopes off).
    pub systemd_version: Option<u32>,
    /// The version the user manager reports, asked only when a probe reached it; the error says
    /// why it could not be read.
    pub manager_version: Option<Result<ManagerVersion, String>>,
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
pub fn diagnose(
    env: &[(OsString, OsString)],
    kinds: &[ScopeKind],
    options: &LauncherOptions,
) -> Report {
    let config = Config::load(env);
    let kinds: Vec<KindReport> = kinds
        .iter()
        .map(|&kind| diagnose_kind(env, kind, &config, options))
        .collect();
    let systemd_run = locate_systemd_run(env);
    // After the requests the version is normally cached; asking first could spend a bound twice.
    let systemd_version = match (&systemd_run, config.mode.value) {
        (Some(path), Mode::On | Mode::Required) => {
            probe::systemd_version(path, env, Instant::now() + options.probe_timeout)
                .unwrap_or(None)
        }
        _ => None,
    };
    // Only a manager that answered a probe is asked: one that did not would cost another bound.
    let manager_version = kinds
        .iter()
        .any(|k| matches!(k.outcome, Outcome::Scoped))
        .then(|| probe::manager_version(env, options.probe_timeout));
    let warnings = version_mismatch(systemd_version, manager_version.as_ref())
        .into_iter()
        .collect();
    Report {
        os: std::env::consts::OS,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_owned()),
        config_exists: config.path.as_ref().is_some_and(|p| p.is_file()),
        systemd_run,
        systemd_version,
        manager_version,
        warnings,
        bus: ["XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"]
            .into_iter()
            .map(|var| {
                (
                    var,
                    lookup_non_empty(env, var).map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect(),
        config,
        kinds,
        cgroup: process_cgroup(std::process::id()).ok(),
    }
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
) -> KindReport {
    let slice = config.slice_setting(kind).clone();
    let started = Instant::now();
    let decision = decide_with(env, kind, options, SliceCheck::Skip);
    let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (outcome, probed) = match decision {
        Ok(Decision::Scoped(_)) => (Outcome::Scoped, true),
        Ok(Decision::Direct(reason)) => {
            let probed = matches!(reason, crate::DirectReason::ProbeFailed { .. });
            (Outcome::Direct(reason), probed)
        }
        Err(error) => {
            let ScopeError::Unavailable { reason, .. } = &error;
            let probed = matches!(reason, crate::DirectReason::ProbeFailed { .. });
            (Outcome::Refused(error), probed)
        }
    };
    let slice_limits = match (&slice.value, &outcome) {
        (Some(name), Outcome::Scoped) => {
            Some(probe::read_slice_limits(name, env, options.probe_timeout))
        }
        _ => None,
    };
    let slice_warning = match (&slice.value, &slice_limits) {
        (Some(name), Some(Ok(limits))) => probe::slice_warning(name, limits),
        _ => None,
    };
    KindReport {
        kind,
        slice,
        outcome,
        probe_ms: probed.then_some(elapsed),
        slice_limits,
        slice_warning,
    }
}

impl Report {
    /// 0 when every kind would use scopes, 1 when any would launch directly, 2 when `required`
    /// would refuse any.
    pub fn exit_code(&self) -> u8 {
        let code = |k: &KindReport| match k.outcome {
            Outcome::Scoped => 0,
            Outcome::Direct(_) => 1,
            Outcome::Refused(_) => 2,
        };
        self.kinds.iter().map(code).max().unwrap_or(0)
    }

    fn verdict(&self) -> &'static str {
        match self.exit_code() {
            0 => "scopes will be used",
            1 => "launches will go direct (not in scopes)",
            _ => "required mode will refuse launches",
        }
    }

    /// The report for a person.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let kernel = self.kernel.as_deref().unwrap_or("unknown");
        let _ = writeln!(out, "platform:      {} (kernel {kernel})", self.os);
        match &self.systemd_run {
            Some(path) => {
                let version = self
                    .systemd_version
                    .map_or("version unknown".to_owned(), |v| format!("systemd {v}"));
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
            None => out.push_str("systemd-run:   not found in PATH\n"),
        }
        let manager = match &self.manager_version {
            Some(Ok(version)) => format!("systemd {}", version.full),
            Some(Err(why)) => format!("version could not be read: {why}"),
            None => "not asked (no probe reached it)".to_owned(),
        };
        let _ = writeln!(out, "user manager:  {manager}");
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
            self.verdict(),
            self.exit_code()
        );
        out
    }

    /// The report for a program: one JSON object.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{");
        let _ = write!(
            out,
            "\"os\":{},\"kernel\":{}",
            json(self.os),
            json_opt(self.kernel.as_deref())
        );
        let path = self.systemd_run.as_ref().map(|p| p.display().to_string());
        let _ = write!(
            out,
            ",\"systemd_run\":{{\"path\":{},\"version\":{},\"expand_environment_no\":{}}}",
            json_opt(path.as_deref()),
            self.systemd_version
                .map_or("null".to_owned(), |v| v.to_string()),
            self.expands_off()
        );
        let manager = match &self.manager_version {
            None => "null".to_owned(),
            Some(Err(why)) => format!("{{\"error\":{}}}", json(why)),
            Some(Ok(version)) => format!(
                "{{\"version\":{},\"version_string\":{}}}",
                version.major.map_or("null".to_owned(), |v| v.to_string()),
                json(&version.full)
            ),
        };
        let _ = write!(out, ",\"manager\":{manager}");
        let warnings: Vec<String> = self.warnings.iter().map(|w| json(w)).collect();
        let _ = write!(out, ",\"warnings\":[{}]", warnings.join(","));
        let bus: Vec<String> = self
            .bus
            .iter()
            .map(|(k, v)| format!("{}:{}", json(k), json_opt(v.as_deref())))
            .collect();
        let _ = write!(out, ",\"bus\":{{{}}}", bus.join(","));
        let config_path = self.config.path.as_ref().map(|p| p.display().to_string());
        let _ = write!(
            out,
            ",\"config\":{{\"path\":{},\"exists\":{}",
            json_opt(config_path.as_deref()),
            self.config_exists
        );
        for (key, value, origin) in self.settings() {
            let _ = write!(
                out,
                ",{}:{{\"value\":{},\"origin\":{}}}",
                json(key),
                json_opt(value.as_deref()),
                origin_json(origin)
            );
        }
        out.push_str("},\"kinds\":[");
        for (i, kind) in self.kinds.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let (state, reason) = match &kind.outcome {
                Outcome::Scoped => ("scoped", None),
                Outcome::Direct(reason) => ("direct", Some(reason.to_string())),
                Outcome::Refused(error) => ("refused", Some(error.to_string())),
            };
            let limits = match &kind.slice_limits {
                None => "null".to_owned(),
                Some(Err(why)) => format!("{{\"error\":{}}}", json(why)),
                Some(Ok(limits)) => {
                    let set: Vec<String> = limits
                        .set
                        .iter()
                        .map(|(k, v)| format!("{}:{}", json(k), json(v)))
                        .collect();
                    format!(
                        "{{\"set\":{{{}}},\"unit_file\":{}}}",
                        set.join(","),
                        json_opt(limits.fragment.as_deref())
                    )
                }
            };
            let _ = write!(
                out,
                "{{\"kind\":{},\"slice\":{},\"state\":{},\"reason\":{},\"probe_ms\":{},\"slice_limits\":{limits},\"slice_warning\":{}}}",
                json(kind.kind.as_str()),
                json_opt(kind.slice.value.as_deref()),
                json(state),
                json_opt(reason.as_deref()),
                kind.probe_ms.map_or("null".to_owned(), |ms| ms.to_string()),
                json_opt(kind.slice_warning.as_deref()),
            );
        }
        let _ = write!(
            out,
            "],\"cgroup\":{},\"verdict\":{},\"exit_status\":{}}}",
            json_opt(self.cgroup.as_deref()),
            json(self.verdict()),
            self.exit_code()
        );
        out
    }

    fn expands_off(&self) -> bool {
        self.systemd_version
            .is_some_and(|v| v >= probe::EXPAND_ENVIRONMENT_SINCE)
    }

    fn settings(&self) -> [(&'static str, Option<String>, &Origin); 3] {
        let c = &self.config;
        [
            (
                "process_scopes",
                Some(c.mode.value.as_str().to_owned()),
                &c.mode.origin,
            ),
            (
                "tool_scope_slice",
                c.tool_slice.value.clone(),
                &c.tool_slice.origin,
            ),
            (
                "daemon_scope_slice",
                c.daemon_slice.value.clone(),
                &c.daemon_slice.origin,
            ),
        ]
    }
}

fn origin_json(origin: &Origin) -> String {
    match origin {
        Origin::Default => "{\"source\":\"default\"}".to_owned(),
        Origin::Environment(var) => {
            format!("{{\"source\":\"environment\",\"variable\":{}}}", json(var))
        }
        Origin::File { path, line } => format!(
            "{{\"source\":\"file\",\"path\":{},\"line\":{line}}}",
            json(&path.display().to_string())
        ),
    }
}

fn json_opt(value: Option<&str>) -> String {
    value.map_or("null".to_owned(), json)
}

/// A JSON string literal.
fn json(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(json("a\"b\\c\nd\u{1}é"), "\"a\\\"b\\\\c\\nd\\u0001é\"");
    }
}

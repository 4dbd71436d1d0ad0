//! `synaps-scope doctor`'s two renderings of the library's report: text for a person and one
//! JSON object (through serde) for a program.

use std::fmt::Write as _;

use serde::Serialize;
use synaps_scope::config::Origin;
use synaps_scope::doctor::{KindReport, Outcome, Report};
use synaps_scope::Wrapper;

/// The report for a person.
pub fn to_text(report: &Report) -> String {
    let mut out = String::new();
    let kernel = report.kernel.as_deref().unwrap_or("unknown");
    let _ = writeln!(out, "platform:      {} (kernel {kernel})", report.os);
    let wrapper = match &report.wrapper {
        Ok(wrapper) => format!("{} {}", wrapper.name(), wrapper.program().display()),
        Err(_) => "none".to_owned(),
    };
    let _ = writeln!(
        out,
        "launcher:      {wrapper} ({})",
        report.wrapper_reason()
    );
    let exec = match &report.exec_program {
        Ok(path) => path.display().to_string(),
        Err(why) => format!("not found: {why}"),
    };
    let _ = writeln!(out, "  synaps-scope-exec: {exec}");
    match &report.systemd_run {
        Some(path) if !matches!(report.wrapper, Ok(Wrapper::SystemdRun { .. })) => {
            let _ = writeln!(out, "systemd-run:   {} (not used)", path.display());
        }
        Some(path) => {
            let version = report
                .systemd_version
                .map_or("version unknown".to_owned(), |v| format!("systemd {v}"));
            let expand = if report.expands_off() {
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
    let manager = match &report.manager_version {
        Some(Ok(version)) => format!("systemd {}", version.full),
        Some(Err(why)) => format!("version could not be read: {why}"),
        None => "not asked (no probe reached it)".to_owned(),
    };
    let _ = writeln!(out, "user manager:  {manager}");
    let bus: Vec<String> = report
        .bus
        .iter()
        .map(|(var, value)| format!("{var}={}", value.as_deref().unwrap_or("(unset)")))
        .collect();
    let _ = writeln!(out, "user bus:      {}", bus.join(", "));
    let file = match &report.config.path {
        Some(path) if report.config_exists => path.display().to_string(),
        Some(path) => format!("{} (not present)", path.display()),
        None => "(none: neither SYNAPS_CONFIG, XDG_CONFIG_HOME nor HOME is set)".to_owned(),
    };
    let _ = writeln!(out, "config file:   {file}");
    for (key, value, origin) in report.settings() {
        let _ = writeln!(
            out,
            "  {key:<20} = {:<24} ({origin})",
            value.as_deref().unwrap_or("(unset)")
        );
    }
    for kind in &report.kinds {
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
                let set: Vec<String> = limits.set.iter().map(|(k, v)| format!("{k}={v}")).collect();
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
    for warning in &report.warnings {
        let _ = writeln!(out, "warning:       {warning}");
    }
    let _ = writeln!(
        out,
        "this process:  cgroup {}",
        report.cgroup.as_deref().unwrap_or("unknown")
    );
    let _ = writeln!(
        out,
        "verdict:       {} (exit {})",
        report.verdict(),
        report.exit_code()
    );
    out
}

/// The report for a program: one JSON object.
pub fn to_json(report: &Report) -> String {
    let manager = report
        .manager_version
        .as_ref()
        .map(|version| match version {
            Ok(version) => Manager::Version {
                version: version.major,
                version_string: &version.full,
            },
            Err(error) => Manager::Error { error },
        });
    let mut config = serde_json::Map::new();
    config.insert(
        "path".into(),
        report
            .config
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .into(),
    );
    config.insert("exists".into(), report.config_exists.into());
    for (key, value, origin) in report.settings() {
        let setting = Setting {
            value,
            origin: origin_of(origin),
        };
        config.insert(
            key.into(),
            serde_json::to_value(setting).expect("plain data serializes"),
        );
    }
    let json = Json {
        os: report.os,
        kernel: report.kernel.as_deref(),
        launcher: LauncherJson {
            wrapper: report.wrapper.as_ref().ok().map(Wrapper::name),
            path: report
                .wrapper
                .as_ref()
                .ok()
                .map(|w| w.program().display().to_string()),
            why: report.wrapper_reason(),
            exec_program: report
                .exec_program
                .as_ref()
                .ok()
                .map(|p| p.display().to_string()),
            exec_program_error: report.exec_program.as_ref().err().map(String::as_str),
        },
        systemd_run: SystemdRun {
            path: report.systemd_run.as_ref().map(|p| p.display().to_string()),
            version: report.systemd_version,
            expand_environment_no: report.expands_off(),
        },
        manager,
        warnings: &report.warnings,
        bus: report
            .bus
            .iter()
            .map(|(var, value)| ((*var).to_owned(), value.clone().into()))
            .collect(),
        config,
        kinds: report.kinds.iter().map(kind_json).collect(),
        cgroup: report.cgroup.as_deref(),
        verdict: report.verdict(),
        exit_status: report.exit_code(),
    };
    serde_json::to_string(&json).expect("plain data serializes")
}

#[derive(Serialize)]
struct Json<'a> {
    os: &'a str,
    kernel: Option<&'a str>,
    launcher: LauncherJson<'a>,
    systemd_run: SystemdRun,
    manager: Option<Manager<'a>>,
    warnings: &'a [String],
    bus: serde_json::Map<String, serde_json::Value>,
    config: serde_json::Map<String, serde_json::Value>,
    kinds: Vec<KindJson<'a>>,
    cgroup: Option<&'a str>,
    verdict: &'a str,
    exit_status: u8,
}

#[derive(Serialize)]
struct LauncherJson<'a> {
    wrapper: Option<&'static str>,
    path: Option<String>,
    why: String,
    exec_program: Option<String>,
    exec_program_error: Option<&'a str>,
}

#[derive(Serialize)]
struct SystemdRun {
    path: Option<String>,
    version: Option<u32>,
    expand_environment_no: bool,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Manager<'a> {
    Version {
        version: Option<u32>,
        version_string: &'a str,
    },
    Error {
        error: &'a str,
    },
}

#[derive(Serialize)]
struct Setting {
    value: Option<String>,
    origin: OriginJson,
}

#[derive(Serialize)]
#[serde(tag = "source", rename_all = "lowercase")]
enum OriginJson {
    Default,
    Environment { variable: &'static str },
    File { path: String, line: usize },
}

fn origin_of(origin: &Origin) -> OriginJson {
    match origin {
        Origin::Default => OriginJson::Default,
        Origin::Environment(variable) => OriginJson::Environment { variable },
        Origin::File { path, line } => OriginJson::File {
            path: path.display().to_string(),
            line: *line,
        },
    }
}

#[derive(Serialize)]
struct KindJson<'a> {
    kind: &'a str,
    slice: Option<&'a str>,
    state: &'a str,
    reason: Option<String>,
    probe_ms: Option<u64>,
    slice_limits: Option<LimitsJson<'a>>,
    slice_warning: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum LimitsJson<'a> {
    Read {
        set: serde_json::Map<String, serde_json::Value>,
        unit_file: Option<&'a str>,
    },
    Error {
        error: &'a str,
    },
}

fn kind_json(kind: &KindReport) -> KindJson<'_> {
    let (state, reason) = match &kind.outcome {
        Outcome::Scoped => ("scoped", None),
        Outcome::Direct(reason) => ("direct", Some(reason.to_string())),
        Outcome::Refused(error) => ("refused", Some(error.to_string())),
    };
    KindJson {
        kind: kind.kind.as_str(),
        slice: kind.slice.value.as_deref(),
        state,
        reason,
        probe_ms: kind.probe_ms,
        slice_limits: kind.slice_limits.as_ref().map(|limits| match limits {
            Ok(limits) => LimitsJson::Read {
                set: limits
                    .set
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone().into()))
                    .collect(),
                unit_file: limits.fragment.as_deref(),
            },
            Err(error) => LimitsJson::Error { error },
        }),
        slice_warning: kind.slice_warning.as_deref(),
    }
}

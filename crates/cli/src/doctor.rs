//! `synaps-scope doctor`'s two renderings of the library's report: text for a person and one
//! JSON object (through serde) for a program.

use serde::Serialize;
use synaps_scope::config::Origin;
use synaps_scope::doctor::{KindReport, Outcome, Report};
use synaps_scope::Wrapper;

/// The report for a program: one JSON object.
pub fn to_json(report: &Report) -> String {
    let manager = report
        .manager_version
        .as_ref()
        .map(|version| match version {
            Ok(version) => Manager::Version {
                version: version.major,
                version_string: &version.full,
                oldest_supported: synaps_scope::doctor::OLDEST_SUPPORTED_SYSTEMD,
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
                .map(|p| p.path.display().to_string()),
            exec_program_found_by: report
                .exec_program
                .as_ref()
                .ok()
                .map(|p| p.found_by.to_string()),
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
    exec_program_found_by: Option<String>,
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
        oldest_supported: u32,
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

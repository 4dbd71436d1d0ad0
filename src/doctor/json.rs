//! The report as one JSON object, through serde (feature `serde`): what `synaps-scope doctor
//! --json` prints, for a program to read.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{KindReport, Outcome, Report, OLDEST_SUPPORTED_SYSTEMD};
use crate::input::config::Origin;
use crate::launch::launcher::Wrapper;

impl Report {
    /// The report as data to serialize (`serde_json::to_string(&report.json())`).
    pub fn json(&self) -> ReportJson<'_> {
        let wrapper = self.wrapper.as_ref().and_then(|w| w.as_ref().ok());
        let exec_program = self.exec_program.as_ref();
        ReportJson {
            os: self.os,
            kernel: self.kernel.as_deref(),
            launcher: LauncherJson {
                wrapper: wrapper.map(Wrapper::name),
                path: wrapper.map(|w| w.program().display().to_string()),
                why: self.wrapper_reason(),
                exec_program: exec_program.ok().map(|p| p.path.display().to_string()),
                exec_program_found_by: exec_program.ok().map(|p| p.found_by.to_string()),
                exec_program_error: exec_program.err().map(String::as_str),
            },
            systemd_run: SystemdRunJson {
                path: self.systemd_run.as_ref().map(|p| p.display().to_string()),
                version: self.systemd_version,
                expand_environment_no: self.expands_off(),
            },
            manager: self.manager_version.as_ref().map(|version| match version {
                Ok(version) => ManagerJson::Version {
                    version: version.major,
                    version_string: &version.full,
                    oldest_supported: OLDEST_SUPPORTED_SYSTEMD,
                },
                Err(error) => ManagerJson::Error { error },
            }),
            route: self.route.as_ref().map(|(way, order)| RouteJson {
                way: way.as_ref().ok().map(String::as_str),
                error: way.as_ref().err().map(String::as_str),
                order,
            }),
            controllers: self.controllers.as_ref().map(|found| match found {
                Ok(names) => ControllersJson::Found { names },
                Err(error) => ControllersJson::Error { error },
            }),
            warnings: &self.warnings,
            bus: self
                .bus
                .iter()
                .map(|(var, value)| (*var, value.as_deref()))
                .collect(),
            config: ConfigJson {
                path: self.config.path.as_ref().map(|p| p.display().to_string()),
                exists: self.config_exists,
                settings: self
                    .settings()
                    .into_iter()
                    .map(|(key, value, origin)| {
                        let origin = OriginJson::of(origin);
                        (key, SettingJson { value, origin })
                    })
                    .collect(),
            },
            kinds: self.kinds.iter().map(KindJson::of).collect(),
            cgroup: self.cgroup.as_deref(),
            verdict: self.overall().words(),
            verdict_name: self.overall().name(),
            exit_status: self.overall().code(),
        }
    }
}

/// [`Report`] as one JSON object.
#[derive(Serialize)]
pub struct ReportJson<'a> {
    os: &'a str,
    kernel: Option<&'a str>,
    launcher: LauncherJson<'a>,
    systemd_run: SystemdRunJson,
    manager: Option<ManagerJson<'a>>,
    route: Option<RouteJson<'a>>,
    controllers: Option<ControllersJson<'a>>,
    warnings: &'a [String],
    bus: BTreeMap<&'static str, Option<&'a str>>,
    config: ConfigJson,
    kinds: Vec<KindJson<'a>>,
    cgroup: Option<&'a str>,
    verdict: &'a str,
    verdict_name: &'a str,
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

/// The controllers the user manager was given (`names`), or why they are unknown (`error`).
#[derive(Serialize)]
#[serde(untagged)]
enum ControllersJson<'a> {
    Found { names: &'a [String] },
    Error { error: &'a str },
}

/// How the requests reach the manager: `way` (`session bus …`, `private socket …`) or the
/// `error` that left none open, and the `order` the ways are tried in.
#[derive(Serialize)]
struct RouteJson<'a> {
    way: Option<&'a str>,
    error: Option<&'a str>,
    order: &'static str,
}

#[derive(Serialize)]
struct SystemdRunJson {
    path: Option<String>,
    version: Option<u32>,
    expand_environment_no: bool,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ManagerJson<'a> {
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
struct ConfigJson {
    path: Option<String>,
    exists: bool,
    #[serde(flatten)]
    settings: BTreeMap<&'static str, SettingJson>,
}

#[derive(Serialize)]
struct SettingJson {
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

impl OriginJson {
    fn of(origin: &Origin) -> Self {
        match origin {
            Origin::Default => OriginJson::Default,
            Origin::Environment(variable) => OriginJson::Environment { variable },
            Origin::File { path, line } => OriginJson::File {
                path: path.display().to_string(),
                line: *line,
            },
        }
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
        set: BTreeMap<&'a str, &'a str>,
        unit_file: Option<&'a str>,
    },
    Error {
        error: &'a str,
    },
}

impl<'a> KindJson<'a> {
    fn of(kind: &'a KindReport) -> Self {
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
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect(),
                    unit_file: limits.fragment.as_deref(),
                },
                Err(error) => LimitsJson::Error { error },
            }),
            slice_warning: kind.slice_warning.as_deref(),
        }
    }
}

//! Which of systemd-oomd's rules cover a cgroup, and with what limits: asked of the manager that
//! owns each unit above it (the system manager up to `user@UID.service`, the user's below), with
//! oomd's own defaults (oomd.conf) where a unit sets none. How a scope ended names the rule from
//! this, and a warning compares the live figures against it.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use crate::manager;
use crate::manager::bus::wire::Value;
use crate::manager::bus::{Fallback, Route};
use crate::oomd::signal;

/// A rule of systemd-oomd's (`systemd.resource-control(5)`, `ManagedOOMSwap=` and
/// `ManagedOOMMemoryPressure=`).
///
/// Exhaustive on purpose: every surface maps each rule, and a new one must not compile unmapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OomdRule {
    /// Swap and memory both nearly used up: oomd kills the cgroup using the most swap.
    Swap,
    /// Memory pressure over the limit for long enough: oomd kills the cgroup reclaiming the most.
    MemoryPressure,
}

impl OomdRule {
    /// The rule oomd names as a kill's reason in its `Killed` signal (`memory-used` for the swap
    /// rule); None for a reason this library does not know.
    pub(crate) fn of_reason(reason: &str) -> Option<OomdRule> {
        match reason {
            "memory-used" => Some(OomdRule::Swap),
            "memory-pressure" => Some(OomdRule::MemoryPressure),
            _ => None,
        }
    }

    /// The rule's word on every surface: `swap` or `memory-pressure`.
    pub fn as_str(self) -> &'static str {
        match self {
            OomdRule::Swap => "swap",
            OomdRule::MemoryPressure => "memory-pressure",
        }
    }
}

/// One rule of oomd's that covers a cgroup.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CoveringRule {
    pub(crate) rule: OomdRule,
    /// The unit the rule is set on (`user@1000.service`, `-.slice`).
    pub(crate) unit: String,
    /// That unit's cgroup, from the hierarchy's root (`/` for `-.slice`).
    pub(crate) cgroup: String,
    /// In percent: the memory pressure (`full avg10`) the unit may reach, or the share of swap
    /// (and of memory) the machine may use.
    pub(crate) limit: f64,
    /// How long the pressure must stay over its limit before oomd acts; zero under the swap rule,
    /// which acts at once.
    pub(crate) duration: Duration,
}

/// oomd's own settings (`[OOM]` of oomd.conf and its drop-ins), for units that set no limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct OomdDefaults {
    /// `SwapUsedLimit=`, in percent.
    pub(crate) swap_used_limit: f64,
    /// `DefaultMemoryPressureLimit=`, in percent.
    pub(crate) pressure_limit: f64,
    /// `DefaultMemoryPressureDurationSec=`.
    pub(crate) pressure_duration: Duration,
}

impl Default for OomdDefaults {
    /// systemd's compiled-in defaults, the same on every version since 247.
    fn default() -> Self {
        OomdDefaults {
            swap_used_limit: 90.0,
            pressure_limit: 60.0,
            pressure_duration: Duration::from_secs(30),
        }
    }
}

/// Where oomd reads its settings, in the order read: the main file (the first found), then each
/// drop-in by name, a name in an earlier directory hiding the same name in a later one.
const MAIN_FILES: [&str; 4] = [
    "/etc/systemd/oomd.conf",
    "/run/systemd/oomd.conf",
    "/usr/local/lib/systemd/oomd.conf",
    "/usr/lib/systemd/oomd.conf",
];
const DROP_IN_DIRS: [&str; 4] = [
    "/etc/systemd/oomd.conf.d",
    "/run/systemd/oomd.conf.d",
    "/usr/local/lib/systemd/oomd.conf.d",
    "/usr/lib/systemd/oomd.conf.d",
];

impl OomdDefaults {
    /// oomd's settings as this machine's files give them.
    pub(crate) fn of_this_machine() -> Self {
        let mut texts = Vec::new();
        if let Some(main) = MAIN_FILES
            .iter()
            .find_map(|file| std::fs::read_to_string(file).ok())
        {
            texts.push(main);
        }
        let mut drop_ins: Vec<(OsString, std::path::PathBuf)> = Vec::new();
        for dir in DROP_IN_DIRS {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let is_conf = name.as_bytes().ends_with(b".conf");
                if is_conf && !drop_ins.iter().any(|(seen, _)| *seen == name) {
                    drop_ins.push((name, entry.path()));
                }
            }
        }
        drop_ins.sort();
        texts.extend(
            drop_ins
                .iter()
                .filter_map(|(_, path)| std::fs::read_to_string(path).ok()),
        );
        let mut defaults = OomdDefaults::default();
        for text in &texts {
            defaults.read(text);
        }
        defaults
    }

    /// Takes in the `[OOM]` settings of one file's `text`; what it does not set, or sets to
    /// something oomd would refuse, stays as it was.
    fn read(&mut self, text: &str) {
        let mut in_oom = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_oom = line == "[OOM]";
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            if !in_oom || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            let value = value.trim();
            match key.trim() {
                "SwapUsedLimit" | "SwapUsedLimitPercent" => {
                    if let Some(percent) = percent(value) {
                        self.swap_used_limit = percent;
                    }
                }
                "DefaultMemoryPressureLimit" | "DefaultMemoryPressureLimitPercent" => {
                    if let Some(percent) = percent(value) {
                        self.pressure_limit = percent;
                    }
                }
                "DefaultMemoryPressureDurationSec" => {
                    if let Some(duration) = pressure_duration(value) {
                        self.pressure_duration = duration;
                    }
                }
                _ => {}
            }
        }
    }
}

/// A unit's `ManagedOOMMemoryPressureLimit` (a share scaled to `UINT32_MAX`) in percent, as oomd
/// reads it: rounded to permyriad (`UINT32_SCALE_TO_PERMYRIAD` of systemd's src/basic/percent-util.h,
/// in `process_managed_oom_message` of src/oom/oomd-manager.c), so that 100 % is 100 and 60 % is 60.
fn limit_of_scaled(scaled: u64) -> f64 {
    let max = u64::from(u32::MAX);
    let permyriad = (scaled.min(max) * 10_000 + max / 2) / max;
    permyriad as f64 / 100.0
}

/// `DefaultMemoryPressureDurationSec=` as oomd takes it (`config_parse_duration` of
/// src/oom/oomd-conf.c; before 258, `manager_start` of src/oom/oomd-manager.c maps 0 the same way):
/// empty or 0 is the default of 30 s ("Map zero -> default"); under 1 s, `infinity` and what is
/// no time span are ignored (None: the setting stays as it was).
fn pressure_duration(value: &str) -> Option<Duration> {
    if value.is_empty() {
        return Some(OomdDefaults::default().pressure_duration);
    }
    match timespan(value)? {
        Duration::ZERO => Some(OomdDefaults::default().pressure_duration),
        short if short < Duration::from_secs(1) => None,
        duration => Some(duration),
    }
}

/// `50%`, `50.5%` or `500‰`/`5000‱` as a percentage from 0 to 100.
fn percent(value: &str) -> Option<f64> {
    let (number, scale) = if let Some(n) = value.strip_suffix('%') {
        (n, 1.0)
    } else if let Some(n) = value.strip_suffix('‰') {
        (n, 0.1)
    } else if let Some(n) = value.strip_suffix('‱') {
        (n, 0.01)
    } else {
        return None;
    };
    let percent = number.trim().parse::<f64>().ok()? * scale;
    (0.0..=100.0).contains(&percent).then_some(percent)
}

/// A systemd time span (`30s`, `1min 30s`, `20`, `500ms`); seconds where no unit is given.
fn timespan(value: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = value.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = rest[digits..].trim_start();
        let unit_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "us" | "usec" => 1e-6,
            "ms" | "msec" => 1e-3,
            "" | "s" | "sec" | "second" | "seconds" => 1.0,
            "m" | "min" | "minute" | "minutes" => 60.0,
            "h" | "hr" | "hour" | "hours" => 3600.0,
            _ => return None,
        };
        total += Duration::try_from_secs_f64(number * seconds).ok()?;
        rest = rest[unit_len..].trim_start();
    }
    Some(total)
}

/// The rules that cover the cgroup at `cgroup` (from the hierarchy's root), each asked of the
/// manager that owns its unit by `deadline`; an error where any manager could not say (half the
/// answers could name a rule the other half contradicts).
pub(crate) fn covering(
    cgroup: &str,
    env: &[(OsString, OsString)],
    defaults: &OomdDefaults,
    deadline: Instant,
) -> Result<Vec<CoveringRule>, String> {
    let user = Route::from_env(env, Fallback::UpTo256);
    let system = Route::to_system_manager(std::ffi::OsStr::from_bytes(
        &signal::system_bus_address(env),
    ));
    let mut rules = Vec::new();
    for ancestor in ancestors(cgroup) {
        let route = if ancestor.in_user_manager {
            &user
        } else {
            &system
        };
        let interface = if ancestor.unit.ends_with(".service") {
            manager::SERVICE
        } else {
            manager::SLICE
        };
        let path = manager::unit_path(&ancestor.unit);
        let ask = |names: &[&str]| {
            let asked: Vec<(&str, &str)> = names.iter().map(|name| (interface, *name)).collect();
            manager::properties(route, &path, &asked, deadline)
        };
        let values = ask(&["ManagedOOMSwap", "ManagedOOMMemoryPressure"]).map_err(|e| {
            let why = e.told_of(route.manager_words());
            format!("{} could not say which rules it has: {why}", ancestor.unit)
        })?;
        tracing::debug!(target: crate::diag::TARGET, "oomd's rules on {}: {values:?}", ancestor.unit);
        let kills = |at: usize| values.get(at).and_then(Value::as_str) == Some("kill");
        if kills(0) {
            rules.push(CoveringRule {
                rule: OomdRule::Swap,
                unit: ancestor.unit.clone(),
                cgroup: ancestor.cgroup.clone(),
                limit: defaults.swap_used_limit,
                duration: Duration::ZERO,
            });
        }
        if kills(1) {
            // 248 and later: a share scaled to 2^32; 247: a percentage as text. Zero or empty:
            // oomd's default.
            let limit = match ask(&["ManagedOOMMemoryPressureLimit"]) {
                Ok(values) => values
                    .first()
                    .and_then(Value::as_u64)
                    .filter(|scaled| *scaled > 0)
                    .map(limit_of_scaled),
                Err(_) => ask(&["ManagedOOMMemoryPressureLimitPercent"])
                    .ok()
                    .and_then(|values| values.first().and_then(Value::as_str).and_then(percent)),
            };
            // 257 and later; infinity (unset) or an older manager: oomd's default.
            let duration = ask(&["ManagedOOMMemoryPressureDurationUSec"])
                .ok()
                .and_then(|values| values.first().and_then(Value::as_u64))
                .filter(|usec| *usec != u64::MAX && *usec > 0)
                .map(Duration::from_micros);
            rules.push(CoveringRule {
                rule: OomdRule::MemoryPressure,
                unit: ancestor.unit,
                cgroup: ancestor.cgroup,
                limit: limit.unwrap_or(defaults.pressure_limit),
                duration: duration.unwrap_or(defaults.pressure_duration),
            });
        }
    }
    Ok(rules)
}

/// A unit whose cgroup holds another.
#[derive(Debug, PartialEq, Eq)]
struct Ancestor {
    unit: String,
    /// Its cgroup, from the hierarchy's root.
    cgroup: String,
    /// Whether the user's manager owns it (below `user@UID.service`), else the system manager.
    in_user_manager: bool,
}

/// The units whose cgroups hold the cgroup at `path`, outermost first (`-.slice` for the root).
fn ancestors(path: &str) -> Vec<Ancestor> {
    let mut units = vec![Ancestor {
        unit: "-.slice".to_owned(),
        cgroup: "/".to_owned(),
        in_user_manager: false,
    }];
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut in_user_manager = false;
    let mut cgroup = String::new();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        cgroup.push('/');
        cgroup.push_str(part);
        if !part.is_empty() {
            units.push(Ancestor {
                unit: (*part).to_owned(),
                cgroup: cgroup.clone(),
                in_user_manager,
            });
        }
        if part.starts_with("user@") && part.ends_with(".service") {
            in_user_manager = true;
        }
    }
    units
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_are_owned_by_the_system_manager_up_to_the_users_manager() {
        let path =
            "/user.slice/user-1000.slice/user@1000.service/agent.slice/synaps-tool-0123.scope";
        let seen: Vec<(String, String, bool)> = ancestors(path)
            .into_iter()
            .map(|a| (a.unit, a.cgroup, a.in_user_manager))
            .collect();
        let user = "/user.slice/user-1000.slice/user@1000.service";
        let expected = [
            ("-.slice", "/", false),
            ("user.slice", "/user.slice", false),
            ("user-1000.slice", "/user.slice/user-1000.slice", false),
            ("user@1000.service", user, false),
            ("agent.slice", &format!("{user}/agent.slice"), true),
        ]
        .map(|(unit, cgroup, user)| (unit.to_owned(), cgroup.to_owned(), user));
        assert_eq!(seen, expected);
    }

    #[test]
    fn oomds_reasons_name_the_rules() {
        assert_eq!(OomdRule::of_reason("memory-used"), Some(OomdRule::Swap));
        assert_eq!(
            OomdRule::of_reason("memory-pressure"),
            Some(OomdRule::MemoryPressure)
        );
        assert_eq!(OomdRule::of_reason("something-new"), None);
    }

    #[test]
    fn oomd_conf_is_read_as_oomd_reads_it() {
        let mut defaults = OomdDefaults::default();
        defaults.read(
            "[OOM]\n#SwapUsedLimit=10%\nSwapUsedLimit=80%\nDefaultMemoryPressureLimit=40%\n\
             DefaultMemoryPressureDurationSec=1min 30s\n[Other]\nSwapUsedLimit=1%\n",
        );
        assert_eq!(defaults.swap_used_limit, 80.0);
        assert_eq!(defaults.pressure_limit, 40.0);
        assert_eq!(defaults.pressure_duration, Duration::from_secs(90));
        // 247's names, and values oomd would refuse, which leave the setting as it was.
        defaults.read("[OOM]\nSwapUsedLimitPercent=85%\nDefaultMemoryPressureLimit=150%\nDefaultMemoryPressureDurationSec=soon\n");
        assert_eq!(defaults.swap_used_limit, 85.0);
        assert_eq!(defaults.pressure_limit, 40.0);
        assert_eq!(defaults.pressure_duration, Duration::from_secs(90));
    }

    /// Issue 60, item 7: the edge values, each as oomd reads it (the source of each reading is
    /// named in docs/spec.md's table of oomd's settings).
    #[test]
    fn oomds_edge_values_are_read_as_oomd_reads_them() {
        let read = |line: &str| {
            let mut defaults = OomdDefaults {
                pressure_duration: Duration::from_secs(90),
                ..OomdDefaults::default()
            };
            defaults.read(&format!("[OOM]\n{line}\n"));
            defaults
        };
        let duration = |line: &str| read(line).pressure_duration;
        // 0 and empty: oomd's default, 30 s (not "for 0 s of 0 s").
        assert_eq!(
            duration("DefaultMemoryPressureDurationSec=0"),
            Duration::from_secs(30)
        );
        assert_eq!(
            duration("DefaultMemoryPressureDurationSec=0s"),
            Duration::from_secs(30)
        );
        assert_eq!(
            duration("DefaultMemoryPressureDurationSec="),
            Duration::from_secs(30)
        );
        // Under a second, infinity and no time span at all: ignored.
        assert_eq!(
            duration("DefaultMemoryPressureDurationSec=500ms"),
            Duration::from_secs(90)
        );
        assert_eq!(
            duration("DefaultMemoryPressureDurationSec=infinity"),
            Duration::from_secs(90)
        );
        assert_eq!(
            duration("DefaultMemoryPressureDurationSec=1s"),
            Duration::from_secs(1)
        );
        // Limits of 0% and 100% are oomd's to take (0: any pressure or swap; 100: never).
        assert_eq!(read("DefaultMemoryPressureLimit=0%").pressure_limit, 0.0);
        assert_eq!(
            read("DefaultMemoryPressureLimit=100%").pressure_limit,
            100.0
        );
        assert_eq!(read("SwapUsedLimit=0%").swap_used_limit, 0.0);
        assert_eq!(read("SwapUsedLimit=100%").swap_used_limit, 100.0);
        // A unit's limit, scaled to UINT32_MAX by the manager, rounded to permyriad as oomd does.
        assert_eq!(limit_of_scaled(u64::from(u32::MAX)), 100.0);
        assert_eq!(limit_of_scaled(2_576_980_377), 60.0);
        assert_eq!(limit_of_scaled(1), 0.0);
    }

    #[test]
    fn percentages_and_time_spans_read_as_systemd_writes_them() {
        assert_eq!(percent("50%"), Some(50.0));
        assert_eq!(percent("500‰"), Some(50.0));
        assert_eq!(percent("50"), None);
        assert_eq!(timespan("20s"), Some(Duration::from_secs(20)));
        assert_eq!(timespan("20"), Some(Duration::from_secs(20)));
        assert_eq!(timespan("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(timespan("1h 1min"), Some(Duration::from_secs(3660)));
        assert_eq!(timespan(""), None);
        assert_eq!(timespan("5 fortnights"), None);
    }
}

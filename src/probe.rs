//! Availability (R3, R5-R7, R11, R12): the cached `systemd-run --version`, the fresh bounded probe
//! of the user manager, the once-per-slice warnings, and the background check of a slice's limits.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::bounded::{self, Failure};
use crate::diag::{WarnedSet, TARGET};
use crate::env::set_env;
use crate::resolve::resolve_program;

/// The first systemd whose systemd-run knows `--expand-environment`.
pub(crate) const EXPAND_ENVIRONMENT_SINCE: u32 = 254;

/// The limits whose absence makes a slice suspicious (R12).
const LIMIT_PROPERTIES: [&str; 5] = [
    "MemoryMax",
    "MemoryHigh",
    "MemorySwapMax",
    "CPUQuotaPerSecUSec",
    "TasksMax",
];

/// Slices whose probe failure has been warned about (None, the default slice, is "").
static PROBE_WARNINGS: WarnedSet = WarnedSet::new();
/// Slices whose limits have been (or are being) checked.
static SLICE_CHECKS: WarnedSet = WarnedSet::new();

/// The parsed `systemd-run --version` of each binary path, asked once per process. Each path has
/// its own lock so concurrent first requests ask once and others wait for that answer.
type VersionCache = Mutex<HashMap<PathBuf, Arc<Mutex<Option<Option<u32>>>>>>;
static VERSIONS: OnceLock<VersionCache> = OnceLock::new();

/// The major version in the first line of `systemd-run --version` (`systemd 254 (254.5-1)`), or
/// None when it cannot be read (which counts as older than 254).
pub(crate) fn parse_version(output: &[u8]) -> Option<u32> {
    let first = output.split(|&b| b == b'\n').next()?;
    let first = std::str::from_utf8(first).ok()?;
    let mut words = first.split_whitespace();
    if words.next()? != "systemd" {
        return None;
    }
    parse_major(words.next()?)
}

/// The version of the systemd-run at `path`, asked once per process; a time-out or spawn failure
/// is not cached, so a later request asks again.
pub(crate) fn systemd_version(
    path: &Path,
    env: &[(OsString, OsString)],
    deadline: Instant,
) -> Result<Option<u32>, String> {
    let slot = {
        let cache = VERSIONS.get_or_init(Default::default);
        let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(cache.entry(path.to_owned()).or_default())
    };
    let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(version) = *slot {
        return Ok(version);
    }
    let mut cmd = Command::new(path);
    cmd.arg("--version").current_dir("/");
    set_env(&mut cmd, env);
    let done = bounded::run(cmd, true, deadline)
        .map_err(|failure| format!("`{} --version` {failure}", path.display()))?;
    let version = parse_version(&done.stdout);
    *slot = Some(version);
    Ok(version)
}

/// Runs `systemd-run <scope_flags> -- true` with the effective environment, cwd `/`, by
/// `deadline`. Ok means a user manager made a scope with exactly these flags.
pub(crate) fn probe(
    systemd_run: &Path,
    scope_flags: &[OsString],
    env: &[(OsString, OsString)],
    deadline: Instant,
) -> Result<(), String> {
    let true_program = resolve_program("true".as_ref(), env, Some(Path::new("/")))
        .map_err(|_| "no `true` program in PATH to probe with".to_owned())?;
    let mut cmd = Command::new(systemd_run);
    cmd.args(scope_flags)
        .arg("--")
        .arg(true_program)
        .current_dir("/");
    set_env(&mut cmd, env);
    let done = bounded::run(cmd, false, deadline).map_err(|failure| match failure {
        Failure::Spawn(e) => format!("systemd-run could not be started: {e}"),
        timed_out => format!("systemd-run {timed_out}"),
    })?;
    if done.status.success() {
        return Ok(());
    }
    let said = stderr_summary(&done.stderr);
    Err(if said.is_empty() {
        format!("systemd-run exited with {}", done.status)
    } else {
        format!("{said} ({})", done.status)
    })
}

/// systemd-run's complaint on one line, bounded in length.
fn stderr_summary(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let joined = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    match joined.char_indices().nth(400) {
        Some((cut, _)) => format!("{}…", &joined[..cut]),
        None => joined,
    }
}

/// How a slice is named in warnings.
pub(crate) fn slice_label(slice: Option<&str>) -> String {
    match slice {
        Some(name) => format!("slice {name}"),
        None => "the default slice".to_owned(),
    }
}

/// The R11 warning: once per slice name per process.
pub(crate) fn warn_probe_failed_once(slice: Option<&str>, reason: &str) {
    if PROBE_WARNINGS.first_time(slice.unwrap_or("")) {
        tracing::warn!(
            target: TARGET,
            "process scopes unavailable for {}: {reason}; launching directly (warned once per slice)",
            slice_label(slice),
        );
    }
}

/// The R12 check, once per slice name per process, on a background thread that reports to the
/// caller's current `tracing` dispatcher. Never delays the caller.
pub(crate) fn check_slice_limits_in_background(
    slice: &str,
    env: &[(OsString, OsString)],
    bound: Duration,
) {
    if !SLICE_CHECKS.first_time(slice) {
        return;
    }
    let dispatch = tracing::dispatcher::get_default(|d| d.clone());
    let (name, env) = (slice.to_owned(), env.to_vec());
    let spawned = std::thread::Builder::new()
        .name("synaps-slice-check".into())
        .spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || check_slice_limits(&name, &env, bound))
        });
    if let Err(e) = spawned {
        tracing::debug!(target: TARGET, slice, "the slice check could not start: {e}");
    }
}

fn check_slice_limits(slice: &str, env: &[(OsString, OsString)], bound: Duration) {
    let limits = read_slice_limits(slice, env, bound);
    match &limits {
        Ok(limits) => {
            if let Some(warning) = slice_warning(slice, limits) {
                tracing::warn!(target: TARGET, "{warning}");
            }
        }
        Err(reason) => {
            tracing::debug!(target: TARGET, "could not read the limits of slice {slice}: {reason}");
        }
    }
    let limited = limits.is_ok_and(|l| !l.set.is_empty());
    tracing::debug!(target: TARGET, slice, limited, "slice check finished");
}

/// The R12 warning for a slice whose limits are `limits`, or None when one is set.
pub(crate) fn slice_warning(slice: &str, limits: &SliceLimits) -> Option<String> {
    if !limits.set.is_empty() {
        return None;
    }
    let unit_file = match &limits.fragment {
        Some(path) => format!("its unit file is {path}"),
        None => "no unit file defines it".to_owned(),
    };
    Some(format!(
        "slice {slice} sets no limits ({}): systemd created it on the fly or its unit file sets none, \
         so scopes in it are separate but uncapped; it may be a typo, or a unit file not yet \
         loaded (systemctl --user daemon-reload); {unit_file}",
        LIMIT_PROPERTIES.join(", "),
    ))
}

/// What the user manager says of a slice's limits (R12).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceLimits {
    /// `(property, value)` for each limit that is set.
    pub set: Vec<(String, String)>,
    /// The unit file, when one exists.
    pub fragment: Option<String>,
}

/// `systemctl --user show -p PROPERTIES -- UNIT` (the manager's own properties when `unit` is None)
/// with the effective environment, within `bound`: its `Property=value` lines, or why the manager
/// could not say.
pub(crate) fn systemctl_show(
    unit: Option<&str>,
    properties: &str,
    env: &[(OsString, OsString)],
    bound: Duration,
) -> Result<String, String> {
    let systemctl = resolve_program("systemctl".as_ref(), env, Some(Path::new("/")))
        .map_err(|_| "no systemctl in PATH".to_owned())?;
    let mut cmd = Command::new(systemctl);
    cmd.args(["--user", "show", "-p", properties])
        .args(unit.map(|u| ["--", u]).into_iter().flatten())
        .current_dir("/");
    set_env(&mut cmd, env);
    let done =
        bounded::run(cmd, true, Instant::now() + bound).map_err(|f| format!("systemctl {f}"))?;
    if !done.status.success() {
        return Err(format!(
            "systemctl {}: {}",
            done.status,
            stderr_summary(&done.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&done.stdout).into_owned())
}

/// Asks the manager for `slice`'s limits and unit file, within `bound`.
pub(crate) fn read_slice_limits(
    slice: &str,
    env: &[(OsString, OsString)],
    bound: Duration,
) -> Result<SliceLimits, String> {
    let properties = format!("{},FragmentPath", LIMIT_PROPERTIES.join(","));
    systemctl_show(Some(slice), &properties, env, bound).map(|show| parse_slice_limits(&show))
}

/// The version the user manager itself reports (its `Version` property, e.g. `262.1-1`), asked
/// within `bound`. It can differ from systemd-run's after a partial upgrade or before a re-exec.
pub(crate) fn manager_version(
    env: &[(OsString, OsString)],
    bound: Duration,
) -> Result<ManagerVersion, String> {
    let show = systemctl_show(None, "Version", env, bound)?;
    let full = show
        .lines()
        .find_map(|l| l.strip_prefix("Version="))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| "the manager reported no Version".to_owned())?;
    Ok(ManagerVersion {
        major: parse_major(full),
        full: full.to_owned(),
    })
}

/// What the user manager says of its own version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagerVersion {
    /// The leading number (`262` of `262.1-1`), when there is one.
    pub major: Option<u32>,
    /// The whole version string, as the manager reports it.
    pub full: String,
}

/// The leading decimal number of a version string: `254` of `254.26-1~bpo12+1`, `256` of `256~rc3`.
fn parse_major(version: &str) -> Option<u32> {
    let digits = version.split(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse().ok()
}

/// Reads `Property=value` lines; a limit is set unless it is `infinity` or empty.
pub(crate) fn parse_slice_limits(show: &str) -> SliceLimits {
    let mut limits = SliceLimits {
        set: Vec::new(),
        fragment: None,
    };
    for (key, value) in show.lines().filter_map(|l| l.split_once('=')) {
        if key == "FragmentPath" {
            limits.fragment = Some(value.to_owned()).filter(|v| !v.is_empty());
        } else if LIMIT_PROPERTIES.contains(&key) && !matches!(value, "" | "infinity") {
            limits.set.push((key.to_owned(), value.to_owned()));
        }
    }
    limits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_from_the_first_line_only() {
        assert_eq!(
            parse_version(b"systemd 252 (252.38-1~deb12u1)\n+PAM +AUDIT"),
            Some(252)
        );
        assert_eq!(
            parse_version(b"systemd 254 (254.26-1~bpo12+1)\n"),
            Some(254)
        );
        assert_eq!(parse_version(b"systemd 256~rc3 (x)"), Some(256));
        assert_eq!(parse_version(b"garbage\nsystemd 254"), None);
        assert_eq!(parse_version(b"systemd"), None);
        assert_eq!(parse_version(b"systemd v254"), None);
        assert_eq!(parse_version(b""), None);
        assert_eq!(parse_version(b"\xff\xfe"), None);
        assert_eq!(parse_version(b"systemd 99999999999999999999"), None);
        // Found by fuzzing: words are split on any whitespace, leading whitespace included.
        assert_eq!(parse_version(b" \tsystemd\xc2\xa0254"), Some(254));
        assert_eq!(parse_version(b"  systemd   254 (x)"), Some(254));
    }

    #[test]
    fn manager_versions_keep_their_leading_number() {
        assert_eq!(parse_major("252.38-1~deb12u1"), Some(252));
        assert_eq!(parse_major("262.1-1"), Some(262));
        assert_eq!(parse_major("256~rc3"), Some(256));
        assert_eq!(parse_major("v254"), None);
        assert_eq!(parse_major(""), None);
    }

    #[test]
    fn limits_are_set_unless_infinity_or_empty() {
        let none = parse_slice_limits(
            "MemoryMax=infinity\nMemoryHigh=infinity\nMemorySwapMax=infinity\nCPUQuotaPerSecUSec=infinity\nTasksMax=infinity\nFragmentPath=\n",
        );
        assert_eq!(
            none,
            SliceLimits {
                set: vec![],
                fragment: None
            }
        );
        let some = parse_slice_limits(
            "MemoryMax=1073741824\nTasksMax=infinity\nFragmentPath=/u/a.slice\n",
        );
        assert_eq!(
            some,
            SliceLimits {
                set: vec![("MemoryMax".into(), "1073741824".into())],
                fragment: Some("/u/a.slice".into())
            }
        );
    }

    #[test]
    fn stderr_is_summarised_on_one_bounded_line() {
        assert_eq!(
            stderr_summary(b"\nFailed to start: no\n  second  \n"),
            "Failed to start: no; second"
        );
        assert_eq!(stderr_summary(&[b'x'; 1000]).chars().count(), 401);
    }
}

//! Questions to the user manager through `systemctl --user show`, each within a bound: a unit's
//! properties, and the manager's own version.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::bounded;
use crate::bounded::stderr_summary;
use crate::env::set_env;
use crate::resolve::resolve_program;
use crate::version::parse_major;

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
    let done = bounded::run(cmd, true, bounded::deadline_after(bound))
        .map_err(|f| format!("systemctl {f}"))?;
    if !done.status.success() {
        return Err(format!(
            "systemctl {}: {}",
            done.status,
            stderr_summary(&done.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&done.stdout).into_owned())
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

//! What decides a request, read once: the entries of its effective environment that a decision
//! looks at, in one typed view made at the start of `decide` and handed down, so that no module
//! looks the environment up on its own, and R7's cheap negatives are answered from it before
//! anything is looked for on disk.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::input::env::{lookup, lookup_non_empty};

/// The environment variable that switches scopes `on`, `off` or `required`; it wins over the file.
pub const SWITCH_VAR: &str = "SYNAPS_PROCESS_SCOPES";
/// The environment variable naming the config file.
pub const CONFIG_VAR: &str = "SYNAPS_CONFIG";
/// The environment variable choosing the wrapper; it wins over the file.
pub const LAUNCHER_VAR: &str = "SYNAPS_SCOPE_LAUNCHER";
/// The environment variable that names the launcher program's path (for packagers and tests).
pub const EXEC_VAR: &str = "SYNAPS_SCOPE_EXEC";
/// Why no manager can be reached when neither user-bus variable is set (R7).
pub(crate) const NO_USER_BUS: &str =
    "no user manager to reach: neither XDG_RUNTIME_DIR nor DBUS_SESSION_BUS_ADDRESS is set";

/// The inputs of one request.
#[derive(Clone, Debug)]
pub(crate) struct Inputs<'a> {
    /// The whole effective environment: what a helper process (`systemd-run --version`) runs with.
    pub env: &'a [(OsString, OsString)],
    /// `SYNAPS_PROCESS_SCOPES`, as set (R8).
    pub mode_switch: Option<&'a OsStr>,
    /// `SYNAPS_SCOPE_LAUNCHER`, as set.
    pub launcher_switch: Option<&'a OsStr>,
    /// The config file (R9): `SYNAPS_CONFIG`, else the default path under `XDG_CONFIG_HOME` or
    /// `HOME`.
    pub config_path: Option<PathBuf>,
    /// Whether `SYNAPS_CONFIG` named the config file (a missing one is then worth a warning).
    pub config_named: bool,
    /// Where the user's manager is reached.
    pub bus: UserBus<'a>,
    /// `PATH` (None: unset, so the libc default applies).
    pub path: Option<&'a OsStr>,
    /// `SYNAPS_SCOPE_EXEC`: the launcher program named by path.
    pub exec_program: Option<&'a OsStr>,
}

impl<'a> Inputs<'a> {
    /// Reads the inputs from the effective environment `env`.
    pub(crate) fn read(env: &'a [(OsString, OsString)]) -> Self {
        let named = lookup_non_empty(env, CONFIG_VAR);
        Inputs {
            env,
            mode_switch: lookup(env, SWITCH_VAR),
            launcher_switch: lookup(env, LAUNCHER_VAR),
            config_path: named
                .map(PathBuf::from)
                .or_else(|| default_config_path(env)),
            config_named: named.is_some(),
            bus: UserBus::read(env),
            path: lookup(env, "PATH"),
            exec_program: lookup_non_empty(env, EXEC_VAR),
        }
    }

    /// Whether any user bus is named at all (R7: without one, nothing is worth looking for).
    pub(crate) fn has_user_bus(&self) -> bool {
        self.bus.runtime_dir.is_some() || self.bus.bus_address.is_some()
    }
}

/// The two entries a way to the user's manager is made from: all that a caller which only talks
/// to the manager (a handle, the launcher program) needs to read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UserBus<'a> {
    /// `XDG_RUNTIME_DIR`: the private socket's directory.
    pub runtime_dir: Option<&'a OsStr>,
    /// `DBUS_SESSION_BUS_ADDRESS`.
    pub bus_address: Option<&'a OsStr>,
}

impl<'a> UserBus<'a> {
    /// Reads them from the effective environment `env` (an empty value names nothing).
    pub(crate) fn read(env: &'a [(OsString, OsString)]) -> Self {
        UserBus {
            runtime_dir: lookup_non_empty(env, "XDG_RUNTIME_DIR"),
            bus_address: lookup_non_empty(env, "DBUS_SESSION_BUS_ADDRESS"),
        }
    }
}

/// `$XDG_CONFIG_HOME/synaps/config` (when absolute), else `$HOME/.config/synaps/config`.
fn default_config_path(env: &[(OsString, OsString)]) -> Option<PathBuf> {
    let xdg = lookup_non_empty(env, "XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let base =
        xdg.or_else(|| lookup_non_empty(env, "HOME").map(|h| Path::new(h).join(".config")))?;
    Some(base.join("synaps").join("config"))
}

#[cfg(test)]
mod tests {
    use super::Inputs;
    use std::ffi::OsString;
    use std::path::Path;

    fn env(entries: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        entries
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn the_config_path_follows_synaps_config_then_xdg_then_home() {
        let named = env(&[("SYNAPS_CONFIG", "/etc/c"), ("HOME", "/h")]);
        let inputs = Inputs::read(&named);
        assert_eq!(inputs.config_path.as_deref(), Some(Path::new("/etc/c")));
        assert!(inputs.config_named);
        let xdg = env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")]);
        let inputs = Inputs::read(&xdg);
        assert_eq!(
            inputs.config_path.as_deref(),
            Some(Path::new("/x/synaps/config"))
        );
        assert!(!inputs.config_named);
        let relative = env(&[("XDG_CONFIG_HOME", "x"), ("HOME", "/h")]);
        assert_eq!(
            Inputs::read(&relative).config_path.as_deref(),
            Some(Path::new("/h/.config/synaps/config"))
        );
        assert_eq!(Inputs::read(&[]).config_path, None);
    }

    #[test]
    fn empty_bus_variables_name_no_bus() {
        let empty = env(&[("XDG_RUNTIME_DIR", ""), ("DBUS_SESSION_BUS_ADDRESS", "")]);
        assert!(!Inputs::read(&empty).has_user_bus());
        let runtime = env(&[("XDG_RUNTIME_DIR", "/run/user/1000")]);
        assert!(Inputs::read(&runtime).has_user_bus());
    }
}

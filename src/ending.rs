//! How a scope ended: killed by systemd-oomd (and under which rule), by the kernel's OOM killer, by
//! a scope handle's kill, or on its own. The manager collects a scope the moment it ends, its
//! cgroup with it, so a handle keeps what it needs to answer afterwards:
//! - the scope's cgroup directory, open: its extended attributes stay readable through that
//!   descriptor after the cgroup is removed. systemd-oomd writes `user.oomd_ooms` on a cgroup
//!   before it kills it; a handle's kill writes `user.synaps_kill` the same way.
//! - the kernel's OOM kills (`memory.events`: `oom_kill`), counted as they happen (`oom_watch`),
//!   since that file goes with the cgroup.
//!
//! Which oomd rule acted is not written anywhere a user can read; it is told from the rules that
//! cover the scope (`ManagedOOMSwap=kill` or `ManagedOOMMemoryPressure=kill` on its slices, on
//! `user@UID.service` or on `-.slice`), asked of the user manager and the system manager, when
//! only one kind covers it.

use std::ffi::OsString;
use std::fmt;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Instant;

use crate::bus::wire::Value;
use crate::bus::{Fallback, Route};
use crate::manager;
use crate::oom_watch::{self, OomKills};

/// The extended attribute systemd-oomd increments on a cgroup before it kills it.
const OOMD_KILL_MARK: &str = "user.oomd_ooms";
/// The extended attribute a scope handle's kill writes before it kills.
pub(crate) const HANDLE_KILL_MARK: &str = "user.synaps_kill";
/// The system bus, where `DBUS_SYSTEM_BUS_ADDRESS` names none (the D-Bus specification's default).
const SYSTEM_BUS: &str = "unix:path=/run/dbus/system_bus_socket";

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
    /// The rule's word on every surface: `swap` or `memory-pressure`.
    pub fn as_str(self) -> &'static str {
        match self {
            OomdRule::Swap => "swap",
            OomdRule::MemoryPressure => "memory-pressure",
        }
    }
}

/// How a scope ended, as far as its handle can tell.
///
/// Exhaustive on purpose: every surface maps each ending, and a new one must not compile unmapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScopeEnding {
    /// Processes are still in the scope.
    Running,
    /// systemd-oomd killed it. `rule` is None where both rules cover the scope, or the managers
    /// could not say which do.
    KilledByOomd {
        /// The rule that acted, where only one could have.
        rule: Option<OomdRule>,
    },
    /// The kernel's OOM killer killed a process in it (a memory limit of its slice, say).
    KilledByKernelOom {
        /// How many processes it killed.
        kills: u64,
    },
    /// A scope handle's kill emptied it (this handle or another, in any process).
    KilledByHandle,
    /// Its processes ended without any of the above.
    EndedOnItsOwn,
    /// It ended, but how cannot be told: the cgroup has no memory controller to count OOM kills
    /// by, and no mark of oomd or of a handle's kill is on it.
    Unknown,
}

impl ScopeEnding {
    /// The ending's word on every surface: `running`, `oomd`, `kernel-oom`, `handle-kill`,
    /// `on-its-own` or `unknown`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ScopeEnding::Running => "running",
            ScopeEnding::KilledByOomd { .. } => "oomd",
            ScopeEnding::KilledByKernelOom { .. } => "kernel-oom",
            ScopeEnding::KilledByHandle => "handle-kill",
            ScopeEnding::EndedOnItsOwn => "on-its-own",
            ScopeEnding::Unknown => "unknown",
        }
    }
}

impl fmt::Display for ScopeEnding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScopeEnding::Running => f.write_str("still running"),
            ScopeEnding::KilledByOomd { rule: Some(rule) } => {
                write!(f, "killed by systemd-oomd ({} rule)", rule.as_str())
            }
            ScopeEnding::KilledByOomd { rule: None } => f.write_str("killed by systemd-oomd"),
            ScopeEnding::KilledByKernelOom { kills } => {
                write!(f, "{kills} process(es) killed by the kernel's OOM killer")
            }
            ScopeEnding::KilledByHandle => f.write_str("killed through a scope handle"),
            ScopeEnding::EndedOnItsOwn => f.write_str("ended on its own"),
            ScopeEnding::Unknown => f.write_str("ended; how cannot be told here"),
        }
    }
}

/// What a handle keeps from the moment it is made, to tell how its scope ended.
#[derive(Debug)]
pub(crate) struct Witness {
    /// The scope's cgroup directory, open for its extended attributes.
    dir: OwnedFd,
    /// The kernel's OOM kills in it, counted as they happen; None without a memory controller.
    oom_kills: Option<Arc<OomKills>>,
}

impl Witness {
    /// Keeps `dir`, the scope's open cgroup directory, and starts counting its OOM kills.
    pub(crate) fn keep(dir: OwnedFd) -> Witness {
        let oom_kills = oom_watch::watch(&dir);
        Witness { dir, oom_kills }
    }

    /// The open cgroup directory.
    pub(crate) fn dir(&self) -> &OwnedFd {
        &self.dir
    }

    /// Marks the scope as killed through a handle, before the kill; false where the cgroup takes
    /// no extended attributes (Linux before 5.7).
    pub(crate) fn mark_handle_kill(&self) -> bool {
        rustix::fs::fsetxattr(
            &self.dir,
            HANDLE_KILL_MARK,
            b"1",
            rustix::fs::XattrFlags::empty(),
        )
        .is_ok()
    }

    /// How the scope ended, once it is empty (`running` says whether it still holds processes).
    /// `killed_here` says whether this handle killed it (where no mark could be written).
    pub(crate) fn ending(
        &self,
        running: bool,
        killed_here: bool,
        cgroup: &str,
        env: &[(OsString, OsString)],
        deadline: Instant,
    ) -> ScopeEnding {
        if running {
            return ScopeEnding::Running;
        }
        if self.marked(OOMD_KILL_MARK) {
            return ScopeEnding::KilledByOomd {
                rule: oomd_rule(cgroup, env, deadline),
            };
        }
        if killed_here || self.marked(HANDLE_KILL_MARK) {
            return ScopeEnding::KilledByHandle;
        }
        match self.oom_kills.as_ref().map(|k| k.seen()) {
            Some(0) => ScopeEnding::EndedOnItsOwn,
            Some(kills) => ScopeEnding::KilledByKernelOom { kills },
            None => ScopeEnding::Unknown,
        }
    }

    fn marked(&self, name: &str) -> bool {
        let mut value = [0u8; 32];
        rustix::fs::fgetxattr(&self.dir, name, &mut value).is_ok_and(|n| n > 0)
    }
}

/// Which rule could have made oomd kill the scope at `cgroup`: the one kind that its ancestors
/// are set to kill by, asked of the manager that owns each.
fn oomd_rule(cgroup: &str, env: &[(OsString, OsString)], deadline: Instant) -> Option<OomdRule> {
    let user = Route::from_env(env, Fallback::UpTo256);
    let system_address = env
        .iter()
        .find(|(k, v)| k == "DBUS_SYSTEM_BUS_ADDRESS" && !v.is_empty())
        .map_or_else(|| OsString::from(SYSTEM_BUS), |(_, v)| v.clone());
    let system = Route::to_system_manager(&system_address);
    let mut rules = Vec::new();
    for (unit, in_user_manager) in ancestors(cgroup) {
        let route = if in_user_manager { &user } else { &system };
        let interface = if unit.ends_with(".service") {
            manager::SERVICE
        } else {
            manager::SLICE
        };
        let asked = manager::properties(
            route,
            &manager::unit_path(&unit),
            &[
                (interface, "ManagedOOMSwap"),
                (interface, "ManagedOOMMemoryPressure"),
            ],
            deadline,
        );
        tracing::debug!(target: crate::diag::TARGET, "oomd's rules on {unit}: {asked:?}");
        let Ok(values) = asked else {
            continue;
        };
        let kills = |at: usize| values.get(at).and_then(Value::as_str) == Some("kill");
        if kills(0) {
            rules.push(OomdRule::Swap);
        }
        if kills(1) {
            rules.push(OomdRule::MemoryPressure);
        }
    }
    rules.dedup();
    match rules.as_slice() {
        [rule] => Some(*rule),
        _ => None,
    }
}

/// The units whose cgroups hold the cgroup at `path`, outermost first (`-.slice` for the root),
/// each with whether the user manager owns it (below `user@UID.service`) or the system manager.
fn ancestors(path: &str) -> Vec<(String, bool)> {
    let mut units = vec![("-.slice".to_owned(), false)];
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut in_user_manager = false;
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        units.push(((*part).to_owned(), in_user_manager));
        if part.starts_with("user@") && part.ends_with(".service") {
            in_user_manager = true;
        }
    }
    units.retain(|(unit, _)| !unit.is_empty());
    units
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_are_owned_by_the_system_manager_up_to_the_users_manager() {
        let path = "/user.slice/user-1000.slice/user@1000.service/agent.slice/agent-tools.slice/synaps-tool-0123.scope";
        assert_eq!(
            ancestors(path),
            vec![
                ("-.slice".to_owned(), false),
                ("user.slice".to_owned(), false),
                ("user-1000.slice".to_owned(), false),
                ("user@1000.service".to_owned(), false),
                ("agent.slice".to_owned(), true),
                ("agent-tools.slice".to_owned(), true),
            ]
        );
    }

    #[test]
    fn every_ending_and_rule_has_one_word() {
        let endings = [
            ScopeEnding::Running,
            ScopeEnding::KilledByOomd { rule: None },
            ScopeEnding::KilledByKernelOom { kills: 1 },
            ScopeEnding::KilledByHandle,
            ScopeEnding::EndedOnItsOwn,
            ScopeEnding::Unknown,
        ];
        let words: std::collections::HashSet<_> = endings.iter().map(ScopeEnding::as_str).collect();
        assert_eq!(words.len(), endings.len());
        assert_ne!(OomdRule::Swap.as_str(), OomdRule::MemoryPressure.as_str());
    }
}

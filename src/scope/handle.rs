//! Scope handles (R15): from a unit name that `wrap` returned, find the scope's cgroup, list and
//! kill every process in it (descendants that left the process group included), read its usage,
//! wait for it to empty, and tell how it ended (`crate::scope::ending`) even after the manager has
//! collected it. Anything that is not a `synaps-*.scope` made by this library is
//! refused, and so is any scope that holds the calling process (when the handle is made and again
//! when it kills), so a caller can never kill its own cgroup by mistake: not a daemon in a scope of
//! its own whose child was launched directly, nor one whose scoped child has not yet left it.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};
use rustix::process::{kill_process, Pid, Signal};

use crate::bounds::deadline_after;
use crate::input::intake;
use crate::input::unit_name::parse_unit_name;
use crate::kernel::cgroup::{self, Cgroup, CgroupError};
use crate::kernel::cgroup_tree::{self, Met};
use crate::kernel::pressure::ScopePressure;
use crate::manager;
use crate::manager::bus::wire::Value;
use crate::manager::bus::{Fallback, Route};
use crate::scope::ending::{Ending, Witness};

/// Why a scope handle could not be made or used.
#[derive(Debug)]
#[non_exhaustive]
pub enum HandleError {
    /// The unit name or cgroup is not a `synaps-<kind>-<32 hex>.scope` of this library.
    NotOurs {
        /// The name or cgroup path that was refused.
        what: String,
    },
    /// The scope holds the calling process (the caller runs in it, or below it): never killed.
    HoldsCaller {
        /// The scope's cgroup, relative to the cgroup2 mount.
        cgroup: String,
        /// The calling process's own cgroup.
        own: String,
    },
    /// The scope belongs to another user (its cgroup is in that user's delegated subtree): this
    /// user could read it but not kill it, so it is refused when the handle is made.
    OtherUsers {
        /// The scope's cgroup, relative to the cgroup2 mount.
        cgroup: String,
        /// The uid that owns it.
        owner: u32,
        /// The calling process's effective uid.
        me: u32,
    },
    /// The process is not in that scope (it exited, or was launched directly).
    NotInScope {
        /// The process asked about.
        pid: u32,
        /// The unit it was expected in.
        unit: String,
        /// Its actual cgroup.
        cgroup: String,
    },
    /// No such scope is running (it exited and was collected, or never started).
    NotFound {
        /// The unit asked for.
        unit: String,
    },
    /// There is no cgroup2 hierarchy mounted.
    NoCgroup2,
    /// A process id that no process can have: not from 1 to 2147483647 (`pid_t` is signed, and 0
    /// names no process).
    InvalidPid {
        /// The number given.
        pid: i64,
    },
    /// Asking the user manager failed.
    Manager(String),
    /// Processes were still in the scope at the deadline.
    TimedOut {
        /// How long was waited.
        waited: Duration,
        /// The processes still there.
        remaining: Vec<u32>,
    },
    /// Reading or writing the cgroup failed.
    Io(io::Error),
}

impl fmt::Display for HandleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandleError::NotOurs { what } => {
                write!(
                    f,
                    "{what} is not a synaps-<kind>-<id>.scope made by synaps-scope; refusing it"
                )
            }
            HandleError::HoldsCaller { cgroup, own } => write!(
                f,
                "the scope {cgroup} holds this process (in {own}); refusing it, so that the caller \
                 is never killed with it"
            ),
            HandleError::OtherUsers { cgroup, owner, me } => write!(
                f,
                "the scope {cgroup} belongs to uid {owner}, not to this user (uid {me}); refusing it"
            ),
            HandleError::NotInScope { pid, unit, cgroup } => {
                write!(f, "process {pid} is not in {unit} (its cgroup is {cgroup})")
            }
            HandleError::NotFound { unit } => write!(f, "scope {unit} is not running"),
            HandleError::NoCgroup2 => f.write_str("no cgroup2 hierarchy is mounted"),
            HandleError::InvalidPid { pid } => intake::BadInput::Pid(*pid).fmt(f),
            HandleError::Manager(why) => write!(f, "the user manager could not say: {why}"),
            HandleError::TimedOut { waited, remaining } => write!(
                f,
                "{} process(es) still in the scope after {} ms: {remaining:?}",
                remaining.len(),
                waited.as_millis()
            ),
            HandleError::Io(e) => write!(f, "cgroup access failed: {e}"),
        }
    }
}

impl std::error::Error for HandleError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HandleError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for HandleError {
    fn from(e: io::Error) -> Self {
        HandleError::Io(e)
    }
}

impl From<CgroupError> for HandleError {
    fn from(e: CgroupError) -> Self {
        match e {
            CgroupError::NoCgroup2 => HandleError::NoCgroup2,
            CgroupError::Io(e) => HandleError::Io(e),
        }
    }
}

/// `pid` as a process id, or why it is none (the handles' constructors take it as `u32`).
fn checked(pid: u32) -> Result<u32, HandleError> {
    intake::pid(pid.into()).map_err(|_| HandleError::InvalidPid { pid: pid.into() })
}

/// What the kernel says of a scope's usage; None where its controller is not enabled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScopeStats {
    /// `memory.current`, bytes.
    pub memory_current: Option<u64>,
    /// `memory.peak`, bytes.
    pub memory_peak: Option<u64>,
    /// `pids.current`.
    pub pids_current: Option<u64>,
}

/// How a kill empties a scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillMethod {
    /// `cgroup.kill` (Linux 5.14+): every process at once, as systemd-oomd does.
    CgroupKill,
    /// Freeze the cgroup, SIGKILL each process, thaw; repeated until empty. For older kernels.
    Signals,
}

/// Writes `cgroup.kill` of the cgroup open as `dir`: a scope that took its path since it was
/// opened is never the one killed.
fn write_cgroup_kill(dir: &OwnedFd) -> io::Result<()> {
    let kill = rustix::fs::openat(
        dir,
        "cgroup.kill",
        OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::io::write(&kill, b"1")?;
    Ok(())
}

/// A running scope of this library, found by unit name. It stays bound to that one scope: a
/// scope started later under the same name (a new cgroup at the same path) is not this one.
/// Clones share what the handle witnessed, so any of them can tell how the scope ended.
#[derive(Clone, Debug)]
pub struct ScopeHandle {
    unit: String,
    /// The scope's cgroup: its path in the hierarchy and its directory.
    cgroup: Cgroup,
    /// The cgroup's inode number, which the kernel never gives two cgroups in one boot.
    cgroup_id: u64,
    /// The open cgroup and its OOM kills, kept to tell how the scope ended.
    witness: Arc<Witness>,
    /// Whether a clone of this handle killed the scope (for kernels that take no mark).
    killed_here: Arc<AtomicBool>,
}

impl PartialEq for ScopeHandle {
    fn eq(&self, other: &Self) -> bool {
        self.unit == other.unit && self.cgroup == other.cgroup && self.cgroup_id == other.cgroup_id
    }
}

impl Eq for ScopeHandle {}

impl ScopeHandle {
    /// The scope `unit`, found through the cgroup of `pid` (a process launched in it), without
    /// asking the manager. Refused unless `unit` is one of this library's names and `pid` is in it.
    pub fn from_pid(unit: &str, pid: u32) -> Result<ScopeHandle, HandleError> {
        checked(pid)?;
        ensure_ours(unit)?;
        let relative = cgroup::of_process(pid)?;
        if cgroup::leaf_name(&relative) != Some(unit) {
            return Err(HandleError::NotInScope {
                pid,
                unit: unit.to_owned(),
                cgroup: relative,
            });
        }
        Self::at(unit, &relative, &own_system_bus())
    }

    /// The scope that process `pid` runs in, refused unless it is one of this library's.
    pub fn of_process(pid: u32) -> Result<ScopeHandle, HandleError> {
        checked(pid)?;
        let relative = cgroup::of_process(pid)?;
        let unit = cgroup::leaf_name(&relative)
            .filter(|n| parse_unit_name(n).is_some())
            .ok_or_else(|| HandleError::NotOurs {
                what: format!("the cgroup {relative} of process {pid}"),
            })?
            .to_owned();
        Self::at(&unit, &relative, &own_system_bus())
    }

    /// The scope `unit`, found by asking the user manager reachable with `env` for its
    /// `ControlGroup`, within `timeout`.
    pub fn from_manager(
        unit: &str,
        env: &[(OsString, OsString)],
        timeout: Duration,
    ) -> Result<ScopeHandle, HandleError> {
        ensure_ours(unit)?;
        // Private socket first, then the session bus, as `systemctl --user` of any era finds it.
        let route = Route::from_env(env, Fallback::UpTo256);
        let values = manager::properties(
            &route,
            &manager::unit_path(unit),
            &[(manager::SCOPE, "ControlGroup")],
            deadline_after(timeout),
        )
        .map_err(|e| HandleError::Manager(e.to_string()))?;
        let relative = values
            .first()
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_owned();
        if relative.is_empty() {
            return Err(HandleError::NotFound {
                unit: unit.to_owned(),
            });
        }
        Self::at(unit, &relative, env)
    }

    fn at(
        unit: &str,
        relative: &str,
        env: &[(OsString, OsString)],
    ) -> Result<ScopeHandle, HandleError> {
        if cgroup::leaf_name(relative) != Some(unit) {
            return Err(HandleError::NotOurs {
                what: format!("the cgroup {relative}"),
            });
        }
        ensure_not_the_callers(relative)?;
        let cgroup = Cgroup::at(relative)?;
        let not_found = || HandleError::NotFound {
            unit: unit.to_owned(),
        };
        let dir = rustix::fs::open(
            cgroup.dir(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|_| not_found())?;
        let meta = rustix::fs::fstat(&dir).map_err(|_| not_found())?;
        drop(dir);
        // A user's manager makes its scopes' cgroups in the subtree delegated to that user, so
        // they are owned by that user; another user's scope is not this caller's to handle.
        let me = rustix::process::geteuid().as_raw();
        if meta.st_uid != me {
            return Err(HandleError::OtherUsers {
                cgroup: relative.to_owned(),
                owner: meta.st_uid,
                me,
            });
        }
        let witness = Witness::keep(unit, relative, cgroup.dir(), meta.st_ino, env);
        Ok(ScopeHandle {
            unit: unit.to_owned(),
            cgroup,
            cgroup_id: meta.st_ino,
            witness: Arc::new(witness),
            killed_here: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The unit name.
    pub fn unit(&self) -> &str {
        &self.unit
    }

    /// The scope's cgroup directory.
    pub fn cgroup_dir(&self) -> &Path {
        self.cgroup.dir()
    }

    /// False once the scope has gone and another cgroup took its path (a scope started later
    /// under the same name): nothing in it is this handle's to list or kill.
    /// The scope's cgroup path (from the hierarchy's root) and the inode number it was made with.
    pub(crate) fn identity(&self) -> (&str, u64) {
        (self.cgroup.path(), self.cgroup_id)
    }

    fn is_still_the_same_scope(&self) -> bool {
        cgroup::inode_at(self.cgroup.dir()) == Some(self.cgroup_id)
    }

    /// Every process in the scope (and any cgroup below it); empty once the scope is gone,
    /// even if a scope of the same name has started since.
    pub fn pids(&self) -> Result<Vec<u32>, HandleError> {
        if !self.is_still_the_same_scope() {
            return Ok(Vec::new());
        }
        let mut pids = Vec::new();
        collect_pids(self.cgroup.dir(), &mut pids)?;
        pids.sort_unstable();
        pids.dedup();
        Ok(pids)
    }

    /// The scope's usage; a controller that is not enabled gives None, not an error, and so does
    /// a scope that is gone (even if another has started under its name).
    pub fn stats(&self) -> ScopeStats {
        let same = self.is_still_the_same_scope();
        let read = |name: &str| {
            fs::read_to_string(self.cgroup.dir().join(name))
                .ok()
                .filter(|_| same)
                .and_then(|text| text.trim().parse().ok())
        };
        ScopeStats {
            memory_current: read("memory.current"),
            memory_peak: read("memory.peak"),
            pids_current: read("pids.current"),
        }
    }

    /// The scope's pressure stall information: how much of the last 10, 60 and 300 seconds its
    /// tasks spent waiting for memory, CPU and I/O (`some` and `full`), and the total. None per
    /// resource where the kernel has no PSI, and for a scope that is gone.
    pub fn pressure(&self) -> ScopePressure {
        ScopePressure::read(self.cgroup.dir(), || self.is_still_the_same_scope())
    }

    /// Kills every process in the scope and waits, up to `timeout`, until it is empty. Uses
    /// `cgroup.kill` where the kernel has it, signals otherwise. Empty as the kernel counts it: a
    /// killed process leaves its cgroup during its exit, so it may not yet be a zombie when this
    /// returns, but it runs none of its own code again. Returns the processes that
    /// were in the scope when the kill began; none for a scope already empty, whose kill (a
    /// clean-up after the tool's exit) does nothing and is not how the scope ended.
    pub fn kill(&self, timeout: Duration) -> Result<Vec<u32>, HandleError> {
        let method = if self.cgroup.dir().join("cgroup.kill").exists() {
            KillMethod::CgroupKill
        } else {
            KillMethod::Signals
        };
        self.kill_with(method, timeout)
    }

    /// [`ScopeHandle::kill`] with a chosen method.
    pub fn kill_with(
        &self,
        method: KillMethod,
        timeout: Duration,
    ) -> Result<Vec<u32>, HandleError> {
        let deadline = deadline_after(timeout);
        ensure_ours(&self.unit)?;
        // Held for the kill: the mark and `cgroup.kill` go to this very cgroup, never to a scope
        // that took the path in between.
        let Some(dir) = cgroup::open_same(self.cgroup.dir(), self.cgroup_id) else {
            return Ok(Vec::new());
        };
        let before = self.pids()?;
        // Checked again now: the caller may have moved into the scope since the handle was made.
        if before.contains(&std::process::id()) {
            return Err(HandleError::HoldsCaller {
                cgroup: self.cgroup.path().to_owned(),
                own: cgroup::own()?,
            });
        }
        // A kill that finds the scope empty (a clean-up after the tool's exit) killed nothing and
        // leaves no mark: the scope ended however it ended.
        if before.is_empty() {
            return Ok(before);
        }
        // Marked first, so that however the scope is collected, every handle can tell it was this.
        Witness::mark_handle_kill(&dir);
        self.killed_here.store(true, Ordering::Release);
        match method {
            KillMethod::CgroupKill => match write_cgroup_kill(&dir) {
                Ok(()) => {}
                Err(e) if cgroup::vanished(&e) && !self.is_still_the_same_scope() => {}
                Err(e) => return Err(e.into()),
            },
            KillMethod::Signals => self.signal_until_empty(deadline)?,
        }
        self.wait_empty_until(deadline, timeout)?;
        Ok(before)
    }

    /// Freezes the cgroup (so nothing forks away mid-kill), SIGKILLs each process, thaws, and
    /// repeats until no process is left or the deadline passes.
    fn signal_until_empty(&self, deadline: Instant) -> Result<(), HandleError> {
        let freeze = self.cgroup.dir().join("cgroup.freeze");
        loop {
            let _ = fs::write(&freeze, "1");
            let pids = match self.pids() {
                Ok(pids) => pids,
                Err(e) => {
                    // Never left frozen.
                    let _ = fs::write(&freeze, "0");
                    return Err(e);
                }
            };
            for pid in pids
                .iter()
                .filter_map(|&p| Pid::from_raw(i32::try_from(p).ok()?))
            {
                // One may have exited already (ESRCH): the next round sees what is left.
                let _ = kill_process(pid, Signal::KILL);
            }
            let _ = fs::write(&freeze, "0");
            if pids.is_empty() || Instant::now() >= deadline {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// How the scope ended (`Running` while processes are in it), and what that answer rests on.
    /// Answers after the manager has collected the scope too, from what the handle kept since it
    /// was made. Blocks at most `timeout`: where oomd's mark is on the cgroup and its signal is
    /// heard but has not come yet, until oomd answers a ping sent after the mark (its answer
    /// comes after the signal of any kill it marked); where oomd killed the scope and no signal named
    /// the rule, to ask the user manager (reached with `env`) and the system manager which rules
    /// cover it (None where they cannot say). Once the scope has ended, the first answer is kept:
    /// every later ask, through this handle or a clone, gets it at once.
    pub fn ending(&self, env: &[(OsString, OsString)], timeout: Duration) -> Ending {
        let running = self.is_still_the_same_scope()
            && fs::read_to_string(self.cgroup.dir().join("cgroup.events"))
                .is_ok_and(|text| crate::kernel::oom_count::field(&text, "populated") == Some(1));
        self.witness.ending(
            running,
            self.killed_here.load(Ordering::Acquire),
            self.cgroup.path(),
            env,
            deadline_after(timeout),
        )
    }

    /// Waits up to `timeout` until no process is left in the scope.
    pub fn wait_empty(&self, timeout: Duration) -> Result<(), HandleError> {
        self.wait_empty_until(deadline_after(timeout), timeout)
    }

    fn wait_empty_until(&self, deadline: Instant, waited: Duration) -> Result<(), HandleError> {
        let mut pause = Duration::from_millis(1);
        loop {
            let remaining = self.pids()?;
            if remaining.is_empty() {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(HandleError::TimedOut { waited, remaining });
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

/// The system bus of this process's own environment, for a handle made without one: the bus
/// that oomd's signal is heard on.
fn own_system_bus() -> Vec<(OsString, OsString)> {
    let name = OsString::from("DBUS_SYSTEM_BUS_ADDRESS");
    std::env::var_os(&name)
        .map(|address| (name, address))
        .into_iter()
        .collect()
}

/// Refuses the cgroup `relative` when the calling process runs in it or below it.
fn ensure_not_the_callers(relative: &str) -> Result<(), HandleError> {
    let own = cgroup::own()?;
    if cgroup::holds(relative, &own) {
        return Err(HandleError::HoldsCaller {
            cgroup: relative.to_owned(),
            own,
        });
    }
    Ok(())
}

fn ensure_ours(unit: &str) -> Result<(), HandleError> {
    match parse_unit_name(unit) {
        Some(_) => Ok(()),
        None => Err(HandleError::NotOurs {
            what: format!("{unit:?}"),
        }),
    }
}

/// The cgroup2 path of `pid` (the `0::` line of /proc/PID/cgroup).
#[deprecated(
    since = "1.1.0",
    note = "a process's cgroup is not a handle's to say: read /proc/PID/cgroup"
)]
pub fn process_cgroup(pid: u32) -> Result<String, HandleError> {
    Ok(cgroup::of_process(pid)?)
}

/// The pids in the cgroup at `dir` and in every cgroup below it, read through a walk that holds a
/// few descriptors at any depth. A cgroup gone meanwhile holds none; any other failure to open,
/// list or read one (no permission, no descriptor left) is the answer: a kill must never take
/// what it could not see for an empty scope.
fn collect_pids(dir: &Path, pids: &mut Vec<u32>) -> Result<(), HandleError> {
    let mut failed = None;
    let walked = cgroup_tree::walk(dir, |cgroup, _, met| {
        if met == Met::Entered {
            match cgroup_tree::read_at(cgroup, "cgroup.procs") {
                Ok(text) => pids.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok())),
                Err(e) if cgroup::vanished(&e) => {}
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        true
    });
    match (failed, walked) {
        (Some(e), _) => Err(e.into()),
        (None, Err(e)) if cgroup::vanished(&e) => Ok(()),
        (None, Err(e)) => Err(e.into()),
        (None, Ok(())) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_is_a_whole_number_from_1_to_pid_max_on_every_constructor() {
        let unit = "synaps-tool-0123456789abcdef0123456789abcdef.scope";
        for pid in [0, intake::PID_MAX + 1, u32::MAX] {
            assert_eq!(
                HandleError::InvalidPid { pid: pid.into() }.to_string(),
                format!("pid must be a whole number from 1 to 2147483647, not {pid}")
            );
            assert!(matches!(
                ScopeHandle::of_process(pid),
                Err(HandleError::InvalidPid { .. })
            ));
            assert!(matches!(
                ScopeHandle::from_pid(unit, pid),
                Err(HandleError::InvalidPid { .. })
            ));
        }
    }

    #[test]
    fn names_that_are_not_ours_are_refused_before_anything_is_read() {
        for unit in [
            "app.slice",
            "session-1.scope",
            "synaps-tool-xyz.scope",
            "../../x",
        ] {
            assert!(
                matches!(
                    ScopeHandle::from_pid(unit, 1),
                    Err(HandleError::NotOurs { .. })
                ),
                "{unit}"
            );
            let refused = ScopeHandle::from_manager(unit, &[], Duration::from_secs(1));
            assert!(
                matches!(refused, Err(HandleError::NotOurs { .. })),
                "{unit}"
            );
        }
    }
}

//! What the oomd signal tests share: a bus standing for the system bus with a stand-in oomd on it,
//! the turn they take, and scopes to kill.

#![allow(dead_code)] // Each of the two test binaries uses a part of it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;
use std::time::Duration;

use crate::common::{cgroup_of, env_with, rig, spawn_scoped, told, BareBus, Standin, TempDir};
use rustix::fs::{setxattr, XattrFlags};
use synaps_scope::{Ending, Evidence, OomdRule, ScopeEnding, ScopeHandle};

pub const ASK: Duration = Duration::from_secs(3);
pub static TURN: Mutex<()> = Mutex::new(());

/// A bus standing for the system bus, and the environment that names it.
pub struct SystemBus {
    _dir: TempDir,
    pub bus: BareBus,
    pub env: Vec<(OsString, OsString)>,
}

impl SystemBus {
    pub fn start() -> SystemBus {
        let dir = TempDir::new("oomd-signal");
        let bus = BareBus::start(&dir);
        let env = env_with(&[("DBUS_SYSTEM_BUS_ADDRESS", &bus.address)]);
        SystemBus {
            _dir: dir,
            bus,
            env,
        }
    }
}

/// What each test starts from: its turn, a bus standing for the system bus, and on it a stand-in
/// oomd (`mode`: None for oomd 252 and later, `--before-252`).
pub struct Setup {
    pub _turn: std::sync::MutexGuard<'static, ()>,
    pub system: SystemBus,
    pub oomd: Standin,
}

/// A bus standing for the system bus with no oomd on it (yet), where the rig is there.
pub fn setup_without_oomd() -> Option<(std::sync::MutexGuard<'static, ()>, SystemBus)> {
    rig()?;
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    Some((turn, SystemBus::start()))
}

/// The setup, where the rig is there (`rig()` fails loudly where it is not asked to skip).
pub fn setup(mode: Option<&str>) -> Option<Setup> {
    rig()?;
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let system = SystemBus::start();
    let oomd = Standin::start(&system.bus.address, mode);
    Some(Setup {
        _turn: turn,
        system,
        oomd,
    })
}

/// `argv` in a scope of its own, with a handle made once it runs there (through the manager, with
/// `env` naming the system bus), and its cgroup path.
pub fn scoped(argv: &[&str], env: &[(OsString, OsString)]) -> (Child, ScopeHandle, String) {
    let (child, unit) = spawn_scoped(argv);
    let handle = ScopeHandle::from_manager(&unit, env, ASK).unwrap();
    let cgroup = cgroup_of(child.id());
    (child, handle, cgroup)
}

/// oomd's mark, then its kill, as oomd does them.
pub fn mark_and_kill(dir: &Path) {
    setxattr(dir, "user.oomd_ooms", b"1", XattrFlags::empty()).expect("cgroup2 takes user xattrs");
    std::fs::write(dir.join("cgroup.kill"), "1").unwrap();
}

/// oomd's whole kill of the cgroup at `dir`, from another thread, `busy` long between its kill
/// and its signal (the question asked meanwhile); join it for the stand-in back.
pub fn oomd_kill_busy(
    mut oomd: Standin,
    dir: PathBuf,
    cgroup: String,
    reason: &'static str,
    busy: Duration,
) -> std::thread::JoinHandle<Standin> {
    std::thread::spawn(move || {
        assert!(
            oomd.oomd_kill(&dir, &cgroup, reason, busy),
            "the cgroup was there"
        );
        oomd
    })
}

pub fn oomd_signal_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "synaps-oomd-sig")
        .count()
}

/// oomd's kill under `rule`, told by its signal.
pub fn oomds(rule: OomdRule) -> Ending {
    told(
        ScopeEnding::KilledByOomd { rule: Some(rule) },
        Evidence::OomdSignal,
    )
}

/// No kill known: the rig's tree has no memory controller to count the kernel's by.
pub const NO_KILL: Ending = Ending {
    how: ScopeEnding::Unknown,
    evidence: Evidence::Nothing,
};

//! The warning before systemd-oomd acts, where it cannot be given: a watch says why when it is
//! made, never a silent watch that cannot fire. Against the rig's real user manager, a real
//! `dbus-daemon` standing for the system bus, and the stand-in oomd of tests/oomd_signal.rs
//! (`tests/tools/oomd_standin.py`, named as such). The rig's cgroup2 tree has no memory controller
//! and no oomd acts on it: the warnings themselves are shown against the real oomd in the virtual
//! machine (scripts/test-vm.sh: each scoped case and the calm control).

mod common;

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{collected, env_with, rig, spawn_scoped, BareBus, TempDir};
use synaps_scope::{CannotWarnKind, OomdWatch, ScopeHandle};

const ASK: Duration = Duration::from_secs(3);

/// `sleep` in a scope of its own, and a handle on it.
fn scoped() -> (Child, ScopeHandle) {
    let (child, unit) = spawn_scoped(&["sleep", "100"]);
    let handle = ScopeHandle::from_pid(&unit, child.id()).unwrap();
    (child, handle)
}

fn done(child: Child, handle: &ScopeHandle) {
    handle.kill(ASK).unwrap();
    collected(child, handle);
}

/// The stand-in oomd on the bus at `address`: it owns `org.freedesktop.oom1`, and no system
/// manager is on that bus to say which rules cover anything.
fn standin_oomd(address: &OsString) -> Child {
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/oomd_standin.py");
    let mut child = Command::new("python3")
        .arg(tool)
        .arg(address)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the oomd stand-in");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        line.starts_with("ready :"),
        "the stand-in did not start: {line:?}"
    );
    child
}

/// A bus standing for the system bus with the stand-in oomd on it, and the environment naming it.
struct OomdBus {
    _bus: BareBus,
    address: OsString,
    oomd: Child,
    env: Vec<(OsString, OsString)>,
}

impl OomdBus {
    fn start(dir: &TempDir) -> Self {
        let bus = BareBus::start(dir);
        let oomd = standin_oomd(&bus.address);
        let env = env_with(&[("DBUS_SYSTEM_BUS_ADDRESS", &bus.address)]);
        let address = bus.address.clone();
        OomdBus {
            _bus: bus,
            address,
            oomd,
            env,
        }
    }
}

impl Drop for OomdBus {
    fn drop(&mut self) {
        let _ = self.oomd.kill();
        let _ = self.oomd.wait();
    }
}

#[test]
fn with_no_system_bus_the_watch_says_oomd_cannot_be_asked() {
    let Some(_rig) = rig() else { return };
    let (child, handle) = scoped();
    let env = env_with(&[(
        "DBUS_SYSTEM_BUS_ADDRESS",
        &OsString::from("unix:path=/nonexistent/system_bus_socket"),
    )]);
    let why = handle.watch_oomd(&env, ASK, |_| {}).unwrap_err();
    assert_eq!(why.kind, CannotWarnKind::NoOomd);
    assert_eq!(why.unit, handle.unit());
    assert!(
        why.message.contains("/nonexistent/system_bus_socket"),
        "{why}"
    );
    assert!(!why.oomd_may_act(), "no oomd can be reached, so none acts");
    let channel = OomdWatch::channel(std::slice::from_ref(&handle), &env, ASK);
    assert_eq!(channel.unwrap_err().kind, CannotWarnKind::NoOomd);
    done(child, &handle);
}

#[test]
fn with_no_oomd_on_the_system_bus_the_watch_says_it_is_not_running() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("oomd-warn");
    let bus = BareBus::start(&dir);
    let env = env_with(&[("DBUS_SYSTEM_BUS_ADDRESS", &bus.address)]);
    let (child, handle) = scoped();
    let why = handle.watch_oomd(&env, ASK, |_| {}).unwrap_err();
    assert_eq!(why.kind, CannotWarnKind::NoOomd);
    assert!(why.message.contains("not running"), "{why}");
    assert_eq!(why.kind.as_str(), "no-oomd");
    done(child, &handle);
}

#[test]
fn where_no_manager_says_which_rules_cover_the_scope_the_watch_says_so() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("oomd-warn");
    let bus = OomdBus::start(&dir);
    let (child, handle) = scoped();
    let started = std::time::Instant::now();
    let why = handle.watch_oomd(&bus.env, ASK, |_| {}).unwrap_err();
    assert!(
        started.elapsed() < ASK + Duration::from_secs(1),
        "held past its bound"
    );
    assert_eq!(why.kind, CannotWarnKind::CannotAsk);
    assert!(why.message.contains("-.slice could not say"), "{why}");
    assert!(
        why.oomd_may_act(),
        "oomd runs: it may act on the scope unseen"
    );
    drop(bus);
    done(child, &handle);
}

#[test]
fn a_silent_system_manager_is_named_as_the_one_that_did_not_answer() {
    // Issue 60, item 8: the system manager hangs, the user manager is healthy.
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("oomd-warn");
    let bus = OomdBus::start(&dir);
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/name_squatter.py");
    let mut squatter = Command::new("python3")
        .arg(tool)
        .arg(&bus.address)
        .arg("--silent")
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the squatter");
    let mut line = String::new();
    BufReader::new(squatter.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    let (child, handle) = scoped();
    let why = handle
        .watch_oomd(&bus.env, Duration::from_millis(500), |_| {})
        .unwrap_err();
    assert_eq!(why.kind, CannotWarnKind::CannotAsk);
    assert!(
        why.message.contains("the system manager did not answer"),
        "{why}"
    );
    assert!(!why.message.contains("user manager"), "{why}");
    let _ = squatter.kill();
    let _ = squatter.wait();
    drop(bus);
    done(child, &handle);
}

#[test]
fn a_watch_over_several_handles_says_why_of_the_first_when_it_can_warn_of_none() {
    let Some(_rig) = rig() else { return };
    let (gone_child, gone) = scoped();
    done(gone_child, &gone);
    let (child, handle) = scoped();
    let env = env_with(&[(
        "DBUS_SYSTEM_BUS_ADDRESS",
        &OsString::from("unix:path=/nonexistent/system_bus_socket"),
    )]);
    let why = OomdWatch::new(&[gone.clone(), handle.clone()], &env, ASK, |_| {}).unwrap_err();
    assert_eq!(why.kind, CannotWarnKind::ScopeGone);
    assert_eq!(why.unit, gone.unit());
    let none = OomdWatch::new(&[], &env, ASK, |_| {}).unwrap_err();
    assert_eq!(none.kind, CannotWarnKind::ScopeGone);
    assert!(none.message.contains("no scope was given"), "{none}");
    done(child, &handle);
}

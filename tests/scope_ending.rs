//! How a scope ended, told by a handle made while it ran and asked only after the tool's exit
//! status is in and the manager has collected the scope (its cgroup removed), against a real
//! manager. The rig's cgroup2 tree has no memory controller, so an ending without a mark is
//! `Unknown` here; the virtual machine (scripts/test-vm.sh) shows `on-its-own`, `kernel-oom` and
//! oomd's real kills with real controllers.

mod common;

use std::process::Child;
use std::time::Duration;

use common::{rig, spawn_scoped, wait_for};
use synaps_scope::{inherited_env, ScopeEnding, ScopeHandle};

const ASK: Duration = Duration::from_secs(3);

/// `argv` in a scope of its own, with a handle made once it runs there.
fn scoped(argv: &[&str]) -> (Child, ScopeHandle) {
    let (child, unit) = spawn_scoped(argv);
    let handle = ScopeHandle::from_pid(&unit, child.id()).unwrap();
    (child, handle)
}

/// Waits for the child's exit status, then until the manager has removed the scope's cgroup.
fn collected(mut child: Child, handle: &ScopeHandle) -> std::process::ExitStatus {
    let status = child.wait().unwrap();
    wait_for("the manager to collect the scope", || {
        !handle.cgroup_dir().exists()
    });
    status
}

#[test]
fn a_running_scope_says_so() {
    let Some(_rig) = rig() else { return };
    let (child, handle) = scoped(&["sleep", "100"]);
    assert_eq!(handle.ending(&inherited_env(), ASK), ScopeEnding::Running);
    handle.kill(ASK).unwrap();
    collected(child, &handle);
}

#[test]
fn a_handles_kill_is_told_by_every_handle_after_the_scope_is_collected() {
    let Some(_rig) = rig() else { return };
    let (child, handle) = scoped(&["sh", "-c", "sleep 100 & exec sleep 100"]);
    // Another handle on the same scope, as another process of the caller's would make.
    let other = ScopeHandle::of_process(child.id()).unwrap();
    handle.kill(ASK).unwrap();
    let status = collected(child, &handle);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert_eq!(
        handle.ending(&inherited_env(), ASK),
        ScopeEnding::KilledByHandle
    );
    assert_eq!(
        other.ending(&inherited_env(), ASK),
        ScopeEnding::KilledByHandle
    );
}

#[test]
fn an_ending_without_a_mark_or_a_memory_controller_is_unknown_never_a_guess() {
    let Some(_rig) = rig() else { return };
    let (mut child, handle) = scoped(&["sh", "-c", "read _; exit 3"]);
    let memory = std::fs::read_to_string(handle.cgroup_dir().join("cgroup.controllers"))
        .unwrap_or_default()
        .split_whitespace()
        .any(|c| c == "memory");
    drop(child.stdin.take());
    let status = collected(child, &handle);
    assert_eq!(status.code(), Some(3));
    let expected = if memory {
        ScopeEnding::EndedOnItsOwn
    } else {
        ScopeEnding::Unknown
    };
    assert_eq!(handle.ending(&inherited_env(), ASK), expected);
}

/// systemd-oomd marks a cgroup (`user.oomd_ooms`) before it kills every process in it. Played
/// here exactly so, on a scope of the rig's manager; the real oomd is in the virtual machine.
#[test]
fn a_cgroup_marked_by_oomd_and_killed_is_told_as_oomds_kill_after_collection() {
    let Some(_rig) = rig() else { return };
    let (child, handle) = scoped(&["sleep", "100"]);
    let dir = handle.cgroup_dir();
    rustix::fs::setxattr(dir, "user.oomd_ooms", b"1", rustix::fs::XattrFlags::empty())
        .expect("cgroup2 takes user xattrs (Linux 5.7+)");
    std::fs::write(dir.join("cgroup.kill"), "1").unwrap();
    collected(child, &handle);
    // The rig's managers set no oomd rule and there is no system bus: the rule cannot be told.
    assert_eq!(
        handle.ending(&inherited_env(), ASK),
        ScopeEnding::KilledByOomd { rule: None }
    );
}

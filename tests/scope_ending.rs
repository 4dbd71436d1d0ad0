//! How a scope ended, told by a handle made while it ran and asked only after the tool's exit
//! status is in and the manager has collected the scope (its cgroup removed), against a real
//! manager, with what each answer rests on. The rig's cgroup2 tree has no memory controller, so an
//! ending without evidence of a kill is `Unknown` here; the virtual machine (scripts/test-vm.sh)
//! shows `on-its-own`, `kernel-oom` and oomd's real kills with real controllers. systemd-oomd is
//! played here by the test itself (its marks, written as oomd writes them, then a kill): a stand-in,
//! named as such. There is no system bus on the rig, so oomd's signal cannot be heard (see
//! tests/oomd_signal.rs for a stand-in oomd on a bus).

mod common;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Child;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use common::{cgroup_is_empty, collected, rig, signal, spawn_scoped, told, wait_for};
use rustix::fs::{setxattr, XattrFlags};
use rustix::process::Signal;
use synaps_scope::{inherited_env, Ending, Evidence, ScopeEnding, ScopeHandle};

const ASK: Duration = Duration::from_secs(3);

/// `argv` in a scope of its own, with a handle made once it runs there.
fn scoped(argv: &[&str]) -> (Child, ScopeHandle) {
    let (child, unit) = spawn_scoped(argv);
    let handle = ScopeHandle::from_pid(&unit, child.id()).unwrap();
    (child, handle)
}

/// An ending with no evidence of a kill: on its own where the kernel's count is there, unknown
/// on this machine's tree, which has no memory controller.
fn no_kill(handle: &ScopeHandle) -> Ending {
    let memory = std::fs::read_to_string(handle.cgroup_dir().join("cgroup.controllers"))
        .unwrap_or_default()
        .split_whitespace()
        .any(|c| c == "memory");
    if memory {
        told(ScopeEnding::EndedOnItsOwn, Evidence::MemoryEvents)
    } else {
        told(ScopeEnding::Unknown, Evidence::Nothing)
    }
}

/// Waits until the child runs as `command` itself: the wrapper in front of it is done with the
/// manager, which may then be stopped without holding the launch up.
fn running_as(child: &Child, command: &str) {
    wait_for("the tool to run", || {
        std::fs::read_to_string(format!("/proc/{}/comm", child.id()))
            .is_ok_and(|comm| comm.trim() == command)
    });
}

/// Writes the extended attribute `name` on the cgroup `dir`, as oomd (root) or the tool (the
/// cgroup's owner) can.
fn mark(dir: &Path, name: &str, value: &[u8]) {
    setxattr(dir, name, value, XattrFlags::empty())
        .expect("cgroup2 takes user xattrs (Linux 5.7+)");
}

/// The rig's manager, stopped while this lives: a scope that empties meanwhile stays uncollected,
/// as in the moment between a tool's exit and the manager's clean-up. Tests running side by side
/// share the stop: the manager continues when the last of them is done. Should the test process
/// die first, a watchdog continues it after 5 s.
struct ManagerStopped;

/// How many tests hold the manager stopped, its pid, and the watchdog of the stop.
static STOPPED: Mutex<Option<(usize, u32, Child)>> = Mutex::new(None);

impl ManagerStopped {
    fn now() -> ManagerStopped {
        let mut stopped = STOPPED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((holders, _, _)) = stopped.as_mut() {
            *holders += 1;
            return ManagerStopped;
        }
        let runtime = std::env::var_os("XDG_RUNTIME_DIR").expect("the rig sets XDG_RUNTIME_DIR");
        let socket = UnixStream::connect(Path::new(&runtime).join("systemd/private")).unwrap();
        let pid = rustix::net::sockopt::socket_peercred(&socket)
            .unwrap()
            .pid
            .as_raw_nonzero()
            .get()
            .unsigned_abs();
        let watchdog = std::process::Command::new("setsid")
            .args(["sh", "-c", &format!("sleep 5; kill -CONT {pid}")])
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap();
        signal(pid, Signal::STOP);
        *stopped = Some((1, pid, watchdog));
        ManagerStopped
    }
}

impl Drop for ManagerStopped {
    fn drop(&mut self) {
        let mut stopped = STOPPED.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((holders, _, _)) = stopped.as_mut() else {
            return;
        };
        *holders -= 1;
        if *holders == 0 {
            let (_, pid, mut watchdog) = stopped.take().unwrap();
            signal(pid, Signal::CONT);
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
    }
}

/// Plays oomd's kill of `target` (the scope's cgroup, or one below it that holds every process
/// left in the scope): the mark `value` as `user.oomd_ooms`, then the kill, as oomd 251 and later
/// do, with the rig's manager stopped until this process's watcher has taken in the scope's end
/// (it then holds the scope's directory open), and with it the mark's notice, which came first.
/// The watcher reads a mark when the kernel tells it; a thread starved for longer than the manager
/// takes to remove an emptied scope finds the cgroup gone, and the answer is `unknown`, never a
/// wrong one (docs/guarantees.md): that race is the machine's load, kept out of what is shown here.
fn oomd_kills(handle: &ScopeHandle, target: &Path, value: &[u8]) {
    let scope = handle.cgroup_dir();
    let _stopped = ManagerStopped::now();
    mark(target, "user.oomd_ooms", value);
    std::fs::write(target.join("cgroup.kill"), "1").unwrap();
    wait_for("the watcher to hold the emptied scope's directory", || {
        holds_directory(scope)
    });
}

/// Whether this process holds `dir` open.
fn holds_directory(dir: &Path) -> bool {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|to| to == dir))
}

#[test]
fn a_running_scope_says_so() {
    let Some(_rig) = rig() else { return };
    let (child, handle) = scoped(&["sleep", "100"]);
    assert_eq!(
        handle.ending(&inherited_env(), ASK),
        told(ScopeEnding::Running, Evidence::CgroupEvents)
    );
    handle.kill(ASK).unwrap();
    collected(child, &handle);
}

#[test]
fn a_handles_kill_is_told_by_every_handle_after_the_scope_is_collected() {
    let Some(_rig) = rig() else { return };
    let (child, handle) = scoped(&["sh", "-c", "sleep 100 & exec sleep 100"]);
    // Another handle on the same scope, as another process of the caller's would make.
    let other = ScopeHandle::of_process(child.id()).unwrap();
    let clone = handle.clone();
    wait_for("both sleeps to run", || handle.pids().unwrap().len() == 2);
    assert_eq!(handle.kill(ASK).unwrap().len(), 2);
    let status = collected(child, &handle);
    assert_eq!(status.signal(), Some(9));
    let own = told(ScopeEnding::KilledByHandle, Evidence::OwnKill);
    assert_eq!(handle.ending(&inherited_env(), ASK), own);
    assert_eq!(clone.ending(&inherited_env(), ASK), own);
    // The other handle knows of the kill by its mark alone, which the tool could have written.
    let marked = other.ending(&inherited_env(), ASK);
    assert_eq!(
        marked,
        told(ScopeEnding::KilledByHandle, Evidence::KillMark)
    );
    assert!(marked.evidence.forgeable());
}

/// A daemon reaps its tool, then kills the scope to sweep up whatever it left: in the moment before
/// the manager collects the empty scope, the kill finds nothing, and the scope ended on its own.
#[test]
fn a_clean_up_kill_of_an_empty_scope_is_not_a_kill() {
    let Some(_rig) = rig() else { return };
    let (mut child, handle) = scoped(&["sh", "-c", "read _; exit 0"]);
    let expected = no_kill(&handle);
    running_as(&child, "sh");
    {
        let _stopped = ManagerStopped::now();
        drop(child.stdin.take());
        assert_eq!(child.wait().unwrap().code(), Some(0));
        assert!(
            handle.cgroup_dir().exists(),
            "the stopped manager left the scope"
        );
        assert_eq!(
            handle.kill(ASK).unwrap(),
            Vec::<u32>::new(),
            "the kill found nobody"
        );
    }
    wait_for("the manager to collect the scope", || {
        !handle.cgroup_dir().exists()
    });
    assert_eq!(handle.ending(&inherited_env(), ASK), expected);
}

#[test]
fn an_ending_without_evidence_of_a_kill_is_unknown_without_a_memory_controller() {
    let Some(_rig) = rig() else { return };
    let (mut child, handle) = scoped(&["sh", "-c", "read _; exit 3"]);
    let expected = no_kill(&handle);
    drop(child.stdin.take());
    let status = collected(child, &handle);
    assert_eq!(status.code(), Some(3));
    assert_eq!(handle.ending(&inherited_env(), ASK), expected);
}

/// systemd-oomd 251 and later marks a cgroup (`user.oomd_ooms`) before it kills every process in
/// it, and again after (`user.oomd_kill`). Played here exactly so (a stand-in).
#[test]
fn a_cgroup_marked_by_oomd_and_killed_is_told_as_oomds_kill_on_a_mark() {
    let Some(_rig) = rig() else { return };
    let (child, handle) = scoped(&["sleep", "100"]);
    running_as(&child, "sleep");
    oomd_kills(&handle, handle.cgroup_dir(), b"1");
    collected(child, &handle);
    // No system bus here: oomd's signal is not heard, the system manager cannot say which rules
    // cover the scope, so neither can the rule be told.
    let ending = handle.ending(&inherited_env(), ASK);
    assert_eq!(
        ending,
        told(ScopeEnding::KilledByOomd { rule: None }, Evidence::OomdMark)
    );
    assert!(ending.evidence.forgeable());
}

/// systemd-oomd before 251 (Ubuntu 22.04's 249) writes only `user.oomd_kill`, after the kill.
/// Played with the manager stopped so that the cgroup is still there to be marked, as it is for
/// oomd, whose write follows its kill at once.
#[test]
fn oomd_before_251_is_told_by_its_after_kill_mark() {
    let Some(_rig) = rig() else { return };
    let (child, handle) = scoped(&["sh", "-c", "sleep 100 & exec sleep 100"]);
    let dir = handle.cgroup_dir().to_owned();
    running_as(&child, "sleep");
    {
        let _stopped = ManagerStopped::now();
        std::fs::write(dir.join("cgroup.kill"), "1").unwrap();
        wait_for("the kill to empty the scope", || {
            cgroup_is_empty(&dir) == Some(true)
        });
        mark(&dir, "user.oomd_kill", b"2");
    }
    collected(child, &handle);
    assert_eq!(
        handle.ending(&inherited_env(), ASK),
        told(ScopeEnding::KilledByOomd { rule: None }, Evidence::OomdMark)
    );
}

/// A mark's value is oomd's count; one longer than any count (garbage a tool wrote first, which
/// oomd then cannot add to) is still a mark.
#[test]
fn a_long_mark_is_still_a_mark() {
    let Some(_rig) = rig() else { return };
    let (child, handle) = scoped(&["sleep", "100"]);
    running_as(&child, "sleep");
    oomd_kills(&handle, handle.cgroup_dir(), &[b'x'; 40]);
    collected(child, &handle);
    assert_eq!(
        handle.ending(&inherited_env(), ASK).how,
        ScopeEnding::KilledByOomd { rule: None }
    );
}

/// oomd kills leaf cgroups: a tool that made a cgroup below its scope and moved into it is killed
/// there, and the mark is on that cgroup, which the manager removes with the scope.
#[test]
fn oomds_kill_of_a_cgroup_below_the_scope_is_told() {
    let Some(_rig) = rig() else { return };
    let (mut child, handle) = scoped(&[
        "sh",
        "-c",
        r#"read dir; mkdir "$dir/leaf" && echo $$ > "$dir/leaf/cgroup.procs" && exec sleep 100"#,
    ]);
    let leaf = handle.cgroup_dir().join("leaf");
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", handle.cgroup_dir().display()).unwrap();
    wait_for("the tool to move into its cgroup below the scope", || {
        cgroup_is_empty(&leaf) == Some(false)
    });
    oomd_kills(&handle, &leaf, b"1");
    collected(child, &handle);
    assert_eq!(
        handle.ending(&inherited_env(), ASK),
        told(ScopeEnding::KilledByOomd { rule: None }, Evidence::OomdMark)
    );
}

/// oomd kills the cgroup a tool made below its scope; the daemon then kills the scope to sweep up
/// the tool's other process, which was left in the scope itself: the kill found a process, yet
/// what ended the tool was oomd's, and that is what is told.
#[test]
fn an_oomd_kill_swept_up_by_a_handles_kill_is_still_oomds() {
    let Some(_rig) = rig() else { return };
    let (mut child, handle) = scoped(&[
        "sh",
        "-c",
        r#"read dir; sleep 100 & echo $! > "$dir/leaf/cgroup.procs"; exec sleep 100"#,
    ]);
    let leaf = handle.cgroup_dir().join("leaf");
    std::fs::create_dir(&leaf).unwrap();
    writeln!(
        child.stdin.take().unwrap(),
        "{}",
        handle.cgroup_dir().display()
    )
    .unwrap();
    wait_for("the worker to move below the scope", || {
        cgroup_is_empty(&leaf) == Some(false)
    });
    mark(&leaf, "user.oomd_ooms", b"1");
    std::fs::write(leaf.join("cgroup.kill"), "1").unwrap();
    wait_for("oomd's kill to empty the cgroup below", || {
        cgroup_is_empty(&leaf) == Some(true)
    });
    assert_eq!(
        handle.kill(ASK).unwrap(),
        vec![child.id()],
        "the sweep found the tool"
    );
    collected(child, &handle);
    assert_eq!(
        handle.ending(&inherited_env(), ASK),
        told(ScopeEnding::KilledByOomd { rule: None }, Evidence::OomdMark)
    );
}

/// A tool that writes a handle's kill mark and exits 0 reads as a handle's kill, on evidence the
/// answer says is forgeable; the handle that killed nothing knows it did not.
#[test]
fn a_forged_kill_mark_says_it_is_forgeable() {
    let Some(_rig) = rig() else { return };
    let (mut child, handle) = scoped(&["sh", "-c", "read _; exit 0"]);
    mark(handle.cgroup_dir(), "user.synaps_kill", b"1");
    drop(child.stdin.take());
    collected(child, &handle);
    let ending = handle.ending(&inherited_env(), ASK);
    assert_eq!(
        ending,
        told(ScopeEnding::KilledByHandle, Evidence::KillMark)
    );
    assert!(ending.evidence.forgeable());
}

/// Whether this process's inotify instance watches the inode `ino` (its `fdinfo` lists each watch
/// with the inode number in hexadecimal).
fn watched(ino: u64) -> bool {
    let wanted = format!(" ino:{ino:x} ");
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|to| to == Path::new("anon_inode:inotify"))
        })
        .filter_map(|fd| {
            std::fs::read_to_string(format!(
                "/proc/self/fdinfo/{}",
                fd.file_name().to_string_lossy()
            ))
            .ok()
        })
        .any(|info| {
            info.lines()
                .any(|line| line.starts_with("inotify ") && line.contains(&wanted))
        })
}

/// What watches an empty scope goes with its last handle, before the manager removes it (a
/// process that exits with a watch in place waits out the kernel's teardown of it); one handle
/// among others leaves it to the rest; and a scope that still runs stays watched without a handle
/// (a cgroup made and removed below it meanwhile, oomd's mark on it, is learnt for a later one).
#[test]
fn the_last_handle_on_an_empty_scope_takes_its_watches_away() {
    use std::os::unix::fs::MetadataExt;
    let Some(_rig) = rig() else { return };
    let (mut running, handle) = scoped(&["sleep", "100"]);
    let ino = std::fs::metadata(handle.cgroup_dir()).unwrap().ino();
    drop(handle);
    assert!(
        watched(ino),
        "a running scope stays watched without a handle"
    );
    running.kill().unwrap();
    running.wait().unwrap();

    let (mut child, handle) = scoped(&["sh", "-c", "read _; exit 0"]);
    running_as(&child, "sh");
    let ino = std::fs::metadata(handle.cgroup_dir()).unwrap().ino();
    let other = ScopeHandle::of_process(child.id()).unwrap();
    let clone = other.clone();
    assert!(watched(ino), "the running scope is watched");
    let stopped = ManagerStopped::now();
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    wait_for("the scope to empty", || {
        cgroup_is_empty(handle.cgroup_dir()) == Some(true)
    });
    drop(handle);
    drop(other);
    assert!(watched(ino), "a clone still asks about the scope");
    assert_eq!(clone.ending(&inherited_env(), ASK), no_kill(&clone));
    drop(clone);
    assert!(
        !watched(ino),
        "no handle is left on the empty scope, so no watch"
    );
    drop(stopped);
}

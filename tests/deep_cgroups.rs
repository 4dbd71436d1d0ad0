//! A tool that nests cgroups deep below its scope (issue 60, item 6): 2,000 levels, the deepest
//! path longer than the kernel takes by path, a process at the bottom, and the host held to 1,024
//! descriptors (systemd's default for a service). The handle finds that process and kills it,
//! by signals (the walk repeated until the scope is empty) and by `cgroup.kill`; the watch on the
//! scope's cgroups walks them too. Each walk holds a few descriptors, whatever the depth: the walk
//! that kept a directory open a level ran out of descriptors past about 1,000 and saw nothing below.

mod common;

use std::os::fd::{AsFd, OwnedFd};
use std::process::{Child, Command};
use std::time::Duration;

use common::{rig, spawn_scoped};
use rustix::fs::{Mode, OFlags};
use rustix::process::{Resource, Rlimit};
use synaps_scope::{KillMethod, ScopeHandle};

const DEPTH: usize = 2000;

fn open_dir(at: impl AsFd, name: &str) -> OwnedFd {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    rustix::fs::openat(at, name, flags, Mode::empty()).unwrap()
}

/// `DEPTH` cgroups nested below the one open as `top`, each made from its parent; the deepest.
fn nest(top: &OwnedFd) -> OwnedFd {
    let mut here = open_dir(top, ".");
    for _ in 0..DEPTH {
        rustix::fs::mkdirat(&here, "d", Mode::from_raw_mode(0o755)).unwrap();
        here = open_dir(&here, "d");
    }
    here
}

/// Removes the cgroups `nest` made, deepest first, climbing from `deepest` through `..`.
fn unnest(deepest: OwnedFd) {
    let mut here = deepest;
    for _ in 0..DEPTH {
        let parent = open_dir(&here, "..");
        rustix::fs::unlinkat(&parent, "d", rustix::fs::AtFlags::REMOVEDIR).unwrap();
        here = parent;
    }
}

fn descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// A `sleep` moved into the cgroup open as `dir`.
fn sleeper_in(dir: &OwnedFd) -> Child {
    let child = Command::new("sleep").arg("120").spawn().unwrap();
    let procs = rustix::fs::openat(dir, "cgroup.procs", OFlags::WRONLY, Mode::empty()).unwrap();
    rustix::io::write(&procs, child.id().to_string().as_bytes()).unwrap();
    child
}

/// The processes and the cgroups a case made, killed and removed however it ends (a failed
/// case must not leave the rig a tree it cannot remove).
struct Made {
    tool: Child,
    bottom: Child,
    deepest: Option<OwnedFd>,
}

impl Drop for Made {
    fn drop(&mut self) {
        for child in [&mut self.tool, &mut self.bottom] {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(deepest) = self.deepest.take() {
            // The processes leave their cgroups as they die.
            std::thread::sleep(Duration::from_millis(200));
            unnest(deepest);
        }
    }
}

/// Descriptors opened until the next would be past every one open: then a limit of one past
/// the last leaves exactly one descriptor to open.
fn fill_descriptors() -> (Vec<std::fs::File>, u64) {
    let highest = |fds: &[std::fs::File]| {
        use std::os::fd::AsRawFd;
        fds.last().map_or(0, |f| f.as_raw_fd())
    };
    let open = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|fd| fd.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .max()
        .unwrap();
    let mut fillers = Vec::new();
    while highest(&fillers) <= open {
        fillers.push(std::fs::File::open("/dev/null").unwrap());
    }
    let last = highest(&fillers);
    (fillers, u64::try_from(last).unwrap() + 2)
}

/// A scoped tool with a `sleep` `DEPTH` cgroups below it: both found and killed by `method`.
fn killed_both(method: KillMethod) {
    let (tool, unit) = spawn_scoped(&["sleep", "120"]);
    let handle = ScopeHandle::from_pid(&unit, tool.id()).unwrap();
    let top = open_dir(rustix::fs::CWD, handle.cgroup_dir().to_str().unwrap());
    let deepest = nest(&top);
    let bottom = sleeper_in(&deepest);
    let mut made = Made {
        tool,
        bottom,
        deepest: Some(deepest),
    };
    // The walks below run held to 1,024 descriptors, as a service is by default.
    let held = Rlimit {
        current: Some(1024),
        maximum: rustix::process::getrlimit(Resource::Nofile).maximum,
    };
    rustix::process::setrlimit(Resource::Nofile, held).unwrap();
    let before = descriptors();
    let mut pids = handle.pids().unwrap();
    pids.sort_unstable();
    let mut both = vec![made.tool.id(), made.bottom.id()];
    both.sort_unstable();
    assert_eq!(pids, both, "the process {DEPTH} cgroups down is found");
    // Far fewer than the levels walked (the library's watching thread may hold one meanwhile).
    let after = descriptors();
    assert!(after < before + 8, "{after} descriptors, {before} before");
    // With one descriptor left, what the walk cannot see is an error, never an empty scope.
    let (fillers, one_left) = fill_descriptors();
    let starved = Rlimit {
        current: Some(one_left),
        maximum: held.maximum,
    };
    rustix::process::setrlimit(Resource::Nofile, starved).unwrap();
    let blind = handle.pids();
    rustix::process::setrlimit(Resource::Nofile, held).unwrap();
    drop(fillers);
    assert!(
        blind.is_err(),
        "a walk out of descriptors answered {blind:?}"
    );
    let mut killed = handle.kill_with(method, Duration::from_secs(10)).unwrap();
    killed.sort_unstable();
    assert_eq!(killed, both, "{method:?}");
    for child in [&mut made.tool, &mut made.bottom] {
        assert!(child.wait().unwrap().code().is_none(), "killed by a signal");
    }
    let after = descriptors();
    assert!(after < before + 8, "{after} descriptors, {before} before");
    drop(made);
    // The manager could not remove the scope's cgroup while cgroups were nested in it (its
    // processes died first): it is removed here, as the manager would have.
    let _ = std::fs::remove_dir(handle.cgroup_dir());
}

#[test]
fn a_process_two_thousand_cgroups_below_the_scope_is_found_and_killed_with_few_descriptors() {
    let Some(_rig) = rig() else { return };
    killed_both(KillMethod::Signals);
    killed_both(KillMethod::CgroupKill);
}

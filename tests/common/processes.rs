//! Process helpers of the tests: a process's cgroup, a child launched in a scope of its own,
//! signals, zombies, the systemd-run processes of a runtime directory.

use std::ffi::OsString;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use synaps_scope::{
    inherited_env, launcher_for_env, set_env, Ending, Evidence, ScopeEnding, ScopeHandle,
};

pub use rustix::process::Signal;
use rustix::process::{kill_process, Pid};

/// The `0::` line of /proc/PID/cgroup, without the prefix.
pub fn cgroup_of(pid: u32) -> String {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("")
        .to_owned()
}

/// Waits up to 10 s until `done`, failing the test with `what` after that.
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Spawns `argv` wrapped, as the leader of a new process group, once it is in its scope; returns
/// the child and its unit. The child's stdin is a pipe from the test, so a tool that ends on its own
/// can wait (`read _`) until the test has looked at its scope: one that ended first would have had
/// its scope collected, and its `/proc/PID/cgroup` say `(deleted)`.
pub fn spawn_scoped(argv: &[&str]) -> (Child, String) {
    let env = inherited_env();
    let launcher = launcher_for_env(&env).unwrap().expect("scoped");
    let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
    let wrapped = launcher.wrap(&argv, &env, None);
    let unit = wrapped.unit.unwrap();
    let mut cmd = Command::new(&wrapped.argv[0]);
    cmd.args(&wrapped.argv[1..])
        .process_group(0)
        .stdin(std::process::Stdio::piped());
    set_env(&mut cmd, &env);
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    wait_for("the child to enter its scope", || {
        cgroup_of(pid).ends_with(&unit)
    });
    (child, unit)
}

/// Sends `signal` to `pid`.
pub fn signal(pid: u32, signal: Signal) {
    let target = Pid::from_raw(i32::try_from(pid).unwrap()).expect("a pid is positive");
    kill_process(target, signal).unwrap_or_else(|e| panic!("{signal:?} to {pid}: {e}"));
}

/// Processes whose parent is this process and that are zombies.
pub fn zombie_children() -> Vec<u32> {
    let me = std::process::id();
    processes()
        .into_iter()
        .filter(|(_, status)| {
            status.lines().any(|l| l == format!("PPid:\t{me}"))
                && status.lines().any(|l| l.starts_with("State:\tZ"))
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// Live systemd-run processes whose environment names `runtime_dir` as XDG_RUNTIME_DIR.
pub fn systemd_runs_for(runtime_dir: &Path) -> Vec<u32> {
    let needle = format!("XDG_RUNTIME_DIR={}", runtime_dir.display()).into_bytes();
    processes()
        .into_iter()
        .filter(|(pid, status)| {
            status.lines().any(|l| l == "Name:\tsystemd-run")
                && fs::read(format!("/proc/{pid}/environ"))
                    .map(|env| env.split(|&b| b == 0).any(|e| e == needle.as_slice()))
                    .unwrap_or(false)
        })
        .map(|(pid, _)| pid)
        .collect()
}

fn processes() -> Vec<(u32, String)> {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, fs::read_to_string(format!("/proc/{pid}/status")).ok()?)))
        .collect()
}

/// Waits for the child's exit status, then until the manager has removed its scope's cgroup.
pub fn collected(mut child: Child, handle: &ScopeHandle) -> std::process::ExitStatus {
    let status = child.wait().unwrap();
    wait_for("the manager to collect the scope", || {
        !handle.cgroup_dir().exists()
    });
    status
}

/// Whether the cgroup at `dir` holds no process; None where it cannot be read.
pub fn cgroup_is_empty(dir: &Path) -> Option<bool> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .ok()
        .map(|procs| procs.trim().is_empty())
}

/// The ending `how`, told by `evidence`.
pub fn told(how: ScopeEnding, evidence: Evidence) -> Ending {
    Ending { how, evidence }
}

//! What the host (this test's process) reads, runs and counts: the programs under test, its own
//! descriptors and threads, cgroups and processes, systemctl, and what each operation did.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use synaps_scope::set_env;

use crate::common::TempDir;

/// The programs under test: this workspace's, or another tree's (`SYNAPS_RULES_TREE`, built
/// there: `scripts/soak.sh --tree DIR` builds it), to show what the rules find in an older release.
pub struct Programs {
    pub cli: PathBuf,
    pub exec: PathBuf,
    /// `examples/c/spawn.c` of that tree, built against its C library.
    pub c_host: PathBuf,
    _dir: TempDir,
}

impl Programs {
    pub fn find() -> Programs {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
        let tree = std::env::var_os("SYNAPS_RULES_TREE")
            .filter(|t| !t.is_empty())
            .map_or_else(|| workspace.to_owned(), PathBuf::from);
        if tree == workspace {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let built = Command::new(cargo)
                .args([
                    "build",
                    "-q",
                    "-p",
                    "synaps-scope-cli",
                    "-p",
                    "synaps-scope-exec",
                ])
                .args(["-p", "synaps-scope-ffi"])
                .current_dir(workspace)
                .status()
                .expect("cargo runs");
            assert!(
                built.success(),
                "cargo build of the programs under test failed"
            );
        }
        let bin = tree.join("target/debug");
        let dir = TempDir::new("rules-programs");
        let c_host = dir.path().join("spawn");
        let cc = Command::new("gcc")
            .arg(tree.join("examples/c/spawn.c"))
            .arg("-I")
            .arg(tree.join("include"))
            .arg("-L")
            .arg(&bin)
            .arg(format!("-Wl,-rpath,{}", bin.display()))
            .args(["-lsynaps_scope_ffi", "-o"])
            .arg(&c_host)
            .output()
            .expect("gcc runs");
        assert!(cc.status.success(), "the C host does not build: {cc:?}");
        let programs = Programs {
            cli: bin.join("synaps-scope"),
            exec: bin.join("synaps-scope-exec"),
            c_host,
            _dir: dir,
        };
        for program in [&programs.cli, &programs.exec] {
            assert!(program.exists(), "{} is not built", program.display());
        }
        programs
    }
}

/// How many times each operation acted (a kill that found no running scope did not), and how many
/// launches ran scoped and unscoped, over every schedule of the run: told at its end, so that a
/// run whose operations never act is seen.
static ACTED: std::sync::Mutex<std::collections::BTreeMap<&str, usize>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

pub fn acted(what: &'static str) {
    *ACTED.lock().unwrap().entry(what).or_default() += 1;
}

/// What [`acted`] counted so far.
pub fn acted_so_far() -> std::collections::BTreeMap<&'static str, usize> {
    ACTED.lock().unwrap().clone()
}

/// This process's descriptors, threads and resident memory.
#[derive(Clone, Copy, Debug)]
pub struct Usage {
    pub fds: usize,
    pub threads: usize,
    pub rss_kib: u64,
}

impl Usage {
    pub fn now() -> Usage {
        let count = |dir: &str| fs::read_dir(dir).map_or(0, |d| d.count());
        let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
        let rss_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        Usage {
            fds: count("/proc/self/fd"),
            threads: count("/proc/self/task"),
            rss_kib,
        }
    }
}

/// Where cgroup2 is mounted here.
pub fn cgroup_mount() -> PathBuf {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines()
        .find_map(|line| {
            let (fields, after) = line.split_once(" - ")?;
            after
                .starts_with("cgroup2 ")
                .then(|| PathBuf::from(fields.split(' ').nth(4).unwrap()))
        })
        .expect("cgroup2 is mounted")
}

/// The cgroup of `pid` (relative to the mount), or None when it is gone.
pub fn cgroup_of(pid: u32) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_owned)
}

/// `systemctl --user ARGS` with `env`, within 30 s; its success.
pub fn systemctl(env: &[(OsString, OsString)], args: &[&str]) -> bool {
    let mut cmd = Command::new("timeout");
    cmd.args(["30", "systemctl", "--user"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    set_env(&mut cmd, env);
    cmd.status().is_ok_and(|s| s.success())
}

/// Polls `done` every 10 ms for up to `limit`; whether it came true.
pub fn within(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGKILL to `pid`, if it is there.
pub fn sigkill(pid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// Spawns `cmd` with its output to `stdout` and `stderr` (appended), never holding a pipe.
pub fn spawn_to_files(cmd: &mut Command, stdout: &Path, stderr: &Path) -> std::io::Result<Child> {
    let open = |p: &Path| fs::OpenOptions::new().create(true).append(true).open(p);
    cmd.stdin(Stdio::null())
        .stdout(open(stdout)?)
        .stderr(open(stderr)?)
        .spawn()
}

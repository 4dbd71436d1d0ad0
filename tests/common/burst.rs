//! Bursts of launches (issue 22): many launches at once, each command recording, as it starts,
//! which cgroup it runs in, so that a launch that ran before its scope was made counts as
//! unscoped even if the manager moved it later. Shared by the burst tests and the burst
//! benchmark.
#![allow(dead_code)] // Each test binary uses a different part of this module.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a burst came to.
#[derive(Debug)]
pub struct Outcome {
    /// Launches started.
    pub launched: usize,
    /// Commands that were in a scope (a `.scope` cgroup) when they started.
    pub scoped: usize,
    /// How many times each launch's command ran (by launch number).
    pub runs: HashMap<usize, usize>,
    /// From the first spawn to the last exit.
    pub wall: Duration,
    /// The manager's CPU time over the burst (its cgroup's `cpu.stat`, `usage_usec`).
    pub manager_cpu: Duration,
    /// What the launches said on stderr, as given (one entry per launch that said anything).
    pub stderr: Vec<String>,
}

impl Outcome {
    /// A burst of `launched` that began at `began` (its instant and the manager's CPU time then)
    /// and has just ended, its commands' records in `log`.
    fn of(launched: usize, log: &Path, began: (Instant, Duration), stderr: Vec<String>) -> Outcome {
        let wall = began.0.elapsed();
        let manager_cpu = manager_cpu().saturating_sub(began.1);
        let (scoped, runs) = read_log(log);
        Outcome {
            launched,
            scoped,
            runs,
            wall,
            manager_cpu,
            stderr,
        }
    }

    /// The manager's CPU time per launch.
    pub fn manager_cpu_per_launch(&self) -> Duration {
        self.manager_cpu / u32::try_from(self.launched.max(1)).unwrap_or(u32::MAX)
    }

    /// Launches whose command ran other than exactly once.
    pub fn not_once(&self) -> Vec<(usize, usize)> {
        (0..self.launched)
            .map(|n| (n, self.runs.get(&n).copied().unwrap_or(0)))
            .filter(|&(_, runs)| runs != 1)
            .collect()
    }

    /// One line for a report.
    pub fn summary(&self) -> String {
        format!(
            "{} of {} scoped when they started, {} not run exactly once, last exit after {:.2} s, \
             manager CPU {:.2} ms per launch",
            self.scoped,
            self.launched,
            self.not_once().len(),
            self.wall.as_secs_f64(),
            self.manager_cpu_per_launch().as_secs_f64() * 1e3
        )
    }
}

/// The argv of a command that appends `N CGROUP` to `log` (one line, written at once) for launch
/// number `n`, then exits 0. One shell and its builtins, no other process: in a burst of 256 on
/// two cores, a `grep` and a `cut` in a subshell for each took a third of the machine's CPU,
/// which the launches' turns then lacked.
pub fn recording_argv(log: &Path, n: usize) -> Vec<OsString> {
    vec![
        "sh".into(),
        "-c".into(),
        RECORD_CGROUP.into(),
        n.to_string().into(),
        log.as_os_str().to_owned(),
    ]
}

/// `sh -c RECORD_CGROUP N LOG` appends `N CGROUP` (the shell's own cgroup v2 path) to `LOG`.
pub const RECORD_CGROUP: &str = "while IFS= read -r line; do case $line in 0::*) \
     printf '%s %s\\n' \"$0\" \"${line#0::}\" >> \"$1\";; esac; done < /proc/$$/cgroup";

/// The CPU time the rig's manager has used so far.
pub fn manager_cpu() -> Duration {
    let pid = std::env::var("SYNAPS_RIG_MANAGER_PID").expect("run inside scripts/systemd-rig.sh");
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let path = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .expect("the manager's cgroup");
    let stat = std::fs::read_to_string(format!("/sys/fs/cgroup{path}/cpu.stat")).unwrap();
    let usec: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
        .expect("usage_usec in cpu.stat");
    Duration::from_micros(usec)
}

/// Reads a burst's log: how many commands were scoped, and how many times each ran.
pub fn read_log(log: &Path) -> (usize, HashMap<usize, usize>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut runs = HashMap::new();
    let mut scoped = 0;
    for line in text.lines() {
        let (n, cgroup) = line.split_once(' ').expect("N CGROUP");
        *runs.entry(n.parse::<usize>().unwrap()).or_insert(0) += 1;
        if cgroup.ends_with(".scope") {
            scoped += 1;
        }
    }
    (scoped, runs)
}

/// A fresh log file under `dir`.
pub fn log_in(dir: &Path, label: &str) -> PathBuf {
    let log = dir.join(format!("{label}.log"));
    let _ = std::fs::remove_file(&log);
    log
}

/// Starts `n` launches at once (`command(i)` for launch i, its stdio closed but for stderr,
/// which is kept) and waits for them all.
pub fn at_once(n: usize, log: &Path, command: impl Fn(usize) -> Command) -> Outcome {
    let cpu_before = manager_cpu();
    let started = Instant::now();
    let children: Vec<_> = (0..n)
        .map(|i| {
            command(i)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn a launch")
        })
        .collect();
    let stderr: Vec<String> = children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().expect("wait for a launch");
            String::from_utf8_lossy(&out.stderr).into_owned()
        })
        .filter(|s| !s.is_empty())
        .collect();
    Outcome::of(n, log, (started, cpu_before), stderr)
}

/// `threads` threads start `total` launches between them, each thread one launch after another
/// (`command(i)` for launch i), as a host's workers do, and wait for them all.
pub fn from_threads(
    threads: usize,
    total: usize,
    log: &Path,
    command: impl Fn(usize) -> Command + Sync,
) -> Outcome {
    let cpu_before = manager_cpu();
    let started = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let stderr = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (command, stderr, next) = (&command, &stderr, &next);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let out = command(i)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .output()
                    .expect("run a launch");
                if !out.stderr.is_empty() {
                    let said = String::from_utf8_lossy(&out.stderr).into_owned();
                    stderr.lock().unwrap().push(said);
                }
            });
        }
    });
    Outcome::of(
        total,
        log,
        (started, cpu_before),
        stderr.into_inner().unwrap(),
    )
}

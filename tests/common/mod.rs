//! Test support: the real user manager the rig started, managers of a test's own, WARN capture,
//! temporary directories and a few process helpers. No mocks of systemd live here.
#![allow(dead_code)] // Each test binary uses a different part of this module.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use rustix::process::Signal;
use rustix::process::{kill_process, Pid};

use synaps_scope::diag::CallbackSubscriber;
use synaps_scope::{inherited_env, set_env, with_overrides};
use tracing::Level;

/// The private systemd user manager that scripts/systemd-rig.sh started for this run.
pub struct Rig {
    /// The manager's (and systemd-run's) major version.
    pub version: u32,
    /// An executable that runs `systemd --user` of that version.
    pub manager: PathBuf,
    /// A cgroup2 directory where tests may start managers of their own.
    pub cgroup_base: PathBuf,
}

/// The rig, or a loud failure saying how to get one. `SYNAPS_SKIP_MANAGER_TESTS=1` skips (None)
/// with a line on stderr instead, for a run that asked for exactly that.
pub fn rig() -> Option<Rig> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    match (
        var("SYNAPS_RIG_SYSTEMD_VERSION"),
        var("SYNAPS_RIG_MANAGER"),
        var("SYNAPS_RIG_CGROUP"),
    ) {
        (Some(version), Some(manager), Some(cgroup)) => Some(Rig {
            version: version
                .parse()
                .expect("SYNAPS_RIG_SYSTEMD_VERSION is a number"),
            manager: manager.into(),
            cgroup_base: cgroup.into(),
        }),
        _ if var("SYNAPS_SKIP_MANAGER_TESTS").as_deref() == Some("1") => {
            eprintln!("SKIPPED (SYNAPS_SKIP_MANAGER_TESTS=1): this test needs a real systemd user manager");
            None
        }
        _ => panic!(
            "this test needs a real systemd user manager and none was started: run it through \
             `scripts/systemd-rig.sh [--systemd 247|252|254|257|262] -- cargo test` as root (the README's test \
             command does), or set SYNAPS_SKIP_MANAGER_TESTS=1 to skip such tests on purpose"
        ),
    }
}

/// This process's environment with `overrides` on top.
pub fn env_with(overrides: &[(&str, &OsString)]) -> Vec<(OsString, OsString)> {
    let overrides: Vec<(OsString, OsString)> = overrides
        .iter()
        .map(|(k, v)| (OsString::from(k), (*v).clone()))
        .collect();
    with_overrides(&inherited_env(), &overrides)
}

/// This process's PATH with `dir` searched first.
pub fn path_with_first(dir: &Path) -> OsString {
    std::env::join_paths(
        std::iter::once(dir.to_owned())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap()
}

/// `systemctl --user show -p PROPERTY --value [-- UNIT]` on the rig's manager (its own properties
/// when `unit` is None).
pub fn systemctl_value(unit: Option<&str>, property: &str) -> String {
    let out = Command::new("systemctl")
        .args(["--user", "show", "-p", property, "--value"])
        .args(unit.map(|u| ["--", u]).into_iter().flatten())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
}

/// `env` without `keys`.
pub fn env_without(env: &[(OsString, OsString)], keys: &[&str]) -> Vec<(OsString, OsString)> {
    env.iter()
        .filter(|(k, _)| !keys.iter().any(|key| k == key))
        .cloned()
        .collect()
}

/// The lines the library logged while a [`Capture`] was the thread's subscriber.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<(Level, String)>>>);

impl Capture {
    /// A dispatcher recording every event of target `synaps_scope`, at every level.
    pub fn dispatch(&self) -> tracing::Dispatch {
        // With exactly one dispatcher ever registered, tracing-core computes a new callsite's
        // interest from the *registering* thread's default alone: a WARN first reached on a thread
        // without a capture would be cached as "never" for every thread. A second, permanent
        // dispatcher makes it ask every live one.
        static KEEP_INTEREST_GLOBAL: std::sync::OnceLock<tracing::Dispatch> =
            std::sync::OnceLock::new();
        KEEP_INTEREST_GLOBAL.get_or_init(|| {
            tracing::Dispatch::new(CallbackSubscriber::new(Level::TRACE, |_, _, _| {}))
        });
        let lines = Arc::clone(&self.0);
        tracing::Dispatch::new(CallbackSubscriber::new(
            Level::TRACE,
            move |level, target, line| {
                if target == "synaps_scope" {
                    lines.lock().unwrap().push((*level, line.to_owned()));
                }
            },
        ))
    }

    /// Runs `f` with this capture as the current thread's subscriber.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        tracing::dispatcher::with_default(&self.dispatch(), f)
    }

    /// The WARN lines so far.
    pub fn warnings(&self) -> Vec<String> {
        self.at(Level::WARN)
    }

    /// The lines at `level` so far.
    pub fn at(&self, level: Level) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(l, _)| *l == level)
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// Waits up to `limit` (zero: looks once) for a line containing `needle`; true when one came.
    pub fn wait_for(&self, needle: &str, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        loop {
            if self
                .0
                .lock()
                .unwrap()
                .iter()
                .any(|(_, s)| s.contains(needle))
            {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("synaps-test-{label}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `name` in this directory, executable when `executable`, and returns its path.
    pub fn write(&self, name: &str, contents: &str, executable: bool) -> PathBuf {
        let path = self.0.join(name);
        if executable {
            let file_name = path.file_name().unwrap().to_string_lossy();
            let draft = path.with_file_name(format!(".{file_name}.draft"));
            fs::write(&draft, contents).unwrap();
            install_executable(&draft, &path);
            fs::remove_file(&draft).unwrap();
        } else {
            fs::write(&path, contents).unwrap();
        }
        path
    }
}

/// Copies `from` to `to`, mode 0755, through `install(1)`: a file this process wrote itself could
/// not be run while a child that another test thread is forking still holds the writing
/// descriptor (exec fails with ETXTBSY until that child execs), so no program a test runs is ever
/// open for writing here.
pub fn install_executable(from: &Path, to: &Path) {
    let status = Command::new("install")
        .arg("-m")
        .arg("0755")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "install {} {}: {status}",
        from.display(),
        to.display()
    );
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Spawns `argv` with exactly `env`, stdout captured, and waits for it.
pub fn run_argv(
    argv: &[OsString],
    env: &[(OsString, OsString)],
) -> std::io::Result<std::process::Output> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null());
    set_env(&mut cmd, env);
    cmd.output()
}

/// The `0::` line of /proc/PID/cgroup, without the prefix.
pub fn cgroup_of(pid: u32) -> String {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("")
        .to_owned()
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

/// A systemd user manager of the test's own, in its own cgroup and XDG_RUNTIME_DIR, to stop or
/// kill without disturbing other tests. Killed and cleaned up when dropped.
pub struct Manager {
    child: Option<Child>,
    pub runtime_dir: PathBuf,
    cgroup: PathBuf,
    _scratch: TempDir,
}

impl Manager {
    pub fn start(rig: &Rig) -> Manager {
        let scratch = TempDir::new("manager");
        let runtime_dir = scratch.path().join("runtime");
        fs::create_dir(&runtime_dir).unwrap();
        fs::set_permissions(&runtime_dir, fs::Permissions::from_mode(0o700)).unwrap();
        let cgroup = rig.cgroup_base.join(format!(
            "manager-{}-{}",
            std::process::id(),
            scratch.path().file_name().unwrap().to_string_lossy()
        ));
        let service = cgroup.join("user@0.service");
        fs::create_dir_all(&service).unwrap();
        let log = fs::File::create(scratch.path().join("manager.log")).unwrap();
        let child = Command::new("sh")
            .args([
                "-c",
                "echo $$ > \"$1/cgroup.procs\" && exec \"$2\" --user",
                "sh",
            ])
            .arg(&service)
            .arg(&rig.manager)
            .env("XDG_RUNTIME_DIR", &runtime_dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start a user manager");
        let log = scratch.path().join("manager.log");
        let mut manager = Manager {
            child: Some(child),
            runtime_dir,
            cgroup,
            _scratch: scratch,
        };
        // Ready means answering, not just a socket file: a test that stops or kills a manager
        // must be acting on one that has finished starting.
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = manager.child.as_mut().unwrap().try_wait() {
                let log = fs::read_to_string(&log).unwrap_or_default();
                panic!("the test's user manager exited at start with {status}; its log:\n{log}");
            }
            if manager.runtime_dir.join("systemd/private").exists() {
                let state = Command::new("systemctl")
                    .args(["--user", "is-system-running"])
                    .env("XDG_RUNTIME_DIR", &manager.runtime_dir)
                    .stderr(Stdio::null())
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                    .unwrap_or_default();
                if state == "running" || state == "degraded" {
                    return manager;
                }
            }
            assert!(
                Instant::now() < end,
                "the test's user manager did not come up within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("manager running").id()
    }

    /// This process's environment, pointed at this manager.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        env_with(&[(
            "XDG_RUNTIME_DIR",
            &self.runtime_dir.clone().into_os_string(),
        )])
    }

    /// A manager with Debian's D-Bus session bus (dbus.socket and dbus.service from the
    /// dbus-user-session package, running the real `dbus-daemon --session`) started in it, and
    /// the manager registered on that bus.
    pub fn with_session_bus(rig: &Rig) -> Manager {
        let manager = Manager::start(rig);
        let mut start = Command::new("systemctl");
        start.args(["--user", "start", "dbus.socket", "dbus.service"]);
        set_env(&mut start, &manager.env());
        let started = start.output().unwrap();
        assert!(
            started.status.success(),
            "the session bus did not start (is Debian's dbus-user-session installed?): {}",
            String::from_utf8_lossy(&started.stderr)
        );
        // The manager joins the bus once dbus.service is up; ask it over the bus until it answers.
        let over_bus = manager.session_bus_only();
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let mut ask = Command::new("systemctl");
            ask.args(["--user", "show", "-p", "Version"])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            set_env(&mut ask, &over_bus);
            if ask.status().unwrap().success() {
                return manager;
            }
            assert!(
                Instant::now() < end,
                "the manager did not answer on the session bus within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The environment of a client that knows only this manager's session bus address.
    pub fn session_bus_only(&self) -> Vec<(OsString, OsString)> {
        let mut env = env_without(&self.env(), &["XDG_RUNTIME_DIR"]);
        env.push((
            "DBUS_SESSION_BUS_ADDRESS".into(),
            format!("unix:path={}/bus", self.runtime_dir.display()).into(),
        ));
        env
    }

    /// Kills the manager now and reaps it (its scopes' processes live on until drop).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A stopped manager must be resumed: only SIGKILL ends it otherwise.
            if let Some(pid) = Pid::from_raw(child.id() as i32) {
                let _ = kill_process(pid, Signal::CONT);
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::write(self.cgroup.join("cgroup.kill"), "1");
        let end = Instant::now() + Duration::from_secs(5);
        while self.cgroup.exists() && Instant::now() < end {
            let _ = Command::new("find")
                .arg(&self.cgroup)
                .args(["-depth", "-type", "d", "-exec", "rmdir", "{}", "+"])
                .stderr(Stdio::null())
                .status();
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The launcher program built from this workspace (`SYNAPS_SCOPE_EXEC`, else
/// `target/debug/synaps-scope-exec`, built on first use).
pub fn exec_program() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("SYNAPS_SCOPE_EXEC").filter(|p| !p.is_empty()) {
                return PathBuf::from(path);
            }
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            let root = root
                .ancestors()
                .find(|d| d.join("Cargo.lock").exists())
                .unwrap();
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "-q", "-p", "synaps-scope-exec"])
                .current_dir(root)
                .status()
                .expect("cargo runs");
            assert!(status.success(), "cargo build -p synaps-scope-exec failed");
            root.join("target/debug/synaps-scope-exec")
        })
        .clone()
}

/// `env` with the wrapper chosen: `synaps-scope-exec` (this workspace's) or `systemd-run`.
pub fn with_wrapper(env: &[(OsString, OsString)], wrapper: &str) -> Vec<(OsString, OsString)> {
    with_overrides(
        env,
        &[
            ("SYNAPS_SCOPE_LAUNCHER".into(), wrapper.into()),
            ("SYNAPS_SCOPE_EXEC".into(), exec_program().into_os_string()),
        ],
    )
}

/// The wrapper this test run was asked to use (`SYNAPS_SCOPE_LAUNCHER`; scripts/test.sh runs
/// everything once with each), checked against the one a launcher actually uses.
pub fn assert_wrapper_under_test(launcher: &synaps_scope::ScopeLauncher) {
    if let Some(asked) = std::env::var("SYNAPS_SCOPE_LAUNCHER")
        .ok()
        .filter(|v| v != "auto")
    {
        assert_eq!(launcher.wrapper().name(), asked, "the wrapper under test");
    }
}

/// `systemctl --user list-units --all --plain --no-legend ARGS` with `env`: one unit per line.
pub fn list_units(env: &[(OsString, OsString)], args: &[&str]) -> String {
    let mut cmd = Command::new("systemctl");
    cmd.args(["--user", "list-units", "--all", "--plain", "--no-legend"])
        .args(args);
    set_env(&mut cmd, env);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "systemctl list-units: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `systemctl --user status --no-pager PATTERN` with `env`, for a failing assertion's message:
/// each unit's state, its processes and its last log lines.
pub fn unit_status(env: &[(OsString, OsString)], pattern: &str) -> String {
    let mut cmd = Command::new("systemctl");
    cmd.args(["--user", "status", "--no-pager", "--full", "--all", pattern]);
    set_env(&mut cmd, env);
    let out = cmd.output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A stand-in for a manager's private socket (`tests/tools/slow_manager.py`) that forwards every
/// byte both ways at once, except the calls that mention a needle, held `seconds` first (only the
/// first one with `first_only`): a manager too busy to answer one kind of question within its
/// bound, while it answers every other at once.
pub struct SlowManager {
    child: Child,
    runtime: TempDir,
}

impl SlowManager {
    /// Slow to answer the slice check's questions (its `Get`s on the Slice interface), in front of
    /// the manager whose runtime directory is `real_runtime`.
    pub fn slice_checks(real_runtime: &Path, seconds: &str, first_only: bool) -> SlowManager {
        Self::start(
            real_runtime,
            "org.freedesktop.systemd1.Slice",
            seconds,
            first_only,
        )
    }

    /// [`SlowManager::slice_checks`] in front of the rig's own manager (this process's
    /// `XDG_RUNTIME_DIR`).
    pub fn slice_checks_in_front_of_the_rig(seconds: &str, first_only: bool) -> SlowManager {
        Self::slice_checks(&rig_runtime_dir(), seconds, first_only)
    }

    /// Slow to answer every call that mentions `needle`, in front of the rig's own manager.
    pub fn holding_in_front_of_the_rig(needle: &str, seconds: &str) -> SlowManager {
        Self::start(&rig_runtime_dir(), needle, seconds, false)
    }

    fn start(real_runtime: &Path, needle: &str, seconds: &str, first_only: bool) -> SlowManager {
        let runtime = TempDir::new("slow-manager");
        fs::create_dir(runtime.path().join("systemd")).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .map(|d| d.join("tests/tools/slow_manager.py"))
            .find(|p| p.exists())
            .expect("tests/tools/slow_manager.py in the workspace");
        let mut cmd = Command::new("python3");
        cmd.arg(script)
            .arg("--listen")
            .arg(runtime.path().join("systemd/private"))
            .arg("--to")
            .arg(real_runtime.join("systemd/private"))
            .args(["--needle", needle, "--delay", seconds])
            .args(first_only.then_some("--first-only"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let mut child = cmd
            .spawn()
            .expect("python3 runs tests/tools/slow_manager.py");
        let mut ready = String::new();
        use std::io::BufRead;
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready.trim(), "ready", "slow_manager.py did not start");
        SlowManager { child, runtime }
    }

    /// The runtime directory whose `systemd/private` is the stand-in.
    pub fn runtime_dir(&self) -> OsString {
        self.runtime.path().as_os_str().to_owned()
    }
}

impl Drop for SlowManager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The rig's runtime directory (this process's `XDG_RUNTIME_DIR`).
fn rig_runtime_dir() -> PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .expect("the rig sets XDG_RUNTIME_DIR")
        .into()
}

/// Whether the kernel may run `binfmt_misc` formats here (then a file that is neither ELF nor `#!`
/// may still be runnable, and the library wraps it).
pub fn binfmt_misc_has_formats() -> bool {
    let root = Path::new("/proc/sys/fs/binfmt_misc");
    fs::read_to_string(root.join("status")).is_ok_and(|s| s.trim() == "enabled")
        && fs::read_dir(root).is_ok_and(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|e| e.file_name() != "register" && e.file_name() != "status")
        })
}

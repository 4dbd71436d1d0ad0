//! Managers of a test's own (to stop or kill without disturbing other tests), a stand-in for a
//! manager too busy to answer one kind of question, session buses of a test's own (one where a
//! program that is no manager owns the manager's name), and what `systemctl --user` says of the
//! rig's.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{kill_process, Pid, Signal};

use synaps_scope::set_env;

use super::{env_with, env_without, Rig, TempDir};

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

/// A systemd user manager of the test's own, in its own cgroup and XDG_RUNTIME_DIR, to stop or
/// kill without disturbing other tests. Killed and cleaned up when dropped.
pub struct Manager {
    child: Option<Child>,
    pub runtime_dir: PathBuf,
    cgroup: PathBuf,
    scratch: TempDir,
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
        let log = scratch.path().join("manager.log");
        let child = spawn_manager(rig, &cgroup, &runtime_dir, &log);
        let mut manager = Manager {
            child: Some(child),
            runtime_dir,
            cgroup,
            scratch,
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

    /// Kills the manager (as a crash would) and starts another in its place, at once: same
    /// cgroup, same runtime directory; not waiting for it to be ready.
    pub fn restart(&mut self, rig: &Rig) {
        self.kill();
        let log = self.scratch.path().join("manager.log");
        self.child = Some(spawn_manager(rig, &self.cgroup, &self.runtime_dir, &log));
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("manager running").id()
    }

    /// What the manager (and each started in its place) wrote on stdout and stderr.
    pub fn log(&self) -> String {
        fs::read_to_string(self.scratch.path().join("manager.log")).unwrap_or_default()
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

    /// The pid of this manager's session bus broker (`dbus.service`'s main process), started by
    /// [`Manager::with_session_bus`].
    pub fn session_bus_broker(&self) -> u32 {
        let mut show = Command::new("systemctl");
        show.args(["--user", "show", "-p", "MainPID", "--value", "dbus.service"]);
        set_env(&mut show, &self.env());
        let broker: u32 = String::from_utf8(show.output().unwrap().stdout)
            .unwrap()
            .trim()
            .parse()
            .expect("dbus.service's MainPID");
        assert_ne!(broker, 0, "the session bus's broker runs");
        broker
    }

    /// This manager's environment with its session bus's address as well.
    pub fn with_its_session_bus_address(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.env();
        env.push((
            "DBUS_SESSION_BUS_ADDRESS".into(),
            format!("unix:path={}/bus", self.runtime_dir.display()).into(),
        ));
        env
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

/// Starts `systemd --user` of the rig's version in `cgroup`'s `user@0.service`, with
/// `runtime_dir`, its output appended to `log`.
fn spawn_manager(rig: &Rig, cgroup: &Path, runtime_dir: &Path, log: &Path) -> Child {
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    Command::new("sh")
        .args([
            "-c",
            "echo $$ > \"$1/cgroup.procs\" && exec \"$2\" --user",
            "sh",
        ])
        .arg(cgroup.join("user@0.service"))
        .arg(&rig.manager)
        .env("XDG_RUNTIME_DIR", runtime_dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start a user manager")
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

    /// Slow to answer the first call (or authentication) that mentions `needle`, in front of the
    /// rig's own manager: one request holds its turn `seconds`, and those after it are answered.
    pub fn holding_first_in_front_of_the_rig(needle: &str, seconds: &str) -> SlowManager {
        Self::start(&rig_runtime_dir(), needle, seconds, true)
    }

    /// Slow to answer the first call that mentions `needle`, in front of the bus whose D-Bus
    /// address is `address` (`unix:path=…`, a [`BareBus`]'s): its own address is
    /// [`SlowManager::address`].
    pub fn holding_first_in_front_of_a_bus(
        address: &OsString,
        needle: &str,
        seconds: &str,
    ) -> SlowManager {
        let socket = address
            .to_str()
            .and_then(|address| address.strip_prefix("unix:path="))
            .expect("a bus at a unix:path= address");
        Self::in_front_of(Path::new(socket), needle, seconds, true)
    }

    fn start(real_runtime: &Path, needle: &str, seconds: &str, first_only: bool) -> SlowManager {
        Self::in_front_of(
            &real_runtime.join("systemd/private"),
            needle,
            seconds,
            first_only,
        )
    }

    fn in_front_of(socket: &Path, needle: &str, seconds: &str, first_only: bool) -> SlowManager {
        let runtime = TempDir::new("slow-manager");
        fs::create_dir(runtime.path().join("systemd")).unwrap();
        let child = started_tool("slow_manager.py", |cmd| {
            cmd.arg("--listen")
                .arg(runtime.path().join("systemd/private"))
                .arg("--to")
                .arg(socket)
                .args(["--needle", needle, "--delay", seconds])
                .args(first_only.then_some("--first-only"));
        });
        SlowManager { child, runtime }
    }

    /// The runtime directory whose `systemd/private` is the stand-in.
    pub fn runtime_dir(&self) -> OsString {
        self.runtime.path().as_os_str().to_owned()
    }

    /// The stand-in's D-Bus address.
    pub fn address(&self) -> OsString {
        format!(
            "unix:path={}",
            self.runtime.path().join("systemd/private").display()
        )
        .into()
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

/// A `dbus-daemon --session` of the test's own at `dir/bus`, which the manager never joins.
pub struct BareBus {
    child: Child,
    pub address: OsString,
}

impl BareBus {
    pub fn start(dir: &TempDir) -> BareBus {
        let socket = dir.path().join("bus");
        let address = format!("unix:path={}", socket.display());
        let child = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile"])
            .arg(format!("--address={address}"))
            .stdout(Stdio::null())
            .spawn()
            .expect("dbus-daemon (Debian's dbus-daemon package) runs");
        let end = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            assert!(Instant::now() < end, "dbus-daemon made no socket in 10 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        BareBus {
            child,
            address: address.into(),
        }
    }
}

impl Drop for BareBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tests/tools/name_squatter.py` on the bus at `address`: a program that owns
/// `org.freedesktop.systemd1` there and answers every call with `UnknownMethod`.
pub struct Squatter(Child);

impl Squatter {
    pub fn start(address: &OsString) -> Squatter {
        Squatter::with_options(address, &[])
    }

    /// A squatter that answers `Get(UnitPath)` with the manager's own list (`unit_path`), and,
    /// if `says_done`, says every start worked and its job is done.
    pub fn copying(address: &OsString, unit_path: &str, says_done: bool) -> Squatter {
        let unit_path = format!("--unit-path={unit_path}");
        let mut options = vec![unit_path.as_str()];
        options.extend(says_done.then_some("--says-done"));
        Squatter::with_options(address, &options)
    }

    fn with_options(address: &OsString, options: &[&str]) -> Squatter {
        Squatter(started_tool("name_squatter.py", |cmd| {
            cmd.arg(address).args(options);
        }))
    }
}

impl Drop for Squatter {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A one-process byte relay in front of a bus socket (`tests/tools/bus_relay.py`), as socat, a
/// sandbox's bus proxy or a forwarded socket is: the broker names it as the sender of whatever
/// comes through. Killed when dropped.
pub struct Relay {
    child: Child,
    pub socket: PathBuf,
    _dir: TempDir,
}

impl Relay {
    /// A relay to the socket at `target` that passes bytes only.
    pub fn to(target: &Path) -> Relay {
        Relay::started(target, false)
    }

    /// A relay to the socket at `target` that passes descriptors too, as a bus proxy may.
    pub fn passing_fds_to(target: &Path) -> Relay {
        Relay::started(target, true)
    }

    fn started(target: &Path, pass_fds: bool) -> Relay {
        let dir = TempDir::new("relay");
        let socket = dir.path().join("bus");
        let child = started_tool("bus_relay.py", |cmd| {
            if pass_fds {
                cmd.arg("--pass-fds");
            }
            cmd.arg(&socket).arg(target);
        });
        Relay {
            child,
            socket,
            _dir: dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A D-Bus address of the relay's socket.
    pub fn address(&self) -> OsString {
        format!("unix:path={}", self.socket.display()).into()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Python test tool `name` (`tests/tools/`) with the arguments `args` adds, once it has said
/// on stdout that it is ready.
fn started_tool(name: &str, args: impl FnOnce(&mut Command)) -> Child {
    use std::io::BufRead;
    let mut cmd = Command::new("python3");
    cmd.arg(test_tool(name));
    args(&mut cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("python3 runs tests/tools/{name}: {e}"));
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "tests/tools/{name} did not start");
    child
}

/// The test tool `name` (`tests/tools/`), found from whichever crate of the workspace runs.
fn test_tool(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|d| d.join("tests/tools").join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("tests/tools/{name} in the workspace"))
}

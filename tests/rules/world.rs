//! The world a schedule runs in: a user manager of its own with its session bus, relays in front
//! of both sockets, units of others that must live, and every launch the schedule made.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

use synaps_scope::{set_env, with_overrides};

use crate::common::{rig, Manager, Relay, Rig, TempDir};
use crate::host::{cgroup_mount, cgroup_of, sigkill, within, Programs, Usage};
use crate::oomd::StandinOomd;
use crate::schedule::{Launch, Route, Wrapper};

/// A process of others: the schedule never asked it to end (`must_live`), and nothing may move it.
pub struct Guarded {
    pub pid: u32,
    pub what: String,
    pub cgroup: String,
    pub must_live: bool,
}

/// What the schedule did to end a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndedBy {
    HandleKill,
    Signal,
    Oomd,
}

/// What a waiter's thread saw at the waiter's exit.
pub struct Waited {
    pub status: ExitStatus,
    /// Processes still in the command's scope the moment the waiter was reaped.
    pub left: Vec<u32>,
}

/// One launch of the schedule (a wrapped argv spawned twice is two).
pub struct Rec {
    pub id: u64,
    pub step: usize,
    pub launch: Launch,
    /// The launch's own process (the waiter, the C host, `unshare`, or the command itself).
    pub pid: u32,
    pub child: Option<Child>,
    pub waiter: Option<JoinHandle<Waited>>,
    pub waited: Option<Waited>,
    pub status: Option<ExitStatus>,
    /// The launch's stderr (and `wrap`'s before it) and stdout.
    pub stderr: PathBuf,
    pub stdout: PathBuf,
    /// The unit it was told it would run in (`wrap`, the C host).
    pub told_unit: Option<String>,
    /// Why it may end without its command having run (`wrap` refused, say).
    pub may_not_run: Option<String>,
    /// How the schedule ended it, if it did: it may then end by a signal, or before it began.
    pub ended_by: Option<EndedBy>,
    /// The argv `wrap` printed and what it said on stderr, for a second spawn of it.
    pub argv: Option<(Vec<OsString>, String)>,
    /// Where it ran was judged (once it began), and how it ended (once it ended).
    pub placed_judged: bool,
    pub end_judged: bool,
}

impl Rec {
    pub fn ended_by_schedule(&self) -> bool {
        self.ended_by.is_some()
    }

    pub fn new(
        id: u64,
        step: usize,
        launch: Launch,
        pid: u32,
        stderr: PathBuf,
        stdout: PathBuf,
    ) -> Rec {
        Rec {
            id,
            step,
            launch,
            pid,
            child: None,
            waiter: None,
            waited: None,
            status: None,
            stderr,
            stdout,
            told_unit: None,
            may_not_run: None,
            ended_by: None,
            argv: None,
            placed_judged: false,
            end_judged: false,
        }
    }

    /// A launch `wrap` refused: it ended with `status` before anything was spawned.
    pub fn refused(
        id: u64,
        step: usize,
        launch: Launch,
        status: ExitStatus,
        stderr: PathBuf,
        stdout: PathBuf,
    ) -> Rec {
        let mut rec = Rec::new(id, step, launch, 0, stderr, stdout);
        rec.status = Some(status);
        rec
    }

    pub fn finished(&self) -> bool {
        self.status.is_some()
    }
}

pub struct World {
    pub rig: Rig,
    pub manager: Manager,
    pub scratch: TempDir,
    pub runs: PathBuf,
    pub programs: &'static Programs,
    pub relays: Vec<Relay>,
    /// Runtime directories whose `systemd/private` is a relay: bytes only, and descriptors too.
    relay_runtimes: Vec<TempDir>,
    pub config: PathBuf,
    pub recs: Vec<Rec>,
    pub guarded: Vec<Guarded>,
    /// Children of others' (units of colliding names), killed at the end.
    pub others: Vec<Child>,
    pub bus_up: bool,
    pub cgroup_root: PathBuf,
    /// The manager's cgroup (`…/user@0.service`), under which every scope of this world is.
    pub manager_cgroup: PathBuf,
    pub next_id: u64,
    pub usage_at_start: Usage,
    pub oomd: StandinOomd,
}

impl World {
    pub fn new(programs: &'static Programs) -> World {
        let rig = rig().expect("the rules need a real user manager");
        let manager = Manager::with_session_bus(&rig);
        let scratch = TempDir::new("rules");
        let runs = scratch.path().join("runs");
        fs::write(&runs, "").unwrap();
        let config = scratch.path().join("slices.conf");
        fs::write(
            &config,
            "tool_scope_slice = rules-tools.slice\ndaemon_scope_slice = rules-daemons.slice\n",
        )
        .unwrap();
        let private = manager.runtime_dir.join("systemd/private");
        let relays = vec![
            Relay::to(&private),
            Relay::passing_fds_to(&private),
            Relay::to(&manager.runtime_dir.join("bus")),
        ];
        let relay_runtimes = relays[..2]
            .iter()
            .map(|relay| {
                let dir = TempDir::new("rules-relayed-runtime");
                fs::create_dir(dir.path().join("systemd")).unwrap();
                std::os::unix::fs::symlink(&relay.socket, dir.path().join("systemd/private"))
                    .unwrap();
                dir
            })
            .collect();
        let manager_cgroup = cgroup_of(manager.pid()).expect("the manager runs");
        let oomd = StandinOomd::start();
        let mut world = World {
            rig,
            manager,
            scratch,
            runs,
            programs,
            relays,
            relay_runtimes,
            config,
            recs: Vec::new(),
            guarded: Vec::new(),
            others: Vec::new(),
            bus_up: true,
            cgroup_root: cgroup_mount(),
            manager_cgroup: PathBuf::from(manager_cgroup),
            next_id: 1,
            usage_at_start: Usage::now(),
            oomd,
        };
        world.guard(world.oomd.pid(), "the oomd stand-in", true);
        world.guard(std::process::id(), "the host (this test)", true);
        world.guard_manager();
        let relay_pids: Vec<u32> = world.relays.iter().map(Relay::pid).collect();
        for (pid, what) in relay_pids
            .into_iter()
            .zip(["byte relay", "fd relay", "bus relay"])
        {
            world.guard(pid, &format!("the {what} in front of the manager"), true);
        }
        for n in 0..2 {
            world.bystander(&format!("rules-bystander-{n}.scope"));
        }
        world
    }

    /// Guards `pid` as it is now.
    pub fn guard(&mut self, pid: u32, what: &str, must_live: bool) {
        if let Some(cgroup) = cgroup_of(pid) {
            self.guarded.push(Guarded {
                pid,
                what: what.to_owned(),
                cgroup,
                must_live,
            });
        }
    }

    /// Guards the manager and its session bus's broker (those before them stop being guarded).
    pub fn guard_manager(&mut self) {
        self.guarded.retain(|g| {
            !g.what.starts_with("the user manager") && !g.what.starts_with("the session bus")
        });
        self.guard(self.manager.pid(), "the user manager", true);
        if self.bus_up {
            let broker = self.manager.session_bus_broker();
            self.guard(broker, "the session bus's broker", true);
        }
    }

    /// A scope of others named `unit`, made by systemd-run, whose process must live.
    pub fn bystander(&mut self, unit: &str) -> bool {
        let mut cmd = Command::new("systemd-run");
        cmd.args(["--user", "--scope", "--quiet", "--collect"])
            .arg(format!("--unit={unit}"))
            .args(["sleep", "600"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        set_env(&mut cmd, &self.manager.env());
        let child = cmd.spawn().expect("systemd-run runs");
        let pid = child.id();
        self.others.push(child);
        let placed = within(Duration::from_secs(10), || {
            cgroup_of(pid).is_some_and(|c| c.ends_with(&format!("/{unit}")))
        });
        if placed {
            self.guard(pid, &format!("{unit}, a unit of others"), true);
        }
        placed
    }

    /// The host's own environment: the manager's, and the bus standing for the system bus.
    pub fn host_env(&self) -> Vec<(OsString, OsString)> {
        let system = [("DBUS_SYSTEM_BUS_ADDRESS".into(), self.oomd.address())];
        with_overrides(&self.manager.env(), &system)
    }

    /// The environment of a launch through `route`, `wrapper` and its mode.
    pub fn env_of(&self, launch: &Launch, id: Option<u64>) -> Vec<(OsString, OsString)> {
        let runtime = &self.manager.runtime_dir;
        let bus = |socket: &Path| OsString::from(format!("unix:path={}", socket.display()));
        let base = self.host_env();
        let mut drop: Vec<&str> = vec!["DBUS_SESSION_BUS_ADDRESS", "SYNAPS_CONFIG"];
        let mut set: Vec<(OsString, OsString)> = Vec::new();
        match launch.route {
            Route::Private => {}
            Route::Bus => {
                drop.push("XDG_RUNTIME_DIR");
                set.push(("DBUS_SESSION_BUS_ADDRESS".into(), bus(&runtime.join("bus"))));
            }
            Route::PrivateRelay | Route::PrivateFdRelay => {
                let dir = &self.relay_runtimes[usize::from(launch.route == Route::PrivateFdRelay)];
                set.push(("XDG_RUNTIME_DIR".into(), dir.path().into()));
            }
            Route::BusRelay => {
                drop.push("XDG_RUNTIME_DIR");
                set.push((
                    "DBUS_SESSION_BUS_ADDRESS".into(),
                    bus(&self.relays[2].socket),
                ));
            }
        }
        let wrapper = match launch.wrapper {
            Wrapper::Exec => "synaps-scope-exec",
            Wrapper::SystemdRun => "systemd-run",
        };
        set.push(("SYNAPS_SCOPE_LAUNCHER".into(), wrapper.into()));
        set.push((
            "SYNAPS_SCOPE_EXEC".into(),
            self.programs.exec.clone().into(),
        ));
        let mode = if launch.required { "required" } else { "on" };
        set.push(("SYNAPS_PROCESS_SCOPES".into(), mode.into()));
        if launch.slice {
            set.push(("SYNAPS_CONFIG".into(), self.config.clone().into()));
        }
        if let Some(id) = id {
            set.push(("SYNAPS_RULES_LAUNCH".into(), id.to_string().into()));
        }
        let kept: Vec<(OsString, OsString)> = base
            .into_iter()
            .filter(|(k, _)| !drop.iter().any(|d| k == d) && k != "SYNAPS_RULES_LAUNCH")
            .collect();
        with_overrides(&kept, &set)
    }

    /// The lines of the runs file: for each launch's id, the (pid, cgroup) of each run.
    pub fn runs(&self) -> HashMap<u64, Vec<(u32, String)>> {
        let mut runs: HashMap<u64, Vec<(u32, String)>> = HashMap::new();
        for line in fs::read_to_string(&self.runs).unwrap_or_default().lines() {
            let mut words = line.splitn(3, ' ');
            let (Some(id), Some(pid), Some(cgroup)) = (words.next(), words.next(), words.next())
            else {
                continue;
            };
            if let (Ok(id), Ok(pid)) = (id.parse(), pid.parse()) {
                runs.entry(id).or_default().push((pid, cgroup.to_owned()));
            }
        }
        runs
    }

    /// The absolute directory of a cgroup path read from /proc.
    pub fn dir_of(&self, cgroup: &str) -> PathBuf {
        self.cgroup_root.join(cgroup.trim_start_matches('/'))
    }

    /// Ends everything the schedule started: its launches, the units of others, the manager.
    pub fn end(mut self) {
        // Only a process that carries a launch's mark: a pid reaped before may be another's now.
        let ours = |pid: u32, id: u64| crate::checks::launch_of(pid) == Some(Some(id));
        for (id, runs) in self.runs() {
            for (pid, _) in runs {
                if ours(pid, id) {
                    sigkill(pid);
                }
            }
        }
        for rec in &mut self.recs {
            if let Some(mut child) = rec.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            } else if ours(rec.pid, rec.id) {
                sigkill(rec.pid);
            }
            if let Some(waiter) = rec.waiter.take() {
                let _ = waiter.join();
            }
        }
        for mut child in self.others.drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

//! Each step of a schedule, done to the world as a host, a user, a supervisor and the system would.

use std::ffi::OsString;
use std::fs;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustix::process::{kill_process, Pid, Signal};
use synaps_scope::{launcher_for_env, set_env, Evidence, OomdRule, ScopeEnding, ScopeHandle};

use crate::checks::{alive, scope_of};
use crate::forks::{fork_running, status_within};
use crate::host::{acted, systemctl, within};
use crate::schedule::{Sig, Step, Tool};
use crate::world::{EndedBy, World};

impl World {
    /// Does `step`; Err names a rule broken in the doing (a hang, a wrong answer).
    pub fn apply(&mut self, at: usize, step: &Step) -> Result<(), String> {
        let private = self.manager.env();
        match *step {
            Step::Launch(launch) => self.launch(at, launch, 1),
            Step::Burst(n, launch) => self.launch(at, launch, n.into()),
            Step::Reexec => self.ask(&["daemon-reexec"]),
            Step::Reload => self.ask(&["daemon-reload"]),
            Step::Restart => {
                self.guarded.retain(|g| {
                    !g.what.starts_with("the user manager")
                        && !g.what.starts_with("the session bus")
                });
                let broker = self.bus_up.then(|| self.manager.session_bus_broker());
                self.manager.restart(&self.rig);
                // The bus the old manager started, if it is still that (a pid is soon another's).
                let a_bus = |pid: u32| {
                    std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|c| c.starts_with("dbus-"))
                };
                if let Some(broker) = broker.filter(|&pid| a_bus(pid)) {
                    crate::host::sigkill(broker);
                }
                self.bus_up = false;
                let mut state = String::new();
                let up = within(Duration::from_secs(15), || {
                    // The private socket alone, each question bounded: until the new manager
                    // listens, systemctl would fall back to the session bus, whose broker the old
                    // manager took down, and wait there.
                    let mut ask = Command::new("timeout");
                    ask.args(["2", "systemctl", "--user", "is-system-running"]);
                    let none = [(
                        "DBUS_SESSION_BUS_ADDRESS".into(),
                        "unix:path=/nonexistent".into(),
                    )];
                    set_env(&mut ask, &synaps_scope::with_overrides(&private, &none));
                    state = ask
                        .output()
                        .map(|o| {
                            let said = [o.stdout, o.stderr].concat();
                            String::from_utf8_lossy(&said).trim().to_owned()
                        })
                        .unwrap_or_default();
                    state == "running" || state == "degraded"
                });
                if !up {
                    return Err(format!(
                        "the world: the restarted user manager did not come up within 15 s ({state:?}); its log:\n{}",
                        self.manager.log()
                    ));
                }
                self.start_bus();
                Ok(())
            }
            Step::BusStop => {
                self.stop_bus();
                Ok(())
            }
            Step::BusStart => {
                self.start_bus();
                Ok(())
            }
            Step::BusSwitch(broker) => {
                crate::broker::choose(&self.manager.runtime_dir, broker);
                self.stop_bus();
                assert!(systemctl(&private, &["daemon-reload"]));
                self.start_bus();
                let pid = self.manager.session_bus_broker();
                assert_eq!(
                    crate::broker::runs_broker(pid),
                    broker,
                    "the session bus is dbus-broker: {broker}"
                );
                Ok(())
            }
            Step::Kill(n) => self.end_scope(n.into(), EndedBy::HandleKill, false),
            Step::Oomd(n, below) => self.end_scope(n.into(), EndedBy::Oomd, below),
            Step::Signal(n, sig) => {
                self.reap();
                let runs = self.runs();
                let waiters: Vec<usize> = (0..self.recs.len())
                    .filter(|&i| {
                        let rec = &self.recs[i];
                        rec.waiter.is_some()
                            && !rec.ended_by_schedule()
                            && runs.contains_key(&rec.id)
                    })
                    .collect();
                if let Some(&i) = waiters.get(usize::from(n) % waiters.len().max(1)) {
                    let signal = match sig {
                        Sig::Term => Signal::TERM,
                        Sig::Int => Signal::INT,
                        Sig::Hup => Signal::HUP,
                        Sig::Usr1 => Signal::USR1,
                    };
                    let rec = &self.recs[i];
                    if crate::checks::launch_of(rec.pid) != Some(Some(rec.id)) {
                        return Ok(()); // ended meanwhile
                    }
                    self.recs[i].ended_by = Some(EndedBy::Signal);
                    acted("signal to a waiter");
                    let _ = kill_process(Pid::from_raw(self.recs[i].pid as i32).unwrap(), signal);
                }
                Ok(())
            }
            Step::Fork => fork_amid_requests(&self.host_env()),
            Step::Nest(n, depth) => {
                if let Some((_, pid, scope)) = self.running_scoped(n.into(), true) {
                    let mut dir = self.dir_of(&scope);
                    for level in 0..depth {
                        dir.push(format!("n{level}"));
                    }
                    if fs::create_dir_all(&dir).is_ok()
                        && fs::write(dir.join("cgroup.procs"), pid.to_string()).is_ok()
                    {
                        acted("cgroups made below a scope");
                    }
                }
                Ok(())
            }
        }
    }

    fn ask(&mut self, what: &[&str]) -> Result<(), String> {
        assert!(
            systemctl(&self.manager.env(), what),
            "systemctl --user {what:?} failed"
        );
        Ok(())
    }

    fn stop_bus(&mut self) {
        if self.bus_up {
            self.guarded
                .retain(|g| !g.what.starts_with("the session bus"));
            let stop = ["stop", "dbus.socket", "dbus.service"];
            assert!(systemctl(&self.manager.env(), &stop));
            self.bus_up = false;
        }
    }

    fn start_bus(&mut self) {
        if self.bus_up {
            return;
        }
        let env = self.manager.env();
        assert!(systemctl(&env, &["start", "dbus.socket", "dbus.service"]));
        let over_bus = self.manager.session_bus_only();
        let answers = within(Duration::from_secs(10), || {
            systemctl(&over_bus, &["show", "-p", "Version"])
        });
        assert!(
            answers,
            "the manager did not answer on the session bus within 10 s"
        );
        self.bus_up = true;
        self.guard_manager();
    }

    /// The Nth (modulo) launch whose command runs in a scope the schedule has not ended: its
    /// index, its command's pid and its cgroup. Only `Long` tools with `long_only`.
    fn running_scoped(&mut self, n: usize, long_only: bool) -> Option<(usize, u32, String)> {
        self.reap();
        let runs = self.runs();
        let candidates: Vec<(usize, u32, String)> = self
            .recs
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.ended_by_schedule() && (!long_only || r.launch.tool == Tool::Long))
            .filter_map(|(i, r)| {
                let (pid, cgroup) = runs.get(&r.id)?.first()?.clone();
                (alive(pid) && scope_of(&cgroup).is_some()).then_some((i, pid, cgroup))
            })
            .collect();
        candidates.get(n % candidates.len().max(1)).cloned()
    }

    /// The launches at `ended` were not ended by the schedule after all (their scope went first).
    fn not_ended(&mut self, ended: &[usize]) {
        for &at in ended {
            self.recs[at].ended_by = None;
        }
    }

    /// Ends the Nth running launch's scope as `by` says: a handle's kill, or the stand-in oomd's
    /// (of the scope, or with `below`, of a cgroup below it that the command was moved to). What
    /// the handle then says of the ending must be that.
    fn end_scope(&mut self, n: usize, by: EndedBy, below: bool) -> Result<(), String> {
        let Some((_, pid, cgroup)) = self.running_scoped(n, false) else {
            return Ok(());
        };
        let scope = scope_of(&cgroup).unwrap();
        let unit = scope.rsplit('/').next().unwrap().to_owned();
        let env = self.host_env();
        // Through the manager the handle hears oomd's signal on the bus `env` names; a handle made
        // from the pid (a manager restarted since knows no such unit) listens on this process's
        // own system bus, where the stand-in is not: its answer rests on oomd's mark.
        let (handle, hears_oomd) =
            match ScopeHandle::from_manager(&unit, &env, Duration::from_secs(3)) {
                Ok(handle) => (handle, true),
                Err(_) => match ScopeHandle::from_pid(&unit, pid) {
                    Ok(handle) => (handle, false),
                    Err(_) => return Ok(()), // gone meanwhile
                },
            };
        let runs = self.runs();
        let mut ended = Vec::new();
        for (at, rec) in self.recs.iter_mut().enumerate() {
            let inside = runs.get(&rec.id).and_then(|r| r.first());
            if inside.is_some_and(|(_, c)| scope_of(c).as_deref() == Some(scope.as_str())) {
                rec.ended_by = Some(by);
                ended.push(at);
            }
        }
        let killed = if by == EndedBy::Oomd {
            let (mut dir, mut target) = (self.dir_of(&scope), scope.clone());
            if below {
                dir.push("oomd-leaf");
                target.push_str("/oomd-leaf");
                let moved = fs::create_dir_all(&dir)
                    .and_then(|()| fs::write(dir.join("cgroup.procs"), pid.to_string()));
                if moved.is_err() {
                    self.not_ended(&ended); // ended meanwhile
                    return Ok(());
                }
            }
            if !self.oomd.kill(&dir, &target) {
                self.not_ended(&ended); // ended meanwhile
                return Ok(());
            }
            acted(if below {
                "oomd's kill below a scope"
            } else {
                "oomd's kill of a scope"
            });
            vec![pid]
        } else {
            handle.kill(Duration::from_secs(5)).map_err(|e| {
                format!("a handle's kill of {unit}, a launch's own scope, failed: {e}")
            })?
        };
        if by == EndedBy::HandleKill {
            acted("a handle's kill");
        }
        handle
            .wait_empty(Duration::from_secs(5))
            .map_err(|e| format!("{unit} was not empty 5 s after its kill: {e}"))?;
        let ending = handle.ending(&env, Duration::from_secs(5));
        let right = match by {
            EndedBy::Oomd if hears_oomd => {
                ending.how
                    == ScopeEnding::KilledByOomd {
                        rule: Some(OomdRule::Swap),
                    }
                    && ending.evidence == Evidence::OomdSignal
            }
            EndedBy::Oomd => {
                matches!(ending.how, ScopeEnding::KilledByOomd { .. })
                    && ending.evidence == Evidence::OomdMark
            }
            _ => ending.how == ScopeEnding::KilledByHandle,
        };
        if !killed.is_empty() && !right {
            return Err(format!(
                "rule 3: {unit} was ended by {by:?} (pids {killed:?}), and its handle's ending says \"{ending}\""
            ));
        }
        Ok(())
    }
}

/// Requests on a thread of the host while it forks: each child asks too, and exits at once.
fn fork_amid_requests(env: &[(OsString, OsString)]) -> Result<(), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let asking = {
        let (stop, env) = (Arc::clone(&stop), env.to_vec());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = launcher_for_env(&env);
            }
        })
    };
    let mut result = Ok(());
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(20));
        let child = fork_running(|| match launcher_for_env(env) {
            Ok(_) => 0,
            Err(_) => 1,
        });
        match status_within(child, Duration::from_secs(10)) {
            Some(0) => {}
            other => {
                result = Err(format!(
                    "a child forked amid requests ended with {other:?} (None: hung 10 s)"
                ));
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    asking.join().expect("the asking thread");
    result
}

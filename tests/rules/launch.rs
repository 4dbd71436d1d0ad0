//! Launches, through every path: spawned, begun, reaped and settled.

use std::ffi::OsString;
use std::fs;
use std::process::Command;
use std::time::Duration;

use synaps_scope::set_env;

use crate::checks::{procs_below, scope_of};
use crate::host::{spawn_to_files, within};
use crate::schedule::{How, Kind, Launch, Limit, Tool, Wrapper};
use crate::world::{Rec, Waited, World};

/// How long a launch may take to begin or end before the schedule calls it hung: the probe's
/// bound, the manager's answer and a burst of 64 on two busy cores.
const BEGIN_LIMIT: Duration = Duration::from_secs(20);

/// The tool each launch runs: it writes "ID PID CGROUP" (its own, read by the shell itself, so a
/// pid namespace changes nothing) to the runs file, then does what `tool` says.
fn script(runs: &std::path::Path, tool: Tool) -> String {
    let then = match tool {
        Tool::Exit0 => "exit 0",
        Tool::Exit7 => "exit 7",
        Tool::Long => "exec sleep 600",
        Tool::Brief => "sleep 0.3",
        Tool::Leaves => "sleep 0.6 & exit 0",
    };
    format!(
        "read -r pid rest < /proc/self/stat; while read -r line; do case $line in 0::*) \
         cg=${{line#0::}};; esac; done < /proc/self/cgroup; \
         echo \"$SYNAPS_RULES_LAUNCH $pid $cg\" >> '{}'; {then}",
        runs.display()
    )
}

/// What `run` and `wrap` take besides the command: the kind and the limit.
fn options(launch: &Launch) -> Vec<String> {
    let mut options = Vec::new();
    match launch.kind {
        Kind::None => {}
        Kind::Tool => options.extend(["--kind".into(), "tool".into()]),
        Kind::Daemon => options.extend(["--kind".into(), "daemon".into()]),
    }
    if launch.limit != Limit::None {
        options.extend(["-p".into(), launch.limit.word().into()]);
    }
    options
}

impl World {
    /// Launches `launch` `n` times at once (each its own id), and waits until each began or ended.
    pub fn launch(&mut self, at: usize, launch: Launch, n: usize) -> Result<(), String> {
        let first = self.recs.len();
        for _ in 0..n {
            self.start(at, launch, None)?;
        }
        self.settle(first)?;
        if launch.how == How::WrapTwice {
            // The same argv once more, once the first has begun (a retry, a cached line).
            for i in first..first + n {
                if let Some((argv, said)) = self.recs[i].argv.clone() {
                    let told = self.recs[i].told_unit.clone();
                    let second = self.recs.len();
                    self.start(at, launch, Some((argv, told, said)))?;
                    if launch.wrapper == Wrapper::SystemdRun {
                        self.recs[second].may_not_run =
                            Some("systemd-run refuses a unit name that is taken".into());
                    }
                }
            }
            self.settle(first)?;
        }
        Ok(())
    }

    /// Starts one launch; `again`: the argv a `wrap` printed before, spawned once more.
    fn start(
        &mut self,
        at: usize,
        launch: Launch,
        again: Option<(Vec<OsString>, Option<String>, String)>,
    ) -> Result<(), String> {
        let id = self.next_id;
        self.next_id += 1;
        let stderr = self.scratch.path().join(format!("{id}.err"));
        let stdout = self.scratch.path().join(format!("{id}.out"));
        let env = self.env_of(&launch, Some(id));
        let tool = [
            "sh".to_owned(),
            "-c".to_owned(),
            script(&self.runs, launch.tool),
        ];
        let mut may_not_run = None;
        let mut wrap_said = String::new();
        let (argv, told_unit): (Vec<OsString>, Option<String>) = match (launch.how, again) {
            (_, Some((argv, told, said))) => {
                // What `wrap` said of that argv (why it is direct, say) holds for each spawn of it.
                fs::write(&stderr, &said).unwrap();
                (argv, told)
            }
            (How::Run | How::Wait, _) => {
                let mut argv: Vec<OsString> = vec![self.programs.cli.clone().into(), "run".into()];
                if launch.how == How::Wait {
                    argv.push("--wait".into());
                }
                argv.extend(options(&launch).into_iter().map(OsString::from));
                argv.push("--".into());
                argv.extend(tool.iter().map(OsString::from));
                (argv, None)
            }
            (How::CHost, _) => {
                let mut argv: Vec<OsString> = vec![self.programs.c_host.clone().into()];
                argv.extend(tool.iter().map(OsString::from));
                (argv, None)
            }
            (How::WrapOnce | How::WrapTwice | How::WrapTaken, _) => {
                // Wrapped where it is spawned: in the pid namespace too, where there is one (a
                // systemd-run argv made outside one names its process there by a pid number).
                let mut wrap = Command::new("env");
                if launch.pidns {
                    wrap.args(["unshare", "--pid", "--fork", "--"]);
                }
                wrap.arg(&self.programs.cli)
                    .arg("wrap")
                    .arg("-0")
                    .args(options(&launch))
                    .arg("--")
                    .args(&tool);
                set_env(&mut wrap, &self.env_of(&launch, None));
                let out = wrap.output().expect("wrap runs");
                fs::write(&stderr, &out.stderr).unwrap();
                let said = String::from_utf8_lossy(&out.stderr);
                wrap_said = said.clone().into_owned();
                let unit = said
                    .lines()
                    .find_map(|l| l.strip_prefix("synaps-scope: unit "))
                    .map(str::to_owned);
                let argv: Vec<OsString> = out
                    .stdout
                    .split(|&b| b == 0)
                    .filter(|w| !w.is_empty())
                    .map(|w| {
                        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(w).to_owned()
                    })
                    .collect();
                if !matches!(out.status.code(), Some(0 | 1)) || argv.is_empty() {
                    // Refused: nothing to spawn.
                    self.recs
                        .push(Rec::refused(id, at, launch, out.status, stderr, stdout));
                    return Ok(());
                }
                if launch.how == How::WrapTaken {
                    if let Some(unit) = &unit {
                        if !self.bystander(unit) {
                            return Err(format!(
                                "systemd-run could not make {unit} for the collision"
                            ));
                        }
                        if launch.wrapper == Wrapper::SystemdRun {
                            may_not_run =
                                Some("systemd-run refuses a unit name that is taken".into());
                        }
                    }
                }
                (argv, unit)
            }
        };
        let spawned_argv = argv.clone();
        let mut argv = argv;
        if launch.pidns {
            let mut inside: Vec<OsString> = ["unshare", "--pid", "--fork", "--"]
                .map(OsString::from)
                .to_vec();
            inside.append(&mut argv);
            argv = inside;
        }
        // Every signal at its default, as a supervisor starts a launch (a suite started in the
        // background of a script inherits SIGINT and SIGQUIT ignored, which a launch would keep).
        let mut cmd = Command::new("env");
        cmd.arg("--default-signal").args(&argv);
        set_env(&mut cmd, &env);
        let child = spawn_to_files(&mut cmd, &stdout, &stderr).expect("a launch spawns");
        let pid = child.id();
        // What stands between the schedule and the command: never to be moved into a scope.
        if launch.how == How::Wait || launch.how == How::CHost || launch.pidns {
            self.guard(
                pid,
                &format!("launch {id}'s own process ({})", launch.how.word()),
                false,
            );
        }
        let mut rec = Rec::new(id, at, launch, pid, stderr, stdout);
        rec.told_unit = told_unit;
        rec.may_not_run = may_not_run;
        rec.argv = matches!(launch.how, How::WrapOnce | How::WrapTwice | How::WrapTaken)
            .then_some((spawned_argv, wrap_said));
        if launch.how == How::Wait {
            let (runs, root) = (self.runs.clone(), self.cgroup_root.clone());
            let mut child = child;
            rec.waiter = Some(std::thread::spawn(move || {
                let status = child.wait().expect("wait for the waiter");
                // Read at once: what is left in the command's scope now was left by the waiter.
                let text = fs::read_to_string(&runs).unwrap_or_default();
                let cgroup = text.lines().find_map(|l| {
                    let mut w = l.splitn(3, ' ');
                    (w.next() == Some(&id.to_string())).then(|| w.nth(1).map(str::to_owned))?
                });
                let left = cgroup
                    .and_then(|c| scope_of(&c))
                    .map(|s| procs_below(&root.join(s.trim_start_matches('/'))))
                    .unwrap_or_default();
                Waited { status, left }
            }));
        } else {
            rec.child = Some(child);
        }
        self.recs.push(rec);
        Ok(())
    }

    /// Takes the status of every launch that ended.
    pub fn reap(&mut self) {
        for rec in &mut self.recs {
            if let Some(child) = &mut rec.child {
                if let Ok(Some(status)) = child.try_wait() {
                    rec.status = Some(status);
                    rec.child = None;
                }
            }
            if rec.waiter.as_ref().is_some_and(|w| w.is_finished()) {
                let waited = rec
                    .waiter
                    .take()
                    .unwrap()
                    .join()
                    .expect("the waiter's thread");
                rec.status = Some(waited.status);
                rec.waited = Some(waited);
            }
        }
        // A launch's own process, once reaped, is guarded no more: its pid may soon be another's.
        let reaped: Vec<u32> = self
            .recs
            .iter()
            .filter(|r| r.finished())
            .map(|r| r.pid)
            .collect();
        self.guarded
            .retain(|g| g.must_live || !reaped.contains(&g.pid));
    }

    /// Waits until every launch from `first` on has begun its command or ended.
    pub fn settle(&mut self, first: usize) -> Result<(), String> {
        let mut hung = Vec::new();
        let settled = within(BEGIN_LIMIT, || {
            self.reap();
            let runs = self.runs();
            hung = self.recs[first..]
                .iter()
                .filter(|r| !r.finished() && !runs.contains_key(&r.id))
                .map(|r| r.id)
                .collect();
            hung.is_empty()
        });
        if settled {
            Ok(())
        } else {
            Err(format!(
                "launches {hung:?} neither began nor ended within {BEGIN_LIMIT:?}"
            ))
        }
    }
}

//! The first rules, checked from outside after every step: from the kernel's cgroups and /proc,
//! the manager's units and the processes' own exit, never from the library's answers.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use crate::host::Usage;
use crate::schedule::{How, Tool};
use crate::world::{EndedBy, World};

/// How far the host's descriptors, threads (besides one per waiter it keeps) and resident memory
/// may go past where they were when the schedule began: a bound that no number of steps moves.
const MORE_FDS: usize = 32;
const MORE_THREADS: usize = 16;
const MORE_RSS_KIB: u64 = 64 * 1024;

/// Whether a cgroup's name is a launch's scope's (`synaps-tool-*.scope`, `synaps-daemon-*.scope`).
fn is_scope_name(name: &str) -> bool {
    (name.starts_with("synaps-tool-") || name.starts_with("synaps-daemon-"))
        && name.ends_with(".scope")
}

/// The scope (`…/synaps-tool-*.scope`) a cgroup path is in or below; None outside any.
pub fn scope_of(cgroup: &str) -> Option<String> {
    // Only below the (last) user manager's cgroup, the world's: the suite itself may run in a
    // scope of this project's, made by another manager, higher up.
    let manager = cgroup.rfind("/user@")?;
    let mut path = cgroup[..manager].to_owned();
    for part in cgroup[manager..].split('/').filter(|p| !p.is_empty()) {
        path.push('/');
        path.push_str(part);
        if is_scope_name(part) {
            return Some(path);
        }
    }
    None
}

/// Every process in `dir` and the cgroups below it.
pub fn procs_below(dir: &Path) -> Vec<u32> {
    let mut pids: Vec<u32> = fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.parse().ok())
        .collect();
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pids.extend(procs_below(&entry.path()));
            }
        }
    }
    pids
}

/// Whether `pid` runs (a zombie has ended).
pub fn alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

/// The launch a process belongs to, by the mark in the environment it was started with; None where
/// it is gone (or going: an exiting process's environment reads empty).
pub fn launch_of(pid: u32) -> Option<Option<u64>> {
    let environ = fs::read(format!("/proc/{pid}/environ")).ok()?;
    if environ.is_empty() {
        return None;
    }
    Some(
        environ
            .split(|&b| b == 0)
            .find_map(|v| v.strip_prefix(b"SYNAPS_RULES_LAUNCH="))
            .and_then(|id| std::str::from_utf8(id).ok()?.parse().ok()),
    )
}

/// Every launch's scope's directory below `dir`.
fn scopes_below(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_scope_name(&name) {
            found.push(entry.path());
        } else {
            scopes_below(&entry.path(), found);
        }
    }
}

/// Every rule broken now, each said in a line.
pub fn check(world: &mut World) -> Vec<String> {
    world.reap();
    let mut broken = Vec::new();
    let runs = world.runs();
    let guarded: HashSet<u32> = world.guarded.iter().map(|g| g.pid).collect();

    // Rule 1: a scope holds its own launch's processes, of one launch, and nothing guarded.
    let mut scopes = Vec::new();
    scopes_below(
        &world.dir_of(&world.manager_cgroup.to_string_lossy()),
        &mut scopes,
    );
    for scope in scopes {
        let rel = format!(
            "/{}",
            scope.strip_prefix(&world.cgroup_root).unwrap().display()
        );
        let mut ids = HashSet::new();
        for pid in procs_below(&scope) {
            if guarded.contains(&pid) {
                let what = &world.guarded.iter().find(|g| g.pid == pid).unwrap().what;
                broken.push(format!("rule 1: {what} (pid {pid}) is in the scope {rel}"));
            }
            match launch_of(pid) {
                None => {} // gone meanwhile
                Some(None) => broken.push(format!(
                    "rule 1: pid {pid} ({}) is in the scope {rel} and is no launch's",
                    fs::read_to_string(format!("/proc/{pid}/cmdline"))
                        .unwrap_or_default()
                        .replace('\0', " ")
                )),
                Some(Some(id)) => {
                    ids.insert(id);
                    let began = runs.get(&id).and_then(|r| r.first());
                    if let Some((_, cgroup)) = began {
                        if scope_of(cgroup).as_deref() != Some(rel.as_str()) {
                            broken.push(format!(
                                "rule 1: launch {id} began in {cgroup}, and its pid {pid} is now in the scope {rel}"
                            ));
                        }
                    }
                }
            }
        }
        if ids.len() > 1 {
            broken.push(format!(
                "rule 1: the scope {rel} holds the processes of launches {ids:?}"
            ));
        }
    }

    // Rules 1 and 2: nothing of others moved or ended.
    for g in &world.guarded {
        if alive(g.pid) {
            match crate::host::cgroup_of(g.pid) {
                Some(now) if now != g.cgroup => broken.push(format!(
                    "rule 1: {} (pid {}) was moved from {} to {now}",
                    g.what, g.pid, g.cgroup
                )),
                _ => {}
            }
        } else if g.must_live {
            broken.push(format!(
                "rule 2: {} (pid {}) ended; the schedule never ended it",
                g.what, g.pid
            ));
        }
    }

    for rec in &mut world.recs {
        let ran = runs.get(&rec.id).map_or(&[][..], Vec::as_slice);
        // Rule 2: once, never twice.
        if ran.len() > 1 {
            broken.push(format!(
                "rule 2: launch {} ran its command {} times",
                rec.id,
                ran.len()
            ));
        }
        let said = fs::read_to_string(&rec.stderr).unwrap_or_default();
        // Rule 3: scoped where told, else said why; never unscoped under `required`.
        // A C host says the unit it was told once its spawn returned, which may be after its
        // command began: judged once it has said so, or ended.
        let host_said = rec.launch.how != How::CHost
            || rec.finished()
            || fs::read_to_string(&rec.stdout).is_ok_and(|o| o.starts_with("pid "));
        if let (false, Some((_, cgroup)), true) = (rec.placed_judged, ran.first(), host_said) {
            rec.placed_judged = true;
            if rec.launch.how == How::CHost {
                // "pid N in UNIT" (or "in this process's cgroup (direct launch)").
                let out = fs::read_to_string(&rec.stdout).unwrap_or_default();
                rec.told_unit = out
                    .split_whitespace()
                    .find(|w| is_scope_name(w))
                    .map(str::to_owned);
            }
            crate::host::acted(match scope_of(cgroup) {
                Some(_) => "launches scoped",
                None => "launches unscoped",
            });
            match (scope_of(cgroup), &rec.told_unit) {
                (None, _) if rec.launch.required => broken.push(format!(
                    "rule 3: launch {} ran unscoped ({cgroup}) under `required`",
                    rec.id
                )),
                (None, _)
                    if !said
                        .lines()
                        .any(|l| l.to_ascii_lowercase().contains("warn")) =>
                {
                    broken.push(format!(
                        "rule 3: launch {} ran unscoped ({cgroup}) and said nothing of why on stderr",
                        rec.id
                    ))
                }
                (Some(scope), Some(unit)) if !scope.ends_with(&format!("/{unit}")) => {
                    broken.push(format!("rule 3: launch {} was told {unit} and ran in {scope}", rec.id))
                }
                _ => {}
            }
        }
        // Rule 2: a command the schedule did not end lives on while it should.
        if let (Tool::Long, Some((pid, _)), false) =
            (rec.launch.tool, ran.first(), rec.ended_by_schedule())
        {
            if !alive(*pid) {
                broken.push(format!(
                    "rule 2: launch {}'s command (pid {pid}) ended; the schedule never ended it",
                    rec.id
                ));
            }
        }
        let Some(status) = rec.status.filter(|_| !rec.end_judged) else {
            continue;
        };
        rec.end_judged = true;
        let code = status.code();
        if ran.is_empty() {
            let refused = rec.launch.required
                && said.contains("scope")
                && (matches!(code, Some(125 | 3))
                    || (rec.launch.how == How::CHost && code == Some(1)));
            if !(refused || rec.may_not_run.is_some() || rec.ended_by_schedule()) {
                broken.push(format!(
                    "rule 2: launch {} ended ({status}) and its command never ran; stderr: {said:?}",
                    rec.id
                ));
            }
            continue;
        }
        let expected = match rec.launch.tool {
            Tool::Exit7 => Some(7),
            Tool::Long => None,
            _ => Some(0),
        };
        if !rec.ended_by_schedule() {
            if expected.is_none() {
                broken.push(format!(
                    "rule 2: launch {}'s long command ended ({status})",
                    rec.id
                ));
            } else if code != expected {
                broken.push(format!(
                    "rule 3: launch {} ended with {status} (signal {:?}); its command's status was {expected:?}; stderr: {said:?}",
                    rec.id,
                    status.signal()
                ));
            }
        }
        if let (Some(waited), Some(scope)) = (&rec.waited, scope_of(&ran[0].1)) {
            if !waited.left.is_empty() {
                broken.push(format!(
                    "rule 2: launch {}'s waiter returned ({status}) while {:?} still ran in {scope}",
                    rec.id, waited.left
                ));
            }
            let line = said
                .lines()
                .find(|l| l.contains(".scope: "))
                .unwrap_or_default();
            let wrong: &[&str] = match rec.ended_by {
                None | Some(EndedBy::Signal) => &["scope handle", "oomd", "OOM killer"],
                Some(EndedBy::HandleKill) => &["ended on its own", "oomd", "OOM killer"],
                Some(EndedBy::Oomd) => &["ended on its own", "scope handle", "OOM killer"],
            };
            if rec.ended_by == Some(EndedBy::Oomd)
                && !line.contains("killed by systemd-oomd (swap rule)")
            {
                broken.push(format!(
                    "rule 3: launch {}'s scope was killed by the oomd stand-in (swap rule), and its waiter said {line:?}",
                    rec.id
                ));
            }
            if let Some(word) = wrong.iter().find(|w| line.contains(*w)) {
                broken.push(format!(
                    "rule 3: launch {}'s waiter said {line:?} ({word:?} is not what happened)",
                    rec.id
                ));
            }
            if expected == Some(7)
                && !rec.ended_by_schedule()
                && !line.contains("exited with status 7")
            {
                broken.push(format!(
                    "rule 3: launch {}'s waiter said {line:?} of a command that exited with 7",
                    rec.id
                ));
            }
        }
    }

    // Rule 4: the host's cost does not grow with the steps.
    let (start, now) = (world.usage_at_start, Usage::now());
    let waiters = world.recs.iter().filter(|r| r.waiter.is_some()).count();
    if now.fds > start.fds + MORE_FDS
        || now.threads > start.threads + waiters + MORE_THREADS
        || now.rss_kib > start.rss_kib + MORE_RSS_KIB
    {
        broken.push(format!(
            "rule 4: the host went from {start:?} to {now:?} with {waiters} waiters"
        ));
    }
    broken
}

/// For a failure's message: what each launch of the schedule left on stderr.
pub fn stderr_of_launches(world: &World) -> String {
    let mut text = String::new();
    let runs: HashMap<u64, Vec<(u32, String)>> = world.runs();
    for rec in &world.recs {
        let said = fs::read_to_string(&rec.stderr).unwrap_or_default();
        text.push_str(&format!(
            "  launch {} (step {}, {}): status {:?}, ran {:?}, told {:?}\n    {}\n",
            rec.id,
            rec.step,
            rec.launch,
            rec.status,
            runs.get(&rec.id),
            rec.told_unit,
            said.trim_end().replace('\n', "\n    ")
        ));
    }
    text
}

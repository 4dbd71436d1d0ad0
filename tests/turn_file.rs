//! The turn file (`$XDG_RUNTIME_DIR/synaps-scope.turn`) held by a process that stopped in the
//! middle of a draw, as one stopped by a debugger or a job-control signal would (its lock on the
//! header, bytes 0-24): each of 32 launches at once waits the 500 ms no-turn rule and no more, at
//! the CPU cost of a blocked wait, then talks to the manager and starts in its scope.

mod common;

#[path = "common/burst.rs"]
mod burst;

use std::fs::OpenOptions;
use std::process::Command;
use std::time::Duration;

use common::{rig, with_wrapper, Manager, TempDir};
use nix::fcntl::{fcntl, FcntlArg};
use nix::libc;
use synaps_scope::{launcher_for_env, set_env};

/// CPU time of this process's waited-for children so far (`cutime` + `cstime` of /proc/self/stat).
fn children_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<u64> = stat
        .rsplit(") ")
        .next()
        .unwrap()
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // Fields 16 and 17 of the whole line; clock ticks of 10 ms.
    Duration::from_millis((fields[13] + fields[14]) * 10)
}

#[test]
fn a_stopped_holder_of_the_header_costs_each_of_32_launches_the_no_turn_rule_only() {
    let Some(rig) = rig() else { return };
    let manager = Manager::start(&rig);
    let env = with_wrapper(&manager.env(), "synaps-scope-exec");
    let launcher = launcher_for_env(&env).unwrap().expect("the manager runs");
    let runtime = env
        .iter()
        .find(|(k, _)| k == "XDG_RUNTIME_DIR")
        .map(|(_, v)| v.clone())
        .unwrap();
    let turn_file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(std::path::Path::new(&runtime).join("synaps-scope.turn"))
        .unwrap();
    let header = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 24,
        l_pid: 0,
    };
    fcntl(&turn_file, FcntlArg::F_OFD_SETLK(&header)).expect("the header's lock");

    let dir = TempDir::new("turn-header");
    let log = burst::log_in(dir.path(), "held-header");
    let cpu_before = children_cpu();
    let outcome = burst::at_once(32, &log, |i| {
        let wrapped = launcher.wrap(&burst::recording_argv(&log, i), &env, None);
        let mut cmd = Command::new(&wrapped.argv[0]);
        cmd.args(&wrapped.argv[1..]);
        set_env(&mut cmd, &env);
        cmd
    });
    let cpu = children_cpu().saturating_sub(cpu_before);
    drop(turn_file);
    eprintln!(
        "32 launches with the turn file's header held: {}; their CPU {cpu:?}",
        outcome.summary()
    );
    assert_eq!(outcome.not_once(), vec![], "each command runs exactly once");
    assert_eq!(outcome.scoped, 32, "{:?}", outcome.stderr.first());
    assert!(
        outcome.wall < Duration::from_millis(2500),
        "the last exit came {:?} after the first start",
        outcome.wall
    );
    assert!(
        cpu < Duration::from_millis(1500),
        "the launches used {cpu:?} of CPU"
    );
}

//! A burst of launches (issue 22), side by side in one run, inside the test rig:
//!
//!   scripts/systemd-rig.sh [--systemd 262] -- cargo bench -p synaps-scope-cli --bench burst
//!   SYNAPS_BENCH_QUICK=1 …   (256 at once only, as CI does)
//!
//! `synaps-scope run` (with the launcher program) against bare `systemd-run --user --scope`:
//! 64 and 256 launches at once, and 1,000 from 256 threads that each launch one after another.
//! Each command records the cgroup it starts in. Reported for each: how many started in their
//! scope, the time to the last exit, and the manager's CPU time per launch (its cgroup's
//! cpu.stat). Exits 1 unless every `synaps-scope run` started scoped, exactly once, and each burst
//! of them ended sooner than the same burst of bare systemd-run.

#[path = "../../../tests/common/burst.rs"]
mod burst;
#[path = "../../../tests/common/mod.rs"]
mod common;

use std::process::Command;

use burst::Outcome;
use common::TempDir;
use synaps_scope::{inherited_env, set_env};

/// A launch of `argv` the way `side` launches.
fn launch(
    side: &str,
    argv: &[std::ffi::OsString],
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> Command {
    let mut cmd = match side {
        "synaps-scope run" => {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_synaps-scope"));
            cmd.args(["run", "--"]);
            cmd
        }
        _ => {
            let mut cmd = Command::new("systemd-run");
            cmd.args(["--user", "--scope", "--quiet", "--collect"]);
            // From 254 systemd-run expands `$…` in the command line (262 by default), which
            // would rewrite the recording script's `$$`, `$0` and `$1`.
            if common::rig().is_some_and(|rig| rig.version >= 254) {
                cmd.arg("--expand-environment=no");
            }
            cmd.arg("--");
            cmd
        }
    };
    cmd.args(argv);
    set_env(&mut cmd, env);
    cmd
}

fn main() {
    common::rig().expect("run inside scripts/systemd-rig.sh");
    let quick = std::env::var_os("SYNAPS_BENCH_QUICK").is_some();
    let env = common::with_wrapper(&inherited_env(), "synaps-scope-exec");
    let dir = TempDir::new("burst-bench");
    // (shape, launches, threads: None for all at once)
    let shapes: &[(&str, usize, Option<usize>)] = if quick {
        &[("256 at once", 256, None)]
    } else {
        &[
            ("64 at once", 64, None),
            ("256 at once", 256, None),
            ("1,000 from 256 threads", 1000, Some(256)),
        ]
    };
    let version = std::env::var("SYNAPS_RIG_SYSTEMD_VERSION").unwrap_or_default();
    println!(
        "systemd {version}: a burst of launches, each command recording its cgroup as it starts"
    );
    let mut ok = true;
    for &(shape, launches, threads) in shapes {
        let mut results: Vec<(&str, Outcome)> = Vec::new();
        for side in ["synaps-scope run", "systemd-run"] {
            let log = burst::log_in(dir.path(), "burst");
            let command = |i| launch(side, &burst::recording_argv(&log, i), &env);
            let outcome = match threads {
                None => burst::at_once(launches, &log, command),
                Some(threads) => burst::from_threads(threads, launches, &log, command),
            };
            println!("  {shape:<24} {side:<17} {}", outcome.summary());
            results.push((side, outcome));
            // Let the manager collect the burst's scopes before the next side starts.
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
        let (ours, theirs) = (&results[0].1, &results[1].1);
        if ours.scoped != ours.launched || !ours.not_once().is_empty() {
            println!(
                "  MISSED: not every synaps-scope run started scoped exactly once: {:?}",
                ours.stderr.first()
            );
            ok = false;
        }
        let ratio = ours.wall.as_secs_f64() / theirs.wall.as_secs_f64();
        let cpu_ratio = ours.manager_cpu_per_launch().as_secs_f64()
            / theirs.manager_cpu_per_launch().as_secs_f64().max(1e-9);
        println!(
            "  {shape:<24} time to the last exit {ratio:.2}x systemd-run's, manager CPU per launch {cpu_ratio:.2}x ({})",
            if ratio < 1.0 { "met: sooner" } else { "MISSED: not sooner" }
        );
        ok &= ratio < 1.0;
    }
    if !ok {
        std::process::exit(1);
    }
}

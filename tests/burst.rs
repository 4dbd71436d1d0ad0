//! A burst of launches (issue 22): 1,000 launches from 256 threads of one host on a healthy
//! manager with the default bound, each a library request (`decide`, then a spawn of the wrapped
//! argv) whose command records where it runs as it starts. None goes direct and none runs twice.
//! How many start in their scope is reported: with 256 launcher programs always waiting their
//! turn with the manager, some wait past their bound and run, as documented, before their scope
//! is made (docs/guarantees.md, "Bursts").

mod common;

#[path = "common/burst.rs"]
mod burst;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use common::{rig, TempDir};
use synaps_scope::{decide, inherited_env, set_env, Decision, LauncherOptions, ScopeKind};

const THREADS: usize = 256;
const LAUNCHES: usize = 1000;

#[test]
fn a_thousand_launches_from_256_threads_none_direct_none_twice() {
    let Some(_rig) = rig() else { return };
    let env = Arc::new(common::with_wrapper(&inherited_env(), "synaps-scope-exec"));
    let dir = TempDir::new("burst-threads");
    let log = Arc::new(burst::log_in(dir.path(), "threads"));
    let direct = Arc::new(AtomicUsize::new(0));
    let cpu_before = burst::manager_cpu();
    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (env, log, direct, next) = (
                Arc::clone(&env),
                Arc::clone(&log),
                Arc::clone(&direct),
                Arc::clone(&next),
            );
            std::thread::spawn(move || loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= LAUNCHES {
                    break;
                }
                let argv = burst::recording_argv(&log, n);
                let argv = match decide(&env, ScopeKind::Tool, &LauncherOptions::default()) {
                    Ok(Decision::Scoped(launcher)) => launcher.wrap(&argv, &env, None).argv,
                    other => {
                        eprintln!("launch {n} direct: {other:?}");
                        direct.fetch_add(1, Ordering::Relaxed);
                        argv
                    }
                };
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null());
                set_env(&mut cmd, &env);
                assert!(cmd.status().unwrap().success(), "launch {n}");
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let wall = started.elapsed();
    let cpu = burst::manager_cpu().saturating_sub(cpu_before);
    let (scoped, runs) = burst::read_log(&log);
    let launches = LAUNCHES;
    eprintln!(
        "{launches} launches from {THREADS} threads: {} direct, {scoped} scoped, last exit after \
         {:.2} s, manager CPU {:.2} ms per launch",
        direct.load(Ordering::Relaxed),
        wall.as_secs_f64(),
        cpu.as_secs_f64() * 1e3 / launches as f64
    );
    assert_eq!(direct.load(Ordering::Relaxed), 0, "none goes direct");
    let not_once: Vec<_> = (0..launches).filter(|n| runs.get(n) != Some(&1)).collect();
    assert_eq!(
        not_once,
        Vec::<usize>::new(),
        "each command runs exactly once"
    );
}

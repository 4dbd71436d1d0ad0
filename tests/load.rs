//! Load (issue 7): 500 launch requests from 32 threads against one manager, and the same while
//! the manager is stopped for 2 s in the middle. Every request runs scoped in its own unit or
//! direct with a WARN, none runs twice, none waits past the probe bound, and the manager's
//! synaps-* unit count returns to its baseline (--collect at work).

mod common;

use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{rig, run_argv, signal, Capture, Manager, Signal, TempDir};
use synaps_scope::{decide, Decision, LauncherOptions, ScopeKind, DEFAULT_PROBE_TIMEOUT};

const REQUESTS: usize = 500;
const THREADS: usize = 32;

/// The two load tests run one after the other: each is meant to be 32 threads against a manager
/// on a 2-core machine, not 64 competing for it.
static ONE_LOAD_AT_A_TIME: Mutex<()> = Mutex::new(());

fn synaps_units(env: &[(OsString, OsString)]) -> usize {
    common::list_units(env, &["synaps-*"])
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
}

/// Whether every unit of `list-units` output `units` is a scope of ours whose cgroup holds no
/// process, asked of the manager that `env` reaches.
fn scopes_hold_no_process(units: &str, env: &[(OsString, OsString)]) -> bool {
    units
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .all(|unit| {
            match synaps_scope::ScopeHandle::from_manager(unit, env, Duration::from_secs(3)) {
                Ok(handle) => handle.pids().is_ok_and(|pids| pids.is_empty()),
                Err(synaps_scope::HandleError::NotFound { .. }) => true,
                Err(_) => false,
            }
        })
}

fn load(stop_midway: bool) {
    let Some(rig) = rig() else { return };
    let _alone = ONE_LOAD_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let manager = Manager::start(&rig);
    let env = Arc::new(manager.env());
    let baseline = synaps_units(&env);
    let dir = TempDir::new(if stop_midway { "load-stopped" } else { "load" });
    let log = Arc::new(dir.path().join("ran.log"));
    let next = Arc::new(AtomicUsize::new(0));
    let capture = Capture::default();
    // Shorter than the stop, so requests caught by it time out and go direct.
    let bound = if stop_midway {
        Duration::from_secs(1)
    } else {
        DEFAULT_PROBE_TIMEOUT
    };

    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (env, log, next, capture) = (
                Arc::clone(&env),
                Arc::clone(&log),
                Arc::clone(&next),
                capture.clone(),
            );
            std::thread::spawn(move || {
                capture.run(|| {
                    let mut outcomes = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        if i >= REQUESTS {
                            return outcomes;
                        }
                        let started = Instant::now();
                        let options = LauncherOptions {
                            probe_timeout: bound,
                        };
                        let decision = decide(&env, ScopeKind::Tool, &options).unwrap();
                        let waited = started.elapsed();
                        assert!(
                            waited < bound + Duration::from_millis(500),
                            "request {i} waited {waited:?}"
                        );
                        let script = format!(
                            "echo \"$1 $(grep ^0:: /proc/$$/cgroup | cut -c4-)\" >> '{}'",
                            log.display()
                        );
                        let argv: Vec<OsString> = vec![
                            "sh".into(),
                            "-c".into(),
                            script.into(),
                            "sh".into(),
                            i.to_string().into(),
                        ];
                        let (argv, unit) = match decision {
                            Decision::Scoped(launcher) => {
                                let wrapped = launcher.wrap(&argv, &env, None);
                                (wrapped.argv, wrapped.unit)
                            }
                            Decision::Direct(_) => (argv, None),
                        };
                        let out = run_argv(&argv, &env).unwrap();
                        assert!(
                            out.status.success(),
                            "request {i}: {}: {}",
                            out.status,
                            String::from_utf8_lossy(&out.stderr)
                        );
                        let fell_back = String::from_utf8_lossy(&out.stderr)
                            .contains("synaps-scope-exec: warning: running");
                        let unconfirmed =
                            String::from_utf8_lossy(&out.stderr).contains("before its scope");
                        outcomes.push((i, (unit, fell_back, unconfirmed)));
                    }
                })
            })
        })
        .collect();

    if stop_midway {
        while next.load(Ordering::SeqCst) < REQUESTS / 2 {
            std::thread::sleep(Duration::from_millis(5));
        }
        signal(manager.pid(), Signal::STOP);
        std::thread::sleep(Duration::from_secs(2));
        signal(manager.pid(), Signal::CONT);
    }
    let outcomes: HashMap<usize, (Option<String>, bool, bool)> = workers
        .into_iter()
        .flat_map(|w| w.join().expect("a load thread panicked"))
        .collect();
    assert_eq!(outcomes.len(), REQUESTS);

    let text = std::fs::read_to_string(&*log).unwrap();
    let mut ran: HashMap<usize, Vec<String>> = HashMap::new();
    for line in text.lines() {
        let (i, cgroup) = line.split_once(' ').unwrap();
        ran.entry(i.parse().unwrap())
            .or_default()
            .push(cgroup.to_owned());
    }
    let mut scoped = 0;
    let mut fell_back = 0;
    for (i, (unit, unscoped_with_warning, unconfirmed)) in &outcomes {
        let cgroups = ran
            .get(i)
            .unwrap_or_else(|| panic!("request {i} never ran"));
        assert_eq!(cgroups.len(), 1, "request {i} ran {} times", cgroups.len());
        match unit {
            // The launcher program could not make the scope by its bound: the command ran once
            // and said why on its stderr (A3); unscoped, or, when the manager had the request but
            // had not answered, wherever the manager put it by the time it looked.
            Some(unit) if *unscoped_with_warning => {
                assert!(
                    *unconfirmed || !cgroups[0].contains("synaps-tool-"),
                    "{}",
                    cgroups[0]
                );
                assert!(
                    !cgroups[0].contains("synaps-tool-")
                        || cgroups[0].ends_with(&format!("/{unit}")),
                    "request {i} ran in another request's scope: {}",
                    cgroups[0]
                );
                fell_back += 1;
            }
            Some(unit) => {
                assert!(
                    cgroups[0].ends_with(&format!("/{unit}")),
                    "request {i} ran in {}, not {unit}",
                    cgroups[0]
                );
                scoped += 1;
            }
            None => assert!(
                !cgroups[0].contains("synaps-tool-"),
                "a direct request {i} ran in {}",
                cgroups[0]
            ),
        }
    }
    let direct = REQUESTS - scoped - fell_back;
    let warnings = capture.warnings();
    assert_eq!(
        direct > 0,
        !warnings.is_empty(),
        "{direct} direct launches, warnings {warnings:?}"
    );
    if stop_midway {
        assert!(
            direct + fell_back > 0,
            "requests caught by the stop went direct"
        );
    } else {
        assert_eq!(
            direct + fell_back,
            0,
            "a running manager scopes every request"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while synaps_units(&env) != baseline && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Nothing launched is left running in a scope. Under a 2 s SIGSTOP, systemd 254 and 262 have
    // each once (in about thirty runs, both times through systemd-run) kept a scope listed as
    // active after its cgroup emptied, a stale entry of the manager's own that --collect never
    // reaches; it is reported, and allowed only when the manager was stopped and the scope is
    // empty. With a running manager every scope must be collected.
    let stale = common::list_units(&env, &["synaps-*"]);
    let left = synaps_units(&env).saturating_sub(baseline);
    if left > 0 {
        let status = common::unit_status(&env, "synaps-*");
        assert!(
            stop_midway && scopes_hold_no_process(&stale, &env),
            "scopes leaked:\n{stale}\n{status}"
        );
        eprintln!(
            "load: the manager kept {left} empty scope(s) listed as active:\n{stale}\n{status}"
        );
    }
    eprintln!(
        "load (stopped midway: {stop_midway}): {scoped} scoped, {direct} direct, {fell_back} \
         unscoped by the launcher program, all ran once"
    );
}

#[test]
fn five_hundred_requests_from_32_threads() {
    load(false);
}

#[test]
fn five_hundred_requests_with_the_manager_stopped_for_two_seconds() {
    load(true);
}

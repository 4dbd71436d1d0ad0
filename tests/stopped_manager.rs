//! A stopped manager (SIGSTOP) makes systemd-run hang; the probe is bounded, the probe process
//! is killed and reaped, and the launch goes direct (R6, R11). Each test has a manager of its own.

mod common;

use std::time::{Duration, Instant};

use common::{rig, signal, systemd_runs_for, zombie_children, Capture, Manager, Signal, TempDir};
use synaps_scope::{decide, launcher_for_env, Decision, DirectReason, LauncherOptions, ScopeKind};

#[test]
fn a_stopped_manager_means_direct_within_the_default_bound_and_no_probe_is_left_behind() {
    let Some(rig) = rig() else { return };
    let manager = Manager::start(&rig);
    let env = manager.env();
    assert!(
        launcher_for_env(&env).unwrap().is_some(),
        "the manager answers while running"
    );

    signal(manager.pid(), Signal::STOP);
    let capture = Capture::default();
    let started = Instant::now();
    let decision = capture
        .run(|| decide(&env, ScopeKind::Tool, &LauncherOptions::default()))
        .unwrap();
    let elapsed = started.elapsed();
    signal(manager.pid(), Signal::CONT);

    let Decision::Direct(DirectReason::ProbeFailed {
        slice: None,
        detail,
    }) = decision
    else {
        panic!("{decision:?}")
    };
    assert!(detail.contains("timed out after"), "{detail}");
    assert!(
        elapsed >= Duration::from_secs(3),
        "returned before the bound: {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_millis(3500),
        "returned after the bound + 0.5 s: {elapsed:?}"
    );
    assert_eq!(zombie_children(), Vec::<u32>::new(), "the probe was reaped");
    assert_eq!(
        systemd_runs_for(&manager.runtime_dir),
        Vec::<u32>::new(),
        "the probe was killed"
    );
    let warnings = capture.warnings();
    assert_eq!(
        warnings.len(),
        1,
        "{warnings:?} {:?}",
        capture.at(tracing::Level::DEBUG)
    );
    assert!(
        warnings[0].contains("the default slice") && warnings[0].contains("timed out after"),
        "{warnings:?}"
    );
}

#[test]
fn a_caller_chosen_bound_is_kept_too() {
    let Some(rig) = rig() else { return };
    let manager = Manager::start(&rig);
    let dir = TempDir::new("r6bound");
    let config = dir.write("config", "tool_scope_slice = r6bound.slice\n", false);
    let mut env = manager.env();
    env.push(("SYNAPS_CONFIG".into(), config.into_os_string()));

    signal(manager.pid(), Signal::STOP);
    let options = LauncherOptions {
        probe_timeout: Duration::from_millis(400),
    };
    let started = Instant::now();
    let decision = decide(&env, ScopeKind::Tool, &options).unwrap();
    let elapsed = started.elapsed();
    signal(manager.pid(), Signal::CONT);
    assert!(
        matches!(&decision, Decision::Direct(DirectReason::ProbeFailed { slice: Some(s), .. }) if s == "r6bound.slice"),
        "{decision:?}"
    );
    assert!(
        elapsed >= Duration::from_millis(400) && elapsed < Duration::from_millis(900),
        "{elapsed:?}"
    );
    assert_eq!(systemd_runs_for(&manager.runtime_dir), Vec::<u32>::new());
    assert!(
        launcher_for_env(&env).unwrap().is_some(),
        "a resumed manager answers the next fresh probe"
    );
}

#[test]
fn sixty_four_threads_against_a_stopped_manager_each_answer_within_their_own_bound() {
    let Some(rig) = rig() else { return };
    let manager = Manager::start(&rig);
    // A slice of its own, so that its once-per-slice warning is not another test's.
    let dir = TempDir::new("stopped64");
    let config = dir.write("config", "tool_scope_slice = stopped64.slice\n", false);
    let mut env = manager.env();
    env.push(("SYNAPS_CONFIG".into(), config.into()));
    let env = std::sync::Arc::new(env);
    assert!(launcher_for_env(&env).unwrap().is_some());
    signal(manager.pid(), Signal::STOP);
    let bound = Duration::from_millis(500);
    let requests: Vec<_> = (0..64)
        .map(|_| {
            let env = std::sync::Arc::clone(&env);
            std::thread::spawn(move || {
                let started = Instant::now();
                let options = LauncherOptions {
                    probe_timeout: bound,
                };
                let decision = decide(&env, ScopeKind::Tool, &options).unwrap();
                (started.elapsed(), decision)
            })
        })
        .collect();
    let answers: Vec<_> = requests.into_iter().map(|r| r.join().unwrap()).collect();
    signal(manager.pid(), Signal::CONT);
    for (took, decision) in answers {
        assert!(
            matches!(decision, Decision::Direct(DirectReason::ProbeFailed { .. })),
            "{decision:?}"
        );
        assert!(
            took < bound + Duration::from_millis(100),
            "answered after {took:?}"
        );
    }
}

//! After a successful probe, a failed wrapped launch is an error and the command never runs
//! directly instead (R13); with the launcher program, a scope that cannot be made means the
//! command has not run yet, so it runs once unscoped with a warning, or in `required` mode not at
//! all, with status 125 (A3).

mod common;

use std::ffi::OsString;

use common::{rig, run_argv, with_wrapper, Manager, TempDir};
use synaps_scope::{launcher_for_env, EXEC_FAILED_STATUS};

#[test]
fn a_manager_killed_after_the_probe_makes_the_launch_fail_and_nothing_replays_it() {
    let Some(rig) = rig() else { return };
    let mut manager = Manager::start(&rig);
    let env = with_wrapper(&manager.env(), "systemd-run");
    let launcher = launcher_for_env(&env).unwrap().expect("the probe succeeds");
    let dir = TempDir::new("r13");
    let marker = dir.path().join("ran");
    let argv: Vec<OsString> = vec!["touch".into(), marker.clone().into_os_string()];
    let wrapped = launcher.wrap(&argv, &env, None);
    assert!(wrapped.unit.is_some());

    manager.kill();
    let out = run_argv(&wrapped.argv, &env).expect("systemd-run itself starts");
    assert!(
        !out.status.success(),
        "the wrapped launch must fail without a manager"
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        !marker.exists(),
        "the command ran although its scope could not be made"
    );
}

/// What the launcher program does when the manager is gone by the time it runs, in `mode`:
/// (exit status, stderr, how many times the command ran).
fn exec_launch_after_the_manager_died(mode: &str) -> (Option<i32>, String, usize) {
    let rig = rig().expect("a rig");
    let mut manager = Manager::start(&rig);
    let mut env = with_wrapper(&manager.env(), "synaps-scope-exec");
    env.push(("SYNAPS_PROCESS_SCOPES".into(), mode.into()));
    let launcher = launcher_for_env(&env).unwrap().expect("the probe succeeds");
    let dir = TempDir::new(&format!("a3-{mode}"));
    let log = dir.path().join("ran");
    let script = format!("echo ran >> '{}'", log.display());
    let argv: Vec<OsString> = vec!["sh".into(), "-c".into(), script.into()];
    let wrapped = launcher.wrap(&argv, &env, None);
    manager.kill();
    let out = run_argv(&wrapped.argv, &env).expect("the launcher program starts");
    let runs = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .count();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        runs,
    )
}

#[test]
fn with_the_launcher_program_a_scope_that_cannot_be_made_runs_the_command_once_unscoped_with_a_warning(
) {
    if rig().is_none() {
        return;
    }
    let (status, stderr, runs) = exec_launch_after_the_manager_died("on");
    assert_eq!((status, runs), (Some(0), 1), "{stderr}");
    assert!(
        stderr.contains("warning: running /") && stderr.contains("without a scope"),
        "{stderr}"
    );
}

#[test]
fn with_the_launcher_program_in_required_mode_the_command_never_runs_and_the_status_is_125() {
    if rig().is_none() {
        return;
    }
    let (status, stderr, runs) = exec_launch_after_the_manager_died("required");
    assert_eq!((status, runs), (Some(EXEC_FAILED_STATUS), 0), "{stderr}");
    assert!(
        stderr.contains("not running /") && stderr.contains("process scopes are required"),
        "{stderr}"
    );
}

/// Issue 13, item 13: a manager that stops right after the probe holds the launch through the
/// launcher program no longer than the request's bound, and a launch that failed before the
/// command ran is told from the command's own status: 125 in `required` mode; in `on` mode the
/// command runs once, unscoped, with the line that says the scope was not confirmed.
#[test]
fn a_manager_stopped_after_the_probe_holds_the_launch_no_longer_than_the_bound() {
    let Some(rig) = rig() else { return };
    let bound = std::time::Duration::from_millis(500);
    for mode in ["required", "on"] {
        let manager = Manager::start(&rig);
        let mut env = with_wrapper(&manager.env(), "synaps-scope-exec");
        env.push(("SYNAPS_PROCESS_SCOPES".into(), mode.into()));
        let options = synaps_scope::LauncherOptions {
            probe_timeout: bound,
        };
        let Ok(synaps_scope::Decision::Scoped(launcher)) =
            synaps_scope::decide(&env, synaps_scope::ScopeKind::Tool, &options)
        else {
            panic!("{mode}: the probe succeeds");
        };
        let dir = TempDir::new(&format!("a3-stopped-{mode}"));
        let log = dir.path().join("ran");
        let script = format!("echo ran >> '{}'", log.display());
        let argv: Vec<OsString> = vec!["sh".into(), "-c".into(), script.into()];
        let wrapped = launcher.wrap(&argv, &env, None);
        common::signal(manager.pid(), common::Signal::STOP);
        let started = std::time::Instant::now();
        let out = run_argv(&wrapped.argv, &env).expect("the launcher program starts");
        let took = started.elapsed();
        common::signal(manager.pid(), common::Signal::CONT);
        let runs = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            took < bound + std::time::Duration::from_millis(300),
            "{mode}: the launch waited {took:?}"
        );
        match mode {
            "required" => assert_eq!(
                (out.status.code(), runs),
                (Some(EXEC_FAILED_STATUS), 0),
                "{stderr}"
            ),
            _ => {
                assert_eq!((out.status.code(), runs), (Some(0), 1), "{stderr}");
                assert!(stderr.contains("warning: running /"), "{stderr}");
            }
        }
    }
}

//! A slice that does not exist is created on the fly without limits; the library warns once, from
//! a background thread that never delays the launch (R12). A check the manager did not answer
//! (stopped, busy) asks again on its own, with no further request, and the warning still comes,
//! once; a check that keeps failing is reported once (issues 15 and 21). The questions go over
//! the library's own D-Bus client: no `systemctl` is needed on PATH.

mod common;

use std::time::{Duration, Instant};

use common::{env_with, rig, signal, Capture, Manager, Signal, SlowManager, TempDir};
use synaps_scope::{decide, launcher_for_env, Decision, LauncherOptions, ScopeKind};

fn config_for(dir: &TempDir, slice: &str) -> std::ffi::OsString {
    dir.write(
        &format!("{slice}.config"),
        &format!("tool_scope_slice = {slice}\n"),
        false,
    )
    .into_os_string()
}

/// A PATH whose one directory (made in `dir`) holds systemd-run and nothing else: either wrapper
/// can be found, and no `systemctl`.
fn path_with_systemd_run_alone(dir: &TempDir) -> std::ffi::OsString {
    let real =
        synaps_scope::find_program("systemd-run".as_ref(), &synaps_scope::inherited_env(), None)
            .expect("systemd-run on PATH");
    let bin = dir.path().join("systemd-run-alone");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(real, bin.join("systemd-run")).unwrap();
    bin.into_os_string()
}

#[test]
fn an_undefined_slice_warns_once_after_the_request_has_returned() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("r12undefined");
    // The manager answers the slice check a second late: the request must not wait for it. No
    // systemctl on PATH: the library asks the manager itself.
    let slow = SlowManager::slice_checks_in_front_of_the_rig("1", false);
    let env = env_with(&[
        ("XDG_RUNTIME_DIR", &slow.runtime_dir()),
        ("PATH", &path_with_systemd_run_alone(&dir)),
        ("SYNAPS_CONFIG", &config_for(&dir, "r12undefined.slice")),
    ]);
    // The stand-in is a relay in front of the manager: systemd-run, which would lose the launch
    // behind one, is never used there (tests/host_relay.rs), so the launcher program is.
    let env = common::with_wrapper(&env, "synaps-scope-exec");

    let capture = Capture::default();
    let started = Instant::now();
    let launcher = capture
        .run(|| launcher_for_env(&env))
        .unwrap()
        .expect("an undefined slice is not refused");
    let returned_after = started.elapsed();
    assert_eq!(launcher.slice(), Some("r12undefined.slice"));
    assert!(
        returned_after < Duration::from_millis(900),
        "the request waited for the check: {returned_after:?}"
    );
    assert!(
        !capture.wait_for("slice check finished", Duration::ZERO),
        "the check finished before the request returned"
    );

    assert!(
        capture.wait_for("slice check finished", Duration::from_secs(10)),
        "the check never finished"
    );
    for _ in 0..3 {
        assert!(capture.run(|| launcher_for_env(&env)).unwrap().is_some());
    }
    std::thread::sleep(Duration::from_millis(1500));
    let warnings = capture.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("slice r12undefined.slice sets no limits"),
        "{warnings:?}"
    );
    assert!(
        warnings[0].contains("typo") && warnings[0].contains("daemon-reload"),
        "{warnings:?}"
    );
    assert!(
        warnings[0].contains("no unit file defines it"),
        "{warnings:?}"
    );
}

#[test]
fn a_slice_with_a_limit_set_gives_no_warning() {
    let Some(_rig) = rig() else { return };
    let status = std::process::Command::new("systemctl")
        .args([
            "--user",
            "set-property",
            "--runtime",
            "r12limited.slice",
            "MemoryMax=1G",
        ])
        .status()
        .unwrap();
    assert!(status.success(), "systemctl set-property failed");
    let dir = TempDir::new("r12limited");
    let env = env_with(&[("SYNAPS_CONFIG", &config_for(&dir, "r12limited.slice"))]);
    let capture = Capture::default();
    assert!(capture.run(|| launcher_for_env(&env)).unwrap().is_some());
    assert!(
        capture.wait_for("slice check finished", Duration::from_secs(10)),
        "the check never finished"
    );
    assert!(
        capture
            .at(tracing::Level::DEBUG)
            .iter()
            .any(|l| l.contains("limited=true")),
        "{:?}",
        capture.at(tracing::Level::DEBUG)
    );
    assert_eq!(capture.warnings(), Vec::<String>::new());
}

/// A manager of the test's own whose answers to slice checks come `seconds` late, with a config
/// that names `slice`.
fn slow_checks(
    rig: &common::Rig,
    slice: &str,
    seconds: &str,
) -> (Manager, SlowManager, TempDir, Env) {
    let manager = Manager::start(rig);
    let slow = SlowManager::slice_checks(&manager.runtime_dir, seconds, false);
    let dir = TempDir::new(slice.trim_end_matches(".slice"));
    let env = synaps_scope::with_overrides(
        &manager.env(),
        &[
            ("XDG_RUNTIME_DIR".into(), slow.runtime_dir()),
            ("SYNAPS_CONFIG".into(), config_for(&dir, slice)),
        ],
    );
    // The stand-in is a relay in front of the manager: systemd-run, which would lose the launch
    // behind one, is never used there (tests/host_relay.rs), so the launcher program is.
    let env = common::with_wrapper(&env, "synaps-scope-exec");
    (manager, slow, dir, env)
}

type Env = Vec<(std::ffi::OsString, std::ffi::OsString)>;

/// How many slice checks have failed so far.
fn failed_checks(capture: &Capture) -> usize {
    capture
        .at(tracing::Level::DEBUG)
        .iter()
        .filter(|l| l.contains("could not read the limits"))
        .count()
}

/// What the slice checks logged, for a failing assertion's message.
fn slice_lines(capture: &Capture) -> Vec<String> {
    let mut lines = capture.at(tracing::Level::DEBUG);
    lines.extend(capture.warnings());
    lines.retain(|l| l.contains("slice i15") || l.contains("slice=i15"));
    lines
}

fn scoped(env: &[(std::ffi::OsString, std::ffi::OsString)], bound: Duration) -> bool {
    let options = LauncherOptions {
        probe_timeout: bound,
    };
    matches!(
        decide(env, ScopeKind::Tool, &options),
        Ok(Decision::Scoped(_))
    )
}

#[test]
fn a_check_the_stopped_manager_did_not_answer_asks_again_on_its_own_and_warns_once() {
    let Some(rig) = rig() else { return };
    let slice = "i15stopped.slice";
    // The check's questions reach the manager 0.2 s late, so they are still on their way when
    // the manager stops.
    let (manager, _slow, _dir, env) = slow_checks(&rig, slice, "0.2");
    let bound = Duration::from_millis(400);
    let capture = Capture::default();

    assert!(
        capture.run(|| scoped(&env, bound)),
        "the first request is scoped"
    );
    // The manager stops for longer than the check's bound.
    signal(manager.pid(), Signal::STOP);
    assert!(
        capture.wait_for("could not read the limits", Duration::from_secs(5)),
        "the check did not fail against the stopped manager: {:?}",
        slice_lines(&capture)
    );
    std::thread::sleep(Duration::from_millis(300));
    signal(manager.pid(), Signal::CONT);
    assert!(capture.warnings().is_empty(), "{:?}", capture.warnings());

    // No further request: the check asks again by itself, after its pause, and warns.
    assert!(
        capture.wait_for("sets no limits", Duration::from_secs(10)),
        "the warning never came: {:?}",
        slice_lines(&capture)
    );
    for _ in 0..5 {
        assert!(capture.run(|| scoped(&env, Duration::from_secs(3))));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let warnings = capture.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(&format!("slice {slice} sets no limits")),
        "{warnings:?}"
    );
    let attempts = failed_checks(&capture);
    assert!(
        attempts < 3,
        "asked again without a pause: {attempts} failed checks"
    );
}

#[test]
fn a_check_that_keeps_failing_is_reported_once_with_the_slice_and_why() {
    let Some(rig) = rig() else { return };
    let slice = "i15failing.slice";
    // The manager answers every slice check later than the check's bound.
    let (_manager, _slow, _dir, env) = slow_checks(&rig, slice, "5");
    let bound = Duration::from_millis(300);
    let capture = Capture::default();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(8) {
        let request = Instant::now();
        assert!(capture.run(|| scoped(&env, bound)));
        assert!(
            request.elapsed() < bound + Duration::from_millis(100),
            "a request waited for the check: {:?}",
            request.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let warnings = capture.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(&format!(
            "could not check whether slice {slice} sets any limits"
        )) && warnings[0].contains("3 attempts")
            && warnings[0].contains("timed out"),
        "{warnings:?}"
    );
    let attempts = failed_checks(&capture);
    assert!(
        (3..=5).contains(&attempts),
        "the pause doubles (1 s, 2 s, 4 s): {attempts} failed checks in 8 s"
    );
}

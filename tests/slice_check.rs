//! A slice that does not exist is created on the fly without limits; the library warns once, from
//! a background thread that never delays the launch (R12).

mod common;

use std::time::{Duration, Instant};

use common::{env_with, path_with_first, rig, Capture, TempDir};
use synaps_scope::launcher_for_env;

fn config_for(dir: &TempDir, slice: &str) -> std::ffi::OsString {
    dir.write(
        &format!("{slice}.config"),
        &format!("tool_scope_slice = {slice}\n"),
        false,
    )
    .into_os_string()
}

#[test]
fn an_undefined_slice_warns_once_after_the_request_has_returned() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("r12undefined");
    // A systemctl that answers a second late, first on PATH: the request must not wait for it.
    let real =
        synaps_scope::resolve_program("systemctl".as_ref(), &synaps_scope::inherited_env(), None)
            .unwrap();
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    dir.write(
        "bin/systemctl",
        &format!("#!/bin/sh\nsleep 1\nexec '{}' \"$@\"\n", real.display()),
        true,
    );
    let env = env_with(&[
        ("PATH", &path_with_first(&dir.path().join("bin"))),
        ("SYNAPS_CONFIG", &config_for(&dir, "r12undefined.slice")),
    ]);

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

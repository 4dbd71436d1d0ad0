//! Cheap negatives (R7), the on/off/required switch (R8) and the config file (R9), against the
//! rig's real user manager. Fake systemd-run, true and systemctl programs here only leave a
//! marker when run, to prove that nothing was spawned.

mod common;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{env_with, env_without, rig, Capture, TempDir};
use synaps_scope::config::Origin;
use synaps_scope::{
    decide, launcher_for_env, Decision, DirectReason, LauncherOptions, ScopeError, ScopeKind,
};

/// A directory of programs named `names` that each append their name to `spawned.log`.
fn marker_programs(dir: &TempDir, names: &[&str]) -> (PathBuf, PathBuf) {
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.path().join("spawned.log");
    for name in names {
        dir.write(
            &format!("bin/{name}"),
            &format!("#!/bin/sh\necho {name} >> '{}'\nexit 1\n", log.display()),
            true,
        );
    }
    (bin, log)
}

fn config_env(dir: &TempDir, text: &str) -> (PathBuf, Vec<(OsString, OsString)>) {
    let path = dir.write("config", text, false);
    let env = env_with(&[("SYNAPS_CONFIG", &path.clone().into_os_string())]);
    (path, env)
}

#[test]
fn without_a_bus_address_or_without_systemd_run_the_answer_is_direct_and_nothing_is_spawned() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("r7");
    let (bin, log) = marker_programs(&dir, &["systemd-run", "true", "systemctl"]);

    let fake_first = std::env::join_paths([bin.clone(), "/usr/bin".into(), "/bin".into()]).unwrap();
    let no_bus = env_without(
        &env_with(&[("PATH", &fake_first)]),
        &["XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"],
    );
    let capture = Capture::default();
    let started = Instant::now();
    let decision = capture
        .run(|| decide(&no_bus, ScopeKind::Tool, &LauncherOptions::default()))
        .unwrap();
    assert!(
        matches!(decision, Decision::Direct(DirectReason::NoUserBus)),
        "{decision:?}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(100),
        "{:?}",
        started.elapsed()
    );

    let only_fakes_without_systemd_run = {
        std::fs::remove_file(bin.join("systemd-run")).unwrap();
        common::with_wrapper(
            &env_with(&[("PATH", &bin.clone().into_os_string())]),
            "systemd-run",
        )
    };
    let started = Instant::now();
    let decision = capture
        .run(|| {
            decide(
                &only_fakes_without_systemd_run,
                ScopeKind::Tool,
                &LauncherOptions::default(),
            )
        })
        .unwrap();
    assert!(
        matches!(decision, Decision::Direct(DirectReason::NoSystemdRun)),
        "{decision:?}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(100),
        "{:?}",
        started.elapsed()
    );

    assert!(
        !log.exists(),
        "spawned: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(
        capture.warnings(),
        Vec::<String>::new(),
        "cheap negatives are not warnings"
    );
    // The launcher program needs no systemd-run: with it, the same PATH gives scopes.
    let exec_without_systemd_run = common::with_wrapper(
        &env_with(&[("PATH", &bin.clone().into_os_string())]),
        "synaps-scope-exec",
    );
    let launcher = launcher_for_env(&exec_without_systemd_run)
        .unwrap()
        .expect("the launcher program needs no systemd-run");
    assert_eq!(launcher.wrapper().name(), "synaps-scope-exec");
    let empty_bus = env_with(&[
        ("XDG_RUNTIME_DIR", &"".into()),
        ("DBUS_SESSION_BUS_ADDRESS", &"".into()),
    ]);
    assert_eq!(
        launcher_for_env(&empty_bus).unwrap(),
        None,
        "empty values count as unset"
    );
}

#[test]
fn off_by_environment_or_by_config_file_means_no_probe_and_no_warning() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("r8off");
    let (bin, log) = marker_programs(&dir, &["systemd-run"]);
    let fake_first = std::env::join_paths([bin, "/usr/bin".into(), "/bin".into()]).unwrap();
    let capture = Capture::default();

    let by_env = env_with(&[
        ("PATH", &fake_first),
        ("SYNAPS_PROCESS_SCOPES", &"off".into()),
    ]);
    let decision = capture
        .run(|| decide(&by_env, ScopeKind::Tool, &LauncherOptions::default()))
        .unwrap();
    assert!(
        matches!(
            &decision,
            Decision::Direct(DirectReason::Off {
                origin: Origin::Environment("SYNAPS_PROCESS_SCOPES")
            })
        ),
        "{decision:?}"
    );

    let (path, mut by_file) = config_env(&dir, "process_scopes = \"off\"\n");
    by_file.push(("PATH".into(), fake_first.clone()));
    let decision = capture
        .run(|| decide(&by_file, ScopeKind::Daemon, &LauncherOptions::default()))
        .unwrap();
    assert!(
        matches!(&decision, Decision::Direct(DirectReason::Off { origin: Origin::File { path: p, line: 1 } }) if *p == path),
        "{decision:?}"
    );
    assert!(!log.exists(), "off must not probe");
    assert_eq!(capture.warnings(), Vec::<String>::new());

    let (_, mut env_wins) = config_env(&dir, "process_scopes = off\n");
    env_wins.push(("SYNAPS_PROCESS_SCOPES".into(), "on".into()));
    assert!(
        launcher_for_env(&env_wins).unwrap().is_some(),
        "the environment wins over the file"
    );
}

#[test]
fn required_turns_every_direct_outcome_into_an_error() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("r8required");
    let (_, refused) = config_env(
        &dir,
        "process_scopes = required\ntool_scope_slice = r8required.service\n",
    );
    let capture = Capture::default();
    let error = capture.run(|| launcher_for_env(&refused)).unwrap_err();
    let ScopeError::Unavailable {
        kind,
        reason: DirectReason::ProbeFailed { slice, detail },
    } = &error
    else {
        panic!("{error:?}")
    };
    assert_eq!(
        (*kind, slice.as_deref()),
        (ScopeKind::Tool, Some("r8required.service"))
    );
    assert!(detail.contains("is not a slice"), "{detail}");
    assert!(error.to_string().contains("required"), "{error}");

    let no_bus = env_without(
        &env_with(&[("SYNAPS_PROCESS_SCOPES", &"required".into())]),
        &["XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"],
    );
    let error = launcher_for_env(&no_bus).unwrap_err();
    assert!(
        matches!(
            error,
            ScopeError::Unavailable {
                reason: DirectReason::NoUserBus,
                ..
            }
        ),
        "{error:?}"
    );

    let available = env_with(&[("SYNAPS_PROCESS_SCOPES", &"required".into())]);
    assert!(
        launcher_for_env(&available).unwrap().is_some(),
        "required and available is a launcher"
    );
}

#[test]
fn an_unknown_switch_value_warns_once_naming_it_and_the_default_applies() {
    let Some(_rig) = rig() else { return };
    let env = env_with(&[("SYNAPS_PROCESS_SCOPES", &"sometimes".into())]);
    let capture = Capture::default();
    for _ in 0..3 {
        assert!(
            capture.run(|| launcher_for_env(&env)).unwrap().is_some(),
            "default is on"
        );
    }
    let warnings = capture.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("SYNAPS_PROCESS_SCOPES") && warnings[0].contains("\"sometimes\""),
        "{warnings:?}"
    );

    let dir = TempDir::new("r8unknown");
    let (path, env) = config_env(&dir, "\nprocess_scopes = maybe\n");
    assert!(capture.run(|| launcher_for_env(&env)).unwrap().is_some());
    let warnings = capture.warnings();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[1].contains(&format!("{}:2", path.display())) && warnings[1].contains("maybe"),
        "{warnings:?}"
    );
}

#[test]
fn a_malformed_line_warns_with_file_and_line_and_the_rest_still_applies() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("r9malformed");
    let (path, env) = config_env(
        &dir,
        "# synaps\nother_app_key = 1\nthis line is wrong\nprocess_scopes = off\n",
    );
    let capture = Capture::default();
    assert_eq!(
        capture.run(|| launcher_for_env(&env)).unwrap(),
        None,
        "line 4 still turns scopes off"
    );
    let warnings = capture.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(&format!("{}:3", path.display())),
        "{warnings:?}"
    );
}

#[test]
fn an_edit_to_the_config_file_applies_to_the_next_request() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("r9edit");
    let (path, env) = config_env(&dir, "process_scopes = off\n");
    assert_eq!(launcher_for_env(&env).unwrap(), None);
    std::fs::write(
        &path,
        "process_scopes = on\ntool_scope_slice = r9edited.slice\n",
    )
    .unwrap();
    let launcher = launcher_for_env(&env).unwrap().expect("on after the edit");
    assert_eq!(launcher.slice(), Some("r9edited.slice"));
    std::fs::write(&path, "process_scopes = off\n").unwrap();
    assert_eq!(launcher_for_env(&env).unwrap(), None);
}

#[test]
fn a_missing_config_file_warns_only_when_synaps_config_names_it() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("r9missing");
    let capture = Capture::default();
    let default_missing = env_with(&[(
        "XDG_CONFIG_HOME",
        &dir.path().join("nothing").into_os_string(),
    )]);
    assert!(capture
        .run(|| launcher_for_env(&default_missing))
        .unwrap()
        .is_some());
    assert_eq!(capture.warnings(), Vec::<String>::new());

    let named = dir.path().join("named-but-missing");
    let named_missing = env_with(&[("SYNAPS_CONFIG", &named.clone().into_os_string())]);
    assert!(
        capture
            .run(|| launcher_for_env(&named_missing))
            .unwrap()
            .is_some(),
        "defaults apply"
    );
    let warnings = capture.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(&named.display().to_string()),
        "{warnings:?}"
    );

    std::fs::create_dir_all(dir.path().join("xdg/synaps")).unwrap();
    std::fs::write(
        dir.path().join("xdg/synaps/config"),
        "process_scopes = off\n",
    )
    .unwrap();
    let xdg = env_with(&[("XDG_CONFIG_HOME", &dir.path().join("xdg").into_os_string())]);
    assert_eq!(
        launcher_for_env(&xdg).unwrap(),
        None,
        "$XDG_CONFIG_HOME/synaps/config is read"
    );
}

#[test]
fn scope_launcher_chooses_the_wrapper_from_the_environment_or_the_file_and_unknown_values_warn() {
    let Some(_rig) = rig() else { return };
    let exec = common::exec_program().into_os_string();
    let dir = TempDir::new("launcher-choice");
    let (_, file_env) = config_env(&dir, "scope_launcher = systemd-run\n");
    let file_env = synaps_scope::with_overrides(
        &common::env_without(&file_env, &["SYNAPS_SCOPE_LAUNCHER"]),
        &[("SYNAPS_SCOPE_EXEC".into(), exec.clone())],
    );
    let wrapper = |env: &[(OsString, OsString)]| {
        launcher_for_env(env)
            .unwrap()
            .expect("scoped")
            .wrapper()
            .name()
    };
    assert_eq!(wrapper(&file_env), "systemd-run", "from the file");
    let env_wins = synaps_scope::with_overrides(
        &file_env,
        &[("SYNAPS_SCOPE_LAUNCHER".into(), "synaps-scope-exec".into())],
    );
    assert_eq!(
        wrapper(&env_wins),
        "synaps-scope-exec",
        "the environment wins"
    );

    let capture = Capture::default();
    let unknown = synaps_scope::with_overrides(
        &file_env,
        &[("SYNAPS_SCOPE_LAUNCHER".into(), "fastest".into())],
    );
    for _ in 0..3 {
        assert_eq!(
            capture.run(|| wrapper(&unknown)),
            "systemd-run",
            "the file's value applies"
        );
    }
    let warnings = capture.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("SYNAPS_SCOPE_LAUNCHER=\"fastest\""),
        "{warnings:?}"
    );

    // `synaps-scope-exec` asked for and not installed: scopes are unavailable, and say why.
    let missing = synaps_scope::with_overrides(
        &env_wins,
        &[(
            "SYNAPS_SCOPE_EXEC".into(),
            "/nonexistent/synaps-scope-exec".into(),
        )],
    );
    match decide(&missing, ScopeKind::Tool, &LauncherOptions::default()).unwrap() {
        Decision::Direct(DirectReason::NoLauncherProgram { why }) => {
            assert!(why.contains("/nonexistent/synaps-scope-exec"), "{why}")
        }
        other => panic!("{other:?}"),
    }
}

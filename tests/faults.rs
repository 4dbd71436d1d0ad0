//! Faults (issue 7): a systemd-run that hangs, fails or prints garbage; a manager killed
//! mid-probe; XDG_RUNTIME_DIR pointing at a file; config files that are unreadable, a directory,
//! a FIFO or 10 MB of garbage. Each gives the documented outcome, a clear WARN or error, and no
//! hang past the bound.

mod common;

use std::ffi::OsString;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{env_with, path_with_first, rig, run_argv, signal, Capture, Manager, Signal, TempDir};
use synaps_scope::{decide, launcher_for_env, Decision, DirectReason, LauncherOptions, ScopeKind};

const BOUND: Duration = Duration::from_millis(500);

/// An environment whose PATH finds `systemd-run` (a script with `body`) first, with systemd-run
/// chosen as the wrapper.
fn fake_systemd_run(dir: &TempDir, body: &str) -> Vec<(OsString, OsString)> {
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    dir.write("bin/systemd-run", &format!("#!/bin/sh\n{body}\n"), true);
    env_with(&[
        ("PATH", &path_with_first(&bin)),
        ("SYNAPS_SCOPE_LAUNCHER", &"systemd-run".into()),
    ])
}

/// `body` for a fake systemd-run that hands everything but `--version` to the real one.
fn real_systemd_run_except_version(version_body: &str) -> String {
    let real =
        synaps_scope::find_program("systemd-run".as_ref(), &synaps_scope::inherited_env(), None)
            .unwrap();
    format!(
        "[ \"$1\" = --version ] && {{ {version_body}; }}\nexec '{}' \"$@\"",
        real.display()
    )
}

/// A FIFO named `name` in `dir`.
fn mkfifo(dir: &TempDir, name: &str) -> std::path::PathBuf {
    let fifo = dir.path().join(name);
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    fifo
}

/// Decides with the short bound, asserting it returned direct within bound + 0.5 s.
fn direct_within_bound(env: &[(OsString, OsString)], capture: &Capture) -> String {
    let started = Instant::now();
    let decision = capture
        .run(|| {
            decide(
                env,
                ScopeKind::Tool,
                &LauncherOptions {
                    probe_timeout: BOUND,
                },
            )
        })
        .unwrap();
    let elapsed = started.elapsed();
    assert!(
        elapsed < BOUND + Duration::from_millis(500),
        "took {elapsed:?}"
    );
    match decision {
        Decision::Direct(DirectReason::ProbeFailed { detail, .. }) => detail,
        other => panic!("expected a failed probe, got {other:?}"),
    }
}

#[test]
fn a_systemd_run_that_hangs_is_killed_at_the_bound() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("fault-hang");
    let mut env = fake_systemd_run(&dir, "exec sleep 1000");
    env.push((
        "SYNAPS_CONFIG".into(),
        dir.write("config", "tool_scope_slice = faulthang.slice\n", false)
            .into(),
    ));
    let capture = Capture::default();
    let detail = direct_within_bound(&env, &capture);
    assert!(detail.contains("--version` timed out after"), "{detail}");
    assert_eq!(capture.warnings().len(), 1, "{:?}", capture.warnings());
    assert!(
        capture.warnings()[0].contains("timed out"),
        "{:?}",
        capture.warnings()
    );
}

#[test]
fn a_systemd_run_that_fails_at_launch_fails_that_launch_and_the_command_never_runs() {
    // The probe asks the manager itself (A1), so a broken systemd-run is met at the launch: its
    // failure is the caller's error (exit 1 and its complaint), never a direct second run (R13).
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("fault-exit1");
    let marker = dir.path().join("ran");
    let env = fake_systemd_run(
        &dir,
        "[ \"$1\" = --version ] && { echo 'systemd 254'; exit 0; }\necho 'broken systemd-run' >&2; exit 1",
    );
    let launcher = launcher_for_env(&env)
        .unwrap()
        .expect("the manager answers");
    let argv = ["touch".into(), marker.clone().into_os_string()];
    let out = run_argv(&launcher.wrap(&argv, &env, None).argv, &env).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken systemd-run"));
    assert!(!marker.exists(), "the command ran");
}

#[test]
fn garbage_from_version_counts_as_older_than_254() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("fault-garbage");
    let body = real_systemd_run_except_version("echo 'not a version'; exit 0");
    let env = fake_systemd_run(&dir, &body);
    let launcher = launcher_for_env(&env)
        .unwrap()
        .expect("the real systemd-run behind it works");
    assert_eq!(launcher.systemd_version(), None);
    assert!(!launcher.disables_environment_expansion());
    let wrapped = launcher.wrap(&["sh".into(), "-c".into(), "exit 0".into()], &env, None);
    assert!(!wrapped
        .argv
        .contains(&OsString::from("--expand-environment=no")));
    assert!(
        run_argv(&wrapped.argv, &env).unwrap().status.success(),
        "the launch works without the flag"
    );
}

#[test]
fn a_manager_killed_mid_probe_means_direct_at_once() {
    let Some(rig) = rig() else { return };
    let mut manager = Manager::start(&rig);
    let env = manager.env();
    assert!(launcher_for_env(&env).unwrap().is_some());
    signal(manager.pid(), Signal::STOP);
    let started = Instant::now();
    let probing = std::thread::spawn(move || {
        let capture = Capture::default();
        let decision = capture
            .run(|| decide(&env, ScopeKind::Daemon, &LauncherOptions::default()))
            .unwrap();
        (decision, capture.warnings())
    });
    std::thread::sleep(Duration::from_millis(300));
    // Killed while still stopped: resumed first, it could answer the probe in the moment between.
    signal(manager.pid(), Signal::KILL);
    manager.kill();
    let (decision, warnings) = probing.join().unwrap();
    let elapsed = started.elapsed();
    assert!(
        matches!(decision, Decision::Direct(DirectReason::ProbeFailed { .. })),
        "{decision:?}"
    );
    assert!(
        elapsed < Duration::from_secs(3),
        "returned at {elapsed:?}, not when the manager died"
    );
    assert_eq!(warnings.len(), 1, "{warnings:?}");
}

#[test]
fn xdg_runtime_dir_pointing_at_a_file_means_direct_with_the_reason() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("fault-xdg");
    let file = dir.write("not-a-dir", "", false);
    let mut env = env_with(&[("XDG_RUNTIME_DIR", &file.into_os_string())]);
    env.push((
        "SYNAPS_CONFIG".into(),
        dir.write("config", "tool_scope_slice = faultxdg.slice\n", false)
            .into(),
    ));
    let capture = Capture::default();
    let detail = direct_within_bound(&env, &capture);
    assert!(
        detail.contains("could not connect to the user manager")
            && detail.contains("Not a directory"),
        "{detail}"
    );
}

/// The config WARNs of one request with SYNAPS_CONFIG at `path`, which must return in time.
fn config_warnings(path: &std::path::Path) -> Vec<String> {
    let env = env_with(&[("SYNAPS_CONFIG", &path.as_os_str().to_owned())]);
    let capture = Capture::default();
    let started = Instant::now();
    assert!(
        capture.run(|| launcher_for_env(&env)).unwrap().is_some(),
        "defaults apply"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    capture.warnings()
}

#[test]
fn a_config_that_is_a_directory_a_fifo_or_10_mb_of_garbage_warns_and_defaults_apply() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("fault-config");
    let warnings = config_warnings(dir.path());
    assert!(
        warnings.len() == 1 && warnings[0].contains("is a directory"),
        "{warnings:?}"
    );

    let fifo = mkfifo(&dir, "fifo");
    let warnings = config_warnings(&fifo);
    assert!(
        warnings.len() == 1 && warnings[0].contains("is not a regular file"),
        "{warnings:?}"
    );

    let garbage: Vec<u8> = (0..10 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let big = dir.path().join("garbage");
    std::fs::write(&big, garbage).unwrap();
    let warnings = config_warnings(&big);
    assert!(
        warnings.len() == 1 && warnings[0].contains("is larger than 1048576 bytes"),
        "{warnings:?}"
    );

    let small: Vec<u8> = (0..64 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
        .collect();
    let noisy = dir.path().join("noisy");
    std::fs::write(&noisy, small).unwrap();
    let warnings = config_warnings(&noisy);
    assert!(
        warnings.len() <= 6,
        "malformed lines are summarised, not one WARN each: {}",
        warnings.len()
    );
    assert!(
        warnings
            .last()
            .unwrap()
            .contains("more malformed config lines skipped"),
        "{warnings:?}"
    );
}

#[test]
fn a_request_never_waits_on_another_request_s_version_query_past_its_own_bound() {
    // A systemd-run whose `--version` takes 2 s (as on a loaded machine), in front of the rig's
    // manager.
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("fault-slow-version");
    let mut env = fake_systemd_run(
        &dir,
        &real_systemd_run_except_version("sleep 2; echo 'systemd 254 (slow)'; exit 0"),
    );
    // A slice of its own, so that its once-per-slice warning is not another test's.
    let config = dir.write(
        "config",
        "tool_scope_slice = faultslowversion.slice\n",
        false,
    );
    env.push(("SYNAPS_CONFIG".into(), config.into()));
    let slow = {
        let env = env.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let options = LauncherOptions {
                probe_timeout: Duration::from_secs(3),
            };
            (decide(&env, ScopeKind::Tool, &options), started.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(300));

    let bound = Duration::from_millis(200);
    let started = Instant::now();
    let quick = decide(
        &env,
        ScopeKind::Tool,
        &LauncherOptions {
            probe_timeout: bound,
        },
    )
    .unwrap();
    let waited = started.elapsed();
    assert!(
        waited < bound + Duration::from_millis(100),
        "the quick request waited {waited:?} on the slow one's version query"
    );
    match quick {
        Decision::Direct(DirectReason::ProbeFailed { detail, .. }) => assert!(
            detail.contains("still being asked by another request"),
            "{detail}"
        ),
        other => panic!("expected a direct launch, got {other:?}"),
    }

    let (slow, took) = slow.join().unwrap();
    assert!(
        matches!(slow, Ok(Decision::Scoped(_))),
        "the asking request got its answer: {slow:?}"
    );
    assert!(took >= Duration::from_secs(2), "{took:?}");
    // The answer is kept: the next request does not ask again.
    let started = Instant::now();
    let again = decide(
        &env,
        ScopeKind::Tool,
        &LauncherOptions {
            probe_timeout: bound,
        },
    );
    assert!(matches!(again, Ok(Decision::Scoped(_))), "{again:?}");
    assert!(started.elapsed() < bound, "{:?}", started.elapsed());
}

/// Issue 13, item 7: a config path that turns from a file into a FIFO between any two looks at it
/// never blocks a request (a symlink retargeted atomically, as fast as a thread can, while
/// requests read it).
#[test]
fn a_config_path_swapped_between_a_file_and_a_fifo_never_blocks_a_request() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};

    let dir = TempDir::new("fault-config-swap");
    let file = dir.path().join("file");
    std::fs::write(&file, "process_scopes = on\n").unwrap();
    let fifo = mkfifo(&dir, "fifo");
    let config = dir.path().join("config");
    std::os::unix::fs::symlink(&file, &config).unwrap();

    let swapping = Arc::new(AtomicBool::new(true));
    let swapper = {
        let (swapping, file, fifo, config) = (
            Arc::clone(&swapping),
            file.clone(),
            fifo.clone(),
            config.clone(),
        );
        let next = dir.path().join("next");
        std::thread::spawn(move || {
            while swapping.load(Ordering::Relaxed) {
                for target in [&fifo, &file] {
                    let _ = std::fs::remove_file(&next);
                    std::os::unix::fs::symlink(target, &next).unwrap();
                    std::fs::rename(&next, &config).unwrap();
                }
            }
        })
    };
    let (done, finished) = mpsc::channel();
    let env = env_with(&[("SYNAPS_CONFIG", &config.clone().into_os_string())]);
    std::thread::spawn(move || {
        for _ in 0..3000 {
            synaps_scope::config::Config::load(&env);
        }
        done.send(()).unwrap();
    });
    let outcome = finished.recv_timeout(Duration::from_secs(30));
    swapping.store(false, Ordering::Relaxed);
    swapper.join().unwrap();
    if outcome.is_err() {
        // Frees the request blocked in open(2) so that the test can end and say so.
        let _writer = std::fs::OpenOptions::new().write(true).open(&fifo);
        panic!("a request blocked opening the config path while it was a FIFO");
    }
}

//! The probe against the real thing (A1): each case runs through `decide` (the in-process D-Bus
//! probe, with each wrapper's way of reaching the manager) and through a real
//! `systemd-run --user --scope --slice=S true` of the rig's version, and through the launcher
//! program itself; all must agree. The probe must make no unit.

mod common;

use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{rig, signal, with_wrapper, Manager, Signal, TempDir};
use synaps_scope::{decide, Decision, LauncherOptions, ScopeKind, EXEC_FAILED_STATUS};

const BOUND: Duration = Duration::from_millis(1500);

/// Runs `cmd` for at most BOUND; Some(success) or None when it was still running.
fn finished_ok(mut cmd: Command) -> Option<bool> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let end = Instant::now() + BOUND;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status.success());
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether a real `systemd-run --user --scope --slice=S true` succeeds (a hang is a failure).
fn systemd_run_verdict(env: &[(OsString, OsString)], slice: Option<&str>) -> bool {
    let mut cmd = Command::new("systemd-run");
    cmd.args(["--user", "--scope", "--quiet"]);
    cmd.args(slice.map(|s| format!("--slice={s}")));
    cmd.args(["--", "true"]);
    synaps_scope::set_env(&mut cmd, env);
    finished_ok(cmd) == Some(true)
}

/// Whether the launcher program makes a scope and runs `true` (`--required`: 125 otherwise).
fn exec_verdict(env: &[(OsString, OsString)], slice: Option<&str>) -> bool {
    // A unit name of its own each time: the last case's scope may not be collected yet.
    static CASE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let case = CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut cmd = Command::new(common::exec_program());
    cmd.arg(format!("--unit=synaps-tool-{case:032x}.scope"));
    if let Some(slice) = slice {
        match synaps_scope::__fuzz::mangle_slice(slice) {
            Ok(mangled) => cmd.arg(format!("--slice={mangled}")),
            Err(_) => return false,
        };
    }
    cmd.args([
        "--description=differential",
        "--timeout-ms=1000",
        "--required",
        "--",
    ]);
    cmd.args(["/bin/true", "true"]);
    synaps_scope::set_env(&mut cmd, env);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    assert!(
        status.success() || status.code() == Some(EXEC_FAILED_STATUS),
        "{status}"
    );
    status.success()
}

/// The probe's verdict for `slice` with `wrapper`, within the bound.
fn probe_verdict(env: &[(OsString, OsString)], slice: Option<&str>, wrapper: &str) -> bool {
    let dir = TempDir::new("differential");
    let config = dir.write(
        "config",
        &slice.map_or(String::new(), |s| format!("tool_scope_slice = \"{s}\"\n")),
        false,
    );
    let mut env = with_wrapper(env, wrapper);
    env.push(("SYNAPS_CONFIG".into(), config.into()));
    let started = Instant::now();
    let decision = decide(
        &env,
        ScopeKind::Tool,
        &LauncherOptions {
            probe_timeout: BOUND,
        },
    )
    .unwrap();
    assert!(started.elapsed() < BOUND + Duration::from_millis(100));
    matches!(decision, Decision::Scoped(_))
}

fn scopes(env: &[(OsString, OsString)]) -> String {
    common::list_units(env, &["--type=scope"])
}

/// Every verdict for one case; `expected` is what systemd-run says.
fn agree(case: &str, env: &[(OsString, OsString)], slice: Option<&str>, expected: bool) {
    let real = systemd_run_verdict(env, slice);
    assert_eq!(real, expected, "{case}: systemd-run itself");
    for wrapper in ["systemd-run", "synaps-scope-exec"] {
        assert_eq!(
            probe_verdict(env, slice, wrapper),
            real,
            "{case}: the probe for {wrapper}"
        );
    }
    assert_eq!(
        exec_verdict(env, slice),
        real,
        "{case}: the launcher program"
    );
    eprintln!(
        "{case}: all agree ({})",
        if real { "scope" } else { "no scope" }
    );
}

#[test]
fn the_probe_gives_systemd_run_s_verdict_in_every_case() {
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    let env = manager.env();

    let run = |args: &[&str]| {
        let mut cmd = Command::new("systemctl");
        cmd.arg("--user").args(args);
        synaps_scope::set_env(&mut cmd, &env);
        assert!(cmd.status().unwrap().success(), "systemctl {args:?}");
    };
    run(&["mask", "--runtime", "masked-differential.slice"]);
    run(&["daemon-reload"]);

    let before = scopes(&env);
    for wrapper in ["systemd-run", "synaps-scope-exec"] {
        assert!(probe_verdict(
            &env,
            Some("nofile-differential.slice"),
            wrapper
        ));
    }
    assert_eq!(scopes(&env), before, "the probe made a unit");

    agree("default slice", &env, None, true);
    agree(
        "a slice with no unit file",
        &env,
        Some("nofile-differential.slice"),
        true,
    );
    agree("a mangled slice name", &env, Some("my tools/x"), true);
    agree(
        "a nested slice",
        &env,
        Some("outer-inner-differential.slice"),
        true,
    );
    agree(
        "a slice that is not a slice",
        &env,
        Some("foo.service"),
        false,
    );
    agree("an invalid slice name", &env, Some("a@b.slice"), false);
    agree(
        "a masked slice",
        &env,
        Some("masked-differential.slice"),
        false,
    );
    agree(
        "a slice under a masked slice",
        &env,
        Some("masked-differential-child.slice"),
        false,
    );
    agree("session bus only", &manager.session_bus_only(), None, true);

    let nowhere = TempDir::new("no-socket");
    let no_socket = common::env_with(&[("XDG_RUNTIME_DIR", &nowhere.path().into())]);
    agree(
        "no socket",
        &common::env_without(&no_socket, &["DBUS_SESSION_BUS_ADDRESS"]),
        None,
        false,
    );

    signal(manager.pid(), Signal::STOP);
    agree("a stopped manager", &env, None, false);
    signal(manager.pid(), Signal::CONT);

    let mut manager = manager;
    let env = manager.env();
    manager.kill();
    agree("a killed manager", &env, None, false);
}

//! The launcher program's way to the manager: the session bus first, the private socket when the
//! session bus cannot be connected or the manager is not on it. Each case launches through the
//! library and the launcher program, checks that the command ran once in its own scope, and that
//! `doctor` names the way the requests took. A systemd-run keeps systemd-run's own order.

mod common;

use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{rig, with_wrapper, BareBus, Manager, Squatter, TempDir};
use synaps_scope::doctor::diagnose;
use synaps_scope::{launcher_for_env, with_overrides, LauncherOptions, ScopeKind};

/// The way `doctor` says the requests with `env` reach the manager.
fn way(env: &[(OsString, OsString)]) -> String {
    let report = diagnose(env, &[ScopeKind::Tool], &LauncherOptions::default());
    match report.route {
        Some((Ok(way), _)) => way,
        other => panic!("doctor names no way to the manager: {other:?}"),
    }
}

/// Launches `cat /proc/self/cgroup` through the library with `env`, within `bound` for the
/// whole launch: it must print the cgroup of its own scope, once; that cgroup.
fn lands_in_its_scope(case: &str, env: &[(OsString, OsString)], bound: Duration) -> String {
    let started = Instant::now();
    let launcher = launcher_for_env(env)
        .unwrap()
        .unwrap_or_else(|| panic!("{case}: the probe found no manager"));
    let wrapped = launcher.wrap(&["cat".into(), "/proc/self/cgroup".into()], env, None);
    let out = common::run_argv(&wrapped.argv, env).unwrap();
    let took = started.elapsed();
    assert!(out.status.success(), "{case}: {out:?}");
    assert!(
        out.stderr.is_empty(),
        "{case}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let unit = wrapped.unit.unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.lines()
            .filter(|l| l.ends_with(&format!("/{unit}")))
            .count(),
        1,
        "{case}: {text}"
    );
    assert!(took < bound, "{case}: {took:?}");
    eprintln!("{case}: in {unit}, {took:?}");
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_default()
        .to_owned()
}

/// `base` with `XDG_RUNTIME_DIR` and `DBUS_SESSION_BUS_ADDRESS` set to `runtime` and `address`.
fn with_bus(
    base: &[(OsString, OsString)],
    runtime: &OsString,
    address: &OsString,
) -> Vec<(OsString, OsString)> {
    with_overrides(
        base,
        &[
            ("XDG_RUNTIME_DIR".into(), runtime.clone()),
            ("DBUS_SESSION_BUS_ADDRESS".into(), address.clone()),
        ],
    )
}

/// `doctor` names a way starting with `way` for `env`, and a launch with it lands in its scope
/// within `bound`.
fn lands_by(case: &str, env: &[(OsString, OsString)], way_prefix: &str, bound: Duration) {
    let taken = way(env);
    assert!(taken.starts_with(way_prefix), "{case}: {taken}");
    lands_in_its_scope(case, env, bound);
}

/// The cgroup of the manager whose pid is `pid` (its `user@….service`, above its `init.scope`),
/// under which every scope it makes is.
fn cgroup_of_manager(pid: u32) -> String {
    let cgroup = common::cgroup_of(pid);
    cgroup
        .strip_suffix("/init.scope")
        .unwrap_or(&cgroup)
        .to_owned()
}

/// One manager for one environment: where the session bus's `org.freedesktop.systemd1` is not the
/// manager of `XDG_RUNTIME_DIR` (another manager, or a program that is no manager), the launch,
/// its probe and `ScopeHandle::from_manager` all reach the manager of `XDG_RUNTIME_DIR` through
/// its private socket, and `doctor` says why the session bus was passed over. With no private
/// socket to take instead, the launch is direct and says why.
#[test]
fn a_session_bus_whose_manager_is_not_the_users_is_passed_over_for_the_private_socket() {
    let Some(rig) = rig() else { return };
    let other = Manager::with_session_bus(&rig);
    let other_bus: OsString = format!("unix:path={}/bus", other.runtime_dir.display()).into();
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").expect("the rig's XDG_RUNTIME_DIR");
    let rig_manager: u32 = std::env::var("SYNAPS_RIG_MANAGER_PID")
        .expect("the rig's SYNAPS_RIG_MANAGER_PID")
        .parse()
        .unwrap();
    let ours = cgroup_of_manager(rig_manager);
    let theirs = cgroup_of_manager(other.pid());
    let base = with_wrapper(&synaps_scope::inherited_env(), "synaps-scope-exec");
    let quick = Duration::from_secs(2);

    // Another user manager owns the name on the session bus named.
    let env = with_bus(&base, &runtime, &other_bus);
    let taken = way(&env);
    assert!(
        taken.starts_with("private socket ") && taken.contains("is another manager"),
        "{taken}"
    );
    let cgroup = lands_in_its_scope("another manager on the session bus", &env, quick);
    assert!(
        cgroup.starts_with(&format!("{ours}/")) && !cgroup.starts_with(&theirs),
        "{cgroup}: not under the manager of XDG_RUNTIME_DIR ({ours}); the other is {theirs}"
    );
    // A running scope launched with this environment is found with it.
    let launcher = launcher_for_env(&env).unwrap().expect("scoped");
    let wrapped = launcher.wrap(&["sleep".into(), "30".into()], &env, None);
    let unit = wrapped.unit.clone().unwrap();
    let mut cmd = Command::new(&wrapped.argv[0]);
    cmd.args(&wrapped.argv[1..]);
    synaps_scope::set_env(&mut cmd, &env);
    let mut sleeper = cmd.stdin(Stdio::null()).spawn().unwrap();
    let pid = sleeper.id();
    common::wait_for("the sleep in its scope", || {
        common::cgroup_of(pid).ends_with(&format!("/{unit}"))
    });
    let handle = synaps_scope::ScopeHandle::from_manager(&unit, &env, Duration::from_secs(3))
        .unwrap_or_else(|e| panic!("from_manager with the launch's environment: {e}"));
    assert!(handle
        .cgroup_dir()
        .ends_with(common::cgroup_of(pid).trim_start_matches('/')));
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();

    // A program that is no manager owns the name.
    let squatted_dir = TempDir::new("squatted-bus");
    let squatted = BareBus::start(&squatted_dir);
    let _squatter = Squatter::start(&squatted.address);
    let env = with_bus(&base, &runtime, &squatted.address);
    let taken = way(&env);
    assert!(
        taken.starts_with("private socket ")
            && taken.contains("does not answer as a systemd manager"),
        "{taken}"
    );
    let cgroup = lands_in_its_scope("a program that is no manager owns the name", &env, quick);
    assert!(cgroup.starts_with(&format!("{ours}/")), "{cgroup}");

    // The session bus alone: nothing to pass over to, so no scope, and the reason.
    let bus_only = common::env_without(&env, &["XDG_RUNTIME_DIR"]);
    let report = diagnose(&bus_only, &[ScopeKind::Tool], &LauncherOptions::default());
    let outcome = format!("{:?}", report.kinds[0].outcome);
    assert!(outcome.contains("not this user's manager"), "{outcome}");
    assert!(launcher_for_env(&bus_only).unwrap().is_none());
}

#[test]
fn the_launcher_program_takes_the_session_bus_first_and_the_private_socket_when_it_must() {
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    let runtime: OsString = manager.runtime_dir.clone().into();
    let session: OsString = format!("unix:path={}/bus", manager.runtime_dir.display()).into();
    let base = with_wrapper(&manager.env(), "synaps-scope-exec");
    let quick = Duration::from_secs(2);

    let both = with_bus(&base, &runtime, &session);
    lands_by("both ways open", &both, "session bus ", quick);

    let runtime_only = common::env_without(&base, &["DBUS_SESSION_BUS_ADDRESS"]);
    assert_eq!(
        way(&runtime_only),
        format!(
            "session bus unix:path={}/bus",
            manager.runtime_dir.display()
        ),
        "without an address, the session bus at $XDG_RUNTIME_DIR/bus, as sd-bus finds it"
    );
    lands_in_its_scope("XDG_RUNTIME_DIR only", &runtime_only, quick);

    let stale_dir = TempDir::new("stale-runtime");
    let stale: OsString = stale_dir.path().into();
    let stale_runtime = with_bus(&base, &stale, &session);
    lands_by(
        "a stale XDG_RUNTIME_DIR beside a valid session bus",
        &stale_runtime,
        "session bus ",
        quick,
    );

    let nowhere: OsString = "unix:path=/nonexistent/synaps-bus".into();
    lands_by(
        "a stale session bus address beside a valid XDG_RUNTIME_DIR",
        &with_bus(&base, &runtime, &nowhere),
        "private socket ",
        quick,
    );

    // A session bus the manager is not on answers at once (no service is started for the name):
    // the private socket is taken without waiting out any bound.
    let bare_dir = TempDir::new("bare-bus");
    let bare = BareBus::start(&bare_dir);
    lands_by(
        "a session bus the manager is not on, beside a valid XDG_RUNTIME_DIR",
        &with_bus(&base, &runtime, &bare.address),
        "private socket ",
        Duration::from_millis(400),
    );

    // A broker that takes the connection and never answers (a listening socket nobody accepts
    // on): the probe and the launcher program each give it half their bound, then take the
    // private socket, and the command starts in its scope with no warning.
    let stalled_dir = TempDir::new("stalled-bus");
    let stalled_socket = stalled_dir.path().join("bus");
    let _stalled = std::os::unix::net::UnixListener::bind(&stalled_socket).unwrap();
    let stalled: OsString = format!("unix:path={}", stalled_socket.display()).into();
    lands_by(
        "a stalled session bus beside a valid XDG_RUNTIME_DIR",
        &with_bus(&base, &runtime, &stalled),
        "private socket ",
        Duration::from_secs(8),
    );

    // systemd-run keeps its own order: the private socket while XDG_RUNTIME_DIR is set.
    let systemd_run = with_wrapper(&both, "systemd-run");
    assert!(way(&systemd_run).starts_with("private socket "));

    // The launcher program straight from a command line, its own process's cgroup read by the
    // command it execs: through the session bus with a stale XDG_RUNTIME_DIR.
    launcher_program_lands(
        "a stale XDG_RUNTIME_DIR",
        "synaps-tool-0000000000000000000000000000a0a0.scope",
        &stale_runtime,
    );
}

/// The launcher program straight from a command line, `--required`, with `env`: the command it
/// execs reads its own cgroup, which must be `unit`'s.
fn launcher_program_lands(case: &str, unit: &str, env: &[(OsString, OsString)]) {
    let mut cmd = Command::new(common::exec_program());
    cmd.arg(format!("--unit={unit}")).args([
        "--description=route",
        "--timeout-ms=2000",
        "--required",
        "--",
        "/bin/cat",
        "cat",
        "/proc/self/cgroup",
    ]);
    synaps_scope::set_env(&mut cmd, env);
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{case}: {out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("/{unit}")),
        "{case}: {out:?}"
    );
}

/// A program of the user that owns `org.freedesktop.systemd1` on the session bus and answers the
/// greeting's `Get(UnitPath)` with the real manager's list (a copy any process of the user can
/// make) passes the greeting; what it does with the start gives it away: it refuses it as a
/// method it does not have, or says the scope was made when the launcher was not moved. Either
/// way the launch goes to the private socket within the same bound, before the command runs,
/// and lands in its scope, once.
#[test]
fn an_owner_that_copies_the_managers_unit_path_is_found_out_at_the_start() {
    let Some(_rig) = rig() else { return };
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").expect("the rig's XDG_RUNTIME_DIR");
    let unit_path = common::systemctl_value(None, "UnitPath").replace(' ', ":");
    assert!(unit_path.contains("/systemd/transient"), "{unit_path}");
    let base = with_wrapper(&synaps_scope::inherited_env(), "synaps-scope-exec");
    for says_done in [false, true] {
        let case = if says_done {
            "an owner that says every start is done"
        } else {
            "an owner that refuses the start as unknown"
        };
        let dir = TempDir::new("copied-unit-path");
        let bus = BareBus::start(&dir);
        let _copier = Squatter::copying(&bus.address, &unit_path, says_done);
        let env = with_bus(&base, &runtime, &bus.address);
        lands_in_its_scope(case, &env, Duration::from_secs(2));

        launcher_program_lands(
            case,
            "synaps-tool-0000000000000000000000000000c0c0.scope",
            &env,
        );
    }
}

//! A session bus reached through a relay (issue 48): socat, a sandbox's or container's bus proxy,
//! an ssh-forwarded socket. The broker names the relay as the sender of whatever comes through,
//! so a scope asked for "the sender" (`PIDs=[0]`) would take the relay, and a kill of the scope
//! every bus connection behind it. The launcher program sends "the sender" only where the broker
//! names its own process; through a relay it takes the manager's private socket, whose
//! credentials are its own, and where there is none it makes no scope: the launch is direct with
//! the reason, and refused under `required`. The relay never leaves its cgroup.

mod common;

use std::ffi::OsString;
use std::process::{Command, Output, Stdio};

use common::{cgroup_of, list_units, rig, Manager, Relay, TempDir};
use synaps_scope::{decide, set_env, Decision, DirectReason, LauncherOptions, ScopeKind};

const UNIT: &str = "synaps-tool-000000000000000000000000000000aa.scope";

/// The launcher program, with `env`, running `cat /proc/self/cgroup` in the scope [`UNIT`].
fn launch(env: &[(OsString, OsString)], required: bool) -> Output {
    let mut cmd = Command::new(common::exec_program());
    cmd.arg(format!("--unit={UNIT}"))
        .args(["--description=relayed", "--timeout-ms=3000"])
        .args(required.then_some("--required"))
        .args(["--", "/bin/cat", "cat", "/proc/self/cgroup"]);
    set_env(&mut cmd, env);
    cmd.stdin(Stdio::null()).output().unwrap()
}

#[test]
fn through_a_relay_with_the_private_socket_beside_the_scope_takes_the_launcher_not_the_relay() {
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    let relay = Relay::to(&manager.runtime_dir.join("bus"));
    let relay_cgroup = cgroup_of(relay.pid());
    let mut env = manager.env();
    env.push(("DBUS_SESSION_BUS_ADDRESS".into(), relay.address()));

    let out = launch(&env, true);
    assert!(out.status.success(), "{out:?}");
    let cgroup = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(cgroup.contains(&format!("/{UNIT}")), "{cgroup}");

    // Through the library: the probe and the launch agree.
    let env = common::with_wrapper(&env, "synaps-scope-exec");
    let Ok(Decision::Scoped(launcher)) = decide(&env, ScopeKind::Tool, &LauncherOptions::default())
    else {
        panic!("the probe through the relay did not find the manager");
    };
    let wrapped = launcher.wrap(&["cat".into(), "/proc/self/cgroup".into()], &env, None);
    let out = common::run_argv(&wrapped.argv, &env).unwrap();
    assert!(out.status.success(), "{out:?}");
    let unit = wrapped.unit.unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("/{unit}")),
        "{out:?}"
    );
    assert_eq!(cgroup_of(relay.pid()), relay_cgroup, "the relay was moved");
}

#[test]
fn through_a_relay_with_no_private_socket_no_scope_is_made_and_the_launch_says_why() {
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    let relay = Relay::to(&manager.runtime_dir.join("bus"));
    let relay_cgroup = cgroup_of(relay.pid());
    // A container given only the (relayed) bus socket.
    let container = TempDir::new("relayed-runtime");
    std::os::unix::fs::symlink(&relay.socket, container.path().join("bus")).unwrap();
    let env = common::env_with(&[("XDG_RUNTIME_DIR", &container.path().as_os_str().to_owned())]);
    let env = common::env_without(&env, &["DBUS_SESSION_BUS_ADDRESS"]);

    let refused = launch(&env, true);
    assert_eq!(refused.status.code(), Some(125), "{refused:?}");
    assert!(refused.stdout.is_empty(), "the command ran: {refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("a relay or proxy stands between") && said.contains("no private socket"),
        "{said}"
    );

    let direct = launch(&env, false);
    assert!(direct.status.success(), "{direct:?}");
    assert!(
        !String::from_utf8_lossy(&direct.stdout).contains(UNIT),
        "{direct:?}"
    );
    assert!(
        String::from_utf8_lossy(&direct.stderr).contains("without a scope"),
        "{direct:?}"
    );

    let env = common::with_wrapper(&env, "synaps-scope-exec");
    match decide(&env, ScopeKind::Tool, &LauncherOptions::default()) {
        Ok(Decision::Direct(DirectReason::ProbeFailed { detail, .. })) => {
            assert!(
                detail.contains("a relay or proxy stands between"),
                "{detail}"
            );
        }
        other => panic!("the probe through the relay: {other:?}"),
    }

    assert_eq!(cgroup_of(relay.pid()), relay_cgroup, "the relay was moved");
    assert!(
        !list_units(&manager.env(), &["synaps-tool-*"]).contains(UNIT),
        "a scope was made"
    );
}

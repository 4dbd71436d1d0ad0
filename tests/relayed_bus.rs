//! A session bus reached through a relay (issue 48): socat, a sandbox's or container's bus proxy,
//! an ssh-forwarded socket. The broker names the relay as the sender of whatever comes through,
//! so a scope asked for "the sender" (`PIDs=[0]`) would take the relay, and a kill of the scope
//! every bus connection behind it. The launcher program sends "the sender" only where the broker
//! names its own process; through a relay it takes the manager's private socket, whose
//! credentials are its own; where there is none, its pid number where the manager counts pids as
//! it does, and else no scope: the launch is direct with the reason, and refused under
//! `required`. A relay in front of the manager's private socket is named by the manager too (the
//! socket's other end is the relay): the launcher's pid where the manager counts pids alike, else
//! no scope. The relay never leaves its cgroup.

mod common;

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{cgroup_of, list_units, rig, Manager, Relay, TempDir};
use synaps_scope::{decide, set_env, Decision, LauncherOptions, ScopeKind};

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

/// A container given only the (relayed) bus socket, beside `relay`: its environment.
fn bus_only_through(relay: &Relay, container: &TempDir) -> Vec<(OsString, OsString)> {
    std::os::unix::fs::symlink(&relay.socket, container.path().join("bus")).unwrap();
    let env = common::env_with(&[("XDG_RUNTIME_DIR", &container.path().as_os_str().to_owned())]);
    common::env_without(&env, &["DBUS_SESSION_BUS_ADDRESS"])
}

/// Without a private socket, through a relay in the launcher's own pid namespace, and a broker
/// and manager there too (the broker names the relay by the pid it has here, and the manager's
/// pid namespace is this one): the launcher program names itself by its pid number, which names
/// it alone to the manager.
#[test]
fn through_a_relay_with_no_private_socket_the_pid_names_the_launcher_where_the_manager_counts_pids_alike(
) {
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    let relay = Relay::to(&manager.runtime_dir.join("bus"));
    let relay_cgroup = cgroup_of(relay.pid());
    let container = TempDir::new("relayed-runtime");
    let env = bus_only_through(&relay, &container);

    scoped_and_probed_scoped(&env, 1);
    assert_eq!(cgroup_of(relay.pid()), relay_cgroup, "the relay was moved");
}

/// `launches` launcher programs in a row with `env`, each under `required` and in its scope
/// [`UNIT`]; then the library's probe with `env`, which says scoped.
fn scoped_and_probed_scoped(env: &[(OsString, OsString)], launches: usize) {
    for _ in 0..launches {
        let out = launch(env, true);
        assert!(out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&format!("/{UNIT}")),
            "{out:?}"
        );
    }
    let env = common::with_wrapper(env, "synaps-scope-exec");
    assert!(
        matches!(
            decide(&env, ScopeKind::Tool, &LauncherOptions::default()),
            Ok(Decision::Scoped(_))
        ),
        "the probe through the relay"
    );
}

/// A runtime directory whose private socket is `relay`'s (a forwarded or proxied private socket),
/// with no session bus: its environment.
fn private_socket_only_through(relay: &Relay, container: &TempDir) -> Vec<(OsString, OsString)> {
    std::fs::create_dir(container.path().join("systemd")).unwrap();
    std::os::unix::fs::symlink(&relay.socket, container.path().join("systemd/private")).unwrap();
    let env = common::env_with(&[("XDG_RUNTIME_DIR", &container.path().as_os_str().to_owned())]);
    common::env_without(&env, &["DBUS_SESSION_BUS_ADDRESS"])
}

/// A relay in front of the manager's private socket: the manager would name the relay as the
/// sender, for the socket's other end is the relay, not the manager (which is in its own
/// `init.scope`). The manager is in the launcher's pid namespace here, so the launcher's pid names
/// it alone: the command runs in its scope, the library's probe agrees, and the relay stays put.
#[test]
fn through_a_relay_in_front_of_the_private_socket_the_pid_names_the_launcher_not_the_relay() {
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    let relay = Relay::to(&manager.runtime_dir.join("systemd/private"));
    let relay_cgroup = cgroup_of(relay.pid());
    let container = TempDir::new("relayed-private");
    let env = private_socket_only_through(&relay, &container);

    scoped_and_probed_scoped(&env, 3);
    assert_eq!(cgroup_of(relay.pid()), relay_cgroup, "the relay was moved");
}

/// The same relay and the launcher program in a pid namespace of their own, the manager outside
/// it: neither "the sender" (the relay) nor a pid number (the manager counts pids otherwise) names
/// the launcher. No scope is made: 125 under `required` with the reason, the command never run,
/// the relay unmoved.
#[test]
fn through_a_relay_in_front_of_the_private_socket_from_a_pid_namespace_no_scope_is_made() {
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    let (said, stderr) = in_sandbox_through_a_relay(&manager, Relayed::PrivateSocket, false);
    assert!(said.contains("exit 125"), "{said}\n{stderr}");
    assert!(!said.contains(UNIT), "the command ran: {said}");
    assert!(said.contains("relay unmoved"), "{said}");
    assert!(
        stderr.contains("which is not the manager")
            && stderr.contains("not known to be this process's"),
        "{stderr}"
    );
}

/// The way to the manager a sandbox's relay stands in front of: the session bus, or the private
/// socket.
#[derive(Clone, Copy)]
enum Relayed {
    SessionBus,
    PrivateSocket,
}

impl Relayed {
    /// The socket's path in a runtime directory.
    fn socket(self) -> &'static str {
        match self {
            Relayed::SessionBus => "bus",
            Relayed::PrivateSocket => "systemd/private",
        }
    }
}

/// A relay in front of `relayed` (passing descriptors too where `pass_fds`) and the launcher
/// program in a pid namespace of their own (a sandbox's), the broker and manager outside it, and
/// only the relayed socket in the runtime directory: the launcher program runs
/// `cat /proc/self/cgroup` in [`UNIT`] under `required`. Returns what it printed (its cgroup, its
/// exit status, and whether the relay was moved) and its stderr.
fn in_sandbox_through_a_relay(
    manager: &Manager,
    relayed: Relayed,
    pass_fds: bool,
) -> (String, String) {
    let container = TempDir::new("sandboxed-runtime");
    let socket = container.path().join(relayed.socket());
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    let relay_script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/bus_relay.py");
    let script = format!(
        "python3 '{relay}' {pass_fds} '{socket}' '{target}' > '{ready}' & relay=$!
         until [ -s '{ready}' ]; do sleep 0.02; done
         before=$(grep ^0:: /proc/$relay/cgroup)
         '{exec}' --unit={UNIT} --description=sandboxed --timeout-ms=3000 --required -- /bin/cat cat /proc/self/cgroup
         echo \"exit $?\"
         after=$(grep ^0:: /proc/$relay/cgroup)
         [ \"$before\" = \"$after\" ] && echo 'relay unmoved' || echo \"relay moved: $before -> $after\"
         kill $relay",
        relay = relay_script.display(),
        pass_fds = if pass_fds { "--pass-fds" } else { "" },
        socket = socket.display(),
        target = manager.runtime_dir.join(relayed.socket()).display(),
        ready = container.path().join("ready").display(),
        exec = common::exec_program().display(),
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork", "--mount-proc", "sh", "-c", &script]);
    let env = common::env_with(&[("XDG_RUNTIME_DIR", &container.path().as_os_str().to_owned())]);
    set_env(
        &mut cmd,
        &common::env_without(&env, &["DBUS_SESSION_BUS_ADDRESS"]),
    );
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A byte relay in a sandbox's pid namespace, the broker and manager outside it, and no private
/// socket: the broker names the relay by another pid than the relay has in the namespace, so
/// neither "the sender" nor a pid number can be trusted, and a pidfd sent through the relay is
/// dropped on the way (a manager from 257 on would take one). No scope is made: 125 under
/// `required`, with the reason; the command never runs, no unit is made, and the relay stays
/// where it was.
#[test]
fn through_a_relay_in_a_pid_namespace_with_no_private_socket_no_scope_is_made_and_the_launch_says_why(
) {
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    let (said, stderr) = in_sandbox_through_a_relay(&manager, Relayed::SessionBus, false);
    assert!(said.contains("exit 125"), "{said}\n{stderr}");
    assert!(!said.contains(UNIT), "the command ran: {said}");
    assert!(said.contains("relay unmoved"), "{said}");
    assert!(
        stderr.contains("a relay or proxy stands between")
            && stderr.contains("not known to be this process's"),
        "{stderr}"
    );
    let why_no_pidfd = if rig.version >= 257 {
        "a descriptor sent on the session bus did not reach the manager"
    } else {
        "takes no pidfd"
    };
    assert!(stderr.contains(why_no_pidfd), "{stderr}");
    assert!(
        !list_units(&manager.env(), &["synaps-tool-*"]).contains(UNIT),
        "a scope was made"
    );
}

/// The same sandbox behind a proxy that passes descriptors (as xdg-dbus-proxy does): a manager
/// that takes a pidfd (257 on) is sent one of the launcher program, which alone is moved; an
/// older one is not, and the launch is refused with the reason. The relay never moves.
#[test]
fn through_a_proxy_that_passes_descriptors_a_pidfd_names_the_launcher_where_the_manager_takes_one()
{
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    let (said, stderr) = in_sandbox_through_a_relay(&manager, Relayed::SessionBus, true);
    assert!(said.contains("relay unmoved"), "{said}\n{stderr}");
    if rig.version >= 257 {
        assert!(said.contains("exit 0"), "{said}\n{stderr}");
        assert!(said.contains(&format!("/{UNIT}")), "{said}\n{stderr}");
    } else {
        assert!(said.contains("exit 125"), "{said}\n{stderr}");
        assert!(!said.contains(UNIT), "the command ran: {said}");
        assert!(stderr.contains("takes no pidfd"), "{stderr}");
    }
}

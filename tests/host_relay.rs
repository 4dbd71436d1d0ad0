//! A sandbox or container (`unshare --pid`, bwrap `--unshare-pid`) given the manager's private
//! socket through a relay on the host (socat `UNIX-LISTEN,fork`, systemd-socket-proxyd), as a
//! setup that forwards sockets into a container may. From the sandbox's pid namespace the other
//! end of the socket cannot be looked at, and the manager names the relay as the sender: asked for
//! "the sender", it would move the relay into the tool's scope, and a kill of the tool would kill
//! the host's relay. The launcher program counts that end as the manager only when a descriptor it
//! sends there reaches the manager, which a byte relay drops: through a relay no scope is made
//! (125 under `required`, the command once unscoped with the reason under `on`), and the relay
//! never leaves its cgroup. Given the socket itself, the same sandbox is scoped on every version.

mod common;

use std::ffi::OsString;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{cgroup_of, env_with, env_without, list_units, rig, TempDir};
use synaps_scope::{inherited_env, launcher_for_env, set_env, EXEC_FAILED_STATUS};

/// A unit name of its own for each launch: a launch never takes a unit another made.
fn next_unit() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("synaps-tool-{:032x}.scope", 0xb700 + n)
}

/// A relay on the host in front of the manager's private socket.
#[derive(Clone, Copy, Debug)]
enum RelayKind {
    Socat,
    SocketProxyd,
}

/// The sandbox the launcher program runs in.
#[derive(Clone, Copy, Debug)]
enum Sandbox {
    Unshare,
    Bwrap,
}

impl Sandbox {
    fn prefix(self) -> &'static [&'static str] {
        match self {
            Sandbox::Unshare => &["unshare", "--pid", "--fork", "--mount-proc"],
            Sandbox::Bwrap => &[
                "bwrap",
                "--unshare-pid",
                "--dev-bind",
                "/",
                "/",
                "--proc",
                "/proc",
                "--",
            ],
        }
    }
}

/// Starts `kind` listening on `socket`, forwarding to `target`, and waits for its socket.
fn relay(kind: RelayKind, socket: &Path, target: &Path) -> Child {
    let mut cmd = match kind {
        RelayKind::Socat => {
            let mut cmd = Command::new("socat");
            cmd.arg(format!("UNIX-LISTEN:{},fork", socket.display()))
                .arg(format!("UNIX-CONNECT:{}", target.display()));
            cmd
        }
        RelayKind::SocketProxyd => {
            let mut cmd = Command::new("systemd-socket-activate");
            cmd.arg("-l")
                .arg(socket)
                .arg("/lib/systemd/systemd-socket-proxyd")
                .arg(target);
            cmd
        }
    };
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{kind:?} starts (socat, systemd's socket tools): {e}"));
    let since = Instant::now();
    while !socket.exists() {
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "{kind:?} listens"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child
}

/// The launcher program in `sandbox`, given the runtime directory `runtime` alone, running `cat
/// /proc/self/cgroup` in `unit` (`required` or not).
fn launch_in(sandbox: Sandbox, runtime: &Path, unit: &str, required: bool) -> Output {
    let prefix = sandbox.prefix();
    let mut cmd = Command::new(prefix[0]);
    cmd.args(&prefix[1..])
        .arg(common::exec_program())
        .arg(format!("--unit={unit}"))
        .args(["--description=relayed from the host", "--timeout-ms=3000"])
        .args(required.then_some("--required"))
        .args(["--", "/bin/cat", "cat", "/proc/self/cgroup"]);
    let env = env_with(&[("XDG_RUNTIME_DIR", &runtime.as_os_str().to_owned())]);
    set_env(&mut cmd, &env_without(&env, &["DBUS_SESSION_BUS_ADDRESS"]));
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{sandbox:?} runs (util-linux's unshare, bubblewrap): {e}"))
}

/// A runtime directory whose `systemd/private` is `socket`.
fn runtime_with(socket: &Path) -> TempDir {
    let dir = TempDir::new("host-relay-runtime");
    std::fs::create_dir(dir.path().join("systemd")).unwrap();
    std::os::unix::fs::symlink(socket, dir.path().join("systemd/private")).unwrap();
    dir
}

fn managers_private_socket() -> std::path::PathBuf {
    Path::new(&std::env::var_os("XDG_RUNTIME_DIR").expect("the rig sets XDG_RUNTIME_DIR"))
        .join("systemd/private")
}

#[test]
fn a_relay_on_the_host_in_front_of_the_private_socket_is_never_moved_from_a_pid_namespace() {
    let Some(_rig) = rig() else { return };
    let env: Vec<(OsString, OsString)> = inherited_env();
    for kind in [RelayKind::Socat, RelayKind::SocketProxyd] {
        let dir = TempDir::new("host-relay");
        let socket = dir.path().join("relayed");
        let mut relay = relay(kind, &socket, &managers_private_socket());
        let relay_cgroup = cgroup_of(relay.id());
        let runtime = runtime_with(&socket);
        for sandbox in [Sandbox::Unshare, Sandbox::Bwrap] {
            let case = format!("{kind:?} from {sandbox:?}");
            let unit = next_unit();
            let out = launch_in(sandbox, runtime.path(), &unit, true);
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            assert_eq!(
                out.status.code(),
                Some(EXEC_FAILED_STATUS),
                "{case}: {stdout}{stderr}"
            );
            assert!(stdout.is_empty(), "{case}: the command ran: {stdout}");
            assert!(
                stderr.contains("did not reach the manager"),
                "{case}: {stderr}"
            );
            assert!(
                !list_units(&env, &["synaps-tool-*"]).contains(&unit),
                "{case}: a scope was made"
            );
            assert_eq!(
                cgroup_of(relay.id()),
                relay_cgroup,
                "{case}: the relay moved"
            );

            // Under `on`, once unscoped with the reason.
            let unit = next_unit();
            let out = launch_in(sandbox, runtime.path(), &unit, false);
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            assert_eq!(out.status.code(), Some(0), "{case}: {stderr}");
            assert!(
                !stdout.contains(&unit) && stdout.contains("0::"),
                "{case}: ran once, unscoped: {stdout}"
            );
            assert!(
                stderr.contains("warning: running /bin/cat without a scope")
                    && stderr.contains("did not reach the manager"),
                "{case}: {stderr}"
            );
            assert_eq!(
                cgroup_of(relay.id()),
                relay_cgroup,
                "{case}: the relay moved"
            );
        }
        relay.kill().unwrap();
        relay.wait().unwrap();
    }
}

/// The control: the same sandboxes given the manager's private socket itself are scoped where the
/// manager takes a pidfd (257 on), so the refusals above are the relay's. Before 257 they are
/// refused too, with another reason: the descriptor reaches the other end, but a relay that passes
/// descriptors would pass it as well, and "the sender" would name that relay.
#[test]
fn given_the_private_socket_itself_a_pid_namespace_is_scoped_where_the_manager_takes_a_pidfd() {
    let Some(rig) = rig() else { return };
    let runtime = runtime_with(&managers_private_socket());
    for sandbox in [Sandbox::Unshare, Sandbox::Bwrap] {
        let unit = next_unit();
        let out = launch_in(sandbox, runtime.path(), &unit, true);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if rig.version < 257 {
            assert_eq!(
                out.status.code(),
                Some(EXEC_FAILED_STATUS),
                "{sandbox:?}: {stderr}"
            );
            assert!(stdout.is_empty(), "{sandbox:?}: the command ran: {stdout}");
            assert!(stderr.contains("takes no pidfd"), "{sandbox:?}: {stderr}");
            continue;
        }
        assert_eq!(out.status.code(), Some(0), "{sandbox:?}: {stderr}");
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("0::") && l.ends_with(&format!("/{unit}"))),
            "{sandbox:?}: {stdout}{stderr}"
        );
    }
}

/// Flatpak's own proxy, xdg-dbus-proxy 0.1.6 (Debian 13's, from the rig) with `--filter
/// --talk=org.freedesktop.systemd1`, in front of the session bus, the launcher program in a bwrap
/// pid namespace with that bus alone (a Flatpak app allowed to talk to systemd): from 257 the
/// launch is scoped by its pidfd, which the proxy passes on; before, direct with the reason (no
/// pidfd). The proxy never leaves its cgroup.
#[test]
fn through_flatpaks_proxy_a_sandbox_is_scoped_by_its_pidfd_where_the_manager_takes_one() {
    let Some(rig) = rig() else { return };
    let program = std::env::var_os("SYNAPS_RIG_XDG_DBUS_PROXY")
        .expect("the rig names xdg-dbus-proxy 0.1.6 (scripts/systemd-rig.sh)");
    let manager = common::Manager::with_session_bus(&rig);
    let dir = TempDir::new("flatpak-proxy");
    let socket = dir.path().join("bus");
    let mut proxy = Command::new(&program)
        .arg(format!(
            "unix:path={}",
            manager.runtime_dir.join("bus").display()
        ))
        .arg(&socket)
        .args(["--filter", "--talk=org.freedesktop.systemd1"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("xdg-dbus-proxy starts: {e}"));
    let since = Instant::now();
    while !socket.exists() {
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "xdg-dbus-proxy listens"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let proxy_cgroup = cgroup_of(proxy.id());
    // The sandbox's runtime directory holds no private socket, as Flatpak's does not.
    let runtime = TempDir::new("flatpak-runtime");
    let unit = next_unit();
    let prefix = Sandbox::Bwrap.prefix();
    let mut cmd = Command::new(prefix[0]);
    cmd.args(&prefix[1..])
        .arg(common::exec_program())
        .arg(format!("--unit={unit}"))
        .args(["--description=from a Flatpak sandbox", "--timeout-ms=3000"])
        .arg("--required")
        .args(["--", "/bin/cat", "cat", "/proc/self/cgroup"]);
    let bus = OsString::from(format!("unix:path={}", socket.display()));
    let env = env_with(&[
        ("XDG_RUNTIME_DIR", &runtime.path().as_os_str().to_owned()),
        ("DBUS_SESSION_BUS_ADDRESS", &bus),
    ]);
    set_env(&mut cmd, &env);
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if rig.version >= 257 {
        assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("0::") && l.ends_with(&format!("/{unit}"))),
            "scoped: {stdout}{stderr}"
        );
    } else {
        assert_eq!(
            out.status.code(),
            Some(EXEC_FAILED_STATUS),
            "{stdout}{stderr}"
        );
        assert!(stdout.is_empty(), "the command ran: {stdout}");
        assert!(stderr.contains("takes no pidfd"), "{stderr}");
    }
    assert_eq!(cgroup_of(proxy.id()), proxy_cgroup, "the proxy moved");
    proxy.kill().unwrap();
    proxy.wait().unwrap();
}

/// systemd-run behind a relay in front of the private socket (bytes only, and descriptors too), on
/// the host: it would name itself by its pid, make the scope, then read its invocation ID from
/// `unit/self`, the sender's (the relay's) unit, fail, and never run the command. The library does
/// not use it there: direct under `on`, refused with the reason under `required`; the relay is
/// never moved.
#[test]
fn systemd_run_behind_a_relay_is_not_used() {
    let Some(_rig) = rig() else { return };
    let private = managers_private_socket();
    for relay in [
        common::Relay::to(&private),
        common::Relay::passing_fds_to(&private),
    ] {
        let relay_cgroup = cgroup_of(relay.pid());
        let runtime = runtime_with(&relay.socket);
        let env = env_with(&[("XDG_RUNTIME_DIR", &runtime.path().as_os_str().to_owned())]);
        let env = common::with_wrapper(
            &env_without(&env, &["DBUS_SESSION_BUS_ADDRESS"]),
            "systemd-run",
        );
        assert!(
            matches!(launcher_for_env(&env), Ok(None)),
            "direct under `on`"
        );
        let required = synaps_scope::with_overrides(
            &env,
            &[("SYNAPS_PROCESS_SCOPES".into(), "required".into())],
        );
        match launcher_for_env(&required) {
            Err(e) => assert!(e.to_string().contains("never running the command"), "{e}"),
            Ok(l) => panic!(
                "a launcher through systemd-run behind a relay: {:?}",
                l.map(|l| l.wrapper().name())
            ),
        }
        assert_eq!(cgroup_of(relay.pid()), relay_cgroup, "the relay moved");
    }
}

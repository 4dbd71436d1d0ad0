//! Launches from a pid namespace of their own (a sandbox's `unshare --pid`, a container's) that
//! the manager and the session bus are outside of. There the peer's pid reads 0, and a pid number
//! of ours names another process in the manager's namespace: a decoy waits at exactly that
//! number, and must never be moved. From there neither the private socket's other end nor the
//! session bus's peer can be told from a relay or proxy outside the namespace (one that passes
//! descriptors passes the one sent to show the manager), so "the sender" is never sent: a manager
//! that takes a pidfd (systemd 257 on) gets one and scopes the launch; an older one cannot be told
//! which process is meant, and the launch is direct with the reason.
//! systemd-run cannot reach the manager from there at all, so the library launches directly and
//! says why. Each case runs this test's binary again under `unshare --pid` as root.

mod common;

use std::ffi::OsString;
use std::process::{Child, Command, Stdio};

use common::{env_without, rig, with_wrapper, Capture, Manager, Rig};
use synaps_scope::{
    decide, decide_in_place, set_env, Decision, DirectReason, InPlaceDecision, LauncherOptions,
    ScopeKind,
};

/// Set in the copy of a test that runs inside the new pid namespace: the decoy's pid, which is
/// also the pid (in the namespace) of the process that asks for the scope.
const DECOY: &str = "SYNAPS_TEST_PID_NAMESPACE_DECOY";

/// The unified cgroup of `pid`, as this process reads it.
fn cgroup_of(pid: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("no cgroup2 line for {pid}: {text}"))
        .to_owned()
}

/// Writes what the next new process of this pid namespace is numbered, less one.
fn next_pid_is(pid: u32) {
    std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string())
        .expect("writing ns_last_pid (root in the new pid namespace)");
}

/// Runs the test `name` of this binary again in a new pid namespace with `env`, beside a decoy
/// (a `sleep` outside it) at the pid it gives (`inner` decides which of its processes gets that
/// number); fails unless the inner test passed and the decoy stayed in its cgroup. Returns what
/// the inner test printed.
fn in_new_pid_namespace(name: &str, env: &[(OsString, OsString)]) -> String {
    let mut decoy: Child = Command::new("sleep").arg("60").spawn().unwrap();
    let decoy_pid = decoy.id().to_string();
    let before = cgroup_of(&decoy_pid);
    let mut unshare = Command::new("unshare");
    // The namespace's pid 1 is a shell that starts the test at the decoy's number.
    unshare
        .args(["--pid", "--fork", "--mount-proc", "--", "sh", "-c"])
        .arg("echo $((SYNAPS_TEST_PID_NAMESPACE_DECOY - 1)) > /proc/sys/kernel/ns_last_pid; \"$@\"")
        .arg("sh")
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"]);
    set_env(&mut unshare, env);
    unshare.env(DECOY, &decoy_pid).stdin(Stdio::null());
    let output = unshare
        .output()
        .unwrap_or_else(|e| panic!("this test runs `unshare` (util-linux) and could not: {e}"));
    let after = cgroup_of(&decoy_pid);
    let _ = decoy.kill();
    let _ = decoy.wait();
    let told = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() && told.contains("1 passed"),
        "{name} in a new pid namespace ({}): {told}",
        output.status
    );
    assert_eq!(
        after, before,
        "{name}: the decoy at the namespace's pid {decoy_pid} was moved: {told}"
    );
    told
}

/// The environments of the two ways to the manager: the session bus alone (dbus-daemon outside
/// the namespace), and the private socket alone.
fn ways(manager: &Manager) -> [(&'static str, Vec<(OsString, OsString)>); 2] {
    [
        ("session bus", manager.session_bus_only()),
        (
            "private socket",
            env_without(&manager.env(), &["DBUS_SESSION_BUS_ADDRESS"]),
        ),
    ]
}

/// Whether a launch from a pid namespace the manager is outside of is scoped on the rig's manager,
/// through either way: where the manager takes a pidfd.
fn scoped_from_a_pid_namespace(rig: &Rig) -> bool {
    rig.version >= 257
}

/// What a launch from there says where the manager takes no pidfd.
const NO_PIDFD: &str = "takes no pidfd";

/// Inside: the test process is at the decoy's number and makes its own scope (the command line's
/// `run`, the launcher program's way); outside: its cgroup was the scope (or, where nothing names
/// it to the manager, no scope was made and it says why), and the decoy's cgroup is unchanged.
#[test]
fn a_process_that_makes_its_own_scope_is_never_named_by_its_pid_number() {
    let name = "a_process_that_makes_its_own_scope_is_never_named_by_its_pid_number";
    if let Ok(decoy) = std::env::var(DECOY) {
        assert_eq!(
            std::process::id().to_string(),
            decoy,
            "started at the decoy's number"
        );
        let env: Vec<_> = std::env::vars_os().collect();
        let decided = decide_in_place(
            &env,
            ScopeKind::Tool,
            &LauncherOptions::default(),
            "true".as_ref(),
            None,
        )
        .unwrap();
        let own = cgroup_of("self");
        match decided {
            InPlaceDecision::Entered {
                launch,
                entered: Ok(()),
                ..
            } => {
                assert!(own.ends_with(&format!("/{}", launch.unit)), "{own}");
                println!("in {own}");
            }
            InPlaceDecision::Entered {
                launch,
                entered: Err(not),
                ..
            } => {
                assert!(!own.ends_with(&format!("/{}", launch.unit)), "{own}");
                println!("not scoped: {}", not.why);
            }
            InPlaceDecision::Decided(Decision::Direct(reason)) => println!("not scoped: {reason}"),
            other => panic!("not the launcher program's way: {other:?}"),
        }
        return;
    }
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    for (way, env) in ways(&manager) {
        let told = in_new_pid_namespace(name, &with_wrapper(&env, "synaps-scope-exec"));
        if scoped_from_a_pid_namespace(&rig) {
            let own = told
                .lines()
                .find_map(|line| line.split_once("in /").map(|(_, cgroup)| cgroup))
                .unwrap_or_else(|| panic!("{way}: the inner test said no cgroup: {told}"));
            eprintln!("{way}: in /{own}");
        } else {
            assert!(
                told.contains("not scoped: ") && told.contains(NO_PIDFD),
                "{way}, systemd {}: {told}",
                rig.version
            );
        }
    }
}

/// Inside: a wrapped launch whose wrapper process is at the decoy's number. The launcher program
/// is scoped; systemd-run is not used at all (it would fail to reach the manager and run
/// nothing): the request goes direct, and says why.
#[test]
fn a_wrapped_launch_is_scoped_by_the_launcher_program_and_direct_with_systemd_run() {
    let name = "a_wrapped_launch_is_scoped_by_the_launcher_program_and_direct_with_systemd_run";
    if let Ok(decoy) = std::env::var(DECOY) {
        let env: Vec<_> = std::env::vars_os().collect();
        let capture = Capture::default();
        let decision = capture
            .run(|| decide(&env, ScopeKind::Tool, &LauncherOptions::default()))
            .unwrap();
        let launcher = match decision {
            Decision::Scoped(launcher) => launcher,
            Decision::Direct(reason) => {
                if !matches!(reason, DirectReason::SystemdRunInPidNamespace { .. }) {
                    println!("unscoped: {reason}");
                    return;
                }
                println!("direct: {reason}");
                for warning in capture.warnings() {
                    println!("warned: {warning}");
                }
                return;
            }
        };
        let argv: Vec<OsString> = ["sh", "-c", "grep ^0:: /proc/self/cgroup"]
            .map(OsString::from)
            .to_vec();
        let wrapped = launcher.wrap(&argv, &env, None);
        next_pid_is(decoy.parse().unwrap());
        let out = common::run_argv(&wrapped.argv, &env).unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
        let unit = wrapped.unit.unwrap();
        assert!(text.trim_end().ends_with(&format!("/{unit}")), "{text}");
        println!("in {unit} through {}", launcher.wrapper().name());
        return;
    }
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    for (way, env) in ways(&manager) {
        let told = in_new_pid_namespace(name, &with_wrapper(&env, "synaps-scope-exec"));
        if scoped_from_a_pid_namespace(&rig) {
            assert!(
                told.contains("in synaps-tool-"),
                "{way}, launcher program: {told}"
            );
        } else {
            assert!(
                told.contains("unscoped: ") && told.contains(NO_PIDFD),
                "{way}, launcher program, systemd {}: {told}",
                rig.version
            );
        }
        let told = in_new_pid_namespace(name, &with_wrapper(&env, "systemd-run"));
        assert!(
            told.contains("direct: this process is in a pid namespace"),
            "{way}, systemd-run: {told}"
        );
        assert!(
            told.contains("warned: process scopes unavailable")
                && told.contains("launching directly"),
            "{way}, systemd-run: the direct launch is warned about: {told}"
        );
    }
}

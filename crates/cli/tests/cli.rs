//! The `synaps-scope` command: `run` execs in place in a scope (or directly, saying why), `wrap`
//! prints the argv. Both say what a library request would log about the slice (R12; issue 13, item
//! 10; issue 15): a slice with no limits is warned about before the process ends, and a check the
//! manager did not answer within the request's bound is reported as such.

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{env_with, env_without, rig, SlowManager, TempDir};
use synaps_scope::inherited_env;

fn cli(args: &[&str], env: &[(std::ffi::OsString, std::ffi::OsString)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_synaps-scope"));
    cmd.args(args);
    synaps_scope::set_env(&mut cmd, env);
    cmd.output().unwrap()
}

#[test]
fn run_execs_the_command_in_place_in_its_own_scope() {
    let Some(_rig) = rig() else { return };
    let out = cli(
        &[
            "run",
            "--kind",
            "daemon",
            "--",
            "sh",
            "-c",
            "grep '^0::' /proc/$$/cgroup; exit 7",
        ],
        &inherited_env(),
    );
    assert_eq!(
        out.status.code(),
        Some(7),
        "the command's own exit status comes back"
    );
    let cgroup = String::from_utf8(out.stdout).unwrap();
    assert!(
        cgroup.contains("/app.slice/synaps-daemon-") && cgroup.trim_end().ends_with(".scope"),
        "{cgroup}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "a scoped run is silent"
    );
}

#[test]
fn wrap_prints_the_argv_and_the_unit() {
    let Some(rig) = rig() else { return };
    for wrapper in ["synaps-scope-exec", "systemd-run"] {
        let env = common::with_wrapper(&inherited_env(), wrapper);
        let out = cli(&["wrap", "-0", "--", "echo", "${HOME}", ""], &env);
        assert!(out.status.success());
        let argv: Vec<&[u8]> = out.stdout.split(|&b| b == 0).collect();
        assert!(
            argv[0].ends_with(format!("/{wrapper}").as_bytes()),
            "{wrapper}: {argv:?}"
        );
        assert_eq!(
            &argv[argv.len() - 3..],
            &[b"${HOME}".as_slice(), b"", b""],
            "NUL-terminated, empty kept"
        );
        let exec = wrapper == "synaps-scope-exec";
        assert_eq!(
            argv.contains(&b"--expand-environment=no".as_slice()),
            !exec && rig.version >= 254
        );
        if exec {
            assert_eq!(argv[argv.len() - 4], b"echo", "argv[0] as given");
        }
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.starts_with("synaps-scope: unit synaps-tool-"),
            "{stderr}"
        );
    }
}

#[test]
fn without_a_manager_run_goes_direct_and_says_why() {
    let Some(_rig) = rig() else { return };
    let env = env_without(
        &inherited_env(),
        &["XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"],
    );
    let out = cli(
        &["run", "--", "sh", "-c", "grep '^0::' /proc/$$/cgroup"],
        &env,
    );
    assert!(out.status.success());
    assert!(!String::from_utf8(out.stdout).unwrap().contains(".scope"));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("warning: launching directly") && stderr.contains("XDG_RUNTIME_DIR"),
        "{stderr}"
    );
}

/// From a pid namespace the manager is outside of (`unshare --pid`, as a sandbox makes one):
/// `run` is scoped by the launcher program's way where a pidfd names its process (257 on), else
/// direct with the reason; with systemd-run, which cannot reach the manager from there and would
/// run nothing, the command runs directly and the warning says why, and `required` refuses it. (Which process is moved, with a decoy at the namespace's pid,
/// is `tests/pid_namespace.rs`.)
#[test]
fn run_from_a_pid_namespace_is_scoped_or_direct_with_the_reason() {
    let Some(rig) = rig() else { return };
    let in_namespace = |env: &[(std::ffi::OsString, std::ffi::OsString)]| {
        let mut cmd = Command::new("unshare");
        cmd.args(["--pid", "--fork", "--mount-proc", "--"])
            .arg(env!("CARGO_BIN_EXE_synaps-scope"))
            .args(["run", "--", "sh", "-c", "grep '^0::' /proc/self/cgroup"]);
        synaps_scope::set_env(&mut cmd, env);
        cmd.output()
            .unwrap_or_else(|e| panic!("this test runs `unshare` (util-linux) and could not: {e}"))
    };
    let scoped = in_namespace(&common::with_wrapper(&inherited_env(), "synaps-scope-exec"));
    let cgroup = String::from_utf8_lossy(&scoped.stdout);
    assert!(scoped.status.success(), "{scoped:?}");
    if rig.version >= 257 {
        assert!(cgroup.contains("/synaps-tool-"), "{cgroup}");
        assert_eq!(
            String::from_utf8_lossy(&scoped.stderr),
            "",
            "a scoped run is silent"
        );
    } else {
        assert!(!cgroup.contains("/synaps-tool-"), "{cgroup}");
        let stderr = String::from_utf8_lossy(&scoped.stderr);
        assert!(
            stderr.contains("warning") && stderr.contains("takes no pidfd"),
            "{stderr}"
        );
    }

    let systemd_run = common::with_wrapper(&inherited_env(), "systemd-run");
    let direct = in_namespace(&systemd_run);
    let stderr = String::from_utf8_lossy(&direct.stderr);
    assert!(direct.status.success(), "{direct:?}");
    assert!(!String::from_utf8_lossy(&direct.stdout).contains(".scope"));
    assert!(
        stderr.contains("warning") && stderr.contains("pid namespace"),
        "{stderr}"
    );
    let mut required = systemd_run.clone();
    required.push(("SYNAPS_PROCESS_SCOPES".into(), "required".into()));
    let refused = in_namespace(&required);
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    assert_eq!(String::from_utf8_lossy(&refused.stdout), "", "nothing ran");
}

#[test]
fn errors_have_their_own_exit_statuses() {
    let Some(_rig) = rig() else { return };
    let env = inherited_env();
    let missing = cli(&["run", "--", "synaps-no-such-program"], &env);
    assert_eq!(missing.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot run synaps-no-such-program"));

    let mut required = env_without(&env, &["XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"]);
    required.push(("SYNAPS_PROCESS_SCOPES".into(), "required".into()));
    let refused = cli(&["run", "--", "true"], &required);
    assert_eq!(refused.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("required"));

    for bad in [
        &["run"][..],
        &["run", "--kind", "nope", "--", "true"],
        &["launch", "--", "true"],
        &["run", "--probe-timeout-ms", "x", "--", "true"],
    ] {
        let out = cli(bad, &env);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("try '--help'"),
            "{bad:?}"
        );
    }
}

#[test]
fn run_with_argv0_starts_a_login_shell_scoped_and_direct() {
    let Some(_rig) = rig() else { return };
    let script = "printf '%s %s' \"$0\" \"$(grep '^0::' /proc/$$/cgroup | cut -c4-)\"";
    for (wrapper, argv0_seen) in [("synaps-scope-exec", "-sh"), ("systemd-run", "/")] {
        let env = common::with_wrapper(&inherited_env(), wrapper);
        let out = cli(&["run", "--argv0", "-sh", "--", "sh", "-c", script], &env);
        assert!(out.status.success(), "{wrapper}: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let (argv0, cgroup) = text.split_once(' ').unwrap();
        assert!(argv0.starts_with(argv0_seen), "{wrapper}: argv[0] {argv0}");
        assert!(cgroup.contains("/synaps-tool-"), "{wrapper}: {cgroup}");
    }
    let direct = common::env_without(
        &inherited_env(),
        &["XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"],
    );
    let out = cli(
        &["run", "--argv0", "-sh", "--", "sh", "-c", script],
        &direct,
    );
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("-sh "), "direct: {text}");
    assert!(!text.contains("synaps-tool-"), "direct: {text}");
}

/// A config naming `slice` for tool launches.
fn slice_config(dir: &TempDir, slice: &str) -> std::ffi::OsString {
    dir.write("config", &format!("tool_scope_slice = {slice}\n"), false)
        .into_os_string()
}

#[test]
fn run_and_wrap_warn_of_a_slice_without_limits() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("cli-r12");
    let slice = "clir12undefined.slice";
    let env = env_with(&[("SYNAPS_CONFIG", &slice_config(&dir, slice))]);
    let run = cli(
        &["run", "--", "sh", "-c", "grep '^0::' /proc/$$/cgroup"],
        &env,
    );
    assert!(run.status.success(), "{run:?}");
    let cgroup = String::from_utf8_lossy(&run.stdout);
    assert!(
        cgroup.contains(&format!("/{slice}/synaps-tool-")),
        "{cgroup}"
    );
    let wrap = cli(&["wrap", "--", "true"], &env);
    assert!(wrap.status.success(), "{wrap:?}");
    for (what, out) in [("run", &run), ("wrap", &wrap)] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr.matches("sets no limits").count(),
            1,
            "{what}: {stderr}"
        );
        assert!(
            stderr.contains(&format!("slice {slice} sets no limits")),
            "{what}: {stderr}"
        );
    }
}

#[test]
fn a_slice_check_without_an_answer_is_reported_within_the_bound() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("cli-r12-slow");
    let slice = "clir12slow.slice";
    // The manager answers the slice check later than the request's bound.
    let slow = SlowManager::slice_checks_in_front_of_the_rig("5", false);
    let env = env_with(&[
        ("SYNAPS_CONFIG", &slice_config(&dir, slice)),
        ("XDG_RUNTIME_DIR", &slow.runtime_dir()),
    ]);
    // The stand-in is a relay in front of the manager: systemd-run, which would lose the launch
    // behind one, is never used there (tests/host_relay.rs), so the launcher program is.
    let env = common::with_wrapper(&env, "synaps-scope-exec");
    let started = Instant::now();
    let out = cli(&["wrap", "--probe-timeout-ms", "500", "--", "true"], &env);
    let took = started.elapsed();
    assert!(out.status.success(), "{out:?}");
    assert!(took < Duration::from_millis(1500), "{took:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "could not check whether slice {slice} sets any limits"
        )) && stderr.contains("no answer within"),
        "{stderr}"
    );
    assert!(!stderr.contains("sets no limits"), "{stderr}");
}

//! `run` with the launcher program does the launcher program's work in its own process (A1): the
//! scope made for the command line's own pid over the probe's connection, then the command
//! exec'd, with the launcher program's outcomes when the manager does not answer in time: the
//! command run once unscoped with the warning, or in `required` mode not at all, status 125.

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{rig, SlowManager};
use synaps_scope::{inherited_env, set_env, with_overrides, EXEC_FAILED_STATUS};

/// `synaps-scope run` of a command that prints its pid and its cgroup, with the launcher program.
fn run_printing_pid_and_cgroup(
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    extra: &[&str],
) -> (u32, Output) {
    let env = common::with_wrapper(env, "synaps-scope-exec");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_synaps-scope"));
    cmd.arg("run")
        .args(extra)
        .args([
            "--",
            "sh",
            "-c",
            "echo $$; grep '^0::' /proc/$$/cgroup | cut -c4-",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    set_env(&mut cmd, &env);
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    (pid, child.wait_with_output().unwrap())
}

#[test]
fn the_command_is_the_command_line_s_own_process_in_its_scope() {
    let Some(_rig) = rig() else { return };
    let (pid, out) = run_printing_pid_and_cgroup(&inherited_env(), &[]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some(pid.to_string().as_str()),
        "exec'd in place: no launcher program process between"
    );
    let cgroup = lines.next().unwrap();
    assert!(
        cgroup.contains("/app.slice/synaps-tool-") && cgroup.ends_with(".scope"),
        "{cgroup}"
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// The manager moves the process into its scope as the start job's last step, before the job's
/// end is signalled: the command line looks at its own cgroup while it listens, and sees the move
/// first.
#[test]
fn the_move_into_the_scope_is_seen_in_the_own_cgroup_before_the_job_s_signal() {
    let Some(_rig) = rig() else { return };
    let env = with_overrides(
        &common::with_wrapper(&inherited_env(), "synaps-scope-exec"),
        &[("SYNAPS_SCOPE_LOG".into(), "debug".into())],
    );
    let mut seen = 0;
    for _ in 0..10 {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_synaps-scope"));
        cmd.args(["run", "--", "true"]).stdin(Stdio::null());
        set_env(&mut cmd, &env);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(".scope started: "), "{stderr}");
        seen += usize::from(stderr.contains("this process was seen in its cgroup"));
    }
    // On a busy machine the signal may come before the next look, not every time.
    assert!(seen >= 1, "seen in the cgroup in none of 10 launches");
}

#[test]
fn a_scope_the_manager_does_not_start_in_time_runs_the_command_once_or_in_required_mode_never() {
    let Some(_rig) = rig() else { return };
    // Every StartTransientUnit held 5 s; the probe and everything else answered at once.
    let slow = SlowManager::holding_in_front_of_the_rig("StartTransientUnit", "5");
    let env = with_overrides(
        &inherited_env(),
        &[("XDG_RUNTIME_DIR".into(), slow.runtime_dir())],
    );
    let bound = Duration::from_millis(1000);
    let bound_arg = ["--probe-timeout-ms", "1000"];

    let started = Instant::now();
    let (pid, out) = run_printing_pid_and_cgroup(&env, &bound_arg);
    let took = started.elapsed();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 2, "ran once: {stdout}");
    assert_eq!(stdout.lines().next(), Some(pid.to_string().as_str()));
    assert!(!stdout.contains(".scope"), "not in a scope yet: {stdout}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.starts_with(
            "synaps-scope: warning: running /usr/bin/sh before its scope synaps-tool-"
        ) || stderr
            .starts_with("synaps-scope: warning: running /bin/sh before its scope synaps-tool-"),
        "{stderr}"
    );
    assert!(stderr.contains("timed out after"), "{stderr}");
    assert!(took >= bound && took < bound * 2, "{took:?}");

    let required = with_overrides(&env, &[("SYNAPS_PROCESS_SCOPES".into(), "required".into())]);
    let started = Instant::now();
    let (_, out) = run_printing_pid_and_cgroup(&required, &bound_arg);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(EXEC_FAILED_STATUS), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "never ran");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("synaps-scope: not running")
            && stderr.contains("process scopes are required"),
        "{stderr}"
    );
    assert!(took >= bound && took < bound * 2, "{took:?}");
}

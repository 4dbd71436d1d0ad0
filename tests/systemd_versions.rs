//! What differs between systemd versions, tested on each version the rig runs, against what
//! systemd's own source says of that version (docs/testing.md names the source read for each):
//! when `--expand-environment=no` is passed and why, how systemd-run reaches the user manager
//! (private socket, session bus), and the scope's Description and CollectMode.

mod common;

use std::ffi::OsString;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{env_with, rig, run_argv, systemctl_value, Manager, Rig, TempDir};
use synaps_scope::{
    decide, inherited_env, launcher_for_effective_env, launcher_for_env, set_env, Decision,
    DirectReason, LauncherOptions, ScopeKind,
};

fn os(items: &[&str]) -> Vec<OsString> {
    items.iter().map(OsString::from).collect()
}

/// Runs systemd-run (the rig's version, first on PATH) with `args` and exactly `env`.
fn bare_systemd_run(args: &[&str], env: &[(OsString, OsString)]) -> Output {
    let mut cmd = Command::new("systemd-run");
    cmd.args(args).stdin(Stdio::null());
    set_env(&mut cmd, env);
    cmd.output()
        .expect("systemd-run of the rig's version is on PATH")
}

/// Whether `systemd-run --scope` expands `${VAR}` in the command line when not told either way.
/// 247 and 252 (src/run/run.c) have no expansion at all (no `--expand-environment` option). 254 and 257 default to none for scopes
/// (`arg_expand_environment = !arg_scope`, with a warning that the default will change). 262's
/// systemd-run no longer carries that warning and expands by default, as this test shows.
fn scope_expands_by_default(rig: &Rig) -> bool {
    match rig.version {
        247 | 252 | 254 | 257 => false,
        262 => true,
        v => panic!("systemd {v} is not in this table: read its src/run/run.c and add it"),
    }
}

/// Whether systemd-run falls back to the session bus when `XDG_RUNTIME_DIR` is set but its
/// `systemd/private` socket cannot be reached. 247, 252 and 254 (src/shared/bus-util.c,
/// `bus_connect_user_systemd`) fall back to `sd_bus_default_user`; 257 returns the error and only
/// uses the session bus when `XDG_RUNTIME_DIR` is unset and `DBUS_SESSION_BUS_ADDRESS` is set
/// (`bus_connect_transport_systemd`); 262 behaves as 257 (its libsystemd-shared carries the same
/// "Falling back to session bus" message, and this test shows the same outcome).
fn private_socket_failure_falls_back_to_session_bus(rig: &Rig) -> bool {
    match rig.version {
        247 | 252 | 254 => true,
        257 | 262 => false,
        v => panic!("systemd {v} is not in this table: read its src/shared/bus-util.c and add it"),
    }
}

/// The Description systemd-run gives a scope when it is given none: 247, 252 and 254 join the
/// command line with spaces (`strv_join(arg_cmdline, " ")` in `run()`); 257 and later write `[systemd-run] ` and the shell-quoted command line.
fn default_description(rig: &Rig, argv: &[&str]) -> String {
    match rig.version {
        247 | 252 | 254 => argv.join(" "),
        257 | 262 => format!("[systemd-run] {}", argv.join(" ")),
        v => panic!("systemd {v} is not in this table: read its src/run/run.c and add it"),
    }
}

#[test]
fn expand_environment_no_is_passed_exactly_from_254_and_keeps_arguments_verbatim_everywhere() {
    let Some(rig) = rig() else { return };
    let value = OsString::from("expanded-value");
    let env = env_with(&[("SYNAPS_VERSION_TEST_VAR", &value)]);
    let echo = synaps_scope::find_program("echo".as_ref(), &env, None).unwrap();
    let echo = echo.to_str().unwrap();

    // systemd-run's own default, so that the test shows what the flag protects against.
    let bare = bare_systemd_run(
        &[
            "--user",
            "--scope",
            "--quiet",
            "--",
            echo,
            "${SYNAPS_VERSION_TEST_VAR}",
        ],
        &env,
    );
    assert!(bare.status.success(), "{bare:?}");
    let expected = if scope_expands_by_default(&rig) {
        "expanded-value\n"
    } else {
        "${SYNAPS_VERSION_TEST_VAR}\n"
    };
    assert_eq!(String::from_utf8_lossy(&bare.stdout), expected);

    // 252 does not know the flag at all, so passing it there would break every launch.
    let flag = bare_systemd_run(
        &[
            "--user",
            "--scope",
            "--quiet",
            "--expand-environment=no",
            "--",
            echo,
            "x",
        ],
        &env,
    );
    assert_eq!(flag.status.success(), rig.version >= 254, "{flag:?}");

    // Through either wrapper, the argument arrives unexpanded: systemd-run gets the flag exactly
    // from 254, the launcher program never expands anything.
    for wrapper in ["systemd-run", "synaps-scope-exec"] {
        let env = common::with_wrapper(&env, wrapper);
        let launcher = launcher_for_effective_env(&env, ScopeKind::Tool)
            .unwrap()
            .expect("the rig's manager answers");
        let wrapped = launcher.wrap(&os(&["echo", "${SYNAPS_VERSION_TEST_VAR}"]), &env, None);
        assert_eq!(
            wrapped.argv.iter().any(|a| a == "--expand-environment=no"),
            wrapper == "systemd-run" && rig.version >= 254,
            "{:?}",
            wrapped.argv
        );
        let out = run_argv(&wrapped.argv, &env).unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "${SYNAPS_VERSION_TEST_VAR}\n",
            "{wrapper}"
        );
    }
}

/// Runs `argv` wrapped by a launcher for `env`; returns the unit and the child's cgroup.
fn scoped_cgroup(env: &[(OsString, OsString)]) -> (String, String) {
    let launcher = launcher_for_effective_env(env, ScopeKind::Tool)
        .unwrap()
        .expect("scoped");
    let argv = os(&["sh", "-c", "grep '^0::' /proc/self/cgroup | cut -c4-"]);
    let wrapped = launcher.wrap(&argv, env, None);
    let out = run_argv(&wrapped.argv, env).unwrap();
    assert!(out.status.success(), "{out:?}");
    (
        wrapped.unit.unwrap(),
        String::from_utf8(out.stdout).unwrap().trim().to_owned(),
    )
}

#[test]
fn with_only_a_session_bus_address_every_version_reaches_the_manager_through_dbus_daemon() {
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    let env = manager.session_bus_only();
    let (unit, cgroup) = scoped_cgroup(&env);
    assert!(
        cgroup.ends_with(&format!("/app.slice/{unit}")) && cgroup.contains("/manager-"),
        "the child runs in a scope of the test's manager: {cgroup}"
    );
}

#[test]
fn a_runtime_dir_without_the_private_socket_falls_back_to_the_session_bus_before_257_and_through_the_launcher_program(
) {
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    // XDG_RUNTIME_DIR names a directory with the bus socket but no systemd/private.
    let runtime = TempDir::new("no-private");
    std::os::unix::fs::symlink(manager.runtime_dir.join("bus"), runtime.path().join("bus"))
        .unwrap();
    let mut env = manager.session_bus_only();
    env.push(("XDG_RUNTIME_DIR".into(), runtime.path().into()));
    let refused = |env: &[(OsString, OsString)]| match decide(
        env,
        ScopeKind::Tool,
        &LauncherOptions::default(),
    )
    .unwrap()
    {
        Decision::Direct(DirectReason::ProbeFailed { detail, .. }) => assert!(
            detail.contains("could not connect to the user manager")
                && detail.contains("systemd/private: No such file or directory"),
            "{detail}"
        ),
        other => panic!("systemd {} would not reach it, yet: {other:?}", rig.version),
    };

    let with_systemd_run = common::with_wrapper(&env, "systemd-run");
    if private_socket_failure_falls_back_to_session_bus(&rig) {
        let (unit, cgroup) = scoped_cgroup(&with_systemd_run);
        assert!(cgroup.ends_with(&unit), "{cgroup}");
    } else {
        refused(&with_systemd_run);
        // systemd-run itself gives the same verdict: the launch would fail, not run unscoped.
        let bare = bare_systemd_run(&["--user", "--scope", "--quiet", "--", "true"], &env);
        assert_eq!(bare.status.code(), Some(1), "{bare:?}");
    }
    // The launcher program takes the session bus first on every version (tests/route_order.rs),
    // so the missing private socket does not matter to it.
    let (unit, cgroup) = scoped_cgroup(&common::with_wrapper(&env, "synaps-scope-exec"));
    assert!(cgroup.ends_with(&unit), "{cgroup}");
}

#[test]
fn the_scope_carries_the_library_s_description_and_collect_mode_on_every_version() {
    let Some(rig) = rig() else { return };
    let env = inherited_env();
    let launcher = launcher_for_env(&env).unwrap().expect("scoped");
    let scratch = TempDir::new("describe");
    let done = scratch.path().join("done");
    // The child reports its own unit's properties while it is alive, then exits non-zero.
    let script = "systemctl --user show -p Description -p CollectMode -- \"$1\" > \"$2\"; exit 3";
    let argv = os(&["sh", "-c", script, "sh"]);
    let mut wrapped = launcher.wrap(&argv, &env, None);
    let unit = wrapped.unit.clone().unwrap();
    wrapped.argv.push(unit.clone().into());
    wrapped.argv.push(done.clone().into());
    let out = run_argv(&wrapped.argv, &env).unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let sh = synaps_scope::find_program("sh".as_ref(), &env, None).unwrap();
    assert_eq!(
        std::fs::read_to_string(&done).unwrap(),
        format!(
            "Description=synaps tool: {}\nCollectMode=inactive-or-failed\n",
            sh.display()
        )
    );
    // Collected once empty, whatever the command's exit status.
    let end = Instant::now() + Duration::from_secs(5);
    while systemctl_value(Some(&unit), "LoadState") != "not-found" {
        assert!(Instant::now() < end, "{unit} was not collected");
        std::thread::sleep(Duration::from_millis(20));
    }

    // Without --description the text would depend on the version, which is why one is passed.
    let show =
        "systemctl --user show -p Description --value $(basename $(grep ^0:: /proc/self/cgroup))";
    let sh = sh.to_str().unwrap();
    let bare = bare_systemd_run(
        &["--user", "--scope", "--quiet", "--", sh, "-c", show],
        &env,
    );
    assert!(bare.status.success(), "{bare:?}");
    let quoted = format!("\"{}\"", show.replace('$', "\\$"));
    let expected = match rig.version {
        247 | 252 | 254 => default_description(&rig, &[sh, "-c", show]),
        _ => default_description(&rig, &[sh, "-c", &quoted]),
    };
    assert_eq!(String::from_utf8_lossy(&bare.stdout).trim_end(), expected);
}

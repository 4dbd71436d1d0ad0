//! A wrapped child runs in its own scope with its pid, process group, session and arguments
//! intact (R1-R4, R10), against the real user manager of the rig.

mod common;

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use common::{cgroup_of, env_with, rig, run_argv, TempDir};
use synaps_scope::{
    inherited_env, launcher_for_effective_env, launcher_for_env, set_env, ScopeKind, Wrapper,
};

/// Prints, one per line: its pid, "pgid sid" from /proc, and its cgroup.
const SELF_REPORT: &str =
    "echo $$; cut -d' ' -f5,6 /proc/$$/stat; grep '^0::' /proc/$$/cgroup | cut -c4-";

fn os(items: &[&str]) -> Vec<OsString> {
    items.iter().map(OsString::from).collect()
}

/// Spawns `argv` (optionally in a new process group) and returns its pid and report lines.
fn spawn_report(argv: &[OsString], new_group: bool) -> (u32, Vec<String>) {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdout(Stdio::piped());
    set_env(&mut cmd, &inherited_env());
    if new_group {
        cmd.process_group(0);
    }
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{argv:?} failed: {}", out.status);
    (
        pid,
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect(),
    )
}

#[test]
fn a_wrapped_child_runs_in_its_own_scope_with_the_pid_group_and_session_of_a_direct_spawn() {
    let Some(rig) = rig() else { return };
    let env = inherited_env();
    let launcher = launcher_for_env(&env)
        .unwrap()
        .expect("the rig's manager answers the probe");
    common::assert_wrapper_under_test(&launcher);
    match launcher.wrapper() {
        Wrapper::SystemdRun { version, .. } => assert_eq!(*version, Some(rig.version)),
        _ => assert_eq!(launcher.systemd_version(), None),
    }
    let argv = os(&["sh", "-c", SELF_REPORT]);

    for new_group in [false, true] {
        let wrapped = launcher.wrap(&argv, &env, None);
        let unit = wrapped.unit.clone().expect("sh resolves, so it is wrapped");
        let (direct_pid, direct) = spawn_report(&argv, new_group);
        let (pid, scoped) = spawn_report(&wrapped.argv, new_group);

        assert_eq!(
            scoped[0],
            pid.to_string(),
            "the pid spawned is the command's pid"
        );
        assert!(
            scoped[2].ends_with(&format!("/app.slice/{unit}")),
            "cgroup {} is not {unit}",
            scoped[2]
        );
        assert!(
            !direct[2].contains(".scope"),
            "a direct spawn stays in the caller's cgroup: {}",
            direct[2]
        );
        let expected_group = if new_group {
            format!("{pid} {}", direct[1].split(' ').nth(1).unwrap())
        } else {
            direct[1].clone()
        };
        assert_eq!(
            scoped[1], expected_group,
            "process group and session (direct child was {direct_pid})"
        );
    }
}

#[test]
fn arguments_arrive_byte_identical_and_expansion_is_disabled_exactly_on_254() {
    let Some(rig) = rig() else { return };
    let env = inherited_env();
    let launcher = launcher_for_env(&env).unwrap().expect("scoped");
    let payload: Vec<OsString> = vec![
        "${HOME}".into(),
        "$HOME".into(),
        "--".into(),
        "-h".into(),
        "--help".into(),
        "".into(),
        "two words".into(),
        "line\nbreak".into(),
        "\"double\" 'single'".into(),
        "back\\slash".into(),
        OsString::from_vec(vec![0xff, 0xfe, b'x', 0x80]),
        "%n %% %h".into(),
    ];
    let mut argv = os(&[
        "sh",
        "-c",
        "for a in \"$@\"; do printf '%s\\0' \"$a\"; done",
        "sh",
    ]);
    argv.extend(payload.iter().cloned());
    let wrapped = launcher.wrap(&argv, &env, None);
    assert!(wrapped.unit.is_some());
    // systemd-run gets the flag from 254 on; the launcher program expands nothing, ever.
    let expect_flag = launcher.systemd_run().is_some() && rig.version >= 254;
    let has_flag = wrapped.argv.iter().any(|a| a == "--expand-environment=no");
    assert_eq!(
        has_flag,
        expect_flag,
        "--expand-environment=no with {} on systemd {}",
        launcher.wrapper().name(),
        rig.version
    );
    assert_eq!(launcher.disables_environment_expansion(), expect_flag);

    let out = run_argv(&wrapped.argv, &env).unwrap();
    assert!(out.status.success());
    let received: Vec<OsString> = out
        .stdout
        .split(|&b| b == 0)
        .map(|a| OsString::from_vec(a.to_vec()))
        .collect();
    assert_eq!(&received[..payload.len()], &payload[..]);
    assert_eq!(
        received.len(),
        payload.len() + 1,
        "one empty tail after the last NUL"
    );
    assert!(
        wrapped.argv.ends_with(&payload),
        "payload passes verbatim in the argv too"
    );
}

#[test]
fn the_childs_path_and_cwd_pick_the_program_and_a_missing_one_is_a_spawn_error() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("resolve");
    for name in ["parent", "child"] {
        std::fs::create_dir(dir.path().join(name)).unwrap();
        dir.write(
            &format!("{name}/which-one"),
            &format!("#!/bin/sh\necho {name}\n"),
            true,
        );
    }
    dir.write("child/local-prog", "#!/bin/sh\necho local\n", true);
    let parent_path =
        std::env::join_paths([dir.path().join("parent"), "/usr/bin".into(), "/bin".into()])
            .unwrap();
    let child_path =
        std::env::join_paths([dir.path().join("child"), "/usr/bin".into(), "/bin".into()]).unwrap();
    let parent_env = env_with(&[("PATH", &parent_path)]);
    let child_env = env_with(&[("PATH", &child_path)]);
    let launcher = launcher_for_env(&parent_env).unwrap().expect("scoped");

    let wrapped = launcher.wrap(&os(&["which-one"]), &child_env, None);
    assert!(wrapped
        .argv
        .contains(&dir.path().join("child/which-one").into_os_string()));
    let out = run_argv(&wrapped.argv, &child_env).unwrap();
    assert_eq!(out.stdout, b"child\n");

    let child_cwd = dir.path().join("child");
    let wrapped = launcher.wrap(&os(&["./local-prog"]), &child_env, Some(&child_cwd));
    assert!(wrapped.unit.is_some());
    assert!(
        wrapped
            .argv
            .contains(&child_cwd.join("local-prog").into_os_string()),
        "{:?}",
        wrapped.argv
    );
    let mut cmd = Command::new(&wrapped.argv[0]);
    cmd.args(&wrapped.argv[1..]).current_dir("/");
    assert_eq!(
        cmd.output().unwrap().stdout,
        b"local\n",
        "runs from any cwd once resolved"
    );

    let missing = os(&["synaps-no-such-program", "arg"]);
    let wrapped = launcher.wrap(&missing, &child_env, None);
    assert_eq!(wrapped.argv, missing, "a missing program is left unwrapped");
    assert_eq!(wrapped.unit, None);
    let error = run_argv(&wrapped.argv, &child_env).expect_err("the spawn itself fails");
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound);

    let directory = launcher.wrap(
        &[dir.path().join("child").into_os_string()],
        &child_env,
        None,
    );
    assert_eq!(directory.unit, None, "a directory is not a program");
}

#[test]
fn tool_and_daemon_children_land_under_their_configured_slices() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("slices");
    let config = dir.write(
        "config",
        "# slices of each kind\ntool_scope_slice = synapstesttool.slice\ndaemon_scope_slice = \"synapstestdaemon.slice\"\n",
        false,
    );
    let env = env_with(&[("SYNAPS_CONFIG", &config.into_os_string())]);
    for (kind, slice) in [
        (ScopeKind::Tool, "synapstesttool.slice"),
        (ScopeKind::Daemon, "synapstestdaemon.slice"),
    ] {
        let launcher = launcher_for_effective_env(&env, kind)
            .unwrap()
            .expect("scoped");
        assert_eq!((launcher.kind(), launcher.slice()), (kind, Some(slice)));
        let wrapped = launcher.wrap(&os(&["sh", "-c", SELF_REPORT]), &env, None);
        let unit = wrapped.unit.unwrap();
        assert!(unit.starts_with(&format!("synaps-{kind}-")), "{unit}");
        assert!(wrapped
            .argv
            .contains(&OsString::from(format!("--slice={slice}"))));
        let out = run_argv(&wrapped.argv, &env).unwrap();
        let report = String::from_utf8(out.stdout).unwrap();
        let cgroup = report.lines().nth(2).unwrap();
        assert!(
            cgroup.ends_with(&format!("/{slice}/{unit}")),
            "{kind}: {cgroup}"
        );
        let pid: u32 = report.lines().next().unwrap().parse().unwrap();
        assert_ne!(
            cgroup_of(std::process::id()),
            cgroup,
            "{pid} left the test's cgroup"
        );
    }
}

#[test]
fn the_description_names_the_kind_and_the_program() {
    let Some(_rig) = rig() else { return };
    let env = inherited_env();
    let launcher = launcher_for_effective_env(&env, ScopeKind::Daemon)
        .unwrap()
        .expect("scoped");
    let wrapped = launcher.wrap(&os(&["sleep", "0"]), &env, None);
    let description = wrapped
        .argv
        .iter()
        .find(|a| a.as_bytes().starts_with(b"--description="))
        .unwrap();
    let sleep = synaps_scope::find_program("sleep".as_ref(), &env, None).unwrap();
    assert_eq!(
        description,
        &OsString::from(format!("--description=synaps daemon: {}", sleep.display()))
    );
}

#[test]
fn a_login_shell_gets_its_dash_argv0_through_wrap_program() {
    let Some(_rig) = rig() else { return };
    let env = inherited_env();
    let launcher = launcher_for_env(&env).unwrap().expect("scoped");
    let argv = os(&["-sh", "-c", "printf %s \"$0\""]);
    let wrapped = launcher.wrap_program("sh".as_ref(), &argv, &env, None);
    assert!(wrapped.unit.is_some());
    let out = run_argv(&wrapped.argv, &env).unwrap();
    assert!(out.status.success(), "{out:?}");
    let seen = String::from_utf8(out.stdout).unwrap();
    match launcher.wrapper() {
        Wrapper::Exec { .. } => assert_eq!(seen, "-sh"),
        // systemd-run cannot pass an argv[0]: the program sees its own path.
        _ => assert!(seen.starts_with('/') && seen.ends_with("/sh"), "{seen}"),
    }
}

#[test]
fn bounds_too_large_for_the_clock_saturate_instead_of_panicking() {
    let Some(_rig) = rig() else { return };
    let env = inherited_env();
    let options = synaps_scope::LauncherOptions {
        probe_timeout: std::time::Duration::MAX,
    };
    let launcher = synaps_scope::launcher_with_options(&env, ScopeKind::Tool, &options)
        .unwrap()
        .expect("scoped");
    let wrapped = launcher.wrap(&os(&["sleep", "30"]), &env, None);
    let unit = wrapped.unit.clone().unwrap();
    let mut cmd = Command::new(&wrapped.argv[0]);
    cmd.args(&wrapped.argv[1..]);
    set_env(&mut cmd, &env);
    let mut child = cmd.spawn().unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let handle = loop {
        match synaps_scope::ScopeHandle::from_pid(&unit, child.id()) {
            Ok(handle) => break handle,
            Err(e) if std::time::Instant::now() > end => panic!("never in {unit}: {e}"),
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    };
    assert_eq!(
        handle.kill(std::time::Duration::MAX).unwrap(),
        vec![child.id()]
    );
    assert!(!child.wait().unwrap().success());
}

/// Issue 13, item 14: a script without a `#!` line fails to spawn scoped exactly as it does
/// direct (ENOEXEC from execve), instead of running through `/bin/sh` (systemd-run's execvp) or
/// failing inside the launcher program: `wrap` leaves it unwrapped, as it does a program that
/// cannot be found (R4). A `#!` script and an ELF program are wrapped.
#[test]
fn a_script_without_a_shebang_fails_scoped_as_it_does_direct() {
    let Some(_rig) = rig() else { return };
    let env = synaps_scope::inherited_env();
    let launcher = launcher_for_env(&env).unwrap().expect("scoped");
    let dir = TempDir::new("no-shebang");
    let log = dir.path().join("ran");
    let bare = dir.write("bare", &format!("echo ran >> '{}'\n", log.display()), true);
    let script = dir.write("script", "#!/bin/sh\nexit 0\n", true);

    let direct = Command::new(&bare).status().unwrap_err();
    assert_eq!(direct.raw_os_error(), Some(8), "direct: {direct}");
    let wrapped = launcher.wrap(&[bare.clone().into_os_string()], &env, None);
    if common::binfmt_misc_has_formats() {
        assert!(wrapped.unit.is_some(), "binfmt_misc may run it: wrapped");
    } else {
        assert_eq!(wrapped.unit, None);
        assert_eq!(wrapped.argv, vec![bare.clone().into_os_string()]);
        let scoped = Command::new(&wrapped.argv[0]).status().unwrap_err();
        assert_eq!(
            scoped.raw_os_error(),
            direct.raw_os_error(),
            "scoped: {scoped}"
        );
        assert!(!log.exists(), "the script never ran");
    }
    for runnable in [script.into_os_string(), "true".into()] {
        let wrapped = launcher.wrap(std::slice::from_ref(&runnable), &env, None);
        assert!(wrapped.unit.is_some(), "{runnable:?} is wrapped");
        assert!(run_argv(&wrapped.argv, &env).unwrap().status.success());
    }
}

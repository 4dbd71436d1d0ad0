//! `synaps-scope doctor` in each state, against real managers: up, none, stopped, refused slice,
//! off, required. Its JSON is checked with Python's json module.

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::ffi::OsString;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{env_with, env_without, path_with_first, rig, signal, Manager, Signal, TempDir};
use synaps_scope::{inherited_env, set_env};

fn doctor(args: &[&str], env: &[(OsString, OsString)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_synaps-scope"));
    cmd.arg("doctor").args(args);
    set_env(&mut cmd, env);
    cmd.output().unwrap()
}

/// Evaluates the Python expression `expr` over the parsed JSON `d`, printed with repr().
fn json_query(json: &[u8], expr: &str) -> String {
    let mut python = Command::new("python3")
        .args([
            "-c",
            &format!("import json,sys; d=json.load(sys.stdin); print(repr({expr}))"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 is on every machine of this project");
    use std::io::Write;
    python.stdin.take().unwrap().write_all(json).unwrap();
    let out = python.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "not valid JSON: {}",
        String::from_utf8_lossy(json)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn a_running_manager_gives_exit_0_with_version_timing_and_cgroup() {
    let Some(rig) = rig() else { return };
    let env = common::with_wrapper(&inherited_env(), "systemd-run");
    let out = doctor(&["--json"], &env);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        json_query(&out.stdout, "d['systemd_run']['version']"),
        rig.version.to_string()
    );
    let expand = if rig.version >= 254 { "True" } else { "False" };
    assert_eq!(
        json_query(&out.stdout, "d['systemd_run']['expand_environment_no']"),
        expand
    );
    assert_eq!(
        json_query(&out.stdout, "[k['state'] for k in d['kinds']]"),
        "['scoped', 'scoped']"
    );
    assert_eq!(
        json_query(
            &out.stdout,
            "all(isinstance(k['probe_ms'], int) for k in d['kinds'])"
        ),
        "True"
    );
    assert_eq!(
        json_query(&out.stdout, "d['config']['process_scopes']"),
        "{'value': 'on', 'origin': {'source': 'default'}}"
    );
    assert_eq!(
        json_query(&out.stdout, "d['cgroup'].endswith('/command')"),
        "True",
        "the test runs in the rig's command cgroup"
    );
    assert_eq!(
        json_query(&out.stdout, "d['manager']['version']"),
        rig.version.to_string()
    );
    assert_eq!(
        json_query(&out.stdout, "d['manager']['oldest_supported']"),
        "247"
    );
    assert_eq!(json_query(&out.stdout, "d['warnings']"), "[]");

    let text = doctor(&[], &env);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains(&format!("(systemd {})", rig.version)),
        "{text}"
    );
    assert!(
        text.contains("verdict:       scopes will be used (exit 0)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("user manager:  systemd {}", rig.version)),
        "{text}"
    );
    assert!(text.contains("(oldest supported: 247)"), "{text}");
    assert!(!text.contains("warning:"), "{text}");
    // systemd-run's own way: its private socket while XDG_RUNTIME_DIR is set.
    let runtime = std::env::var("XDG_RUNTIME_DIR").unwrap();
    assert!(
        text.contains(&format!(
            "reached by:    private socket {runtime}/systemd/private\n  in the order systemd-run's"
        )),
        "{text}"
    );
}

#[test]
fn a_systemd_run_of_another_version_than_the_manager_is_named_and_warned_about() {
    let Some(rig) = rig() else { return };
    // A real systemd-run of another version (the rig names one), first on PATH.
    let other = std::env::var_os("SYNAPS_RIG_OTHER_SYSTEMD_RUN").expect("the rig names one");
    let bin = TempDir::new("other-run");
    std::os::unix::fs::symlink(&other, bin.path().join("systemd-run")).unwrap();
    let other_version = Command::new(&other).arg("--version").output().unwrap();
    let other_version: String = String::from_utf8_lossy(&other_version.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_owned();
    assert_ne!(other_version, rig.version.to_string());
    let env = common::with_wrapper(
        &env_with(&[("PATH", &path_with_first(bin.path()))]),
        "systemd-run",
    );

    let out = doctor(&["--json"], &env);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        json_query(&out.stdout, "d['systemd_run']['version']"),
        other_version
    );
    assert_eq!(
        json_query(&out.stdout, "d['manager']['version']"),
        rig.version.to_string()
    );
    assert_eq!(
        json_query(
            &out.stdout,
            &format!(
                "[w for w in d['warnings'] if 'systemd-run is from systemd {other_version} but the user manager runs systemd {}' in w] != []",
                rig.version
            )
        ),
        "True",
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8(doctor(&[], &env).stdout).unwrap();
    assert!(
        text.contains(&format!(
            "warning:       systemd-run is from systemd {other_version} but the user manager runs systemd {}",
            rig.version
        )),
        "{text}"
    );
}

#[test]
fn doctor_names_the_launcher_program_it_will_use_and_why() {
    let Some(_rig) = rig() else { return };
    let exec = common::exec_program();
    let env = common::with_wrapper(&inherited_env(), "synaps-scope-exec");
    let out = doctor(&["--json"], &env);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        json_query(
            &out.stdout,
            "(d['launcher']['wrapper'], d['launcher']['path'])"
        ),
        format!("('synaps-scope-exec', '{}')", exec.display())
    );
    assert_eq!(
        json_query(&out.stdout, "d['launcher']['why']"),
        "'scope_launcher = synaps-scope-exec (environment SYNAPS_SCOPE_LAUNCHER)'"
    );
    let text = String::from_utf8(doctor(&[], &env).stdout).unwrap();
    assert!(
        text.contains(&format!(
            "launcher:      synaps-scope-exec {}",
            exec.display()
        )),
        "{text}"
    );
    assert!(
        text.contains("(not used)"),
        "systemd-run is named as unused: {text}"
    );
    // The way the requests took, and the order: with a session bus address that leads nowhere,
    // the launcher program passes over it to the private socket (tests/route_order.rs has every
    // case).
    let runtime = std::env::var("XDG_RUNTIME_DIR").unwrap();
    let nowhere = common::env_with(&[(
        "DBUS_SESSION_BUS_ADDRESS",
        &"unix:path=/nonexistent/bus".into(),
    )]);
    let out = doctor(
        &["--json"],
        &common::with_wrapper(&nowhere, "synaps-scope-exec"),
    );
    assert_eq!(
        json_query(&out.stdout, "d['route']['way']"),
        format!("'private socket {runtime}/systemd/private'")
    );
    assert_eq!(
        json_query(
            &out.stdout,
            "d['route']['order'].startswith(\"the launcher program's: the session bus first\")"
        ),
        "True"
    );
    assert!(text.contains("reached by:    "), "{text}");

    // Where the launcher program is missing, `auto` falls back to systemd-run and says why.
    let missing = common::env_with(&[
        ("SYNAPS_SCOPE_LAUNCHER", &"auto".into()),
        (
            "SYNAPS_SCOPE_EXEC",
            &"/nonexistent/synaps-scope-exec".into(),
        ),
    ]);
    let out = doctor(&["--json"], &missing);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        json_query(&out.stdout, "d['launcher']['wrapper']"),
        "'systemd-run'"
    );
    assert_eq!(
        json_query(
            &out.stdout,
            "'synaps-scope-exec is not installed' in d['launcher']['why'] and '/nonexistent' in d['launcher']['why']"
        ),
        "True",
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn no_manager_gives_exit_1_and_says_why() {
    let Some(_rig) = rig() else { return };
    let env = env_without(
        &inherited_env(),
        &["XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"],
    );
    let out = doctor(&["--json", "--kind", "tool"], &env);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json_query(&out.stdout, "d['kinds'][0]['state']"),
        "'direct'"
    );
    assert!(json_query(&out.stdout, "d['kinds'][0]['reason']").contains("XDG_RUNTIME_DIR"));
    assert_eq!(
        json_query(&out.stdout, "d['kinds'][0]['probe_ms']"),
        "None",
        "nothing was probed"
    );
}

#[test]
fn a_stopped_manager_gives_exit_1_within_the_bound() {
    let Some(rig) = rig() else { return };
    let manager = Manager::start(&rig);
    signal(manager.pid(), Signal::STOP);
    let started = Instant::now();
    let out = doctor(
        &["--json", "--kind", "daemon", "--probe-timeout-ms", "500"],
        &manager.env(),
    );
    let elapsed = started.elapsed();
    signal(manager.pid(), Signal::CONT);
    assert_eq!(out.status.code(), Some(1));
    assert!(elapsed < Duration::from_millis(1500), "{elapsed:?}");
    let reason = json_query(&out.stdout, "d['kinds'][0]['reason']");
    assert!(reason.contains("timed out after"), "{reason}");
    assert_eq!(
        json_query(&out.stdout, "d['kinds'][0]['probe_ms'] >= 500"),
        "True"
    );
}

#[test]
fn a_refused_slice_and_an_undefined_slice_are_both_explained() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("doctor-slices");
    let config = dir.write(
        "config",
        "tool_scope_slice = doctortools.slice\ndaemon_scope_slice = doctor.service\n",
        false,
    );
    let env = env_with(&[("SYNAPS_CONFIG", &config.clone().into_os_string())]);
    let out = doctor(&["--json"], &env);
    assert_eq!(out.status.code(), Some(1));
    let tool = "d['kinds'][0]";
    assert_eq!(
        json_query(&out.stdout, &format!("{tool}['state']")),
        "'scoped'"
    );
    assert_eq!(
        json_query(&out.stdout, &format!("{tool}['slice_limits']")),
        "{'set': {}, 'unit_file': None}"
    );
    assert!(json_query(&out.stdout, &format!("{tool}['slice_warning']")).contains("sets no limits"));
    assert_eq!(
        json_query(&out.stdout, "d['kinds'][1]['state']"),
        "'direct'"
    );
    assert!(json_query(&out.stdout, "d['kinds'][1]['reason']").contains("is not a slice"));
    let origin = json_query(&out.stdout, "d['config']['daemon_scope_slice']['origin']");
    assert_eq!(
        origin,
        format!(
            "{{'source': 'file', 'path': '{}', 'line': 2}}",
            config.display()
        )
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a slice"),
        "the library's WARN is shown too"
    );
}

#[test]
fn off_gives_exit_1_and_required_gives_exit_3_apart_from_usage_errors() {
    let Some(_rig) = rig() else { return };
    let off = doctor(
        &["--json"],
        &env_with(&[("SYNAPS_PROCESS_SCOPES", &"off".into())]),
    );
    assert_eq!(off.status.code(), Some(1));
    assert!(json_query(&off.stdout, "d['kinds'][0]['reason']").contains("off"));
    assert_eq!(
        json_query(&off.stdout, "d['config']['process_scopes']['origin']"),
        "{'source': 'environment', 'variable': 'SYNAPS_PROCESS_SCOPES'}"
    );

    let required = env_without(
        &env_with(&[("SYNAPS_PROCESS_SCOPES", &"required".into())]),
        &["XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"],
    );
    let out = doctor(&["--json"], &required);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        json_query(&out.stdout, "[k['state'] for k in d['kinds']]"),
        "['refused', 'refused']"
    );
    assert_eq!(
        json_query(&out.stdout, "(d['verdict_name'], d['exit_status'])"),
        "('refused', 3)"
    );
    let text = String::from_utf8(doctor(&[], &required).stdout).unwrap();
    assert!(
        text.contains("required mode will refuse launches (exit 3)"),
        "{text}"
    );
    // A usage error has its own status, and --help says which is which.
    let usage = doctor(&["--no-such-option"], &required);
    assert_eq!(usage.status.code(), Some(2), "{usage:?}");
    let help = String::from_utf8(doctor(&["--help"], &required).stdout).unwrap();
    assert!(
        help.contains("2: usage or bad input") && help.contains("3: `required` mode would refuse"),
        "{help}"
    );
}

/// Runs a copy of the command at `bin/synaps-scope` under `root`, with no SYNAPS_SCOPE_* variable.
fn doctor_installed_at(root: &std::path::Path) -> String {
    let bin = root.join("bin/synaps-scope");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    common::install_executable(
        std::path::Path::new(env!("CARGO_BIN_EXE_synaps-scope")),
        &bin,
    );
    let env = env_without(
        &inherited_env(),
        &["SYNAPS_SCOPE_EXEC", "SYNAPS_SCOPE_LAUNCHER"],
    );
    let mut cmd = Command::new(&bin);
    set_env(&mut cmd, &env);
    let out = cmd.arg("doctor").output().unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn doctor_finds_the_launcher_program_beside_itself_or_in_its_libexec_with_no_configuration() {
    let Some(_rig) = rig() else { return };
    // As the C tarball lays them out: PREFIX/bin/synaps-scope, PREFIX/libexec/synaps-scope/.
    let tarball = TempDir::new("doctor-libexec");
    let libexec = tarball.path().join("libexec/synaps-scope");
    std::fs::create_dir_all(&libexec).unwrap();
    common::install_executable(&common::exec_program(), &libexec.join("synaps-scope-exec"));
    let text = doctor_installed_at(tarball.path());
    let bin = tarball.path().join("bin");
    let line = format!(
        "  synaps-scope-exec: {}/../libexec/synaps-scope/synaps-scope-exec (in the libexec directory of {}/synaps-scope)",
        bin.display(),
        bin.display()
    );
    assert!(text.lines().any(|l| l == line), "{line:?} not in:\n{text}");

    // Beside it, as a cargo build puts them: that copy comes first.
    common::install_executable(&common::exec_program(), &bin.join("synaps-scope-exec"));
    let text = doctor_installed_at(tarball.path());
    let line = format!(
        "  synaps-scope-exec: {}/synaps-scope-exec (beside {}/synaps-scope)",
        bin.display(),
        bin.display()
    );
    assert!(text.lines().any(|l| l == line), "{line:?} not in:\n{text}");
    assert!(
        text.contains(&format!(
            "launcher:      synaps-scope-exec {}/synaps-scope-exec (",
            bin.display()
        )),
        "{text}"
    );
}

/// Where the session bus's `org.freedesktop.systemd1` is a program that is no systemd manager,
/// `doctor` (text and JSON) says the requests reach the manager by the private socket and why the
/// session bus was passed over, and `run` lands in its scope under the manager of
/// `XDG_RUNTIME_DIR`; with the session bus alone, `run` is direct and says why.
#[test]
fn a_session_bus_whose_manager_name_a_program_squats_is_passed_over_with_the_reason() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("squatted-bus");
    let bus = common::BareBus::start(&dir);
    let _squatter = common::Squatter::start(&bus.address);
    let env = synaps_scope::with_overrides(
        &common::with_wrapper(&inherited_env(), "synaps-scope-exec"),
        &[("DBUS_SESSION_BUS_ADDRESS".into(), bus.address.clone())],
    );
    let out = doctor(&[], &env);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("reached by:    private socket ")
            && text.contains("the session bus passed over: not this user's manager: ")
            && text.contains("does not answer as a systemd manager"),
        "{text}"
    );
    let out = doctor(&["--json"], &env);
    let way = json_query(&out.stdout, "d['route']['way']");
    assert!(
        way.contains("does not answer as a systemd manager"),
        "{way}"
    );

    let run = |env: &[(OsString, OsString)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_synaps-scope"));
        cmd.args(["run", "--", "cat", "/proc/self/cgroup"]);
        set_env(&mut cmd, env);
        cmd.output().unwrap()
    };
    let out = run(&env);
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("/synaps-tool-"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = run(&env_without(&env, &["XDG_RUNTIME_DIR"]));
    assert!(out.status.success(), "{out:?}");
    let warned = String::from_utf8_lossy(&out.stderr);
    assert!(warned.contains("not this user's manager"), "{warned}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("/synaps-tool-"));
}

//! A launch's own resource limits (A6) against the rig's real manager, with both wrappers: each
//! property reaches the manager with the value asked (the unit's properties read back from inside
//! the scope), a limit the manager's cgroup has no controller for is said and refused in `required`
//! mode, a value the manager or the wrapper refuses is told and never runs the command twice, and
//! a bad name or value is refused before anything runs.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::process::Command;

use common::{env_with, rig, systemctl_value, with_wrapper, Capture, TempDir};
use synaps_scope::limits::Property;
use synaps_scope::{
    launcher_for_env, set_env, Classified, ErrorClass, Limits, ScopeLauncher, EXEC_FAILED_STATUS,
};

const WRAPPERS: [&str; 2] = ["synaps-scope-exec", "systemd-run"];

/// Every property, with a value each wrapper carries on every version, and what the manager says
/// it holds (`systemctl show`).
const EVERY_LIMIT: [(&str, &str, &str); 7] = [
    ("MemoryMax", "64M", "67108864"),
    ("MemoryHigh", "48M", "50331648"),
    ("MemorySwapMax", "0", "0"),
    ("CPUWeight", "200", "200"),
    ("CPUQuota", "50%", "500ms"),
    ("TasksMax", "8", "8"),
    ("IOWeight", "50", "50"),
];

fn launcher_through(
    wrapper: &str,
    extra: &[(&str, &OsString)],
) -> (ScopeLauncher, Vec<(OsString, OsString)>) {
    let env = with_wrapper(&env_with(extra), wrapper);
    let launcher = launcher_for_env(&env)
        .unwrap()
        .expect("the rig's manager answers the probe");
    assert_eq!(launcher.wrapper().name(), wrapper);
    (launcher, env)
}

/// The name the manager shows a property under, `CPUQuota` being `CPUQuotaPerSecUSec`.
fn shown_as(name: &str) -> &str {
    if name == "CPUQuota" {
        "CPUQuotaPerSecUSec"
    } else {
        name
    }
}

/// Runs `systemctl --user show` of the launch's own scope from inside it: the properties `names`
/// as the manager holds them while the command runs.
fn read_back(
    launcher: &ScopeLauncher,
    env: &[(OsString, OsString)],
    names: &[&str],
) -> BTreeMap<String, String> {
    let mut argv: Vec<OsString> = vec!["systemctl".into(), "--user".into(), "show".into()];
    for name in names {
        argv.push("-p".into());
        argv.push(shown_as(name).into());
    }
    argv.push("--".into());
    argv.push("UNIT".into());
    let wrapped = launcher.wrap(&argv, env, None);
    let unit = wrapped.unit.clone().expect("systemctl resolves");
    // The unit's name is known once wrapped; the command, last in the argv, asks of its own scope.
    let mut argv = wrapped.argv;
    *argv.last_mut().unwrap() = unit.into();
    let out = run(&argv, env);
    assert!(out.status.success(), "{argv:?}: {out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn run(argv: &[OsString], env: &[(OsString, OsString)]) -> std::process::Output {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    set_env(&mut cmd, env);
    cmd.output().unwrap()
}

/// The controllers the rig's manager was given, read as a person would.
fn managers_controllers() -> Vec<String> {
    let cgroup = systemctl_value(None, "ControlGroup");
    std::fs::read_to_string(format!("/sys/fs/cgroup{cgroup}/cgroup.controllers"))
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_limit_reaches_the_manager_through_both_wrappers() {
    let Some(_rig) = rig() else { return };
    let limits = Limits::from_pairs(EVERY_LIMIT.map(|(n, v, _)| (n, v))).unwrap();
    let names = EVERY_LIMIT.map(|(n, _, _)| n);
    for wrapper in WRAPPERS {
        let (plain, env) = launcher_through(wrapper, &[]);
        let launcher = plain.with_limits(limits.clone()).unwrap();
        assert_eq!(launcher.limits(), &limits);
        let held = read_back(&launcher, &env, &names);
        for (name, _, shown) in EVERY_LIMIT {
            assert_eq!(held[shown_as(name)], shown, "{wrapper}: {name}: {held:?}");
        }
        // A launcher without limits leaves the manager's defaults.
        let defaults = read_back(&plain, &env, &["MemoryMax", "TasksMax"]);
        assert_eq!(defaults["MemoryMax"], "infinity", "{wrapper}");
    }
}

#[test]
fn shares_of_the_machine_are_worked_out_by_the_manager() {
    let Some(_rig) = rig() else { return };
    let limits = Limits::parse(["MemoryHigh=50%", "TasksMax=10%"]).unwrap();
    for wrapper in WRAPPERS {
        let (launcher, env) = launcher_through(wrapper, &[]);
        let held = read_back(
            &launcher.with_limits(limits.clone()).unwrap(),
            &env,
            &["MemoryHigh", "TasksMax"],
        );
        for name in ["MemoryHigh", "TasksMax"] {
            let value: u64 = held[name]
                .parse()
                .unwrap_or_else(|_| panic!("{wrapper}: {name} is a number: {held:?}"));
            assert!(value > 0 && value < u64::MAX, "{wrapper}: {name}={value}");
        }
    }
}

#[test]
fn a_limit_without_its_controller_is_said_and_refused_in_required_mode() {
    let Some(_rig) = rig() else { return };
    let have = managers_controllers();
    let limits = Limits::from_pairs(EVERY_LIMIT.map(|(n, v, _)| (n, v))).unwrap();
    let missing: Vec<Property> = limits
        .iter()
        .map(|l| l.property())
        .filter(|p| !have.iter().any(|c| c == p.controller()))
        .collect();
    assert!(
        !missing.is_empty(),
        "the rig's cgroup tree has no memory controller (docs/testing.md), so MemoryMax is one"
    );
    let required = OsString::from("required");
    for wrapper in WRAPPERS {
        let (launcher, _) = launcher_through(wrapper, &[]);
        let capture = Capture::default();
        let limited = capture
            .run(|| launcher.with_limits(limits.clone()))
            .unwrap();
        let said: Vec<Property> = limited.unenforced().iter().map(|u| u.property).collect();
        assert_eq!(said, missing, "{wrapper}");
        for unenforced in limited.unenforced() {
            let controller = unenforced.property.controller();
            assert!(
                unenforced
                    .why
                    .contains(&format!("no {controller} controller")),
                "{unenforced}"
            );
            assert!(
                unenforced.passed,
                "still passed to the manager: {unenforced}"
            );
        }
        // Said once per property and reason in the process: the first launcher of this test says it.
        if wrapper == WRAPPERS[0] {
            let warnings = capture.warnings();
            assert!(
                warnings
                    .iter()
                    .any(|w| w.contains("MemoryMax will not be enforced")),
                "{warnings:?}"
            );
        }

        let (strict, _) = launcher_through(wrapper, &[("SYNAPS_PROCESS_SCOPES", &required)]);
        let refused = strict.with_limits(limits.clone()).unwrap_err();
        assert_eq!(refused.class(), ErrorClass::Unavailable, "{refused}");
        assert!(
            refused
                .to_string()
                .contains("MemoryMax will not be enforced"),
            "{refused}"
        );
        // Limits the manager can enforce (none at all, here) are taken in required mode too.
        assert!(strict.with_limits(Limits::new()).is_ok());
    }
}

/// `CPUWeight=idle`: systemd-run reads it from 252 (247 says "Failed to parse" and runs nothing),
/// and the manager takes it from 252 (247's refuses the scope: "out of range").
#[test]
fn a_value_the_wrapper_or_the_manager_cannot_take_is_told_and_runs_the_command_once() {
    let Some(rig) = rig() else { return };
    let limits = Limits::parse(["CPUWeight=idle"]).unwrap();
    let takes_idle = rig.version >= 252;
    let dir = TempDir::new("limits-idle");

    // systemd-run: left out where it cannot read it, so that the command still runs in its scope.
    let (launcher, env) = launcher_through("systemd-run", &[]);
    let launcher = launcher.with_limits(limits.clone()).unwrap();
    let left_out = launcher.unenforced().iter().any(|u| !u.passed);
    assert_eq!(left_out, !takes_idle, "{:?}", launcher.unenforced());
    let wrapped = launcher.wrap(&["true".into()], &env, None);
    let passes = wrapped
        .argv
        .contains(&OsString::from("--property=CPUWeight=idle"));
    assert_eq!(passes, takes_idle, "{:?}", wrapped.argv);
    let out = run(&wrapped.argv, &env);
    assert!(out.status.success(), "{out:?}");

    // The launcher program: the manager's refusal is told in its words, and the command runs once,
    // unscoped; with --required it does not run at all.
    let (launcher, env) = launcher_through("synaps-scope-exec", &[]);
    let launcher = launcher.with_limits(limits).unwrap();
    let marker = dir.path().join("ran");
    let script = format!(
        "echo x >> {}; grep '^0::' /proc/$$/cgroup",
        marker.display()
    );
    let wrapped = launcher.wrap(&["sh".into(), "-c".into(), script.into()], &env, None);
    let unit = wrapped.unit.clone().unwrap();
    let out = run(&wrapped.argv, &env);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "x\n", "ran once");
    if takes_idle {
        assert!(stdout.contains(&unit), "in its scope: {stdout} {stderr}");
    } else {
        assert!(
            stderr.contains("CPUWeight") && stderr.contains("out of range"),
            "the manager's words: {stderr}"
        );
        assert!(!stdout.contains(&unit), "not in a scope: {stdout}");
        let mut required = wrapped.argv.clone();
        let at = required.iter().position(|a| a == "--").unwrap();
        required.insert(at, "--required".into());
        std::fs::remove_file(&marker).unwrap();
        let out = run(&required, &env);
        assert_eq!(out.status.code(), Some(EXEC_FAILED_STATUS), "{out:?}");
        assert!(!marker.exists(), "the command did not run");
    }
}

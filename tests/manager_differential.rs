//! Every question the library asks the manager beside the probe (a slice's limits and unit file, a
//! scope's cgroup, the manager's version) goes over its own D-Bus client; each answer must be the
//! one `systemctl --user show` gives on the same manager, on every systemd version the rig runs,
//! and a PATH without `systemctl` (or anything else) must change none of them.

mod common;

use std::ffi::OsString;
use std::process::Command;
use std::time::Duration;

use common::{exec_program, rig, spawn_scoped, TempDir};
use synaps_scope::doctor::{diagnose, Report};
use synaps_scope::{
    inherited_env, with_overrides, HandleError, LauncherOptions, ScopeHandle, ScopeKind,
    SliceLimits,
};

const LIMITS: [&str; 5] = [
    "MemoryMax",
    "MemoryHigh",
    "MemorySwapMax",
    "CPUQuotaPerSecUSec",
    "TasksMax",
];

/// `systemctl --user show -p P… -- UNIT` (the manager's own properties when None), as pairs.
fn systemctl_show(unit: Option<&str>, properties: &[&str]) -> Vec<(String, String)> {
    let out = Command::new("systemctl")
        .args(["--user", "show", "-p", &properties.join(",")])
        .args(unit.map(|u| ["--", u]).into_iter().flatten())
        .output()
        .unwrap();
    assert!(out.status.success(), "systemctl show: {out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// What systemctl says of `slice`'s limits, in the library's terms.
fn limits_by_systemctl(slice: &str) -> SliceLimits {
    let mut asked = LIMITS.to_vec();
    asked.push("FragmentPath");
    let shown = systemctl_show(Some(slice), &asked);
    let value = |name: &str| {
        shown
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("systemctl showed no {name} for {slice}: {shown:?}"))
    };
    SliceLimits {
        set: LIMITS
            .iter()
            .map(|name| ((*name).to_owned(), value(name)))
            .filter(|(_, v)| v != "infinity")
            .collect(),
        fragment: Some(value("FragmentPath")).filter(|f| !f.is_empty()),
    }
}

/// The launcher program as the wrapper, and PATH as given: what decides nothing here but where
/// `systemctl` could be found.
fn env_with_path(config: &OsString, path: &str) -> Vec<(OsString, OsString)> {
    with_overrides(
        &inherited_env(),
        &[
            ("SYNAPS_CONFIG".into(), config.clone()),
            ("SYNAPS_SCOPE_LAUNCHER".into(), "synaps-scope-exec".into()),
            ("SYNAPS_SCOPE_EXEC".into(), exec_program().into_os_string()),
            ("PATH".into(), path.into()),
        ],
    )
}

fn doctor_for_slice(dir: &TempDir, slice: &str, path: &str) -> Report {
    let config = dir
        .write(
            &format!("{slice}.config"),
            &format!("tool_scope_slice = {slice}\n"),
            false,
        )
        .into_os_string();
    let options = LauncherOptions {
        probe_timeout: Duration::from_secs(5),
    };
    diagnose(&env_with_path(&config, path), &[ScopeKind::Tool], &options)
}

fn set_runtime_properties(unit: &str, properties: &[&str]) {
    let status = Command::new("systemctl")
        .args(["--user", "set-property", "--runtime", unit])
        .args(properties)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "systemctl set-property {unit} {properties:?}"
    );
}

#[test]
fn slice_limits_are_what_systemctl_shows() {
    let Some(rig) = rig() else { return };
    set_runtime_properties(
        "r21limited.slice",
        &[
            "MemoryMax=1G",
            "MemoryHigh=512M",
            "TasksMax=100",
            "CPUQuota=150%",
        ],
    );
    set_runtime_properties("r21quota.slice", &["CPUQuota=50%"]);
    let dir = TempDir::new("r21diff");
    let everyday_path = std::env::var("PATH").unwrap();
    // app.slice has a unit file where the version ships one; the others are made on the fly.
    for slice in [
        "r21undefined.slice",
        "r21limited.slice",
        "r21quota.slice",
        "app.slice",
    ] {
        let expected = limits_by_systemctl(slice);
        for path in [everyday_path.as_str(), "/nonexistent"] {
            let report = doctor_for_slice(&dir, slice, path);
            let kind = &report.kinds[0];
            let limits = kind
                .slice_limits
                .clone()
                .unwrap_or_else(|| panic!("{slice}: no limits read: {:?}", kind.outcome));
            assert_eq!(
                limits,
                Ok(expected.clone()),
                "{slice} with PATH={path}, systemd {}",
                rig.version
            );
        }
        println!("systemd {}: {slice}: {expected:?}", rig.version);
    }
    assert!(
        limits_by_systemctl("r21limited.slice").set.len() == 4,
        "the limits set were all seen"
    );
}

#[test]
fn the_managers_version_is_what_systemctl_shows() {
    let Some(_rig) = rig() else { return };
    let expected = systemctl_show(None, &["Version"]);
    let dir = TempDir::new("r21version");
    for path in [std::env::var("PATH").unwrap().as_str(), "/nonexistent"] {
        let report = doctor_for_slice(&dir, "r21version.slice", path);
        let version = report
            .manager_version
            .expect("a manager that answered the probe is asked")
            .expect("the manager answered");
        assert_eq!(
            vec![("Version".to_owned(), version.full.clone())],
            expected,
            "PATH={path}"
        );
    }
}

#[test]
fn a_scopes_cgroup_is_what_systemctl_shows() {
    let Some(_rig) = rig() else { return };
    let (mut child, unit) = spawn_scoped(&["sleep", "30"]);
    let shown = systemctl_show(Some(&unit), &["ControlGroup"]);
    let (_, expected) = shown[0].clone();
    assert!(expected.ends_with(&unit), "{shown:?}");
    for path in [std::env::var("PATH").unwrap(), "/nonexistent".to_owned()] {
        let env = with_overrides(&inherited_env(), &[("PATH".into(), path.clone().into())]);
        let handle = ScopeHandle::from_manager(&unit, &env, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("PATH={path}: {e}"));
        assert!(
            handle
                .cgroup_dir()
                .ends_with(expected.trim_start_matches('/')),
            "PATH={path}: {} is not {expected}",
            handle.cgroup_dir().display()
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();

    // A scope the manager does not know: systemctl shows no cgroup, and the library says so.
    let gone = "synaps-tool-00000000000000000000000000000000.scope";
    assert_eq!(
        systemctl_show(Some(gone), &["ControlGroup"]),
        vec![("ControlGroup".to_owned(), String::new())]
    );
    match ScopeHandle::from_manager(gone, &inherited_env(), Duration::from_secs(5)) {
        Err(HandleError::NotFound { unit }) => assert_eq!(unit, gone),
        other => panic!("{other:?}"),
    }
}

//! After a successful probe, a failed wrapped launch is an error and the command never runs
//! directly instead (R13).

mod common;

use std::ffi::OsString;

use common::{rig, run_argv, Manager, TempDir};
use synaps_scope::launcher_for_env;

#[test]
fn a_manager_killed_after_the_probe_makes_the_launch_fail_and_nothing_replays_it() {
    let Some(rig) = rig() else { return };
    let mut manager = Manager::start(&rig);
    let env = manager.env();
    let launcher = launcher_for_env(&env).unwrap().expect("the probe succeeds");
    let dir = TempDir::new("r13");
    let marker = dir.path().join("ran");
    let argv: Vec<OsString> = vec!["touch".into(), marker.clone().into_os_string()];
    let wrapped = launcher.wrap(&argv, &env, None);
    assert!(wrapped.unit.is_some());

    manager.kill();
    let out = run_argv(&wrapped.argv, &env).expect("systemd-run itself starts");
    assert!(
        !out.status.success(),
        "the wrapped launch must fail without a manager"
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        !marker.exists(),
        "the command ran although its scope could not be made"
    );
}

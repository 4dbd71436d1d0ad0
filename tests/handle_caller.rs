//! Issue 13, item 1: the scope API never kills its caller. This test binary moves itself into a
//! `synaps-daemon-*.scope` of its own (as a daemon launched scoped runs), launches children
//! directly and scoped, and asks for handles to them at once: a scope that holds the calling
//! process is refused (when the handle is made and again at the kill), so the daemon survives;
//! a child that reached its own scope is killed as asked. One test in its own binary, since the
//! whole process moves.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::rig;
use synaps_scope::__exec::{make_own_scope, ScopeRequest};
use synaps_scope::{
    decide, inherited_env, Decision, HandleError, LauncherOptions, Limits, ScopeHandle, ScopeKind,
};

#[test]
fn a_scope_that_holds_the_caller_is_never_handed_out_or_killed() {
    let Some(_rig) = rig() else { return };
    let env = inherited_env();
    let own_unit = format!("synaps-daemon-{:032x}.scope", std::process::id());
    make_own_scope(
        &env,
        &ScopeRequest {
            unit: &own_unit,
            slice: None,
            description: "synaps daemon: the handle test",
            limits: &Limits::new(),
            required: false,
        },
        Instant::now() + Duration::from_secs(10),
    )
    .expect("the test process moves into a daemon scope of its own");
    let own = common::cgroup_of(std::process::id());
    assert!(own.ends_with(&format!("/{own_unit}")), "{own}");

    // A child launched directly shares the daemon's scope.
    let mut direct = Command::new("sleep").arg("100").spawn().unwrap();
    for refused in [
        ScopeHandle::of_process(direct.id()),
        ScopeHandle::from_pid(&own_unit, direct.id()),
        ScopeHandle::from_pid(&own_unit, std::process::id()),
        ScopeHandle::from_manager(&own_unit, &env, Duration::from_secs(3)),
    ] {
        match refused {
            Err(e @ HandleError::HoldsCaller { .. }) => {
                assert!(e.to_string().contains("holds this process"), "{e}");
            }
            other => panic!("a handle to the caller's own scope: {other:?}"),
        }
    }
    direct.kill().unwrap();
    direct.wait().unwrap();

    // A scoped child is asked about from the moment it is spawned, while it may still be in the
    // daemon's scope: never a handle to that scope; once in its own, killed as asked.
    let Ok(Decision::Scoped(launcher)) = decide(&env, ScopeKind::Tool, &LauncherOptions::default())
    else {
        panic!("the rig's manager scopes launches");
    };
    let wrapped = launcher.wrap(&["sleep".into(), "100".into()], &env, None);
    let unit = wrapped.unit.clone().unwrap();
    let mut child = Command::new(&wrapped.argv[0])
        .args(&wrapped.argv[1..])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut refusals = 0;
    let handle = loop {
        assert!(Instant::now() < deadline, "the child never reached {unit}");
        match ScopeHandle::of_process(child.id()) {
            Ok(handle) => break handle,
            Err(HandleError::HoldsCaller { .. }) => refusals += 1,
            Err(e) => panic!("{e}"),
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    assert_eq!(handle.unit(), unit, "a handle to the child's own scope");
    let killed = handle.kill(Duration::from_secs(5)).unwrap();
    assert!(killed.contains(&child.id()), "{killed:?}");
    assert!(!child.wait().unwrap().success());
    eprintln!("{refusals} handle requests refused while the child was still in the daemon's scope");
}

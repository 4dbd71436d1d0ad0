//! The spawn policy every surface follows, once in the core: a child that switches user runs
//! directly, said once per process, or is refused in `required` mode (R17); a direct launch runs
//! the program with the caller's argv[0], and a scoped one passes it through the wrapper.

mod common;

use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use common::{env_with, rig};
use synaps_scope::diag::CallbackSubscriber;
use synaps_scope::{
    direct_for_user_switch, inherited_env, launcher_for_env, set_env, DirectReason, Launch,
    ScopeError, ScopeKind,
};
use tracing::Level;

#[test]
fn a_child_that_switches_user_runs_directly_said_once_or_is_refused_when_required() {
    let Some(_rig) = rig() else { return };
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = Arc::clone(&lines);
    let subscriber = CallbackSubscriber::new(Level::WARN, move |_, _, line| {
        sink.lock().unwrap().push(line.to_owned());
    });
    tracing::subscriber::with_default(subscriber, || {
        let launcher = launcher_for_env(&inherited_env())
            .unwrap()
            .expect("the rig's manager");
        for _ in 0..3 {
            let reason = direct_for_user_switch(&launcher, "uid=65534").unwrap();
            assert_eq!(
                reason,
                DirectReason::UserSwitch {
                    switches: "uid=65534".into()
                }
            );
        }
        let required = env_with(&[("SYNAPS_PROCESS_SCOPES", &OsString::from("required"))]);
        let launcher = launcher_for_env(&required)
            .unwrap()
            .expect("the rig's manager");
        match direct_for_user_switch(&launcher, "gid=65534") {
            Err(
                e @ ScopeError::Unavailable {
                    kind: ScopeKind::Tool,
                    ..
                },
            ) => {
                assert!(e.to_string().contains("switches user (gid=65534)"), "{e}")
            }
            other => panic!("required mode must refuse a user switch: {other:?}"),
        }
    });
    let lines = lines.lock().unwrap();
    let said: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("switches user"))
        .collect();
    assert_eq!(said.len(), 1, "one warning per process: {lines:?}");
    assert!(
        said[0].contains("cannot hold another user's process"),
        "{said:?}"
    );
}

/// What `sh -c 'echo $0'` prints when launched as `launch`.
fn argv0_seen(launch: &Launch) -> String {
    let mut command = Command::new(&launch.program);
    std::os::unix::process::CommandExt::arg0(&mut command, &launch.argv[0]);
    command.args(&launch.argv[1..]).stdout(Stdio::piped());
    set_env(&mut command, &inherited_env());
    let out = command.output().unwrap();
    assert!(out.status.success(), "{launch:?}: {}", out.status);
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn a_launch_keeps_the_caller_s_argv0_direct_and_through_the_launcher_program() {
    let Some(_rig) = rig() else { return };
    let env = inherited_env();
    let argv: Vec<OsString> = ["-custom", "-c", "echo $0"].map(OsString::from).to_vec();
    let direct = Launch::new(None, "sh".as_ref(), argv.clone(), &env);
    assert_eq!(
        (direct.program.as_os_str(), direct.unit.as_deref()),
        ("sh".as_ref(), None)
    );
    assert_eq!(argv0_seen(&direct), "-custom");
    assert_eq!(direct.spawnable_argv()[0], "sh");

    let launcher = launcher_for_env(&env).unwrap().expect("the rig's manager");
    let scoped = Launch::new(Some(&launcher), "sh".as_ref(), argv, &env);
    assert!(scoped.unit.is_some(), "{scoped:?}");
    assert_eq!(
        scoped.program, scoped.argv[0],
        "the wrapper runs under its own name"
    );
    let seen = argv0_seen(&scoped);
    if common::exec_program() == std::path::Path::new(&scoped.program) {
        assert_eq!(seen, "-custom", "the launcher program passes argv[0] on");
    } else {
        assert!(
            seen.ends_with("/sh"),
            "systemd-run cannot pass argv[0]: {seen}"
        );
    }
}

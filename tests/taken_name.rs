//! A wrapped argv spawned twice (a retry loop, a task runner that caches the wrapped line, a
//! script written from `wrap`'s output) names one unit twice. The second launch finds the name
//! taken: it never stops, kills or takes over the first tool's scope, whose name is no proof that
//! it is the second launch's own. Through the launcher program the second command runs once
//! unscoped with the warning that names the unit (`on`), or not at all with status 125
//! (`required`); through systemd-run, which refuses a taken name itself, it does not run.

mod common;

use std::ffi::OsString;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{cgroup_of, env_with, rig, TempDir};
use synaps_scope::{launcher_for_env, set_env, Wrapper, EXEC_FAILED_STATUS};

/// The tool: records its pid and cgroup, then sleeps, unless it was told to end at once before it
/// began (the second launch is; the first, told after it recorded itself, sleeps on).
fn tool(dir: &TempDir) -> Vec<OsString> {
    let script = format!(
        "[ -e '{quick}' ]; quick=$?; echo \"$$ $(grep ^0:: /proc/$$/cgroup | cut -c4-)\" >> '{runs}'; \
         [ $quick = 0 ] || exec sleep 60",
        runs = dir.path().join("runs").display(),
        quick = dir.path().join("quick").display(),
    );
    vec!["sh".into(), "-c".into(), script.into()]
}

fn spawn(argv: &[OsString], env: &[(OsString, OsString)]) -> Child {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    set_env(&mut cmd, env);
    cmd.spawn().expect("the wrapped argv spawns")
}

/// The lines of `runs` ("pid cgroup"), once there are at least `want`, within 10 s.
fn runs(dir: &TempDir, want: usize) -> Vec<String> {
    let since = Instant::now();
    loop {
        let text = std::fs::read_to_string(dir.path().join("runs")).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        if lines.len() >= want || since.elapsed() > Duration::from_secs(10) {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_wrapped_argv_spawned_twice_leaves_the_first_tool_running_in_its_scope() {
    let Some(_rig) = rig() else { return };
    let modes: &[&str] = match std::env::var("SYNAPS_SCOPE_LAUNCHER").as_deref() {
        Ok("systemd-run") => &["on"],
        _ => &["on", "required"],
    };
    for &mode in modes {
        let env = env_with(&[("SYNAPS_PROCESS_SCOPES", &OsString::from(mode))]);
        let launcher = launcher_for_env(&env)
            .unwrap()
            .expect("the rig's manager answers the probe");
        common::assert_wrapper_under_test(&launcher);
        let dir = TempDir::new(&format!("taken-name-{mode}"));
        let wrapped = launcher.wrap(&tool(&dir), &env, None);
        let unit = wrapped.unit.clone().expect("sh resolves, so it is wrapped");

        let mut first = spawn(&wrapped.argv, &env);
        let first_run = runs(&dir, 1);
        assert_eq!(first_run.len(), 1, "{mode}: the first tool ran");
        assert!(
            first_run[0].ends_with(&format!("/{unit}")),
            "{mode}: {first_run:?}"
        );
        std::fs::write(dir.path().join("quick"), "").unwrap();

        let second = spawn(&wrapped.argv, &env)
            .wait_with_output()
            .expect("the second launch ends");
        let stderr = String::from_utf8_lossy(&second.stderr);
        // The second command has ended (or never ran) by now.
        let all = runs(&dir, 1);
        assert_eq!(
            first.try_wait().unwrap(),
            None,
            "{mode}: the first tool was ended by the second launch: {stderr}"
        );
        assert_eq!(
            cgroup_of(first.id()).rsplit('/').next(),
            Some(unit.as_str()),
            "{mode}: the first tool is still in its scope"
        );
        match (launcher.wrapper(), mode) {
            (Wrapper::Exec { .. }, "on") => {
                assert_eq!(second.status.code(), Some(0), "{stderr}");
                assert_eq!(all.len(), 2, "the second command ran once: {all:?}");
                assert!(!all[1].ends_with(&unit), "unscoped: {all:?}");
                assert!(
                    stderr.contains("warning: running /")
                        && stderr.contains(&format!("already has a unit named {unit}")),
                    "{stderr}"
                );
            }
            (Wrapper::Exec { .. }, _) => {
                assert_eq!(second.status.code(), Some(EXEC_FAILED_STATUS), "{stderr}");
                assert_eq!(all.len(), 1, "the second command never ran: {all:?}");
                assert!(stderr.contains(&unit), "{stderr}");
            }
            _ => {
                assert_eq!(second.status.code(), Some(1), "{stderr}");
                assert_eq!(all.len(), 1, "the second command never ran: {all:?}");
                // "already exists", or on 252 "was already loaded or has a fragment file".
                assert!(stderr.contains(&unit), "{stderr}");
            }
        }
        first.kill().unwrap();
        first.wait().unwrap();
    }
}

//! The launcher program started with some of fds 0-2 closed (a daemon that closed its stdio, a
//! shell's `2>&-`): what it opens (the bus socket, the turn file) goes elsewhere, its warnings
//! reach nothing they should not, and the command starts with the fds 0-2 its caller gave.

mod common;

use std::ffi::OsString;
use std::process::Command;

use common::{exec_program, rig, signal, with_wrapper, Manager, Signal, TempDir};
use synaps_scope::{launcher_for_env, set_env};

/// Runs `wrapped` from a shell that first closes the fds `closing` names (`1>&- 2>&-`); what the
/// command found open of fds 0-2 (as `0 1 2`, those open).
fn open_standard_fds(
    wrapped: &[OsString],
    env: &[(OsString, OsString)],
    closing: &str,
    dir: &TempDir,
) -> String {
    let report = dir
        .path()
        .join(format!("open-{}", closing.replace(' ', "")));
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("exec {closing} \"$@\""))
        .arg("sh")
        .args(wrapped)
        .arg(&report);
    set_env(&mut command, env);
    let status = command.status().unwrap();
    assert!(status.success(), "{closing}: {status}");
    std::fs::read_to_string(&report).unwrap().trim().to_owned()
}

/// The command: writes which of fds 0-2 it has open to the file named by its argument (through fd
/// 9, so that the report itself takes none of them).
fn reporting_argv() -> Vec<OsString> {
    let script = r#"exec 9>"$1"; for fd in 0 1 2; do [ -e /proc/self/fd/$fd ] && printf '%s ' $fd >&9; done; :"#;
    ["sh", "-c", script, "sh"].map(OsString::from).to_vec()
}

#[test]
fn closed_standard_fds_stay_closed_for_the_command_and_nothing_lands_on_them() {
    let Some(rig) = rig() else { return };
    let manager = Manager::start(&rig);
    let env = with_wrapper(&manager.env(), "synaps-scope-exec");
    let dir = TempDir::new("standard-fds");
    let launcher = launcher_for_env(&env).unwrap().expect("the manager runs");
    let wrapped = launcher.wrap(&reporting_argv(), &env, None);
    assert_eq!(wrapped.argv[0], exec_program().into_os_string());
    let cases = [
        ("", "0 1 2"),
        ("2>&-", "0 1"),
        ("1>&- 2>&-", "0"),
        ("0<&- 2>&-", "1"),
        ("0<&- 1>&- 2>&-", ""),
    ];
    for (closing, open) in cases {
        assert_eq!(
            open_standard_fds(&wrapped.argv, &env, closing, &dir),
            open,
            "{closing}"
        );
    }

    // A manager that does not answer, and another launch in its turn with it: this one waits for
    // its turn behind that one (its ticket in the turn file, open), gives up, warns (to its
    // stderr, closed here) and runs the command, whose fds are still those its caller gave. The
    // warning lands in no file: the turn file's header still counts the tickets.
    signal(manager.pid(), Signal::STOP);
    let holder_report = dir.path().join("holder");
    let mut holder = Command::new("sh");
    holder
        .arg("-c")
        .arg("exec \"$@\" 2>/dev/null")
        .arg("sh")
        .args(with_timeout(&wrapped.argv, 3000))
        .arg(&holder_report);
    set_env(&mut holder, &env);
    let mut holder = holder.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let open = open_standard_fds(&with_timeout(&wrapped.argv, 1200), &env, "1>&- 2>&-", &dir);
    signal(manager.pid(), Signal::CONT);
    assert!(holder.wait().unwrap().success());
    assert_eq!(open, "0");
    let runtime = env
        .iter()
        .find(|(k, _)| k == "XDG_RUNTIME_DIR")
        .map(|(_, v)| std::path::PathBuf::from(v))
        .unwrap();
    let turn_file = std::fs::read(runtime.join("synaps-scope.turn")).unwrap();
    assert!(
        !turn_file.windows(17).any(|w| w == b"synaps-scope-exec"),
        "a warning landed in the turn file: {:?}",
        String::from_utf8_lossy(&turn_file[..64.min(turn_file.len())])
    );
}

/// `wrapped` with the launcher program's bound set to `millis`.
fn with_timeout(wrapped: &[OsString], millis: u64) -> Vec<OsString> {
    wrapped
        .iter()
        .map(|arg| match arg.to_str() {
            Some(a) if a.starts_with("--timeout-ms=") => format!("--timeout-ms={millis}").into(),
            _ => arg.clone(),
        })
        .collect()
}

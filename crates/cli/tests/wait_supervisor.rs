//! `run --wait` as the command's supervisor, with the run's wrapper: a signal a process sends the
//! waiter reaches the command, and the waiter still waits for the scope, says its line and exits
//! with the command's status; one the waiter's caller ignored stays ignored; a waiter killed
//! outright takes the command with it (SIGTERM); an inherited SIGCHLD ignored takes no status
//! away; at a terminal the command keeps the terminal and Ctrl-C goes to it alone; and a closed
//! stderr or stdout loses a line, never the status, on every path that prints.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod waiter;

use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use common::{env_with, env_without, rig, signal, wait_for, Signal, TempDir};
use synaps_scope::set_env;
use waiter::{cli, run_env};

/// The waiter of `run --wait -- sh -c SCRIPT`, once the command has printed its first line (which
/// is returned).
fn waiting(script: &str, env: &[(OsString, OsString)]) -> (Child, String) {
    let mut child = cli(&["run", "--wait", "--", "sh", "-c", script], env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    (child, first)
}

/// The waiter's one line on stderr.
fn the_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    lines[0].to_owned()
}

/// Traps each signal a process may send the waiter with a status of its own, then waits (10 s at
/// most, so that a signal that never came fails the test rather than hanging it).
const TRAPS: &str = "trap 'exit 71' TERM; trap 'exit 72' INT; trap 'exit 73' HUP; \
    trap 'exit 74' QUIT; trap 'exit 75' USR1; trap 'exit 76' USR2; trap 'exit 77' WINCH; \
    echo ready; i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done; exit 99";

#[test]
fn a_signal_a_process_sends_the_waiter_reaches_the_command() {
    let Some(_rig) = rig() else { return };
    let env = run_env();
    let signals = [
        (Signal::TERM, 71),
        (Signal::INT, 72),
        (Signal::HUP, 73),
        (Signal::QUIT, 74),
        (Signal::USR1, 75),
        (Signal::USR2, 76),
        (Signal::WINCH, 77),
    ];
    for (sent, status) in signals {
        let (child, ready) = waiting(TRAPS, &env);
        assert_eq!(ready, "ready\n");
        signal(child.id(), sent);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(status), "{sent:?}: {out:?}");
        let line = the_line(&out);
        assert!(line.starts_with("synaps-scope: synaps-tool-"), "{line}");
        assert!(
            line.contains(&format!("the command exited with status {status}")),
            "{sent:?}: {line}"
        );
        assert!(line.contains("CPU time"), "{line}");
    }
    // Not caught: the command dies of it, and the status is 128+N.
    let (child, _) = waiting("echo ready; exec sleep 10", &env);
    signal(child.id(), Signal::TERM);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{out:?}");
    assert!(
        the_line(&out).contains("the command was killed by signal 15 (SIGTERM)"),
        "{out:?}"
    );
    // SIGINT, as a terminal's: the waiter ends by it too, so a script waiting on it stops
    // (a shell's `$?` is 130 either way).
    let (child, _) = waiting("echo ready; exec sleep 10", &env);
    signal(child.id(), Signal::INT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.signal(), Some(2), "{out:?}");
    assert!(
        the_line(&out).contains("the command was killed by signal 2 (SIGINT)"),
        "{out:?}"
    );
    // Without a scope too.
    let off = OsString::from("off");
    let direct = env_with(&[("SYNAPS_PROCESS_SCOPES", &off)]);
    let (child, _) = waiting(TRAPS, &direct);
    signal(child.id(), Signal::USR1);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(75), "{out:?}");
    assert_eq!(
        the_line(&out),
        "synaps-scope: not in a scope; the command exited with status 75"
    );
}

/// The signal mask `SigIgn` of /proc/PID/status, as the command printed it.
fn ignored_mask(printed: &str) -> u64 {
    let hex = printed.trim().strip_prefix("SigIgn:").unwrap().trim();
    u64::from_str_radix(hex, 16).unwrap()
}

/// `python3` that ignores `signals` (by name) and execs the waiter with `args`.
fn ignoring(signals: &[&str], args: &[&str], env: &[(OsString, OsString)]) -> Command {
    let set: String = signals
        .iter()
        .map(|name| format!("signal.signal(signal.{name}, signal.SIG_IGN); "))
        .collect();
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(format!(
            "import os, signal, sys; {set}os.execv(sys.argv[1], sys.argv[1:])"
        ))
        .arg(env!("CARGO_BIN_EXE_synaps-scope"))
        .args(args)
        .stdin(Stdio::null());
    set_env(&mut cmd, env);
    cmd
}

#[test]
fn a_signal_the_caller_ignored_stays_ignored_for_the_command() {
    let Some(_rig) = rig() else { return };
    let env = run_env();
    let script = "grep SigIgn /proc/$$/status; sleep 0.5; exit 5";
    let mut child = ignoring(
        &["SIGHUP"],
        &["run", "--wait", "--", "sh", "-c", script],
        &env,
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut printed = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut printed)
        .unwrap();
    let hup = 1 << (Signal::HUP.as_raw() - 1);
    assert_ne!(ignored_mask(&printed) & hup, 0, "{printed}");
    // Ignored by the waiter: it neither dies nor passes it on.
    signal(child.id(), Signal::HUP);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(
        the_line(&out).contains("the command exited with status 5"),
        "{out:?}"
    );
}

#[test]
fn a_waiter_killed_outright_takes_the_command_with_it() {
    let Some(_rig) = rig() else { return };
    let env = run_env();
    let dir = TempDir::new("wait-pdeathsig");
    let mark = dir.path().join("term");
    let script = format!(
        "trap 'echo term > {}; exit 0' TERM; echo $$; i=0; \
         while [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done",
        mark.display()
    );
    let (mut child, pid) = waiting(&script, &env);
    let pid: u32 = pid.trim().parse().unwrap();
    signal(child.id(), Signal::KILL);
    assert_eq!(child.wait().unwrap().signal(), Some(9));
    wait_for("the command's SIGTERM", || {
        fs::read_to_string(&mark).is_ok_and(|t| t == "term\n")
    });
    // Gone, or a zombie its new parent has not reaped yet.
    wait_for("the command to end", || {
        fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'))
        })
    });
}

#[test]
fn an_inherited_sigchld_ignored_takes_no_status_away() {
    let Some(_rig) = rig() else { return };
    let env = run_env();
    for env in [
        env.clone(),
        env_with(&[("SYNAPS_PROCESS_SCOPES", &OsString::from("off"))]),
    ] {
        let out = ignoring(
            &["SIGCHLD"],
            &["run", "--wait", "--", "sh", "-c", "exit 3"],
            &env,
        )
        .output()
        .unwrap();
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        assert!(
            the_line(&out).contains("the command exited with status 3"),
            "{out:?}"
        );
        // The command gets SIGCHLD as the waiter's caller left it: ignored (not through a shell,
        // which sets it to its default).
        let args = ["run", "--wait", "--", "grep", "SigIgn", "/proc/self/status"];
        let out = ignoring(&["SIGCHLD"], &args, &env).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let mask = ignored_mask(&String::from_utf8_lossy(&out.stdout));
        assert_ne!(mask & 1 << (Signal::CHILD.as_raw() - 1), 0, "{out:?}");
    }
}

/// A pipe whose reading end is closed: a write to it fails with EPIPE.
fn closed_pipe() -> OwnedFd {
    let (reader, writer) = rustix::pipe::pipe().unwrap();
    drop(reader);
    writer
}

/// Whether `out` shows no panic: none said, and not Rust's panic status.
fn no_panic(out: &Output) -> bool {
    out.status.code() != Some(101) && !String::from_utf8_lossy(&out.stderr).contains("panicked")
}

#[test]
fn a_closed_stderr_or_stdout_loses_the_line_not_the_status() {
    let Some(_rig) = rig() else { return };
    let env = run_env();
    let off = OsString::from("off");
    let direct = env_with(&[("SYNAPS_PROCESS_SCOPES", &off)]);
    // run --wait, scoped and direct: its line is lost.
    for env in [&env, &direct] {
        let status = cli(&["run", "--wait", "--", "sh", "-c", "exit 3"], env)
            .stderr(closed_pipe())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(3), "{status:?}");
    }
    // wrap: the unit's line is lost, the argv printed.
    let out = cli(&["wrap", "--", "true"], &env)
        .stderr(closed_pipe())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).ends_with("true\n"),
        "{out:?}"
    );
    // run's warning (no manager: launching directly) is lost, and the command runs.
    let no_manager = env_without(&env, &["XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"]);
    let status = cli(&["run", "--", "sh", "-c", "exit 6"], &no_manager)
        .stderr(closed_pipe())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(6), "{status:?}");
    // doctor, its report on a closed stdout, as text and as JSON: its status is the report's.
    for json in [false, true] {
        let args: &[&str] = if json {
            &["doctor", "--json"]
        } else {
            &["doctor"]
        };
        let told = cli(args, &env).output().unwrap();
        let out = cli(args, &env).stdout(closed_pipe()).output().unwrap();
        assert!(no_panic(&out), "{out:?}");
        assert_eq!(out.status.code(), told.status.code(), "{out:?} {told:?}");
    }
}

/// Every line the command prints goes through `say.rs`, which lets a failed write go: the macros
/// that panic on one are used nowhere else.
#[test]
fn no_printing_macro_that_panics_in_the_command_line() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().is_some_and(|name| name == "say.rs") {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            for name in ["println!", "print!", "eprintln!", "eprint!", "dbg!"] {
                let found = code.match_indices(name).any(|(at, _)| {
                    !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
                });
                assert!(!found, "{}:{}: {name}", path.display(), n + 1);
            }
        }
    }
}

/// Catches SIGINT (and says when it is continued), then reads a line from the terminal and exits 4. The words it prints are
/// spelled apart in its source, so the terminal's echo of the command line never matches them.
const CATCHER: &str = "import signal, sys\n\
    signal.signal(signal.SIGINT, lambda *_: print('got' + '-int', flush=True))\n\
    signal.signal(signal.SIGCONT, lambda *_: print('con' + 'tinued', flush=True))\n\
    print('rea' + 'dy', flush=True)\n\
    line = sys.stdin.readline()\n\
    print('re' + 'ad:' + line.strip(), flush=True)\n\
    sys.exit(4)\n";

#[test]
fn at_a_terminal_the_command_keeps_it_and_ctrl_c_goes_to_the_command_alone() {
    let Some(_rig) = rig() else { return };
    let env = run_env();
    let dir = TempDir::new("wait-terminal");
    let catcher = dir.write("catcher.py", CATCHER, false);
    let waiter = env!("CARGO_BIN_EXE_synaps-scope");
    let mut tty = waiter::Terminal::new(&env);
    let run = format!("{waiter} run --wait -- python3 {}", catcher.display());
    // Ctrl-C: the command catches it and goes on reading the terminal; `$?` is its own.
    tty.type_in(&format!("{run}; echo \"sta\"\"tus:$?\"\n"));
    let at = tty.shows("ready", 0);
    tty.type_in("\x03");
    let at = tty.shows("got-int", at);
    tty.type_in("hello\n");
    let at = tty.shows("read:hello", at);
    let at = tty.shows("the command exited with status 4", at);
    let at = tty.shows("status:4", at);
    // Ctrl-Z stops the job, `fg` brings it back, and it still reads the terminal.
    tty.type_in(&format!("{run}\n"));
    let at = tty.shows("ready", at);
    tty.type_in("\x1a");
    let at = tty.shows("Stopped", at);
    tty.type_in("fg\n");
    // Continued once the shell has given it the terminal back.
    let at = tty.shows("continued", at);
    tty.type_in("\x03");
    let at = tty.shows("got-int", at);
    tty.type_in("again\n");
    let at = tty.shows("read:again", at);
    tty.type_in("echo \"sta\"\"tus:$?\"\n");
    let at = tty.shows("status:4", at);
    // A command that does not catch Ctrl-C dies of it, and so does the waiter: a script waiting
    // on it stops there, as it would without it (and the interactive shell drops the rest of the
    // line, as it does where a job died of Ctrl-C).
    tty.type_in(&format!(
        "bash -c '{waiter} run --wait -- sh -c \"echo re\"\"ady; exec sleep 30\"; echo af\"\"ter'; \
         echo \"not \"\"dropped\"\n"
    ));
    let at = tty.shows("ready", at);
    tty.type_in("\x03");
    let said_at = tty.shows("the command was killed by signal 2 (SIGINT)", at);
    tty.type_in("echo \"sta\"\"tus:$?\"\n");
    let end = tty.shows("status:130", said_at);
    let said = String::from_utf8_lossy(&tty.seen.lock().unwrap()[at..end]).into_owned();
    assert!(!said.contains("not dropped"), "{said}");
    assert!(!said.contains("after"), "the script went on: {said}");
}

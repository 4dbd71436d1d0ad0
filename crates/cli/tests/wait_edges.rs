//! `run --wait` at the edges of its command's life, with the run's wrapper: a signal that comes
//! before the command begins (while the manager is asked, or while the launcher program makes the
//! scope) ends the launch with the command never run (never the launcher program killed in its
//! place, told as the command's end); a signal sent to the waiter's whole process group, where there
//! is no terminal, reaches the command once, not twice; and once the command has ended, a
//! terminal's Ctrl-C stops the wait for what it left in its scope, and the line says so.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod waiter;

use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Stdio;
use std::time::Duration;

use common::{env_without, rig, signal, Manager, Signal, TempDir};
use waiter::{cli, run_env};

#[test]
fn a_signal_before_the_command_begins_ends_the_launch_and_the_command_never_runs() {
    let Some(rig) = rig() else { return };
    let manager = Manager::start(&rig);
    let env = env_without(&manager.env(), &["DBUS_SESSION_BUS_ADDRESS"]);
    let dir = TempDir::new("wait-before");
    let mark = dir.path().join("ran");
    // The manager stopped: the waiter is still asking it when the supervisor's SIGTERM comes.
    signal(manager.pid(), Signal::STOP);
    let waiter = cli(
        &["run", "--wait", "--", "touch", mark.to_str().unwrap()],
        &env,
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    signal(waiter.id(), Signal::TERM);
    signal(manager.pid(), Signal::CONT);
    let out = waiter.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(15), "ended as SIGTERM: {stderr}");
    assert!(!mark.exists(), "the command ran: {stderr}");
}

/// Counts the SIGTERMs delivered to it (the wakeup descriptor gets a byte for each delivery, where
/// a handler's flag would take two that come close together for one), then exits with the count
/// after a second.
const COUNTER: &str = "import os, signal, sys, time\n\
    r, w = os.pipe()\n\
    os.set_blocking(w, False)\n\
    os.set_blocking(r, False)\n\
    signal.set_wakeup_fd(w)\n\
    signal.signal(signal.SIGTERM, lambda *_: None)\n\
    print('ready', flush=True)\n\
    time.sleep(1)\n\
    n = len(os.read(r, 100))\n\
    print('terms:%d' % n, flush=True)\n\
    sys.exit(n)\n";

#[test]
fn a_signal_to_the_waiters_group_reaches_the_command_once_where_there_is_no_terminal() {
    let Some(_rig) = rig() else { return };
    let env = run_env();
    let mut waiter = cli(&["run", "--wait", "--", "python3", "-c", COUNTER], &env)
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(waiter.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    // To the whole group, as a supervisor or a shell's job control sends it.
    let group = rustix::process::Pid::from_raw(i32::try_from(waiter.id()).unwrap()).unwrap();
    rustix::process::kill_process_group(group, rustix::process::Signal::TERM).unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let out = waiter.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(rest.contains("terms:1"), "once: {rest} {stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
}

#[test]
fn a_terminal_ctrl_c_once_the_command_ended_stops_the_wait_and_says_what_is_left() {
    let Some(_rig) = rig() else { return };
    let env = run_env();
    let waiter = env!("CARGO_BIN_EXE_synaps-scope");
    let mut tty = waiter::Terminal::new(&env);
    // The command ends at once and leaves a `sleep` in its scope, which ignores SIGINT (a
    // non-interactive shell's background job does).
    tty.type_in(&format!(
        "{waiter} run --wait -- sh -c 'sleep 30 & echo \"left:$!\"; echo en\"\"ded'\n"
    ));
    let at = tty.shows("ended", 0);
    let seen = String::from_utf8_lossy(&tty.seen.lock().unwrap()).into_owned();
    let left: i32 = seen[..at]
        .rsplit("left:")
        .next()
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|pid| pid.parse().ok())
        .expect("the command said what it left");
    std::thread::sleep(Duration::from_millis(300));
    tty.type_in("\x03");
    let at = tty.shows("the wait for it was interrupted with 1 process", at);
    tty.type_in("echo \"sta\"\"tus:$?\"\n");
    tty.shows("status:130", at);
    let sleep = rustix::process::Pid::from_raw(left).unwrap();
    let _ = rustix::process::kill_process(sleep, rustix::process::Signal::KILL);
}

/// Whether the process `pid` is stopped (its state `T` in `/proc/PID/stat`).
fn is_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit(')')
                .next()
                .map(|rest| rest.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

#[test]
fn a_signal_while_the_launcher_program_is_held_ends_the_launch_and_the_command_never_runs() {
    let Some(rig) = rig() else { return };
    let manager = Manager::start(&rig);
    let dir = TempDir::new("wait-held");
    let mark = dir.path().join("ran");
    // The launcher program as the waiter starts it, with the manager stopped as it begins: it is
    // still making the scope (and so not yet released) when the supervisor's SIGTERM comes.
    let stopping = dir.write(
        "synaps-scope-exec",
        &format!(
            "#!/bin/sh\nkill -STOP {}\nexec '{}' \"$@\"\n",
            manager.pid(),
            common::exec_program().display()
        ),
        true,
    );
    let mut env = common::with_wrapper(
        &env_without(&manager.env(), &["DBUS_SESSION_BUS_ADDRESS"]),
        "synaps-scope-exec",
    );
    env.retain(|(key, _)| key != "SYNAPS_SCOPE_EXEC");
    env.push(("SYNAPS_SCOPE_EXEC".into(), stopping.into_os_string()));
    let waiter = cli(
        &["run", "--wait", "--", "touch", mark.to_str().unwrap()],
        &env,
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Once the manager is stopped, the launcher program is waiting for it.
    let stopped = std::time::Instant::now();
    while !is_stopped(manager.pid()) {
        assert!(
            stopped.elapsed() < Duration::from_secs(10),
            "the launcher program began"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    signal(waiter.id(), Signal::TERM);
    std::thread::sleep(Duration::from_millis(100));
    signal(manager.pid(), Signal::CONT);
    let out = waiter.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(15), "ended as SIGTERM: {stderr}");
    assert!(!mark.exists(), "the command ran: {stderr}");
    assert!(
        stderr.contains("came before the command began; it was not run"),
        "{stderr}"
    );
}

#[test]
fn at_a_terminal_with_stdin_elsewhere_ctrl_c_still_reaches_the_command() {
    let Some(_rig) = rig() else { return };
    let env = run_env();
    let waiter = env!("CARGO_BIN_EXE_synaps-scope");
    let mut tty = waiter::Terminal::new(&env);
    // Its stdin is not the terminal, its controlling terminal is: it stays in the foreground group.
    tty.type_in(&format!(
        "{waiter} run --wait -- sh -c 'echo rea\"\"dy; exec sleep 30' < /dev/null\n"
    ));
    let at = tty.shows("ready", 0);
    tty.type_in("\x03");
    let at = tty.shows("the command was killed by signal 2 (SIGINT)", at);
    tty.type_in("echo \"sta\"\"tus:$?\"\n");
    tty.shows("status:130", at);
}

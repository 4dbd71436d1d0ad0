//! A real system's events around a launch (issue 48): the manager re-executed by an upgrade
//! (`daemon-reexec`), its units reloaded (`daemon-reload`) and the manager restarted, each amid a
//! burst of launcher programs, through each way to the manager; kept connections across a
//! re-exec; and a container given only the bus socket, whose broker stalls. A request that cannot
//! have reached the manager waits for it within its own bound and tries again, so every launch
//! is scoped and runs once; under `--required` none is refused while the bound lasts.

mod common;

#[path = "common/burst.rs"]
mod burst;

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{rig, Manager, TempDir};
use rustix::process::{kill_process, Pid, Signal};
use synaps_scope::{decide, set_env, Decision, LauncherOptions, ScopeKind};

/// Launches in a burst, and bursts in a case: 192 launches, the event 0, 40 or 80 ms in.
const BURST: usize = 64;
const EVENT_AFTER_MS: [u64; 3] = [0, 40, 80];
/// Each launch's bound.
const BOUND_MS: u64 = 2000;

/// The launcher program's command line for launch `n`: `--required`, so a launch that cannot be
/// scoped within its bound exits 125 without running its command. Every other launch has a share
/// as a limit, for which the launcher program asks the manager's version before its start.
fn launch(
    env: &[(OsString, OsString)],
    log: &Path,
    n: usize,
    label: &str,
    bound_ms: u64,
) -> Command {
    let mut cmd = Command::new(common::exec_program());
    let width = 32 - label.len();
    cmd.arg(format!("--unit=synaps-tool-{label}{n:0>width$x}.scope"))
        .arg("--description=manager events")
        .arg(format!("--timeout-ms={bound_ms}"))
        .arg("--required");
    if n % 2 == 1 {
        cmd.arg("--property=MemoryHigh=90%");
    }
    cmd.arg("--")
        .arg("/bin/sh")
        .args(burst::recording_argv(log, n));
    set_env(&mut cmd, env);
    cmd
}

/// `systemctl --user VERB` on the manager `env` leads to, through its private socket.
fn systemctl(env: &[(OsString, OsString)], verb: &str) {
    let mut cmd = Command::new("systemctl");
    cmd.args(["--user", verb]);
    set_env(
        &mut cmd,
        &common::env_without(env, &["DBUS_SESSION_BUS_ADDRESS"]),
    );
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "systemctl --user {verb}: {out:?}");
}

/// Three bursts of [`BURST`] launches with `env`, `event` run 0, 40 and 80 ms into each: every
/// launch scoped when its command started, each command run once, every launch exiting 0.
fn bursts_amid(case: &str, env: &[(OsString, OsString)], event: &(dyn Fn() + Sync)) {
    static SERIES: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
    let series = SERIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = TempDir::new("manager-events");
    for (round, after) in EVENT_AFTER_MS.into_iter().enumerate() {
        // The event must have happened amid the burst, or the round proves nothing: a burst can
        // end before a slow re-exec does (seen: 201 ms against 273 ms, the event 80 ms in, on a
        // loaded machine), and such a round is run again, at most three times in all.
        let mut attempt = 0;
        let (outcome, label) = loop {
            let log = burst::log_in(dir.path(), &format!("round-{round}-{attempt}"));
            // Every series names units of its own: a unit systemd 247 left running empty (its lost
            // move) is another launch's to the next series, which waits for it and never stops it.
            let label = format!("{series:02x}{round:02x}{attempt:02x}");
            let began = Instant::now();
            let (outcome, event_ended) = std::thread::scope(|scope| {
                let evented = scope.spawn(move || {
                    std::thread::sleep(Duration::from_millis(after));
                    event();
                    began.elapsed()
                });
                let outcome =
                    burst::at_once(BURST, &log, |n| launch(env, &log, n, &label, BOUND_MS));
                (outcome, evented.join().unwrap())
            });
            eprintln!(
                "{case}, {after} ms in (over after {} ms): {}",
                event_ended.as_millis(),
                outcome.summary()
            );
            if event_ended < outcome.wall {
                break (outcome, label);
            }
            attempt += 1;
            assert!(
                attempt < 3,
                "{case}: the event ended after {event_ended:?}, the burst after {:?}, three times",
                outcome.wall
            );
        };
        assert_eq!(
            outcome.scoped,
            BURST,
            "{case}, {after} ms in: {}\n{}\nthe units:\n{}",
            outcome.summary(),
            outcome.stderr.join(""),
            common::unit_status(env, &format!("synaps-tool-{label}*"))
        );
        assert!(
            outcome.not_once().is_empty(),
            "{case}: {:?}",
            outcome.not_once()
        );
        assert!(
            outcome.stderr.is_empty(),
            "{case}: {}",
            outcome.stderr.join("")
        );
    }
}

/// The ways to a manager of the test's own: its private socket alone (no bus), its session bus
/// with the private socket beside it, and the session bus alone.
fn each_way(rig: &common::Rig, mut case: impl FnMut(&str, &Manager, Vec<(OsString, OsString)>)) {
    let private = Manager::start(rig);
    case("private socket", &private, private.env());
    drop(private);
    let bus = Manager::with_session_bus(rig);
    case(
        "session bus, private socket beside",
        &bus,
        bus.with_its_session_bus_address(),
    );
    case("session bus alone", &bus, bus.session_bus_only());
}

/// [`bursts_amid`] `systemctl --user VERB` on a manager of the test's own, through each way.
fn bursts_amid_each_way(rig: &common::Rig, verb: &str) {
    each_way(rig, |way, manager, env| {
        let private = manager.env();
        bursts_amid(&format!("{verb}, {way}"), &env, &|| {
            systemctl(&private, verb)
        });
    });
}

#[test]
fn a_manager_reexec_amid_bursts_costs_time_not_scopes() {
    let Some(rig) = rig() else { return };
    bursts_amid_each_way(&rig, "daemon-reexec");
}

#[test]
fn a_reload_amid_bursts_costs_nothing() {
    let Some(rig) = rig() else { return };
    bursts_amid_each_way(&rig, "daemon-reload");
}

/// The manager killed and started again amid bursts (through its private socket: its session
/// bus is one of its own units, and goes with it): the launches that met the manager away, or
/// whose start it left unanswered as it died, wait for the new one and are scoped by it.
#[test]
fn a_manager_restart_amid_bursts_costs_time_not_scopes() {
    let Some(rig) = rig() else { return };
    let manager = std::sync::Mutex::new(Manager::start(&rig));
    let env = manager.lock().unwrap().env();
    bursts_amid("a restart, private socket", &env, &|| {
        manager.lock().unwrap().restart(&rig);
    });
}

/// A host that keeps its connections (probing every 50 ms, then a burst of 16 requests right
/// after a re-exec): no request waits out its bound for a reply from the manager's old name owner,
/// and none goes direct.
#[test]
fn kept_connections_follow_the_manager_across_a_reexec() {
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    let env = common::with_wrapper(&manager.session_bus_only(), "synaps-scope-exec");
    let options = LauncherOptions {
        probe_timeout: Duration::from_millis(1000),
    };
    let scoped = |what: &str| {
        let started = Instant::now();
        let decision = decide(&env, ScopeKind::Tool, &options);
        let took = started.elapsed();
        assert!(
            matches!(decision, Ok(Decision::Scoped(_))),
            "{what}: {decision:?} after {took:?}"
        );
        took
    };
    let private = manager.env();
    for round in 0..4 {
        let reexec = std::thread::spawn({
            let private = private.clone();
            move || {
                std::thread::sleep(Duration::from_millis(120));
                systemctl(&private, "daemon-reexec");
            }
        });
        // Every 50 ms for a while, across the re-exec.
        let mut slowest = Duration::ZERO;
        for probe in 0..12 {
            slowest = slowest.max(scoped(&format!("round {round}, probe {probe}")));
            std::thread::sleep(Duration::from_millis(50));
        }
        reexec.join().unwrap();
        // Then a burst right after one, on connections kept from before it.
        scoped("the probe that keeps a connection");
        systemctl(&private, "daemon-reexec");
        let took: Vec<Duration> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..16)
                .map(|i| scope.spawn(move || scoped(&format!("round {round}, request {i}"))))
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let burst_slowest = took.iter().max().copied().unwrap_or_default();
        eprintln!(
            "round {round}: probes every 50 ms, slowest {slowest:?}; 16 right after a re-exec, \
             slowest {burst_slowest:?}"
        );
        assert!(
            burst_slowest < Duration::from_millis(900),
            "a request waited out its bound: {took:?}"
        );
    }
}

/// A container given only the bus socket: a runtime directory with `bus` and no
/// `systemd/private`. A broker stalled for 600 ms gets the request's whole bound (3000 ms), and
/// once it answers again the launches that follow go through it at once.
#[test]
fn with_only_the_bus_socket_a_stalled_broker_gets_the_whole_bound() {
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    let container = TempDir::new("bus-only-runtime");
    std::os::unix::fs::symlink(
        manager.runtime_dir.join("bus"),
        container.path().join("bus"),
    )
    .unwrap();
    let env = common::env_with(&[("XDG_RUNTIME_DIR", &container.path().as_os_str().to_owned())]);
    let env = common::env_without(&env, &["DBUS_SESSION_BUS_ADDRESS"]);
    let broker = Pid::from_raw(manager.session_bus_broker() as i32).unwrap();
    let dir = TempDir::new("bus-only");
    let log = burst::log_in(dir.path(), "stalled");
    kill_process(broker, Signal::STOP).unwrap();
    let resume = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(600));
        kill_process(broker, Signal::CONT).unwrap();
    });
    let mut cmd = launch(&env, &log, 0, "b0b0", 3000);
    let started = Instant::now();
    let out = cmd.output().unwrap();
    resume.join().unwrap();
    assert!(
        out.status.success(),
        "a stalled broker: {out:?} after {:?}",
        started.elapsed()
    );
    // The launches right after, within what a broker-silent mark would have lasted: at once.
    for n in 1..6 {
        let started = Instant::now();
        let out = launch(&env, &log, n, "b0b0", BOUND_MS).output().unwrap();
        let took = started.elapsed();
        assert!(out.status.success(), "launch {n} after the stall: {out:?}");
        assert!(
            took < Duration::from_millis(1000),
            "launch {n} took {took:?}"
        );
    }
    let (scoped, runs) = burst::read_log(&log);
    assert_eq!(scoped, 6, "{runs:?}");
    assert!(runs.values().all(|&r| r == 1), "{runs:?}");
}

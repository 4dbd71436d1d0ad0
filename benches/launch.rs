//! Benchmarks against the floor (issues 7, 12 and 32), run inside the test rig, or in a booted
//! login session as its user (`scripts/bench-session.sh`, the routes only):
//!
//!   scripts/systemd-rig.sh [--systemd 254] -- cargo bench --bench launch
//!   SYNAPS_BENCH_QUICK=1 …   (a short run, as CI does)
//!   SYNAPS_BENCH_ONLY=routes …   (the ways to the manager alone)
//!
//! Each comparison interleaves its two sides round by round (this machine is shared and noisy)
//! and reports the ratio of their medians, with the target it is held to.

use std::ffi::OsString;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use synaps_scope::__bench::{KeptConnection, ScopeRequest};
use synaps_scope::{
    inherited_env, launcher_for_env, launcher_with_options, set_env, with_overrides,
    LauncherOptions, Limits, ScopeEnding, ScopeHandle, ScopeKind,
};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn run(cmd: &mut Command) {
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("spawn");
    assert!(status.success(), "{cmd:?}: {status}");
}

/// Medians of `a` and `b` over `rounds` interleaved rounds (the order alternates each round).
fn side_by_side(rounds: usize, mut a: impl FnMut(), mut b: impl FnMut()) -> (Duration, Duration) {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for side in [round % 2, 1 - round % 2] {
            let started = Instant::now();
            if side == 0 {
                a()
            } else {
                b()
            }
            (if side == 0 { &mut ta } else { &mut tb }).push(started.elapsed());
        }
    }
    (median(ta), median(tb))
}

fn report(name: &str, measured: Duration, against: &str, floor: Duration, target: f64) {
    let ratio = measured.as_secs_f64() / floor.as_secs_f64();
    let verdict = if ratio <= target {
        "met".to_owned()
    } else {
        format!("MISSED by {:.0}%", (ratio / target - 1.0) * 100.0)
    };
    println!(
        "{name:<44} {:>10.1} µs  vs {against:<34} {:>10.1} µs  ratio {ratio:>5.2}  (target ≤ {target:.2}: {verdict})",
        measured.as_secs_f64() * 1e6,
        floor.as_secs_f64() * 1e6
    );
}

/// How the launcher program is built to ship (scripts/build-exec.sh runs the same).
const STATIC_EXEC_BUILD: &[&str] = &[
    "rustc",
    "-q",
    "--release",
    "--locked",
    "-p",
    "synaps-scope-exec",
    "--bin",
    "synaps-scope-exec",
    "--",
    "-C",
    "target-feature=+crt-static",
];

/// The launcher program as it ships: a release build, linked statically (glibc's static-pie), so
/// that each launch skips the dynamic loader (about 0.5 ms a launch here); or `SYNAPS_BENCH_EXEC`.
fn exec_program() -> PathBuf {
    if let Some(path) = std::env::var_os("SYNAPS_BENCH_EXEC") {
        return path.into();
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(cargo)
        .args(STATIC_EXEC_BUILD)
        .current_dir(&root)
        .status()
        .expect("cargo runs");
    assert!(built.success(), "cargo {}", STATIC_EXEC_BUILD.join(" "));
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("release/synaps-scope-exec")
}

/// `env` with the wrapper chosen.
fn with_wrapper(
    env: &[(OsString, OsString)],
    wrapper: &str,
    exec: &Path,
) -> Vec<(OsString, OsString)> {
    with_overrides(
        env,
        &[
            ("SYNAPS_SCOPE_LAUNCHER".into(), wrapper.into()),
            ("SYNAPS_SCOPE_EXEC".into(), exec.as_os_str().to_owned()),
        ],
    )
}

/// One whole scoped launch of `true`: the probe, the wrap, the run to its exit.
fn scoped_true(env: &[(OsString, OsString)]) {
    let launcher = launcher_for_env(env).unwrap().expect("scoped");
    let wrapped = launcher.wrap(&["true".into()], env, None);
    let mut cmd = Command::new(&wrapped.argv[0]);
    cmd.args(&wrapped.argv[1..]);
    set_env(&mut cmd, env);
    run(&mut cmd);
}

/// A scoped `sh -c 'read _; exit 0'` run to its end (stdin closed once it is in its scope); with a
/// handle, made once it is there and asked how the scope ended after the exit, the time of each
/// of those two pushed to `timings`.
fn tool_to_its_end(
    env: &[(OsString, OsString)],
    timings: Option<&mut (Vec<Duration>, Vec<Duration>)>,
) {
    let launcher = launcher_for_env(env).unwrap().expect("scoped");
    let argv: Vec<OsString> = vec!["sh".into(), "-c".into(), "read _; exit 0".into()];
    let wrapped = launcher.wrap(&argv, env, None);
    let unit = wrapped.unit.expect("a scope");
    let mut cmd = Command::new(&wrapped.argv[0]);
    cmd.args(&wrapped.argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::null());
    set_env(&mut cmd, env);
    let mut child = cmd.spawn().expect("spawn");
    let cgroup = format!("/proc/{}/cgroup", child.id());
    while !std::fs::read_to_string(&cgroup).is_ok_and(|c| c.trim_end().ends_with(&unit)) {
        std::thread::sleep(Duration::from_micros(200));
    }
    let handle = timings.is_some().then(|| {
        let started = Instant::now();
        let handle = ScopeHandle::from_pid(&unit, child.id()).expect("a handle");
        (handle, started.elapsed())
    });
    drop(child.stdin.take());
    assert!(child.wait().expect("wait").success());
    if let (Some((handle, made)), Some((making, asking))) = (handle, timings) {
        let started = Instant::now();
        let ending = handle.ending(env, Duration::from_secs(1));
        asking.push(started.elapsed());
        making.push(made);
        assert!(
            matches!(
                ending.how,
                ScopeEnding::EndedOnItsOwn | ScopeEnding::Unknown
            ),
            "{ending}"
        );
    }
}

/// An environment, as the library takes it.
type Env = [(OsString, OsString)];

/// How one launch of the load is made.
#[derive(Clone, Copy)]
enum Design {
    /// Through the library with the environment's wrapper.
    Library,
    /// The design before the launcher program (issue 12's "today"): a probe that is itself a
    /// scoped systemd-run of `true`, then the launch through systemd-run.
    SystemdRunProbe,
}

/// `launches` scoped launches of `true` from `threads` threads: the median launch, and how many
/// went direct.
fn load(
    env: &[(OsString, OsString)],
    design: Design,
    launches: usize,
    threads: usize,
) -> (Duration, usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let took = Arc::new(Mutex::new(Vec::with_capacity(launches)));
    let direct = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (env, next, took, direct) = (
                env.to_vec(),
                Arc::clone(&next),
                Arc::clone(&took),
                Arc::clone(&direct),
            );
            std::thread::spawn(move || {
                while next.fetch_add(1, Ordering::SeqCst) < launches {
                    let started = Instant::now();
                    let launcher = launcher_for_env(&env).unwrap();
                    let probed = match (design, &launcher) {
                        (Design::SystemdRunProbe, Some(launcher)) => {
                            let mut probe = Command::new(launcher.wrapper().program());
                            probe.args(["--user", "--scope", "--quiet", "--collect", "--", "true"]);
                            set_env(&mut probe, &env);
                            probe.stdout(Stdio::null()).stderr(Stdio::null());
                            probe.status().expect("spawn").success()
                        }
                        (_, launcher) => launcher.is_some(),
                    };
                    let mut cmd = match launcher.filter(|_| probed) {
                        Some(launcher) => {
                            let wrapped = launcher.wrap(&["true".into()], &env, None);
                            let mut cmd = Command::new(&wrapped.argv[0]);
                            cmd.args(&wrapped.argv[1..]);
                            cmd
                        }
                        None => {
                            direct.fetch_add(1, Ordering::SeqCst);
                            Command::new("true")
                        }
                    };
                    set_env(&mut cmd, &env);
                    run(&mut cmd);
                    took.lock().unwrap().push(started.elapsed());
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("a load thread panicked");
    }
    let took = std::mem::take(&mut *took.lock().unwrap());
    (median(took), direct.load(Ordering::SeqCst))
}

/// The CPU time `pid` has used so far (its scheduler statistics, in nanoseconds).
fn cpu_of(pid: u32) -> Duration {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/schedstat: {e}"));
    Duration::from_nanos(text.split(' ').next().and_then(|n| n.parse().ok()).unwrap())
}

/// The session bus's broker (the main process of `dbus.service`: dbus-daemon; or, where the
/// user bus is dbus-broker, the `dbus-broker` that its main process `dbus-broker-launch` runs), its
/// name, and the manager that runs the service. Started first where the manager has none running
/// (the private rig), as a login session has it.
fn session_bus_broker() -> (u32, String, u32) {
    let service = session_bus_service();
    let comm = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    let manager = parent_of(service);
    if !comm(service).starts_with("dbus-broker-lau") {
        return (service, comm(service), manager);
    }
    let children = std::fs::read_to_string(format!("/proc/{service}/task/{service}/children"))
        .unwrap_or_default();
    let broker = children
        .split_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .find(|&pid| comm(pid) == "dbus-broker")
        .unwrap_or_else(|| panic!("dbus-broker-launch ({service}) runs no dbus-broker"));
    (broker, comm(broker), manager)
}

/// `systemctl --user show -p MainPID --value dbus.service`, started first if it is not running.
fn session_bus_service() -> u32 {
    let main_pid = || {
        let out = Command::new("systemctl")
            .args(["--user", "show", "-p", "MainPID", "--value", "dbus.service"])
            .output()
            .expect("systemctl runs");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    };
    if main_pid() == 0 {
        run(Command::new("systemctl").args(["--user", "start", "dbus.socket", "dbus.service"]));
    }
    let pid = main_pid();
    assert!(
        pid > 0,
        "the user manager runs no session bus (dbus.service)"
    );
    pid
}

/// The parent of `pid`.
fn parent_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit_once(") ").unwrap().1;
    after.split(' ').nth(1).unwrap().parse().unwrap()
}

/// `env` without a way to the manager (no `XDG_RUNTIME_DIR`, no `DBUS_SESSION_BUS_ADDRESS`).
fn without_bus(env: &Env) -> Vec<(OsString, OsString)> {
    env.iter()
        .filter(|(k, _)| k != "XDG_RUNTIME_DIR" && k != "DBUS_SESSION_BUS_ADDRESS")
        .cloned()
        .collect()
}

/// One side of a comparison: a launch to time.
type Side<'a> = Box<dyn FnMut() + 'a>;

/// Each way to the manager side by side, interleaved round by round with the order rotating: a
/// bare systemd-run, a launch through the library and the launcher program along each route, the
/// floor (a spawn put in its scope by one `StartTransientUnit` on a kept connection), and each
/// part of a launch on its own (the call and its job, a plain spawn, the launcher program's own
/// start, its new connection, the host's probe and wrap); with the manager's and the broker's CPU
/// per launch.
fn routes(env: &Env, systemd_run: &Path, exec: &Path, rounds: usize) {
    let (broker, broker_name, manager) = session_bus_broker();
    let private = with_overrides(
        env,
        &[(
            "DBUS_SESSION_BUS_ADDRESS".into(),
            "unix:path=/nonexistent/no-session-bus".into(),
        )],
    );
    let deadline = || Instant::now() + Duration::from_secs(5);
    let no_bus = without_bus(env);
    let mut kept = KeptConnection::open(env, deadline()).expect("a kept connection");
    let mut floor_round = 0u32;
    let mut floor = move || {
        floor_round += 1;
        spawn_into_scope(&mut kept, floor_round);
    };
    // A process that lives through the rounds, moved into a new scope each round: one call and
    // its job, with no spawn to overlap them.
    let mut held = Command::new("sleep")
        .arg("1000000")
        .spawn()
        .expect("spawn sleep");
    let held_pid = held.id();
    let mut mover = KeptConnection::open(env, deadline()).expect("a kept connection");
    let mut move_round = 0u32;
    let mut moved = move || {
        move_round += 1;
        into_new_scope(&mut mover, held_pid, u64::from(move_round) + (1 << 32));
    };
    // The route a host could take where it spawns the command itself: a program that waits for
    // a byte, put in its scope by the host's kept connection meanwhile, then exec'ing the command
    // (sh stands in for a launcher program that waits instead of connecting).
    let mut waiter = KeptConnection::open(env, deadline()).expect("a kept connection");
    let mut waiter_round = 0u32;
    let mut host_made = move || {
        waiter_round += 1;
        let mut child = Command::new("/bin/sh")
            .args(["-c", "read -r go && exec true"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("spawn sh");
        into_new_scope(&mut waiter, child.id(), u64::from(waiter_round) + (2 << 32));
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        assert!(child.wait().unwrap().success());
    };
    let mut sides: Vec<(&str, Side<'_>)> = vec![
        (
            "bare systemd-run --user --scope true",
            Box::new(|| {
                run(Command::new(systemd_run).args(["--user", "--scope", "--quiet", "true"]))
            }),
        ),
        (
            "launch, session bus first (default)",
            Box::new(|| scoped_true(env)),
        ),
        ("launch, private socket", Box::new(|| scoped_true(&private))),
        (
            "floor: spawn + 1 call on a kept connection",
            Box::new(&mut floor),
        ),
        (
            "1 call and its job on a kept connection",
            Box::new(&mut moved),
        ),
        (
            "host-made: a waiting program, 1 call, its exec",
            Box::new(&mut host_made),
        ),
        (
            "plain spawn of true",
            Box::new(|| run(&mut Command::new("true"))),
        ),
        (
            "launcher program, then true, no scope (no bus)",
            Box::new(|| exec_chain(exec, &no_bus)),
        ),
        (
            "new connection: auth, Hello, name check, match",
            Box::new(|| drop(KeptConnection::open(env, deadline()).expect("a connection"))),
        ),
        (
            "the probe (kept connection) and the wrap",
            Box::new(|| {
                let launcher = launcher_for_env(env).unwrap().expect("scoped");
                std::hint::black_box(launcher.wrap(&["true".into()], env, None));
            }),
        ),
    ];
    let n = sides.len();
    let mut took = vec![Vec::new(); n];
    let (mut manager_cpu, mut broker_cpu) = (vec![Duration::ZERO; n], vec![Duration::ZERO; n]);
    for round in 0..rounds {
        for turn in 0..n {
            let side = (turn + round) % n;
            let (m, b) = (cpu_of(manager), cpu_of(broker));
            let started = Instant::now();
            (sides[side].1)();
            took[side].push(started.elapsed());
            manager_cpu[side] += cpu_of(manager).saturating_sub(m);
            broker_cpu[side] += cpu_of(broker).saturating_sub(b);
        }
    }
    let medians: Vec<Duration> = took.into_iter().map(median).collect();
    held.kill().expect("kill sleep");
    held.wait().expect("reap sleep");
    let bare = medians[0];
    println!("ways to the manager, {rounds} rounds (manager pid {manager}, session bus broker {broker_name} pid {broker}):");
    for (side, (name, _)) in sides.iter().enumerate() {
        let median = medians[side];
        println!(
            "  {name:<46} {:>8.1} µs  {:>5.2}× bare systemd-run  manager CPU {:>6.1} µs, broker CPU {:>6.1} µs per launch",
            median.as_secs_f64() * 1e6,
            median.as_secs_f64() / bare.as_secs_f64(),
            manager_cpu[side].as_secs_f64() * 1e6 / rounds as f64,
            broker_cpu[side].as_secs_f64() * 1e6 / rounds as f64,
        );
    }
    // Where a launch's time goes beyond the floor: the launcher program's own image (a second
    // one), its new connection, the host's probe and wrap, and the rest. The floor starts its
    // program while its call and job run; a launch's command must wait for its scope, so the
    // rest is about the call and its job (measured alone on a process moved into a new scope,
    // waiting for the job's signal where the launcher program sees its move sooner).
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    let beyond = micros(medians[1]) - micros(medians[3]);
    let call = micros(medians[4]);
    let image = micros(medians[7]) - micros(medians[6]);
    let connection = micros(medians[8]);
    let probe = micros(medians[9]);
    println!(
        "  a launch beyond the floor: {beyond:.0} µs = the launcher program's image {image:.0} µs + its new connection {connection:.0} µs + the probe and wrap {probe:.0} µs + the rest {:.0} µs (the call and its job, which the floor runs while its program starts: {call:.0} µs alone)",
        beyond - image - connection - probe
    );
}

/// Spawns `cat`, puts it in a new scope with one call on `bus`, then lets it end: a spawn put in
/// its scope from the host's side.
fn spawn_into_scope(bus: &mut KeptConnection, round: u32) {
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn cat");
    into_new_scope(bus, child.id(), u64::from(round));
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}

/// Puts `pid` in a new scope (its name from this process and `round`) with one call on `bus`, and
/// waits for the scope's start job.
fn into_new_scope(bus: &mut KeptConnection, pid: u32, round: u64) {
    let unit = format!("synaps-tool-{:016x}{round:016x}.scope", std::process::id());
    let request = ScopeRequest {
        unit: &unit,
        slice: None,
        description: "synaps bench",
        limits: &Limits::new(),
        required: false,
    };
    bus.start_scope(&request, pid, Instant::now() + Duration::from_secs(5))
        .expect("the scope");
}

/// The launcher program with no way to the manager: it starts, finds no bus, and execs `true`
/// unscoped (its warning dropped).
fn exec_chain(exec: &Path, no_bus: &Env) {
    let mut cmd = Command::new(exec);
    cmd.args([
        "--unit=synaps-tool-00000000000000000000000000000000.scope",
        "--description=synaps chain",
        "--timeout-ms=1000",
        "--",
        "/bin/true",
        "true",
    ]);
    set_env(&mut cmd, no_bus);
    cmd.stderr(Stdio::null());
    run(&mut cmd);
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick = std::env::var_os("SYNAPS_BENCH_QUICK").is_some_and(|v| !v.is_empty());
    let only_routes = std::env::var("SYNAPS_BENCH_ONLY").is_ok_and(|only| only == "routes");
    let manager_pid = std::env::var("SYNAPS_RIG_MANAGER_PID").ok();
    if manager_pid.is_none() && !only_routes {
        eprintln!("these benchmarks need the test rig's manager: scripts/systemd-rig.sh -- cargo bench --bench launch");
        std::process::exit(1);
    }
    let exec = exec_program();
    let base = inherited_env();
    let env = with_wrapper(&base, "synaps-scope-exec", &exec);
    let env_systemd_run = with_wrapper(&base, "systemd-run", &exec);
    let launcher = launcher_for_env(&env)
        .unwrap()
        .expect("the rig's manager answers");
    assert_eq!(launcher.wrapper().name(), "synaps-scope-exec");
    let systemd_run_launcher = launcher_for_env(&env_systemd_run)
        .unwrap()
        .expect("the rig's manager answers");
    let systemd_run = systemd_run_launcher
        .systemd_run()
        .expect("systemd-run")
        .to_owned();
    println!(
        "synaps-scope benchmarks: systemd {}, {} cores, {}, launcher program {}",
        systemd_run_launcher.systemd_version().unwrap_or(0),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if quick { "quick run" } else { "full run" },
        exec.display()
    );

    // 1. wrap alone, program resolution included.
    let argv: Vec<OsString> = vec!["sh".into(), "-c".into(), "exit 0".into()];
    let (batches, per_batch) = if quick { (5, 200) } else { (31, 2000) };
    let wrap = median(
        (0..batches)
            .map(|_| {
                let started = Instant::now();
                for _ in 0..per_batch {
                    std::hint::black_box(launcher.wrap(std::hint::black_box(&argv), &env, None));
                }
                started.elapsed() / per_batch
            })
            .collect(),
    );
    println!(
        "{:<44} {:>10.1} µs  (target < 20 µs: {})",
        "wrap (with program resolution)",
        wrap.as_secs_f64() * 1e6,
        if wrap < Duration::from_micros(20) {
            "met".to_owned()
        } else {
            format!(
                "MISSED by {:.0}%",
                (wrap.as_secs_f64() / 20e-6 - 1.0) * 100.0
            )
        }
    );

    let rounds = if quick { 10 } else { 60 };
    routes(&env, &systemd_run, &exec, if quick { 20 } else { 200 });
    let Some(manager_pid) = manager_pid.filter(|_| !only_routes) else {
        return;
    };
    let bare = || run(Command::new(&systemd_run).args(["--user", "--scope", "--quiet", "true"]));

    // 2. A scoped launch with the launcher program (probe + wrapped run of `true`).
    let (scoped, floor) = side_by_side(rounds, || scoped_true(&env), bare);
    let bare_name = "bare systemd-run --user --scope true";
    report(
        "scoped launch (probe + synaps-scope-exec true)",
        scoped,
        bare_name,
        floor,
        0.7,
    );

    // 2b. What a scope handle adds to a tool's life: made once the tool is in its scope, asked
    // how the scope ended after its exit (the rig has no system bus: no subscription to oomd's
    // signal; tests/oomd_signal.rs counts what that adds).
    let mut timings = (Vec::new(), Vec::new());
    let (with_handle, without) = side_by_side(
        rounds,
        || tool_to_its_end(&env, Some(&mut timings)),
        || tool_to_its_end(&env, None),
    );
    report(
        "a tool's life with a handle and its ending",
        with_handle,
        "the same without",
        without,
        1.1,
    );
    println!(
        "{:<44} {:>10.1} µs  (ScopeHandle::from_pid, the watch set up)",
        "  making the handle",
        median(timings.0).as_secs_f64() * 1e6
    );
    println!(
        "{:<44} {:>10.1} µs  (ending() of the ended scope)",
        "  asking how it ended",
        median(timings.1).as_secs_f64() * 1e6
    );

    // 3. The probe alone: on a kept connection (a request that follows another within half a
    // second), and on a new one (the same socket named by another path each round, so that no
    // kept connection matches).
    let (probe, floor) = side_by_side(
        rounds,
        || {
            std::hint::black_box(launcher_for_env(&env).unwrap().expect("scoped"));
        },
        bare,
    );
    report("probe alone, kept connection", probe, bare_name, floor, 0.2);
    let runtime_dir = std::env::var("XDG_RUNTIME_DIR").expect("the rig sets XDG_RUNTIME_DIR");
    let mut round = 0;
    let (cold, floor) = side_by_side(
        rounds,
        || {
            round += 1;
            let elsewhere = format!("{runtime_dir}{}", "/".repeat(round));
            let env = with_overrides(&env, &[("XDG_RUNTIME_DIR".into(), elsewhere.into())]);
            std::hint::black_box(launcher_for_env(&env).unwrap().expect("scoped"));
        },
        bare,
    );
    report("probe alone, new connection", cold, bare_name, floor, 0.2);

    // 4. The systemd-run path: the same probe, then systemd-run as the wrapper.
    let (through_systemd_run, floor) = side_by_side(rounds, || scoped_true(&env_systemd_run), bare);
    report(
        "scoped launch through systemd-run",
        through_systemd_run,
        bare_name,
        floor,
        1.2,
    );

    // 5. The direct path when scopes are unavailable (R7) against a plain spawn.
    let no_bus = without_bus(&env);
    // A difference of a few microseconds on a spawn of about a millisecond, which varies by a
    // tenth from one to the next here: a quick run takes as many rounds as a full one (about two
    // seconds), for 20 left the median a few percent either way.
    let (direct, plain) = side_by_side(
        1000,
        || {
            assert!(launcher_for_env(&no_bus).unwrap().is_none());
            let mut cmd = Command::new("true");
            set_env(&mut cmd, &no_bus);
            run(&mut cmd);
        },
        || {
            let mut cmd = Command::new("true");
            set_env(&mut cmd, &no_bus);
            run(&mut cmd);
        },
    );
    report(
        "direct path (no user bus) + spawn true",
        direct,
        "plain spawn of true",
        plain,
        1.02,
    );
    // The decision alone, which is all the direct path adds to the spawn.
    let decisions: Vec<Duration> = (0..1000)
        .map(|_| {
            let started = Instant::now();
            assert!(launcher_for_env(&no_bus).unwrap().is_none());
            started.elapsed()
        })
        .collect();
    println!(
        "{:<44} {:>10.1} µs  ({:.1}% of a plain spawn of true)",
        "  the direct path's decision alone",
        median(decisions.clone()).as_secs_f64() * 1e6,
        median(decisions).as_secs_f64() / plain.as_secs_f64() * 100.0
    );

    // 6. Many launches at once on a healthy manager: the launcher program, the systemd-run path
    // and the design before both, in turns (a quarter of each at a time, the order rotating).
    let (launches, threads) = if quick { (128, 64) } else { (1000, 64) };
    let sides: [(&str, &Env, Design); 3] = [
        ("launcher program", &env, Design::Library),
        ("systemd-run path", &env_systemd_run, Design::Library),
        (
            "before (systemd-run probe + launch)",
            &env_systemd_run,
            Design::SystemdRunProbe,
        ),
    ];
    let mut medians = [Vec::new(), Vec::new(), Vec::new()];
    let mut went_direct = [0, 0, 0];
    for quarter in 0..4 {
        for turn in 0..3 {
            let side = (turn + quarter) % 3;
            let (_, env, design) = sides[side];
            let (took, direct) = load(env, design, launches / 4, threads);
            medians[side].push(took);
            went_direct[side] += direct;
        }
    }
    let mean = |d: &[Duration]| d.iter().sum::<Duration>() / d.len() as u32;
    let name = format!("{launches} launches from {threads} threads, median");
    report(&name, mean(&medians[0]), sides[2].0, mean(&medians[2]), 0.5);
    report(&name, mean(&medians[0]), sides[1].0, mean(&medians[1]), 1.0);
    for (side, direct) in sides.iter().zip(went_direct) {
        println!(
            "{:<44} {direct} of {launches} went direct (target 0: {})",
            format!("  {} under load", side.0),
            if direct == 0 { "met" } else { "MISSED" }
        );
    }

    // 7. The probe against a stopped manager: back within the bound plus 50 ms.
    let bound = Duration::from_millis(500);
    let signal = |name: &str| {
        assert!(Command::new("kill")
            .args([name, &manager_pid])
            .status()
            .unwrap()
            .success())
    };
    signal("-STOP");
    let overshoot: Vec<Duration> = (0..if quick { 2 } else { 7 })
        .map(|_| {
            let started = Instant::now();
            let got = launcher_with_options(
                &env,
                ScopeKind::Tool,
                &LauncherOptions {
                    probe_timeout: bound,
                },
            );
            let elapsed = started.elapsed();
            assert!(matches!(got, Ok(None)), "a stopped manager means direct");
            elapsed.saturating_sub(bound)
        })
        .collect();
    signal("-CONT");
    let worst = overshoot.iter().max().copied().unwrap_or_default();
    println!(
        "{:<44} {:>10.1} ms over the {} ms bound at worst (target ≤ 50 ms: {})",
        "probe against a stopped manager",
        worst.as_secs_f64() * 1e3,
        bound.as_millis(),
        if worst <= Duration::from_millis(50) {
            "met"
        } else {
            "MISSED"
        }
    );
}

//! Benchmarks against the floor (issue 7), run inside the test rig:
//!
//!   scripts/systemd-rig.sh [--systemd 254] -- cargo bench --bench launch
//!   SYNAPS_BENCH_QUICK=1 …   (a short run, as CI does)
//!
//! Each comparison interleaves its two sides round by round (this machine is shared and noisy)
//! and reports the ratio of their medians, with the target it is held to.

use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use synaps_scope::{
    inherited_env, launcher_for_env, launcher_with_options, set_env, LauncherOptions,
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

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick = std::env::var_os("SYNAPS_BENCH_QUICK").is_some();
    let Some(manager_pid) = std::env::var("SYNAPS_RIG_MANAGER_PID").ok() else {
        eprintln!("these benchmarks need the test rig's manager: scripts/systemd-rig.sh -- cargo bench --bench launch");
        std::process::exit(1);
    };
    let env = inherited_env();
    let launcher = launcher_for_env(&env)
        .unwrap()
        .expect("the rig's manager answers");
    let systemd_run = launcher.systemd_run().to_owned();
    println!(
        "synaps-scope benchmarks: systemd {}, {} cores, {}",
        launcher.systemd_version().unwrap_or(0),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if quick { "quick run" } else { "full run" }
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

    // 2. A scoped launch (probe + wrapped run of `true`) against one bare systemd-run.
    let true_argv: Vec<OsString> = vec!["true".into()];
    let (scoped, bare) = side_by_side(
        if quick { 6 } else { 60 },
        || {
            let launcher = launcher_for_env(&env).unwrap().expect("scoped");
            let wrapped = launcher.wrap(&true_argv, &env, None);
            let mut cmd = Command::new(&wrapped.argv[0]);
            cmd.args(&wrapped.argv[1..]);
            set_env(&mut cmd, &env);
            run(&mut cmd);
        },
        || run(Command::new(&systemd_run).args(["--user", "--scope", "--quiet", "true"])),
    );
    report(
        "scoped launch (probe + wrapped true)",
        scoped,
        "bare systemd-run --user --scope true",
        bare,
        2.2,
    );

    // 3. The direct path when scopes are unavailable (R7) against a plain spawn.
    let no_bus: Vec<_> = env
        .iter()
        .filter(|(k, _)| k != "XDG_RUNTIME_DIR" && k != "DBUS_SESSION_BUS_ADDRESS")
        .cloned()
        .collect();
    let (direct, plain) = side_by_side(
        if quick { 20 } else { 400 },
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
        1.05,
    );

    // 4. The probe against a stopped manager: back within the bound plus 50 ms.
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
                synaps_scope::ScopeKind::Tool,
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

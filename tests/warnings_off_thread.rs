//! The R12 warning comes from a background thread, so it must reach the host's logging however the
//! host set `tracing` up: a global subscriber (`set_global_default`, as most programs and the C,
//! Python and Node surfaces do) or a scoped one on the requesting thread, also while other threads
//! launch. Each run is a fresh process of this test binary (tracing's callsite interest is decided
//! once per process), so 20 runs are 20 hosts.

mod common;

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{env_with, rig, TempDir};
use synaps_scope::diag::CallbackSubscriber;
use synaps_scope::{decide, Decision, LauncherOptions, ScopeKind};
use tracing::Level;

const RUNS: usize = 20;
/// Launching threads beside the one that names the undefined slice.
const OTHER_THREADS: usize = 6;
const ROLE: &str = "SYNAPS_TEST_WARNING_HOST";

/// One host: `global` or `scoped` subscriber; the undefined slice's name; the config directory.
fn host(setup: &str, slice: &str, dir: &str) {
    let lines: Arc<Mutex<Vec<(Level, String)>>> = Arc::default();
    let sink = Arc::clone(&lines);
    let subscriber = CallbackSubscriber::new(Level::TRACE, move |level, target, line| {
        if target == "synaps_scope" {
            sink.lock().unwrap().push((*level, line.to_owned()));
        }
    });
    let dispatch = tracing::Dispatch::new(subscriber);
    match setup {
        "global" => tracing::dispatcher::set_global_default(dispatch.clone()).unwrap(),
        "fmt" => {
            let sink = Arc::clone(&lines);
            tracing_subscriber::fmt()
                .with_env_filter("info,synaps_scope=debug")
                .with_writer(move || LineWriter(Arc::clone(&sink)))
                .init();
        }
        _ => {}
    }
    let dir = std::path::Path::new(dir);
    let plain = dir.join("plain.config");
    std::fs::write(&plain, "").unwrap();
    let undefined = dir.join("undefined.config");
    std::fs::write(&undefined, format!("tool_scope_slice = {slice}\n")).unwrap();
    let options = LauncherOptions {
        probe_timeout: Duration::from_secs(5),
    };
    let request = |config: &std::path::Path| {
        let env = env_with(&[("SYNAPS_CONFIG", &config.as_os_str().to_owned())]);
        let decision = decide(&env, ScopeKind::Tool, &options).unwrap();
        assert!(matches!(decision, Decision::Scoped(_)), "{decision:?}");
    };
    std::thread::scope(|threads| {
        for _ in 0..OTHER_THREADS {
            threads.spawn(|| {
                // Each launching thread logs to a subscriber of its own, as a test harness's
                // captures or a host's per-task loggers do.
                let own =
                    tracing::Dispatch::new(CallbackSubscriber::new(Level::TRACE, |_, _, _| {}));
                tracing::dispatcher::with_default(&own, || {
                    for _ in 0..5 {
                        request(&plain);
                    }
                });
            });
        }
        threads.spawn(|| {
            std::thread::sleep(Duration::from_millis(5));
            if setup == "scoped" {
                tracing::dispatcher::with_default(&dispatch, || request(&undefined));
            } else {
                request(&undefined);
            }
        });
    });
    let needle = format!("slice {slice} sets no limits");
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end && !warned(&lines, &needle) {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Time for a second warning, should one come.
    std::thread::sleep(Duration::from_millis(300));
    let warnings: Vec<String> = lines
        .lock()
        .unwrap()
        .iter()
        .filter(|(level, _)| *level == Level::WARN)
        .map(|(_, line)| line.clone())
        .collect();
    let count = warnings.iter().filter(|w| w.contains(&needle)).count();
    assert_eq!(
        count, 1,
        "{setup}: the R12 warning came {count} times: {warnings:?}"
    );
}

/// What `tracing_subscriber::fmt` writes, kept as lines (a WARN line says so).
struct LineWriter(Arc<Mutex<Vec<(Level, String)>>>);

impl std::io::Write for LineWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(bytes);
        let mut lines = self.0.lock().unwrap();
        for line in text.lines() {
            let level = if line.contains(" WARN ") {
                Level::WARN
            } else {
                Level::DEBUG
            };
            lines.push((level, line.to_owned()));
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn warned(lines: &Mutex<Vec<(Level, String)>>, needle: &str) -> bool {
    lines
        .lock()
        .unwrap()
        .iter()
        .any(|(_, l)| l.contains(needle))
}

/// Runs [`RUNS`] hosts of `setup`, each a fresh process of `test` (this test, which then plays
/// the host); all must get the warning exactly once.
fn every_run_warns_once(setup: &str, test: &str) {
    if let Ok(role) = std::env::var(ROLE) {
        let mut words = role.splitn(2, ' ');
        return host(setup, words.next().unwrap(), words.next().unwrap());
    }
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("r12host");
    let me = std::env::current_exe().unwrap();
    let mut failed = Vec::new();
    for run in 0..RUNS {
        let slice = format!("r12{setup}{run}.slice");
        let out = Command::new(&me)
            .args(["--exact", test, "--nocapture", "--test-threads=1"])
            .env(ROLE, format!("{slice} {}", dir.path().display()))
            .output()
            .unwrap();
        if !out.status.success() {
            failed.push(format!(
                "run {run}: {}",
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .chain(String::from_utf8_lossy(&out.stderr).lines())
                    .filter(|l| l.contains("R12") || l.contains("panicked"))
                    .collect::<Vec<_>>()
                    .join(" | ")
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {RUNS} hosts with a {setup} subscriber missed the warning or got it twice: {failed:#?}",
        failed.len()
    );
}

#[test]
fn a_global_subscriber_gets_the_warning_once_in_every_run() {
    every_run_warns_once(
        "global",
        "a_global_subscriber_gets_the_warning_once_in_every_run",
    );
}

#[test]
fn a_scoped_subscriber_gets_the_warning_once_in_every_run() {
    every_run_warns_once(
        "scoped",
        "a_scoped_subscriber_gets_the_warning_once_in_every_run",
    );
}

#[test]
fn a_global_fmt_subscriber_gets_the_warning_once_in_every_run() {
    every_run_warns_once(
        "fmt",
        "a_global_fmt_subscriber_gets_the_warning_once_in_every_run",
    );
}

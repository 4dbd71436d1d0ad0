//! A peer that speaks as the manager on its private socket, or as the session bus's broker, and
//! never lets the socket run dry (a flood of signals, a flood of returns for other serials, a reply
//! trickled byte by byte), or stalls, or lies (says every call worked and every job is done).
//! Only root or the same user can be that peer, so this is robustness, not privilege: the probe and
//! the launcher program must still end at their one deadline (+ 100 ms), however the peer behaves,
//! and the launcher program must never run the command in `--required` mode. No manager is needed:
//! the peer is a thread of this test, listening where `XDG_RUNTIME_DIR/systemd/private` is, or
//! where `XDG_RUNTIME_DIR/bus` is (the session bus, which the launcher program tries first).

mod common;
#[path = "hostile_peer/fake_peer.rs"]
mod fake_peer;

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::{exec_program, TempDir};
use fake_peer::{every_peer, FakeManager, Flood, Way, WAYS};
use synaps_scope::{decide, Decision, LauncherOptions, ScopeKind};

const BOUND: Duration = Duration::from_millis(500);
/// One flood at a time: each keeps a core busy writing, and on a small machine the tests of this
/// file side by side would measure the scheduler rather than the client's deadline.
static ONE_FLOOD_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_flood_at_a_time() -> MutexGuard<'static, ()> {
    ONE_FLOOD_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
const SLACK: Duration = Duration::from_millis(100);

#[test]
fn the_probe_ends_at_its_bound_however_fast_the_peer_sends() {
    for (flood, way) in every_peer() {
        let _alone = one_flood_at_a_time();
        let manager = FakeManager::start(flood, way);
        let config = TempDir::new("hostile-peer-config");
        let env = manager.env(&config);
        let options = LauncherOptions {
            probe_timeout: BOUND,
        };
        // The peak resident set starts again from the current one (clear_refs 5), so what the
        // probe adds to its host is the peak afterwards less the resident set before.
        std::fs::write("/proc/self/clear_refs", "5").expect("reset the peak resident set");
        let before = status_kib("VmRSS");
        let started = Instant::now();
        let decision = decide(&env, ScopeKind::Tool, &options).expect("on mode never errs");
        let took = started.elapsed();
        let added_kib = status_kib("VmHWM").saturating_sub(before);
        println!("probe, {flood:?} on the {way:?}: {took:?} (bound {BOUND:?}), added {added_kib} KiB to its host");
        assert!(
            added_kib < 4 * 1024,
            "{flood:?} on the {way:?}: the probe added {added_kib} KiB to its host, 4 MiB or more"
        );
        assert!(
            matches!(decision, Decision::Direct(_)),
            "{flood:?} on the {way:?}: the peer gave no verdict, yet the request was scoped: {decision:?}"
        );
        assert!(
            took < BOUND + SLACK,
            "{flood:?} on the {way:?}: the probe took {took:?}, past its bound {BOUND:?} + {SLACK:?}"
        );
    }
}

/// A `/proc/self/status` figure in KiB (`VmRSS`, `VmHWM`).
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// What one run of the launcher program against a flooding peer came to.
struct Run {
    status: std::process::ExitStatus,
    stderr: String,
    took: Duration,
    /// The largest `VmHWM` (peak resident set) seen while it ran, in KiB.
    peak_kib: u64,
    ran: bool,
}

/// Runs the launcher program in `--required` mode against a fake manager flooding as `flood`,
/// started by the command `prefix` when there is one (an address-space limit, a `/proc` hidden),
/// watching its peak resident set.
fn run_launcher(flood: Flood, way: Way, prefix: &[String]) -> Run {
    let _alone = one_flood_at_a_time();
    let manager = FakeManager::start(flood, way);
    let config = TempDir::new("hostile-peer-config");
    let marker = config.path().join("ran");
    let mut cmd = match prefix.split_first() {
        Some((first, rest)) => {
            let mut cmd = Command::new(first);
            cmd.args(rest).arg(exec_program());
            cmd
        }
        None => Command::new(exec_program()),
    };
    cmd.arg("--unit=synaps-tool-0123456789abcdef0123456789abcdef.scope")
        .arg("--description=synaps tool: /bin/sh")
        .arg(format!("--timeout-ms={}", BOUND.as_millis()))
        .arg("--required")
        .arg("--")
        .arg("/bin/sh")
        .arg("sh")
        .arg("-c")
        .arg(format!("touch '{}'", marker.display()))
        .env_clear()
        .envs(manager.env(&config))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().expect("the launcher program starts");
    let mut stderr_pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let hwm = std::fs::read_to_string(&status_file)
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0);
        peak_kib = peak_kib.max(hwm);
        std::thread::sleep(Duration::from_millis(2));
    };
    let took = started.elapsed();
    Run {
        status,
        stderr: reader.join().unwrap(),
        took,
        peak_kib,
        ran: marker.exists(),
    }
}

#[test]
fn the_launcher_program_ends_at_its_bound_and_never_runs_the_command_when_required() {
    for (flood, way) in every_peer() {
        let run = run_launcher(flood, way, &[]);
        println!(
            "launcher program, {flood:?} on the {way:?}: {:?} (bound {BOUND:?}), peak RSS {} KiB",
            run.took, run.peak_kib
        );
        assert_eq!(
            run.status.code(),
            Some(synaps_scope::EXEC_FAILED_STATUS),
            "{flood:?} on the {way:?}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains("timed out")
                || run.stderr.contains("larger than any answer")
                || run.stderr.contains("yet this process is not in it"),
            "{flood:?} on the {way:?}: the reason says why: {}",
            run.stderr
        );
        assert!(!run.ran, "{flood:?} on the {way:?}: the command ran");
        assert!(
            run.took < BOUND + SLACK,
            "{flood:?} on the {way:?}: the launcher program took {:?}, past its bound {BOUND:?} + {SLACK:?}",
            run.took
        );
        assert!(
            run.peak_kib < 8 * 1024,
            "{flood:?} on the {way:?}: the launcher program's peak RSS was {} KiB, 8 MiB or more",
            run.peak_kib
        );
    }
}

/// What the peer sends costs the launcher program no memory it does not need: under a 64 MiB
/// address-space limit, a `--required` launch against each flood ends with status 125 and the
/// reason, never by a signal (an allocation failure aborts a Rust program).
#[test]
fn under_a_64_mib_address_space_limit_a_required_launch_ends_125_never_by_a_signal() {
    for (flood, way) in every_peer() {
        let limit = ["prlimit", "--as=67108864", "--"].map(String::from);
        let run = run_launcher(flood, way, &limit);
        assert_eq!(
            run.status.code(),
            Some(synaps_scope::EXEC_FAILED_STATUS),
            "{flood:?} on the {way:?}: {:?} after {:?}, peak RSS {} KiB: {}",
            run.status,
            run.took,
            run.peak_kib,
            run.stderr
        );
        assert!(!run.ran, "{flood:?} on the {way:?}: the command ran");
    }
}

/// A sandbox may hide `/proc`, and with it the launcher program's own cgroup, the one evidence it
/// trusts over the peer's word: against a peer that says the scope's start job is done, in
/// `--required` mode it exits 125 and never runs the command (in `on` mode it would run it, as
/// it does whenever the manager says done and nothing shows otherwise). Needs root for the mount
/// namespace in which a tmpfs covers `/proc`.
#[test]
fn a_peer_that_says_done_is_not_believed_when_required_and_proc_is_hidden() {
    let hidden = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        "mount -t tmpfs none /proc && exec \"$@\"",
        "sh",
    ]
    .map(String::from);
    for way in WAYS {
        let run = run_launcher(Flood::Lie, way, &hidden);
        assert_eq!(
            run.status.code(),
            Some(synaps_scope::EXEC_FAILED_STATUS),
            "on the {way:?}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains("cannot read its own cgroup"),
            "on the {way:?}: the reason says why: {}",
            run.stderr
        );
        assert!(!run.ran, "on the {way:?}: the command ran");
    }
}

//! A peer that speaks as the manager on its private socket, or as the session bus's broker, and
//! never lets the socket run dry (a flood of signals, a flood of returns for other serials, a reply
//! trickled byte by byte), or stalls, or lies (says every call worked and every job is done).
//! Only root or the same user can be that peer, so this is robustness, not privilege: the probe and
//! the launcher program must still end at their one deadline (+ 100 ms), however the peer behaves,
//! and the launcher program must never run the command in `--required` mode. No manager is needed:
//! the peer is a thread of this test, listening where `XDG_RUNTIME_DIR/systemd/private` is, or
//! where `XDG_RUNTIME_DIR/bus` is (the session bus, which the launcher program tries first).

mod common;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::{env_with, exec_program, TempDir};
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

/// What the fake manager sends once the client has authenticated.
#[derive(Clone, Copy, Debug)]
enum Flood {
    /// `JobRemoved` signals for other jobs, back to back.
    Signals,
    /// Method returns for serials the client never used, back to back.
    OtherReturns,
    /// A return for the client's first call, one byte every 2 ms, never finished in time.
    Trickle,
    /// Four `JobRemoved` signals of 15 MiB each (a byte array), then a 15 MiB return for the
    /// client's first call: what a client that reads every message whole pays for in memory.
    Huge,
    /// `JobRemoved` signals of 60 KiB each (long job paths), back to back: each small enough to
    /// be read whole, none the awaited job.
    LongSignals,
    /// The authentication answered, then nothing: a stopped broker or manager.
    Stall,
    /// Every call answered as if it worked (a job path), and a `JobRemoved` with result `done` for
    /// it: a peer that says the scope was made when nothing was.
    Lie,
}

/// Where the fake peer listens: the manager's private socket, or the session bus.
#[derive(Clone, Copy, Debug)]
enum Way {
    PrivateSocket,
    SessionBus,
}

impl Way {
    fn socket(self) -> &'static str {
        match self {
            Way::PrivateSocket => "systemd/private",
            Way::SessionBus => "bus",
        }
    }
}

const WAYS: [Way; 2] = [Way::PrivateSocket, Way::SessionBus];

/// Every flood on every way.
fn every_peer() -> impl Iterator<Item = (Flood, Way)> {
    FLOODS
        .into_iter()
        .flat_map(|flood| WAYS.map(|way| (flood, way)))
}

/// Reads the next whole message the client sends; None when it went away.
fn read_call(stream: &mut UnixStream) -> Option<(u8, u32, bool)> {
    let mut fixed = [0u8; 16];
    stream.read_exact(&mut fixed).ok()?;
    let word = |at: usize| u32::from_le_bytes(fixed[at..at + 4].try_into().unwrap()) as usize;
    let rest = (word(12) + 7) / 8 * 8 + word(4);
    let mut skip = vec![0u8; rest];
    stream.read_exact(&mut skip).ok()?;
    let asks_unit_path = skip.windows(8).any(|w| w == b"UnitPath");
    Some((fixed[1], word(8) as u32, asks_unit_path))
}

/// A return for `reply_serial` carrying the unit path `[transient]` in a variant, as a manager
/// answers `Get(Manager, UnitPath)`.
fn unit_path_return(serial: u32, reply_serial: u32, transient: &str) -> Vec<u8> {
    let mut fields = vec![5, 1, b'u', 0];
    fields.extend_from_slice(&reply_serial.to_le_bytes());
    pad(&mut fields, 8);
    fields.extend_from_slice(&[8, 1, b'g', 0, 1, b'v', 0]);
    let mut body = vec![2, b'a', b's', 0];
    body.extend_from_slice(&((transient.len() + 5) as u32).to_le_bytes());
    body.extend_from_slice(&(transient.len() as u32).to_le_bytes());
    body.extend_from_slice(transient.as_bytes());
    body.push(0);
    message(2, serial, fields, &body)
}

/// A return for `reply_serial` carrying the object path `job`.
fn job_return(serial: u32, reply_serial: u32, job: &str) -> Vec<u8> {
    let mut fields = vec![5, 1, b'u', 0];
    fields.extend_from_slice(&reply_serial.to_le_bytes());
    pad(&mut fields, 8);
    fields.extend_from_slice(&[8, 1, b'g', 0, 1, b'o', 0]);
    let mut body = (job.len() as u32).to_le_bytes().to_vec();
    body.extend_from_slice(job.as_bytes());
    body.push(0);
    message(2, serial, fields, &body)
}

/// Appends `value` padded to `align`.
fn pad(buf: &mut Vec<u8>, align: usize) {
    while buf.len() % align != 0 {
        buf.push(0);
    }
}

/// A header field holding a string-like value (`s` or `o`) in a D-Bus message under construction.
fn string_field(fields: &mut Vec<u8>, code: u8, signature: u8, value: &str) {
    pad(fields, 8);
    fields.extend_from_slice(&[code, 1, signature, 0]);
    fields.extend_from_slice(&(value.len() as u32).to_le_bytes());
    fields.extend_from_slice(value.as_bytes());
    fields.push(0);
}

/// A little-endian D-Bus message of `kind` (2 return, 4 signal) with the given header fields
/// and body (whose signature the fields name), sent as the broker: through a session bus, the
/// client takes replies and signals only from the broker and the manager's name owner.
fn message(kind: u8, serial: u32, mut fields: Vec<u8>, body: &[u8]) -> Vec<u8> {
    string_field(&mut fields, 7, b's', "org.freedesktop.DBus");
    let mut out = vec![b'l', kind, 1, 1];
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&serial.to_le_bytes());
    out.extend_from_slice(&(fields.len() as u32).to_le_bytes());
    out.extend_from_slice(&fields);
    pad(&mut out, 8);
    out.extend_from_slice(body);
    out
}

fn job_removed_signal(serial: u32) -> Vec<u8> {
    let mut fields = Vec::new();
    string_field(&mut fields, 1, b'o', "/org/freedesktop/systemd1");
    string_field(&mut fields, 2, b's', "org.freedesktop.systemd1.Manager");
    string_field(&mut fields, 3, b's', "JobRemoved");
    message(4, serial, fields, &[])
}

/// A `JobRemoved` signal whose body is `signature` with `body` (already laid out).
fn job_removed_with(serial: u32, signature: &str, body: &[u8]) -> Vec<u8> {
    let mut fields = Vec::new();
    string_field(&mut fields, 1, b'o', "/org/freedesktop/systemd1");
    string_field(&mut fields, 2, b's', "org.freedesktop.systemd1.Manager");
    string_field(&mut fields, 3, b's', "JobRemoved");
    pad(&mut fields, 8);
    fields.extend_from_slice(&[8, 1, b'g', 0, signature.len() as u8]);
    fields.extend_from_slice(signature.as_bytes());
    fields.push(0);
    message(4, serial, fields, body)
}

/// A body `ay` of `len` bytes.
fn byte_array(len: usize) -> Vec<u8> {
    let mut body = (len as u32).to_le_bytes().to_vec();
    body.resize(4 + len, 7);
    body
}

/// A `JobRemoved(u id, o job, s unit, s result)` body whose job path is `job`.
fn job_removed_body(id: u32, job: &str) -> Vec<u8> {
    let mut body = id.to_le_bytes().to_vec();
    for text in [job, "x.scope", "done"] {
        while body.len() % 4 != 0 {
            body.push(0);
        }
        body.extend_from_slice(&(text.len() as u32).to_le_bytes());
        body.extend_from_slice(text.as_bytes());
        body.push(0);
    }
    body
}

fn method_return(serial: u32, reply_serial: u32) -> Vec<u8> {
    let mut fields = vec![5, 1, b'u', 0];
    fields.extend_from_slice(&reply_serial.to_le_bytes());
    message(2, serial, fields, &[])
}

/// A return for `reply_serial` carrying one string of `len` bytes: at a byte every 2 ms, a
/// 4,000-byte one takes 8 s to arrive.
fn long_return(reply_serial: u32, len: usize) -> Vec<u8> {
    let mut fields = vec![5, 1, b'u', 0];
    fields.extend_from_slice(&reply_serial.to_le_bytes());
    pad(&mut fields, 8);
    fields.extend_from_slice(&[8, 1, b'g', 0, 1, b's', 0]);
    let mut body = (len as u32).to_le_bytes().to_vec();
    body.extend(std::iter::repeat(b'x').take(len));
    body.push(0);
    message(2, 1, fields, &body)
}

/// Serves one client on `stream`: answers its authentication, then floods it as `flood` says
/// until it goes away or `stop` is set.
/// The bytes of the [`Flood::Huge`] burst, made once before any client connects (they take a
/// while to lay out in a debug build, which must not eat into the client's bound).
fn huge_burst() -> Vec<u8> {
    const HUGE: usize = 15 << 20;
    let mut burst = Vec::new();
    for serial in 2..6 {
        burst.extend(job_removed_with(serial, "ay", &byte_array(HUGE)));
    }
    let mut fields = vec![5, 1, b'u', 0];
    fields.extend_from_slice(&1u32.to_le_bytes());
    pad(&mut fields, 8);
    fields.extend_from_slice(&[8, 1, b'g', 0, 2, b'a', b'y', 0]);
    burst.extend(message(2, 6, fields, &byte_array(HUGE)));
    burst
}

fn serve(mut stream: UnixStream, flood: Flood, burst: &[u8], stop: &AtomicBool, transient: &str) {
    let mut auth = Vec::new();
    let mut byte = [0u8; 1];
    while !auth.ends_with(b"BEGIN\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => auth.push(byte[0]),
            _ => return,
        }
    }
    if stream
        .write_all(b"OK 0123456789abcdef0123456789abcdef\r\n")
        .is_err()
    {
        return;
    }
    let mut serial = 1u32;
    let mut batch = Vec::new();
    match flood {
        Flood::Trickle => {
            for byte in &long_return(1, 4000) {
                if stop.load(Ordering::Relaxed) || stream.write_all(&[*byte]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        Flood::Stall => {
            while !stop.load(Ordering::Relaxed) && stream.read(&mut byte).is_ok_and(|n| n > 0) {}
        }
        Flood::Lie => {
            while let Some((kind, call, asks_unit_path)) = read_call(&mut stream) {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                if kind != 1 {
                    continue;
                }
                serial += 2;
                if asks_unit_path {
                    // The greeting's question of which manager owns the name: this one, it says.
                    if stream
                        .write_all(&unit_path_return(serial, call, transient))
                        .is_err()
                    {
                        return;
                    }
                    continue;
                }
                let job = format!("/org/freedesktop/systemd1/job/{call}");
                let mut answer = job_return(serial, call, &job);
                answer.extend(job_removed_with(
                    serial + 1,
                    "uoss",
                    &job_removed_body(call, &job),
                ));
                if stream.write_all(&answer).is_err() {
                    return;
                }
            }
        }
        Flood::Huge => {
            let _ = stream.write_all(burst);
            // Then keep the connection open and quiet until the client gives up.
            while !stop.load(Ordering::Relaxed) && stream.read(&mut byte).is_ok_and(|n| n > 0) {}
        }
        Flood::LongSignals => {
            let job = format!("/org/freedesktop/systemd1/job/{}", "9".repeat(60 * 1024));
            loop {
                serial = serial.wrapping_add(1).max(1);
                let signal = job_removed_with(serial, "uoss", &job_removed_body(serial, &job));
                if stop.load(Ordering::Relaxed) || stream.write_all(&signal).is_err() {
                    return;
                }
            }
        }
        Flood::Signals | Flood::OtherReturns => loop {
            batch.clear();
            for _ in 0..64 {
                serial = serial.wrapping_add(1).max(1);
                batch.extend(match flood {
                    Flood::Signals => job_removed_signal(serial),
                    _ => method_return(serial, 1_000_000 + serial),
                });
            }
            if stop.load(Ordering::Relaxed) || stream.write_all(&batch).is_err() {
                return;
            }
        },
    }
}

/// A fake manager listening at `runtime/systemd/private` or a fake broker at `runtime/bus`,
/// serving each client on a thread of its own until dropped.
struct FakeManager {
    stop: Arc<AtomicBool>,
    runtime: TempDir,
    way: Way,
}

impl FakeManager {
    fn start(flood: Flood, way: Way) -> FakeManager {
        let runtime = TempDir::new("hostile-peer");
        std::fs::create_dir_all(runtime.path().join("systemd")).unwrap();
        let listener = UnixListener::bind(runtime.path().join(way.socket())).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let burst = Arc::new(match flood {
            Flood::Huge => huge_burst(),
            _ => Vec::new(),
        });
        let transient = format!("{}/systemd/transient", runtime.path().display());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                if stopping.load(Ordering::Relaxed) {
                    return;
                }
                let stop = Arc::clone(&stopping);
                let burst = Arc::clone(&burst);
                let transient = transient.clone();
                std::thread::spawn(move || serve(stream, flood, &burst, &stop, &transient));
            }
        });
        FakeManager { stop, runtime, way }
    }

    /// An environment that reaches only this fake manager, with the launcher program as the
    /// wrapper and `slice` as the tool slice (so the probe must wait for the manager's answers).
    fn env(&self, config: &TempDir) -> Vec<(OsString, OsString)> {
        let file = config.write("config", "tool_scope_slice = flooded.slice\n", false);
        env_with(&[
            (
                "XDG_RUNTIME_DIR",
                &self.runtime.path().as_os_str().to_owned(),
            ),
            ("DBUS_SESSION_BUS_ADDRESS", &OsString::new()),
            ("SYNAPS_CONFIG", &file.into_os_string()),
            (
                "SYNAPS_SCOPE_LAUNCHER",
                &OsString::from("synaps-scope-exec"),
            ),
            ("SYNAPS_SCOPE_EXEC", &exec_program().into_os_string()),
            ("SYNAPS_PROCESS_SCOPES", &OsString::from("on")),
        ])
    }
}

impl Drop for FakeManager {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so that it sees the stop.
        let _ = UnixStream::connect(self.runtime.path().join(self.way.socket()));
    }
}

const FLOODS: [Flood; 7] = [
    Flood::Signals,
    Flood::OtherReturns,
    Flood::Trickle,
    Flood::Huge,
    Flood::LongSignals,
    Flood::Stall,
    Flood::Lie,
];

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

//! A peer that speaks as the manager on its private socket and never lets the socket run dry: a
//! flood of signals, a flood of returns for other serials, a reply trickled byte by byte. Only
//! root or the same user can be that peer, so this is robustness, not privilege: the probe and the
//! launcher program must still end at their one deadline (+ 100 ms), however fast the peer sends,
//! and the launcher program must never run the command in `--required` mode. No manager is needed:
//! the peer is a thread of this test, listening where `XDG_RUNTIME_DIR/systemd/private` is.

mod common;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{env_with, exec_program, TempDir};
use synaps_scope::{decide, Decision, LauncherOptions, ScopeKind};

const BOUND: Duration = Duration::from_millis(500);
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
/// and body (whose signature the fields name).
fn message(kind: u8, serial: u32, fields: Vec<u8>, body: &[u8]) -> Vec<u8> {
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
fn serve(mut stream: UnixStream, flood: Flood, stop: &AtomicBool) {
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

/// A fake manager listening at `runtime/systemd/private`, serving each client on a thread of its
/// own until dropped.
struct FakeManager {
    stop: Arc<AtomicBool>,
    runtime: TempDir,
}

impl FakeManager {
    fn start(flood: Flood) -> FakeManager {
        let runtime = TempDir::new("hostile-peer");
        std::fs::create_dir_all(runtime.path().join("systemd")).unwrap();
        let listener = UnixListener::bind(runtime.path().join("systemd/private")).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                if stopping.load(Ordering::Relaxed) {
                    return;
                }
                let stop = Arc::clone(&stopping);
                std::thread::spawn(move || serve(stream, flood, &stop));
            }
        });
        FakeManager { stop, runtime }
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
        let _ = UnixStream::connect(self.runtime.path().join("systemd/private"));
    }
}

const FLOODS: [Flood; 3] = [Flood::Signals, Flood::OtherReturns, Flood::Trickle];

#[test]
fn the_probe_ends_at_its_bound_however_fast_the_peer_sends() {
    for flood in FLOODS {
        let manager = FakeManager::start(flood);
        let config = TempDir::new("hostile-peer-config");
        let env = manager.env(&config);
        let options = LauncherOptions {
            probe_timeout: BOUND,
        };
        let started = Instant::now();
        let decision = decide(&env, ScopeKind::Tool, &options).expect("on mode never errs");
        let took = started.elapsed();
        println!("probe, {flood:?}: {took:?} (bound {BOUND:?})");
        assert!(
            matches!(decision, Decision::Direct(_)),
            "{flood:?}: the flooding peer gave no verdict, yet the request was scoped: {decision:?}"
        );
        assert!(
            took < BOUND + SLACK,
            "{flood:?}: the probe took {took:?}, past its bound {BOUND:?} + {SLACK:?}"
        );
    }
}

#[test]
fn the_launcher_program_ends_at_its_bound_and_never_runs_the_command_when_required() {
    for flood in FLOODS {
        let manager = FakeManager::start(flood);
        let config = TempDir::new("hostile-peer-config");
        let marker = config.path().join("ran");
        let mut cmd = Command::new(exec_program());
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
        let out = cmd.output().expect("the launcher program runs");
        let took = started.elapsed();
        println!("launcher program, {flood:?}: {took:?} (bound {BOUND:?})");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(synaps_scope::EXEC_FAILED_STATUS),
            "{flood:?}: {stderr}"
        );
        assert!(
            stderr.contains("timed out"),
            "{flood:?}: the reason says the deadline passed: {stderr}"
        );
        assert!(!marker.exists(), "{flood:?}: the command ran");
        assert!(
            took < BOUND + SLACK,
            "{flood:?}: the launcher program took {took:?}, past its bound {BOUND:?} + {SLACK:?}"
        );
    }
}

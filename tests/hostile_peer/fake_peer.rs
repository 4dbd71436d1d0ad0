//! The hostile peer of tests/hostile_peer.rs: a thread of the test that listens where the
//! manager's private socket or the session bus is, answers the client's authentication, and then
//! floods, stalls or lies as its `Flood` says.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::{env_with, exec_program, TempDir};

/// What the fake manager sends once the client has authenticated.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Flood {
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
pub(crate) enum Way {
    PrivateSocket,
    SessionBus,
}

impl Way {
    pub(crate) fn socket(self) -> &'static str {
        match self {
            Way::PrivateSocket => "systemd/private",
            Way::SessionBus => "bus",
        }
    }
}

pub(crate) const WAYS: [Way; 2] = [Way::PrivateSocket, Way::SessionBus];

/// Every flood on every way.
pub(crate) fn every_peer() -> impl Iterator<Item = (Flood, Way)> {
    FLOODS
        .into_iter()
        .flat_map(|flood| WAYS.map(|way| (flood, way)))
}

/// What a call the client sent asks for, as far as the fake peer tells calls apart.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asks {
    /// `Get(Manager, UnitPath)`: which manager owns the name.
    UnitPath,
    /// The broker's `GetConnectionUnixProcessID`: which process sent the client's calls.
    SenderPid,
    /// The manager's `GetUnitByPID`: which unit a process is in (asked of the private socket's
    /// other end where its cgroup cannot be read).
    UnitOfPid,
    /// Anything else.
    Other,
}

/// Reads the next whole message the client sends (its type, serial, and what it asks); None
/// when it went away.
pub(crate) fn read_call(stream: &mut UnixStream) -> Option<(u8, u32, Asks)> {
    let mut fixed = [0u8; 16];
    stream.read_exact(&mut fixed).ok()?;
    let word = |at: usize| u32::from_le_bytes(fixed[at..at + 4].try_into().unwrap()) as usize;
    let rest = (word(12) + 7) / 8 * 8 + word(4);
    let mut skip = vec![0u8; rest];
    stream.read_exact(&mut skip).ok()?;
    let has = |name: &[u8]| skip.windows(name.len()).any(|w| w == name);
    let asks = if has(b"UnitPath") {
        Asks::UnitPath
    } else if has(b"GetConnectionUnixProcessID") {
        Asks::SenderPid
    } else if has(b"GetUnitByPID") {
        Asks::UnitOfPid
    } else {
        Asks::Other
    };
    Some((fixed[1], word(8) as u32, asks))
}

/// A return for `reply_serial` carrying the pid `pid` (`u`), as the broker answers
/// `GetConnectionUnixProcessID`.
pub(crate) fn pid_return(serial: u32, reply_serial: u32, pid: u32) -> Vec<u8> {
    let mut fields = vec![5, 1, b'u', 0];
    fields.extend_from_slice(&reply_serial.to_le_bytes());
    pad(&mut fields, 8);
    fields.extend_from_slice(&[8, 1, b'g', 0, 1, b'u', 0]);
    message(2, serial, fields, &pid.to_le_bytes())
}

/// A return for `reply_serial` carrying the unit path `[transient]` in a variant, as a manager
/// answers `Get(Manager, UnitPath)`.
pub(crate) fn unit_path_return(serial: u32, reply_serial: u32, transient: &str) -> Vec<u8> {
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
pub(crate) fn job_return(serial: u32, reply_serial: u32, job: &str) -> Vec<u8> {
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
pub(crate) fn pad(buf: &mut Vec<u8>, align: usize) {
    while buf.len() % align != 0 {
        buf.push(0);
    }
}

/// A header field holding a string-like value (`s` or `o`) in a D-Bus message under construction.
pub(crate) fn string_field(fields: &mut Vec<u8>, code: u8, signature: u8, value: &str) {
    pad(fields, 8);
    fields.extend_from_slice(&[code, 1, signature, 0]);
    fields.extend_from_slice(&(value.len() as u32).to_le_bytes());
    fields.extend_from_slice(value.as_bytes());
    fields.push(0);
}

/// A little-endian D-Bus message of `kind` (2 return, 4 signal) with the given header fields
/// and body (whose signature the fields name), sent as the broker: through a session bus, the
/// client takes replies and signals only from the broker and the manager's name owner.
pub(crate) fn message(kind: u8, serial: u32, mut fields: Vec<u8>, body: &[u8]) -> Vec<u8> {
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

pub(crate) fn job_removed_signal(serial: u32) -> Vec<u8> {
    let mut fields = Vec::new();
    string_field(&mut fields, 1, b'o', "/org/freedesktop/systemd1");
    string_field(&mut fields, 2, b's', "org.freedesktop.systemd1.Manager");
    string_field(&mut fields, 3, b's', "JobRemoved");
    message(4, serial, fields, &[])
}

/// A `JobRemoved` signal whose body is `signature` with `body` (already laid out).
pub(crate) fn job_removed_with(serial: u32, signature: &str, body: &[u8]) -> Vec<u8> {
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
pub(crate) fn byte_array(len: usize) -> Vec<u8> {
    let mut body = (len as u32).to_le_bytes().to_vec();
    body.resize(4 + len, 7);
    body
}

/// A `JobRemoved(u id, o job, s unit, s result)` body whose job path is `job`.
pub(crate) fn job_removed_body(id: u32, job: &str) -> Vec<u8> {
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

pub(crate) fn method_return(serial: u32, reply_serial: u32) -> Vec<u8> {
    let mut fields = vec![5, 1, b'u', 0];
    fields.extend_from_slice(&reply_serial.to_le_bytes());
    message(2, serial, fields, &[])
}

/// A return for `reply_serial` carrying one string of `len` bytes: at a byte every 2 ms, a
/// 4,000-byte one takes 8 s to arrive.
pub(crate) fn long_return(reply_serial: u32, len: usize) -> Vec<u8> {
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
pub(crate) fn huge_burst() -> Vec<u8> {
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

pub(crate) fn serve(
    mut stream: UnixStream,
    flood: Flood,
    burst: &[u8],
    stop: &AtomicBool,
    transient: &str,
) {
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
            while let Some((kind, call, asks)) = read_call(&mut stream) {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                if kind != 1 {
                    continue;
                }
                serial += 2;
                if asks == Asks::SenderPid {
                    // The client is the broker's peer: its own pid.
                    let pid = rustix::net::sockopt::socket_peercred(&stream)
                        .map_or(0, |cred| cred.pid.as_raw_nonzero().get() as u32);
                    if stream.write_all(&pid_return(serial, call, pid)).is_err() {
                        return;
                    }
                    continue;
                }
                if asks == Asks::UnitOfPid {
                    // Which unit the socket's other end is in: the manager's own, it says.
                    let init = "/org/freedesktop/systemd1/unit/init_2escope";
                    if stream.write_all(&job_return(serial, call, init)).is_err() {
                        return;
                    }
                    continue;
                }
                if asks == Asks::UnitPath {
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
pub(crate) struct FakeManager {
    stop: Arc<AtomicBool>,
    runtime: TempDir,
    way: Way,
}

/// Puts this process (whose thread is the fake peer) in a cgroup named `init.scope` below its
/// own, once: a user manager's own process is in its `init.scope`, and the launcher program takes
/// the other end of the private socket for the manager only there (else for a relay in front of
/// it). So the fake passes for a manager that misbehaves, which is what these tests are about.
fn pass_for_the_manager() {
    static MOVED: std::sync::Once = std::sync::Once::new();
    MOVED.call_once(|| {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let own = own
            .lines()
            .find_map(|line| line.strip_prefix("0::"))
            .expect("a cgroup2 line in /proc/self/cgroup");
        if own.ends_with("/init.scope") {
            return;
        }
        let init = std::path::Path::new("/sys/fs/cgroup")
            .join(own.trim_start_matches('/'))
            .join("init.scope");
        std::fs::create_dir_all(&init).unwrap_or_else(|e| {
            panic!(
                "this test puts itself in {} (root, cgroup2): {e}",
                init.display()
            )
        });
        std::fs::write(init.join("cgroup.procs"), std::process::id().to_string())
            .unwrap_or_else(|e| panic!("moving this test into {}: {e}", init.display()));
    });
}

impl FakeManager {
    pub(crate) fn start(flood: Flood, way: Way) -> FakeManager {
        pass_for_the_manager();
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
    pub(crate) fn env(&self, config: &TempDir) -> Vec<(OsString, OsString)> {
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

pub(crate) const FLOODS: [Flood; 7] = [
    Flood::Signals,
    Flood::OtherReturns,
    Flood::Trickle,
    Flood::Huge,
    Flood::LongSignals,
    Flood::Stall,
    Flood::Lie,
];

//! The connection's own tests: what a broker passes on, and who the peer is.

use std::time::Duration;

use super::*;
use crate::manager::bus::address::Address;
use crate::manager::bus::connect::connect_one;

/// A message as a broker would pass it on: little-endian, from `sender`, with the
/// `fields` given as (code, signature, text), a reply serial, and a body already marshalled.
fn message(
    kind: u8,
    serial: u32,
    sender: &str,
    fields: &[(u8, &str, &str)],
    reply_to: Option<u32>,
    body_signature: &str,
    body: &[u8],
) -> Vec<u8> {
    let mut out = Marshal(vec![b'l', kind, 0, 1]);
    out.u32(u32::try_from(body.len()).unwrap());
    out.u32(serial);
    out.u32(0);
    let start = out.0.len();
    for &(code, signature, text) in fields.iter().chain([&(7, "s", sender)]) {
        out.pad(8);
        out.0.push(code);
        out.signature(signature);
        out.string(text);
    }
    if let Some(to) = reply_to {
        out.pad(8);
        out.0.push(5);
        out.signature("u");
        out.u32(to);
    }
    if !body_signature.is_empty() {
        out.pad(8);
        out.0.push(8);
        out.signature("g");
        out.signature(body_signature);
    }
    let fields_len = u32::try_from(out.0.len() - start).unwrap();
    out.0[12..16].copy_from_slice(&fields_len.to_le_bytes());
    out.pad(8);
    out.0.extend_from_slice(body);
    out.0
}

/// Little-endian D-Bus marshalling, as much as these tests send.
struct Marshal(Vec<u8>);

impl Marshal {
    fn pad(&mut self, align: usize) {
        while self.0.len() % align != 0 {
            self.0.push(0);
        }
    }
    fn u32(&mut self, value: u32) {
        self.pad(4);
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    fn string(&mut self, text: &str) {
        self.u32(u32::try_from(text.len()).unwrap());
        self.0.extend_from_slice(text.as_bytes());
        self.0.push(0);
    }
    fn signature(&mut self, text: &str) {
        self.0.push(u8::try_from(text.len()).unwrap());
        self.0.extend_from_slice(text.as_bytes());
        self.0.push(0);
    }
}

/// A body of one string (or object path).
fn one_string(text: &str) -> Vec<u8> {
    let mut body = Marshal(Vec::new());
    body.string(text);
    body.0
}

/// A `Get(UnitPath)` answer's body: a variant holding `as`.
fn unit_path_body(paths: &[&str]) -> Vec<u8> {
    let mut body = Marshal(Vec::new());
    body.signature("as");
    body.u32(0);
    let start = body.0.len();
    for path in paths {
        body.string(path);
    }
    let len = u32::try_from(body.0.len() - start).unwrap();
    body.0[start - 4..start].copy_from_slice(&len.to_le_bytes());
    body.0
}

/// A `JobRemoved(id, job, unit, result)` signal's body.
fn job_removed_body(id: u32, job: &str, unit: &str, result: &str) -> Vec<u8> {
    let mut body = Marshal(Vec::new());
    body.u32(id);
    body.string(job);
    body.string(unit);
    body.string(result);
    body.0
}

/// Through a broker, the manager is the connection that owns its name: another connection's
/// answer to our question or `JobRemoved` (one a broker let through, or one of a manager that
/// has since left the name) is not taken for the manager's, and the owner's, after it, is.
#[test]
fn through_a_broker_only_the_name_owners_replies_and_signals_count() {
    use std::os::unix::net::UnixStream;
    const BROKER_NAME: &str = "org.freedesktop.DBus";
    const OWNER: &str = ":1.4";
    const OTHER: &str = ":1.9";
    let job = "/org/freedesktop/systemd1/job/7";
    let signal_fields = [
        (1, "o", MANAGER_PATH),
        (2, "s", MANAGER),
        (3, "s", "JobRemoved"),
    ];
    let mut stream = b"OK 0123456789abcdef0123456789abcdef\r\n".to_vec();
    for part in [
        // Hello, GetNameOwner, then Get(UnitPath) from another connection and the owner.
        message(2, 1, BROKER_NAME, &[], Some(1), "s", &one_string(":1.100")),
        message(2, 2, BROKER_NAME, &[], Some(2), "s", &one_string(OWNER)),
        message(
            2,
            5,
            OTHER,
            &[],
            Some(3),
            "v",
            &unit_path_body(&["/run/user/8/systemd/transient"]),
        ),
        message(
            2,
            6,
            OWNER,
            &[],
            Some(3),
            "v",
            &unit_path_body(&["/run/user/7/systemd/transient"]),
        ),
        // The call's reply, and its job's end: another's first, then the owner's.
        message(2, 7, OTHER, &[], Some(4), "o", &one_string("/job/666")),
        message(2, 8, OWNER, &[], Some(4), "o", &one_string(job)),
        message(
            4,
            9,
            OTHER,
            &signal_fields,
            None,
            "uoss",
            &job_removed_body(7, job, "x.scope", "failed"),
        ),
        message(
            4,
            10,
            OWNER,
            &signal_fields,
            None,
            "uoss",
            &job_removed_body(7, job, "x.scope", "done"),
        ),
    ] {
        stream.extend(part);
    }
    let (ours, theirs) = UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    let peer = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut theirs = theirs;
        theirs.write_all(&stream).unwrap();
        let mut sink = Vec::new();
        let _ = theirs.read_to_end(&mut sink);
    });
    let started = Instant::now();
    let deadline = started + Duration::from_secs(5);
    let socket = Socket::of_this_process(ours.into());
    let greeting = BrokerGreeting {
        asks_unit_path: true,
    };
    let mut bus = Connection::over(socket, Some(greeting), READ_SIZE, started, deadline)
        .expect("the greeting is answered");
    assert!(matches!(bus.take_unit_path_answer(), Some(Ok(_))));
    assert_eq!(bus.owner.as_deref(), Some(OWNER));
    let reply = bus
        .call_manager("StartTransientUnit", Call::new().string("x.scope"))
        .unwrap();
    assert_eq!(reply.first_str(), Some(job));
    assert_eq!(bus.wait_for_job(job).unwrap(), "done");
    drop(bus);
    peer.join().unwrap();
}

/// Set in the copy of this test that runs inside a new pid namespace: the listener to reach.
const PEER_SOCKET: &str = "SYNAPS_TEST_PEER_OUTSIDE_PID_NAMESPACE";

/// From a child pid namespace (a sandbox's `unshare --pid`, a container), `SO_PEERCRED`
/// gives pid 0 for a peer outside it: the peer check must read that and judge by the uid.
/// The test runs itself again under `unshare`, beside a listener it binds out here.
#[test]
fn a_peer_outside_our_pid_namespace_reads_as_pid_0_and_is_judged_by_its_uid() {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let name = "manager::bus::connection::tests::a_peer_outside_our_pid_namespace_reads_as_pid_0_and_is_judged_by_its_uid";
    if let Some(path) = std::env::var_os(PEER_SOCKET) {
        let socket = connect_one(&Address::Path(path))
            .unwrap_or_else(|why| panic!("from a child pid namespace: {}", why.why));
        assert_eq!(socket.peer_pid, 0, "as the connection read it");
        let peer = getsockopt(&socket.fd, PeerCredentials).unwrap();
        assert_eq!(peer.pid(), 0, "the listener is outside this pid namespace");
        return;
    }
    let dir = std::env::temp_dir().join(format!("synaps-peer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("socket");
    let _ = std::fs::remove_file(&path);
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    // Root makes the pid namespace itself; anyone else in a user namespace of their own, where
    // they are root and so is the listener's uid, mapped.
    let mut unshare = std::process::Command::new("unshare");
    if !rustix::process::geteuid().is_root() {
        unshare.args(["--user", "--map-root-user"]);
    }
    let output = unshare
        .args(["--pid", "--fork", "--"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(PEER_SOCKET, &path)
        .output()
        .unwrap_or_else(|e| panic!("this test runs `unshare` (util-linux) and could not: {e}"));
    let _ = std::fs::remove_dir_all(&dir);
    let told = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() && told.contains("1 passed"),
        "the test in a new pid namespace ({}): {told}",
        output.status
    );
}

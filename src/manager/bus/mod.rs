//! A minimal D-Bus client for the user manager: the private socket or the session bus, SASL
//! EXTERNAL, method calls and the `JobRemoved` signal, all under one deadline.
//!
//! Written here rather than taken from a crate: zbus 5 and 6 refuse the manager's private socket
//! (it names itself `org.freedesktop.systemd1` as the sender, which they reject as a unique name),
//! and libdbus would bring a C library to a pure-Rust core. Everything a peer sends is parsed by
//! `wire`, which is fuzzed.

mod address;
mod broker_silence;
pub(crate) mod comeback;
mod connect;
mod connection;
mod error;
mod identity;
mod listener;
mod owner;
pub(crate) mod pool;
mod route;
pub(crate) mod wire;

pub(crate) use connect::Socket;
pub(in crate::manager) use connection::{job_removed, Ahead, PROPERTIES};
pub(crate) use connection::{Connection, MANAGER, MANAGER_PATH, SYSTEMD};
pub(crate) use error::BusError;
pub(crate) use identity::{identity_on, manager_version, sender_on, Identity, Sender};
pub(crate) use route::{Fallback, Route};

/// The fuzz target's conversation (`crate::__fuzz::converse_with_peer`): a socket pair whose far
/// end a thread fills with `stream` and then shuts for writing (reading on until the client is
/// done), while this end converses as the launcher program does.
pub(crate) fn converse_with_peer(
    stream: &[u8],
    read_size: usize,
    bound: std::time::Duration,
    pipelined: bool,
) -> (std::time::Duration, String) {
    use std::os::unix::net::UnixStream;

    let started = std::time::Instant::now();
    let deadline = started + bound;
    let Ok((ours, theirs)) = UnixStream::pair() else {
        return (started.elapsed(), "no socket pair".to_owned());
    };
    if ours.set_nonblocking(true).is_err() {
        return (started.elapsed(), "no non-blocking socket".to_owned());
    }
    let stream = stream.to_vec();
    let peer = std::thread::spawn(move || {
        let mut left = &stream[..];
        while !left.is_empty() {
            match rustix::net::send(&theirs, left, rustix::net::SendFlags::NOSIGNAL) {
                Ok(n) => left = &left[n..],
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => break,
            }
        }
        // Hang up for writing, and take what the client sends until it is done.
        let _ = rustix::net::shutdown(&theirs, rustix::net::Shutdown::Write);
        let mut sink = [0u8; 4096];
        while matches!(
            rustix::net::recv(&theirs, &mut sink, rustix::net::RecvFlags::empty()),
            Ok((n, _)) if n > 0
        ) {}
    });
    let outcome = (|| {
        let call = wire::Call::new().string("synaps-fuzz.scope").string("fail");
        let reply = if pipelined {
            // As the launcher program has it: the call goes out with the authentication.
            let mut bus = Connection::pipelined_over(
                Socket::of_this_process(ours.into()),
                read_size,
                started,
                deadline,
            )?;
            bus.listen_for_jobs();
            let serial = bus.send_manager("StartTransientUnit", call)?;
            bus.authenticated()?;
            let reply = bus.reply(serial)?;
            (bus, reply)
        } else {
            let mut bus = Connection::over_private(
                Socket::of_this_process(ours.into()),
                read_size,
                started,
                deadline,
            )?;
            let reply = bus.call_manager("StartTransientUnit", call)?;
            (bus, reply)
        };
        let (mut bus, reply) = reply;
        let job = reply.first_str().unwrap_or_default().to_owned();
        bus.wait_for_job(&job)
    })();
    let took = started.elapsed();
    let _ = peer.join();
    (took, format!("{outcome:?}"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn the_fuzz_seeds_converse_to_their_job_result_however_the_bytes_are_split() {
        let seeds: [(&[u8], &str); 3] = [
            (
                include_bytes!("../../../fuzz/seeds/peer_stream/done-whole"),
                "Ok(\"done\")",
            ),
            (
                include_bytes!("../../../fuzz/seeds/peer_stream/done-bytewise"),
                "Ok(\"done\")",
            ),
            (
                include_bytes!("../../../fuzz/seeds/peer_stream/signals-first"),
                "Ok(\"failed\")",
            ),
        ];
        for pipelined in [false, true] {
            for (seed, expected) in seeds {
                for read_size in [1, 3, 61, 16384] {
                    let (took, outcome) = super::converse_with_peer(
                        &seed[1..],
                        read_size,
                        Duration::from_secs(2),
                        pipelined,
                    );
                    assert_eq!(outcome, expected, "read size {read_size}, {pipelined}");
                    assert!(took < Duration::from_secs(1), "{took:?}");
                }
            }
            let rejected = include_bytes!("../../../fuzz/seeds/peer_stream/rejected");
            let (_, outcome) =
                super::converse_with_peer(&rejected[1..], 7, Duration::from_secs(2), pipelined);
            assert!(outcome.contains("authentication refused"), "{outcome}");
        }
    }
}

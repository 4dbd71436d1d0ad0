//! Connecting to the manager's private socket, or to a bus broker from a D-Bus address list,
//! and the peer's credentials as the socket gives them.

use std::ffi::OsStr;
use std::fmt;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;

use rustix::io::Errno;
use rustix::net::{self, AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

use super::address::{self, Address};

/// A connected socket, and the pid of the process at its other end as `SO_PEERCRED` read it when
/// it connected (0: outside this process's pid namespace).
pub(crate) struct Socket {
    pub(crate) fd: OwnedFd,
    pub(crate) peer_pid: i32,
}

impl Socket {
    /// One end of a socket pair this process made (the fuzz target's conversation, tests).
    pub(crate) fn of_this_process(fd: OwnedFd) -> Self {
        Socket {
            fd,
            peer_pid: rustix::process::getpid().as_raw_nonzero().get(),
        }
    }
}

/// Why a socket could not be connected.
#[derive(Debug)]
pub(super) struct Unconnected {
    /// Which socket, and why not, in words.
    pub(super) why: String,
    /// Nobody listens there now (refused, no such socket, a full backlog): so it is while a
    /// manager or broker re-executes or restarts.
    pub(super) nobody_listens: bool,
}

impl Unconnected {
    fn because(why: String) -> Self {
        Unconnected {
            why,
            nobody_listens: false,
        }
    }

    fn named(self, socket: impl fmt::Display) -> Self {
        Unconnected {
            why: format!("{socket}: {}", self.why),
            ..self
        }
    }
}

/// The manager's private socket at `path`; Err says which socket and why not.
pub(super) fn connect_private(path: &OsStr) -> Result<Socket, Unconnected> {
    connect_one(&Address::Path(path.to_owned())).map_err(|no| {
        no.named(format_args!(
            "private socket {}",
            String::from_utf8_lossy(path.as_bytes())
        ))
    })
}

/// The first address of the session bus address list `list` that connects; Err says why none.
pub(super) fn connect_session(list: &[u8]) -> Result<Socket, Unconnected> {
    let shown = String::from_utf8_lossy(list);
    let named = format!("session bus {shown}");
    let addresses = address::parse(list).map_err(|why| Unconnected::because(why).named(&named))?;
    let mut last = Unconnected::because(String::new());
    for address in &addresses {
        match connect_one(address) {
            Ok(socket) => return Ok(socket),
            Err(why) => last = why,
        }
    }
    Err(last.named(named))
}

/// A non-blocking, close-on-exec stream socket connected to `address`, checked to belong to us
/// or root (as systemd-run checks), and its peer's pid.
pub(super) fn connect_one(address: &Address) -> Result<Socket, Unconnected> {
    let addr = match address {
        Address::Path(path) => SocketAddrUnix::new(path.as_os_str()),
        Address::Abstract(name) => SocketAddrUnix::new_abstract_name(name),
    }
    .map_err(|e| Unconnected::because(format!("unusable address: {e}")))?;
    let fd = net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )
    .map_err(|e| Unconnected::because(e.to_string()))?;
    net::connect(&fd, &addr).map_err(|e| Unconnected {
        why: std::io::Error::from(e).to_string(),
        nobody_listens: matches!(e, Errno::CONNREFUSED | Errno::NOENT | Errno::AGAIN),
    })?;
    let peer = peer_credentials(&fd)
        .map_err(|e| Unconnected::because(format!("reading the peer's credentials: {e}")))?;
    let me = rustix::process::geteuid().as_raw();
    if peer.uid() != 0 && peer.uid() != me {
        return Err(Unconnected::because(format!(
            "the socket belongs to uid {}, not to us",
            peer.uid()
        )));
    }
    Ok(Socket {
        fd,
        peer_pid: peer.pid(),
    })
}

/// The credentials of the process at the other end of `fd` (`SO_PEERCRED`), read through nix,
/// whose credentials are plain integers: a peer outside our pid namespace has pid 0 here, which
/// rustix's `UCred` (a `NonZero` pid) cannot hold.
pub(super) fn peer_credentials(fd: &OwnedFd) -> nix::Result<nix::sys::socket::UnixCredentials> {
    nix::sys::socket::getsockopt(fd, nix::sys::socket::sockopt::PeerCredentials)
}

//! One connection to the user manager, every step (connect, auth, each call, each wait) under a
//! single deadline with `poll`, so a stopped or dead manager costs a request its bound and no more.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fmt;
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use rustix::event::PollFlags;
use rustix::io::Errno;
use rustix::net::{
    self, AddressFamily, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
    SocketAddrUnix, SocketFlags, SocketType,
};

use super::address::{self, Address};
use super::wire::{self, Call, Kind, Message, NO_AUTO_START};
use crate::bounds::wait_ready;

/// The manager's well-known name, object and interface.
pub(crate) const SYSTEMD: &str = "org.freedesktop.systemd1";
pub(crate) const MANAGER_PATH: &str = "/org/freedesktop/systemd1";
pub(crate) const MANAGER: &str = "org.freedesktop.systemd1.Manager";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";
/// `JobRemoved` signals kept while waiting for a reply (every job's, on the private socket), as
/// their job path and result only. systemd sends a job's `JobRemoved` after the reply that names
/// the job, so these are a safety margin, not a queue: a flood beyond it is dropped.
const MAX_KEPT_SIGNALS: usize = 64;
/// The longest job path or result a kept `JobRemoved` may carry.
const MAX_KEPT_WORD: usize = 256;
/// Messages larger than this are not read whole: nothing the client asks for comes near it (a
/// reply names a unit or a job; `JobRemoved` carries two paths and two words). A larger reply is
/// refused as soon as its header says so; a larger signal is skipped as it streams in, unbuffered.
/// So what a conversation holds is bounded by what it needs, not by what the peer sends.
const MAX_READ_WHOLE: usize = 64 * 1024;
/// The most one read takes from the socket.
pub(super) const READ_SIZE: usize = 16 * 1024;

/// What became of a bus conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BusError {
    /// No connection could be made (no socket, refused, not ours).
    Connect(String),
    /// The deadline passed during `phase`.
    TimedOut {
        phase: &'static str,
        after: Duration,
    },
    /// The connection broke, or the peer spoke something other than D-Bus.
    Broken(String),
    /// The manager answered with an error.
    Refused { name: String, message: String },
    /// The session bus's `org.freedesktop.systemd1` is not the manager the route leads to
    /// (another user's, the system manager, or a program that is not a systemd manager).
    NotTheManager(String),
    /// The manager is not there, and nothing was sent to it: its socket refuses or is gone from a
    /// runtime directory a manager made, or the broker says nobody owns its name (or its owner
    /// left while asked a question that changes nothing). So it is while a manager re-executes or
    /// restarts (`crate::bus::comeback`). In words, whole.
    Away(String),
}

impl BusError {
    /// The broker says nobody owns the manager's name: the manager is not on this session bus
    /// (a bus of a session that systemd does not run, or before the manager joined it).
    pub(crate) fn means_no_manager_on_bus(&self) -> bool {
        matches!(self, BusError::Refused { name, .. } if name == "org.freedesktop.DBus.Error.NameHasNoOwner"
            || name == "org.freedesktop.DBus.Error.ServiceUnknown")
    }

    /// The owner of the manager's name answered that it has no such method, interface or object:
    /// a program that owns the name but is no manager.
    pub(crate) fn means_no_such_method(&self) -> bool {
        matches!(self, BusError::Refused { name, .. } if name == "org.freedesktop.DBus.Error.UnknownMethod"
            || name == "org.freedesktop.DBus.Error.UnknownInterface"
            || name == "org.freedesktop.DBus.Error.UnknownObject")
    }

    /// The broker says the owner of the manager's name left the bus with this call unanswered.
    /// Whether the manager acted on the call first is not known.
    pub(crate) fn means_owner_left(&self) -> bool {
        matches!(self, BusError::Refused { name, .. } if name == "org.freedesktop.DBus.Error.NoReply")
    }
}

impl BusError {
    /// What went wrong, naming the manager that was asked (`manager`: "the user manager", "the
    /// system manager"), so that a message never blames the one that answered.
    pub(crate) fn told_of(&self, manager: &str) -> String {
        match self {
            BusError::Connect(why) => format!("could not connect to {manager}: {why}"),
            BusError::TimedOut { phase, after } => format!(
                "{manager} did not answer ({phase}): timed out after {} ms",
                after.as_millis()
            ),
            BusError::Broken(why) => format!("the connection to {manager} broke: {why}"),
            BusError::Refused { name, message } => format!("{message} ({name})"),
            BusError::NotTheManager(why) => format!("not this user's manager: {why}"),
            // Said of the user manager where it was made (only a user manager's route is away).
            BusError::Away(why) => why.replacen(USER_MANAGER, manager, 1),
        }
    }
}

/// How a message names the manager of a user route.
pub(crate) const USER_MANAGER: &str = "the user manager";

impl fmt::Display for BusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.told_of(USER_MANAGER))
    }
}

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

/// An authenticated connection to the manager.
pub(crate) struct Connection {
    fd: OwnedFd,
    /// The pid of the process at the other end ([`Socket::peer_pid`]).
    peer_pid: i32,
    /// The process that opened it.
    opened_by: u32,
    buf: Vec<u8>,
    serial: u32,
    started: Instant,
    deadline: Instant,
    /// Through a bus broker (the session bus) rather than the manager's private socket.
    pub(crate) via_broker: bool,
    /// `JobRemoved` signals (job path, result) that arrived while waiting for a reply, kept for a
    /// later wait.
    signals: VecDeque<(String, String)>,
    /// Bytes of a skipped message still to come and be dropped.
    skipping: usize,
    /// Whether `JobRemoved` signals are kept; when not, every signal is skipped unparsed (the
    /// private socket carries every unit change of the session to every connection).
    keeps_signals: bool,
    /// Whether every signal's body is parsed (a listener's connection, [`Connection::next_heard`]),
    /// not only `JobRemoved`'s.
    parses_every_signal: bool,
    /// The most one read takes (the fuzz target makes it small, to split a peer's bytes anywhere).
    read_size: usize,
    /// The authentication went out and its answer is still to be read ([`Connection::open_pipelined`]).
    authenticating: bool,
    /// Calls sent ahead (`Hello`, `AddMatch`…, and the question that tells which manager owns
    /// the name), whose answers come before any other and must each be a return.
    answers_ahead: Vec<(u32, Ahead)>,
    /// Answers that came before the one being read, to calls sent ahead: kept, not dropped.
    early: Vec<Message>,
    /// The unique name of the bus connection that owns `org.freedesktop.systemd1` (through a
    /// broker, once greeted): only its replies and signals are taken as the manager's.
    owner: Option<String>,
    /// Why this connection is to the private socket although the route tries the session bus
    /// first: the session bus was passed over, for this reason.
    pub(crate) passed_over: Option<String>,
    /// This connection's unique name on the bus (through a broker, once greeted).
    unique_name: Option<String>,
    /// The pid the broker names as this connection's process, once asked.
    sender_pid: Option<u32>,
    /// The owner's answer to the greeting's `Get(Manager, UnitPath)`, until taken.
    unit_path: Option<Result<Message, BusError>>,
    /// The authentication asks to pass descriptors (`NEGOTIATE_UNIX_FD`).
    negotiates_fds: bool,
    /// The server agreed to pass descriptors.
    pub(crate) fds_agreed: bool,
}

/// What a call sent ahead asks.
enum Ahead {
    /// Its answer need only be a return.
    Return,
    /// The broker's answer to `Hello`: this connection's unique name.
    Hello,
    /// Who owns `org.freedesktop.systemd1` on the bus.
    Owner,
    /// The owner's unit path, which tells which manager it is (`bus::owner`): kept for the
    /// route to judge.
    UnitPath,
    /// Whether `org.freedesktop.systemd1` is still owned by the connection greeted (a kept
    /// connection's new conversation): a manager that re-executed owns it anew.
    OwnerStill(Option<String>),
}

/// What a connection's greeting of its broker asks besides `Hello` and the name's owner.
#[derive(Clone, Copy, Debug)]
pub(super) struct BrokerGreeting {
    /// The owner's unit path, which tells which manager it is (`bus::owner`).
    pub(super) asks_unit_path: bool,
}

/// The broker's own name, the sender of its answers.
const BROKER: &str = "org.freedesktop.DBus";

/// A connection that its process is done with is hung up, not only closed: a child forked since
/// shares the socket, and the manager would go on writing to it for as long as the child lives. A
/// forked child's copy of its parent's connection is only closed; the connection is the parent's.
impl Drop for Connection {
    fn drop(&mut self) {
        if self.opened_by == std::process::id() {
            let _ = rustix::net::shutdown(&self.fd, rustix::net::Shutdown::Both);
        }
    }
}

impl Connection {
    /// Over the manager's connected private socket `fd`: sends the authentication and leaves its
    /// answer to [`Connection::authenticated`], so that the first call goes out with it.
    pub(crate) fn pipelined_over(
        socket: Socket,
        read_size: usize,
        started: Instant,
        deadline: Instant,
    ) -> Result<Self, BusError> {
        let mut connection =
            Connection::unauthenticated(socket, false, read_size, started, deadline);
        connection.send_authentication()?;
        connection.authenticating = true;
        Ok(connection)
    }

    /// Starts a conversation over the connected socket `fd` (begun at `started`): authenticates
    /// and, through a broker (`broker`: what the greeting asks), says Hello and asks who owns the
    /// name, by `deadline`. Each read takes at most `read_size`
    /// bytes (1 to 16 KiB; the fuzz target makes it small, so a peer's bytes arrive split
    /// anywhere).
    pub(super) fn over(
        socket: Socket,
        broker: Option<BrokerGreeting>,
        read_size: usize,
        started: Instant,
        deadline: Instant,
    ) -> Result<Self, BusError> {
        let connection =
            Connection::unauthenticated(socket, broker.is_some(), read_size, started, deadline);
        connection.begin(broker)
    }

    /// Authenticates (and, through a broker, greets it as `broker` says), by the deadline.
    fn begin(mut self, broker: Option<BrokerGreeting>) -> Result<Self, BusError> {
        self.send_authentication()?;
        self.finish_authentication()?;
        if let Some(greeting) = broker {
            self.greet_broker(greeting)?;
            self.authenticated()?;
        }
        Ok(self)
    }

    /// [`Connection::over`] a socket to a manager's private socket (no broker), for the fuzz
    /// target's conversation.
    pub(crate) fn over_private(
        socket: Socket,
        read_size: usize,
        started: Instant,
        deadline: Instant,
    ) -> Result<Self, BusError> {
        Connection::over(socket, None, read_size, started, deadline)
    }

    fn unauthenticated(
        socket: Socket,
        via_broker: bool,
        read_size: usize,
        started: Instant,
        deadline: Instant,
    ) -> Self {
        Connection {
            fd: socket.fd,
            peer_pid: socket.peer_pid,
            opened_by: std::process::id(),
            buf: Vec::with_capacity(4096),
            serial: 0,
            started,
            deadline,
            via_broker,
            signals: VecDeque::new(),
            skipping: 0,
            keeps_signals: true,
            parses_every_signal: false,
            read_size: read_size.clamp(1, READ_SIZE),
            authenticating: false,
            answers_ahead: Vec::new(),
            early: Vec::new(),
            owner: None,
            passed_over: None,
            unique_name: None,
            sender_pid: None,
            unit_path: None,
            negotiates_fds: false,
            fds_agreed: false,
        }
    }

    /// [`Connection::over`] the manager's connected private socket, asking in the authentication
    /// to pass descriptors ([`Connection::fds_agreed`] says whether the other end agreed).
    pub(super) fn over_private_passing_fds(
        socket: Socket,
        started: Instant,
        deadline: Instant,
    ) -> Result<Self, BusError> {
        let mut connection =
            Connection::unauthenticated(socket, false, READ_SIZE, started, deadline);
        connection.negotiates_fds = true;
        connection.begin(None)
    }

    /// [`Connection::over`] a broker's connected socket, asking in the authentication to pass
    /// descriptors ([`Connection::fds_agreed`] says whether the broker agreed).
    pub(super) fn over_passing_fds(
        socket: Socket,
        greeting: BrokerGreeting,
        started: Instant,
        deadline: Instant,
    ) -> Result<Self, BusError> {
        let mut connection =
            Connection::unauthenticated(socket, true, READ_SIZE, started, deadline);
        connection.negotiates_fds = true;
        connection.begin(Some(greeting))
    }

    /// Starts a new conversation on this connection, bounded by `deadline`. Through a broker it
    /// first asks, without waiting, who owns the manager's name now: an owner other than the one
    /// greeted (a manager re-executed since) ends the conversation as broken before its answers
    /// are taken ([`Connection::authenticated`]), so a kept connection never waits for a reply
    /// that comes from an owner it does not listen to.
    pub(crate) fn renew(&mut self, deadline: Instant) -> Result<(), BusError> {
        self.started = Instant::now();
        self.deadline = deadline;
        self.signals.clear();
        if self.via_broker {
            let owner = self.send_to_broker("GetNameOwner", Call::new().string(SYSTEMD))?;
            self.answers_ahead
                .push((owner, Ahead::OwnerStill(self.owner.clone())));
        }
        Ok(())
    }

    /// Skips signals unparsed from now on: for conversations that wait for no job.
    pub(crate) fn ignore_signals(&mut self) {
        self.keeps_signals = false;
        self.signals.clear();
    }

    /// Keeps `JobRemoved` signals from now on: for a conversation that waits for a job.
    pub(crate) fn listen_for_jobs(&mut self) {
        self.keeps_signals = true;
    }

    /// Moves the end of the current conversation to `deadline`.
    pub(crate) fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    fn timed_out(&self, phase: &'static str) -> BusError {
        BusError::TimedOut {
            phase,
            after: self.started.elapsed(),
        }
    }

    /// Waits until the socket is ready for `flags`, or the deadline.
    fn wait(&self, flags: PollFlags, phase: &'static str) -> Result<(), BusError> {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.timed_out(phase));
            }
            match wait_ready(&self.fd, flags, left) {
                Ok(false) => continue,
                Ok(true) => return Ok(()),
                Err(e) => return Err(BusError::Broken(e.to_string())),
            }
        }
    }

    fn send_all(&self, mut bytes: &[u8], phase: &'static str) -> Result<(), BusError> {
        while !bytes.is_empty() {
            match net::send(&self.fd, bytes, SendFlags::NOSIGNAL) {
                Ok(n) => bytes = &bytes[n..],
                Err(Errno::AGAIN) => self.wait(PollFlags::OUT, phase)?,
                Err(Errno::INTR) => {}
                Err(e) => return Err(BusError::Broken(e.to_string())),
            }
        }
        Ok(())
    }

    /// Reads more bytes into the buffer. The deadline is looked at before every read, not only
    /// when one would block: a peer that never lets the socket run dry (a flood of signals, a reply
    /// trickled byte by byte) still ends the conversation at the deadline.
    fn fill(&mut self, phase: &'static str) -> Result<(), BusError> {
        let mut chunk = [0u8; READ_SIZE];
        let size = self.read_size;
        loop {
            if Instant::now() >= self.deadline {
                return Err(self.timed_out(phase));
            }
            match net::recv(&self.fd, &mut chunk[..size], RecvFlags::DONTWAIT) {
                Ok((0, _)) => {
                    return Err(BusError::Broken("the manager closed the connection".into()))
                }
                Ok((n, _)) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(());
                }
                Err(Errno::AGAIN) => self.wait(PollFlags::IN, phase)?,
                Err(Errno::INTR) => {}
                Err(e) => return Err(BusError::Broken(e.to_string())),
            }
        }
    }

    /// SASL EXTERNAL with our uid, as sd-bus does it: the auth lines and BEGIN in one write.
    fn send_authentication(&mut self) -> Result<(), BusError> {
        let uid = rustix::process::geteuid().as_raw().to_string();
        let hex: String = uid.bytes().map(|b| format!("{b:02x}")).collect();
        let fds = if self.negotiates_fds {
            "NEGOTIATE_UNIX_FD\r\n"
        } else {
            ""
        };
        self.send_all(
            format!("\0AUTH EXTERNAL {hex}\r\n{fds}BEGIN\r\n").as_bytes(),
            "authentication",
        )
    }

    /// Reads the server's answer to an authentication sent ahead ([`Connection::open_pipelined`]),
    /// and the broker's to the calls sent ahead, if they are still to be read.
    pub(crate) fn authenticated(&mut self) -> Result<(), BusError> {
        if self.authenticating {
            self.finish_authentication()?;
        }
        let ahead = std::mem::take(&mut self.answers_ahead);
        let mut left = ahead.len();
        for (serial, asked) in ahead {
            // Answers to the calls still ahead are kept if they come first.
            left -= 1;
            let reply = self.reply_keeping(serial, left);
            match asked {
                Ahead::Return => drop(reply?),
                Ahead::Hello => self.unique_name = reply?.first_str().map(str::to_owned),
                Ahead::Owner => self.owner = reply?.first_str().map(str::to_owned),
                Ahead::UnitPath if reply.as_ref().is_err_and(BusError::means_owner_left) => {
                    return Err(BusError::Away(
                        "the user manager left the session bus while asked which manager it is"
                            .to_owned(),
                    ));
                }
                Ahead::UnitPath => self.unit_path = Some(reply),
                Ahead::OwnerStill(greeted) => {
                    let now = reply?.first_str().map(str::to_owned);
                    if now != greeted {
                        return Err(BusError::Broken(format!(
                            "the manager's name changed owner on the bus ({} to {})",
                            greeted.as_deref().unwrap_or("none"),
                            now.as_deref().unwrap_or("none")
                        )));
                    }
                }
            }
        }
        self.early.clear();
        Ok(())
    }

    /// Sends the broker `Hello` (the first message a bus client must send), asks it who owns the
    /// manager's name and, if `greeting` says so, asks the owner for its unit path (which tells
    /// which manager it is: `bus::owner`, judged by the route once answered), all without
    /// waiting: a session bus the manager is not on answers `NameHasNoOwner`
    /// ([`BusError::means_no_manager_on_bus`]) before any call is made. A property's `Get`
    /// changes nothing in whoever owns the name, and the answers all come in one round trip.
    fn greet_broker(&mut self, greeting: BrokerGreeting) -> Result<(), BusError> {
        let hello = self.send_to_broker("Hello", Call::new())?;
        let owner = self.send_to_broker("GetNameOwner", Call::new().string(SYSTEMD))?;
        self.answers_ahead
            .extend([(hello, Ahead::Hello), (owner, Ahead::Owner)]);
        if greeting.asks_unit_path {
            let unit_path = self.send_get(MANAGER_PATH, MANAGER, "UnitPath")?;
            self.answers_ahead.push((unit_path, Ahead::UnitPath));
        }
        Ok(())
    }

    /// The owner's answer to the greeting's `Get(Manager, UnitPath)`, once (None if it was not
    /// asked).
    pub(super) fn take_unit_path_answer(&mut self) -> Option<Result<Message, BusError>> {
        self.unit_path.take()
    }

    /// Reads the server's answer to the authentication: OK, or why not; and, where asked, its
    /// answer to passing descriptors.
    fn finish_authentication(&mut self) -> Result<(), BusError> {
        self.authenticating = false;
        let line = self.auth_line()?;
        if !line.starts_with(b"OK ") {
            return Err(BusError::Broken(format!(
                "authentication refused: {}",
                String::from_utf8_lossy(&line).trim_end()
            )));
        }
        if self.negotiates_fds {
            let line = self.auth_line()?;
            self.fds_agreed = line == b"AGREE_UNIX_FD\r\n";
            if !self.fds_agreed && !line.starts_with(b"ERROR") {
                return Err(BusError::Broken(format!(
                    "an answer to NEGOTIATE_UNIX_FD that is neither AGREE_UNIX_FD nor ERROR: {}",
                    String::from_utf8_lossy(&line).trim_end()
                )));
            }
        }
        Ok(())
    }

    /// The server's next line of the authentication, with its CRLF.
    fn auth_line(&mut self) -> Result<Vec<u8>, BusError> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                return Ok(self.buf.drain(..end + 2).collect());
            }
            if self.buf.len() > 4096 {
                return Err(BusError::Broken("no authentication reply".into()));
            }
            self.fill("authentication")?;
        }
    }

    /// The next whole message that is worth parsing: signals are skipped unparsed when none are
    /// kept, and whenever they are too large to be anything asked for.
    fn read_message(&mut self, phase: &'static str) -> Result<Message, BusError> {
        self.authenticated()?;
        loop {
            if self.skipping > 0 {
                let dropped = self.skipping.min(self.buf.len());
                self.buf.drain(..dropped);
                self.skipping -= dropped;
                if self.skipping > 0 {
                    self.fill(phase)?;
                    continue;
                }
            }
            let len = wire::message_len(&self.buf).map_err(|e| BusError::Broken(e.to_string()))?;
            match len {
                Some(len)
                    if wire::is_signal(&self.buf)
                        && (!self.keeps_signals || len > MAX_READ_WHOLE) =>
                {
                    self.skipping = len;
                }
                Some(len) if len > MAX_READ_WHOLE => {
                    return Err(BusError::Broken(format!(
                        "the peer sent a message of {len} bytes, larger than any answer asked for \
                         ({MAX_READ_WHOLE} bytes at most)"
                    )));
                }
                Some(len) if self.buf.len() >= len => {
                    let bytes = &self.buf[..len];
                    // A signal's body is parsed only when it is a `JobRemoved`: any other is
                    // dropped from its header alone.
                    let message = if wire::is_signal(bytes) {
                        wire::parse_header(bytes).and_then(|header| {
                            if self.parses_every_signal || may_be_job_removed(&header) {
                                wire::parse(bytes)
                            } else {
                                Ok(header)
                            }
                        })
                    } else {
                        wire::parse(bytes)
                    };
                    self.buf.drain(..len);
                    return message.map_err(|e| BusError::Broken(e.to_string()));
                }
                _ => self.fill(phase)?,
            }
        }
    }

    /// Sends a call and returns its serial, without waiting for the reply.
    pub(crate) fn send(
        &mut self,
        call: Call,
        destination: Option<&str>,
        path: &str,
        interface: &str,
        member: &str,
    ) -> Result<u32, BusError> {
        let bytes = self.next_message(call, destination, path, interface, member);
        self.send_all(&bytes, "sending a call")?;
        Ok(self.serial)
    }

    /// The bytes of `call` as the next message of this connection (its serial taken).
    fn next_message(
        &mut self,
        call: Call,
        destination: Option<&str>,
        path: &str,
        interface: &str,
        member: &str,
    ) -> Vec<u8> {
        self.serial += 1;
        // Nobody is started for our sake: a name without an owner is not activated.
        let flags = if destination.is_some_and(|d| d != BROKER) {
            NO_AUTO_START
        } else {
            0
        };
        call.finish(self.serial, flags, destination, path, interface, member)
    }

    /// [`Connection::send`] of a call whose descriptors ([`Call::unix_fds`], one here) are `fd`,
    /// on a connection whose server agreed to pass descriptors.
    pub(crate) fn send_with_fd(
        &mut self,
        call: Call,
        fd: BorrowedFd<'_>,
        destination: &str,
        path: &str,
        interface: &str,
        member: &str,
    ) -> Result<u32, BusError> {
        if !self.fds_agreed || call.unix_fds() != 1 {
            return Err(BusError::Broken(
                "a descriptor to send on a connection that does not pass them".into(),
            ));
        }
        let bytes = self.next_message(call, Some(destination), path, interface, member);
        // The descriptor goes with the message's first bytes; the rest follows as usual.
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let sent = loop {
            let mut control = SendAncillaryBuffer::new(&mut space);
            let fds = [fd];
            control.push(SendAncillaryMessage::ScmRights(&fds));
            match net::sendmsg(
                &self.fd,
                &[std::io::IoSlice::new(&bytes)],
                &mut control,
                SendFlags::NOSIGNAL,
            ) {
                Ok(n) => break n,
                Err(Errno::AGAIN) => self.wait(PollFlags::OUT, "sending a call")?,
                Err(Errno::INTR) => {}
                Err(e) => return Err(BusError::Broken(e.to_string())),
            }
        };
        self.send_all(&bytes[sent..], "sending a call")?;
        Ok(self.serial)
    }

    /// The reply to the call with `serial`; signals that come first are kept for
    /// [`Connection::wait_for_job`].
    pub(crate) fn reply(&mut self, serial: u32) -> Result<Message, BusError> {
        self.reply_keeping(serial, 0)
    }

    /// [`Connection::reply`], keeping the answers that come first to the `later` calls sent
    /// ahead after this one (`answers_ahead`).
    fn reply_keeping(&mut self, serial: u32, later: usize) -> Result<Message, BusError> {
        if let Some(at) = self
            .early
            .iter()
            .position(|m| m.reply_serial == Some(serial))
        {
            return answer(self.early.remove(at));
        }
        loop {
            let message = self.read_message("waiting for a reply")?;
            if !self.sent_by_a_peer_we_asked(&message) {
                continue;
            }
            match message.kind {
                Kind::Return | Kind::Error if message.reply_serial == Some(serial) => {
                    return answer(message);
                }
                Kind::Return | Kind::Error
                    if self.early.len() < later
                        && message
                            .reply_serial
                            .is_some_and(|s| s > serial && s <= self.serial) =>
                {
                    self.early.push(message);
                }
                Kind::Signal if self.signals.len() < MAX_KEPT_SIGNALS => {
                    // A job path the manager makes is short (`/org/freedesktop/systemd1/job/N`);
                    // a longer one is no job of ours and is not worth keeping.
                    if let Some(removed) = job_removed(&message).filter(|(job, result)| {
                        job.len() <= MAX_KEPT_WORD && result.len() <= MAX_KEPT_WORD
                    }) {
                        self.signals.push_back(removed);
                    }
                }
                _ => {}
            }
        }
    }

    /// Waits for the answer to the call `second`, and says whether the answer to `first` (sent
    /// before it) came first. A peer that answers its calls in order answers `first` first unless
    /// `first` never reached it whole.
    pub(super) fn answered_before(&mut self, first: u32, second: u32) -> Result<bool, BusError> {
        let mut first_answered = false;
        loop {
            let message = self.read_message("waiting for a reply")?;
            if !self.sent_by_a_peer_we_asked(&message) {
                continue;
            }
            if let Kind::Return | Kind::Error = message.kind {
                if message.reply_serial == Some(first) {
                    first_answered = true;
                } else if message.reply_serial == Some(second) {
                    return Ok(first_answered);
                }
            }
        }
    }

    /// A connection to the bus at `address` (a D-Bus address list) as a listener: authenticated
    /// and greeted (`Hello`) by `deadline`, with no manager asked for. Only the broker's messages
    /// count until [`Connection::hear_from`] names the one peer whose count too.
    pub(crate) fn listener(address: &[u8], deadline: Instant) -> Result<Self, BusError> {
        let started = Instant::now();
        let socket = connect_session(address).map_err(|no| BusError::Connect(no.why))?;
        let mut connection =
            Connection::unauthenticated(socket, true, READ_SIZE, started, deadline);
        connection.parses_every_signal = true;
        connection.send_authentication()?;
        connection.finish_authentication()?;
        let hello = connection.send_to_broker("Hello", Call::new())?;
        connection.reply(hello)?;
        Ok(connection)
    }

    /// Takes replies and signals from the bus connection `unique_name` (besides the broker's)
    /// from now on, and from no other peer.
    pub(crate) fn hear_from(&mut self, unique_name: Option<String>) {
        self.owner = unique_name;
    }

    /// A call to the bus broker itself, and its answer.
    pub(crate) fn call_broker(&mut self, member: &str, call: Call) -> Result<Message, BusError> {
        let serial = self.send_to_broker(member, call)?;
        self.reply(serial)
    }

    /// The next signal, or answer to a call sent with [`Connection::send`], from the broker or
    /// the peer named by [`Connection::hear_from`]; what any other connection sent (to us alone,
    /// or broadcast) is never returned.
    pub(crate) fn next_heard(&mut self) -> Result<Message, BusError> {
        loop {
            let message = self.read_message("waiting for a signal")?;
            if message.kind != Kind::MethodCall && self.sent_by_a_peer_we_asked(&message) {
                return Ok(message);
            }
        }
    }

    /// A second descriptor of this connection's socket, to hang it up from another thread
    /// (`shutdown`), which ends a wait in [`Connection::next_heard`] there.
    pub(crate) fn hang_up_handle(&self) -> std::io::Result<OwnedFd> {
        self.fd.try_clone()
    }

    /// Whether `message` comes from the broker or from the owner of the manager's name, the only
    /// peers this client speaks to (anything on a private socket comes from the manager). Through
    /// a broker, any other sender's reply or signal is not the manager's, and is not taken for it.
    fn sent_by_a_peer_we_asked(&self, message: &Message) -> bool {
        if !self.via_broker {
            return true;
        }
        match (&message.sender, &self.owner) {
            (Some(sender), _) if sender == BROKER => true,
            (Some(sender), Some(owner)) => sender == owner,
            _ => false,
        }
    }

    /// Sends a call to the bus broker itself; its answer comes with [`Connection::reply`].
    fn send_to_broker(&mut self, member: &str, call: Call) -> Result<u32, BusError> {
        self.send(call, Some(BROKER), "/org/freedesktop/DBus", BROKER, member)
    }

    /// A call to the manager object.
    pub(crate) fn call_manager(&mut self, member: &str, call: Call) -> Result<Message, BusError> {
        // On a pipelined connection the authentication's answer is read first: sd-bus's server
        // takes a call that came in the same read as BEGIN only at the socket's next wake-up, and
        // a short one (a question, unlike a scope's start) fits in that read whole, so it would
        // wait for the caller to hang up (seen through a relay, which hands both on at once).
        self.authenticated()?;
        let serial = self.send_manager(member, call)?;
        self.reply(serial)
    }

    /// Sends a call to the manager object; the answer comes with [`Connection::reply`], in the
    /// order the calls were sent.
    pub(crate) fn send_manager(&mut self, member: &str, call: Call) -> Result<u32, BusError> {
        self.send(call, Some(SYSTEMD), MANAGER_PATH, MANAGER, member)
    }

    /// Whether the process at the other end (the manager, or the broker) is outside this
    /// process's pid namespace: its pid reads 0 here (`SO_PEERCRED`), and a pid number of ours
    /// names another process there, or none. A process in a sandbox's or a container's pid
    /// namespace meets this; the manager then knows it only by its credentials as a sender, or
    /// by a pidfd.
    pub(crate) fn peer_outside_our_pid_namespace(&self) -> bool {
        self.peer_pid == 0
    }

    /// The pid of the process at the other end of the socket, as this process counts pids (0:
    /// outside its pid namespace).
    pub(crate) fn peer_pid(&self) -> i32 {
        self.peer_pid
    }

    /// Through a broker: the pid the broker names as the process of the connection that owns the
    /// manager's name (None on the private socket, or before the greeting named the owner).
    pub(crate) fn owner_pid_as_the_broker_names_it(&mut self) -> Result<Option<u32>, BusError> {
        let Some(owner) = self.owner.clone().filter(|_| self.via_broker) else {
            return Ok(None);
        };
        self.pid_of_connection(&owner)
    }

    /// The pid the broker names as the process of the bus connection `name`, if its answer holds
    /// one.
    fn pid_of_connection(&mut self, name: &str) -> Result<Option<u32>, BusError> {
        let reply = self.call_broker("GetConnectionUnixProcessID", Call::new().string(name))?;
        Ok(reply
            .body
            .first()
            .and_then(wire::Value::as_u64)
            .map(|pid| u32::try_from(pid).unwrap_or(0)))
    }

    /// Through a broker: the pid the broker names as this connection's process, which is what the
    /// manager is told when it asks who sent a call (`PIDs=[0]`, "the sender"). It is this
    /// process's own pid only where this process is the broker's peer and both count pids alike;
    /// through a relay (a byte relay, a sandbox's or container's bus proxy, a forwarded socket) it
    /// is the relay's, and from a pid namespace the broker is outside of, this process's pid
    /// there. None on the private socket, where the manager reads the socket's own credentials.
    pub(crate) fn sender_pid_as_the_broker_names_it(&mut self) -> Result<Option<u32>, BusError> {
        if !self.via_broker {
            return Ok(None);
        }
        if self.sender_pid.is_some() {
            return Ok(self.sender_pid);
        }
        let me = self
            .unique_name
            .clone()
            .ok_or_else(|| BusError::Broken("the broker gave this connection no name".into()))?;
        let pid = self.pid_of_connection(&me)?.ok_or_else(|| {
            BusError::Broken("the broker's GetConnectionUnixProcessID gave no pid".into())
        })?;
        self.sender_pid = Some(pid);
        Ok(self.sender_pid)
    }

    /// The object path of the unit the manager says the process `pid` (as the manager counts
    /// pids) is in; None where it is in none of the manager's units.
    pub(crate) fn unit_of_pid(&mut self, pid: u32) -> Result<Option<String>, BusError> {
        match self.call_manager("GetUnitByPID", Call::new().uint32(pid)) {
            Ok(reply) => Ok(reply.first_str().map(str::to_owned)),
            Err(BusError::Refused { name, .. })
                if name == "org.freedesktop.systemd1.NoUnitForPID"
                    || name == "org.freedesktop.systemd1.NoSuchProcess" =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The manager's own property `property` (of its `Manager` interface), asked once the
    /// authentication is answered (as [`Connection::call_manager`] asks).
    pub(crate) fn manager_property(&mut self, property: &str) -> Result<Message, BusError> {
        self.authenticated()?;
        let serial = self.send_get(MANAGER_PATH, MANAGER, property)?;
        self.reply(serial)
    }

    /// Sends `Properties.Get(interface, property)` on `path`; the answer comes with
    /// [`Connection::reply`].
    pub(crate) fn send_get(
        &mut self,
        path: &str,
        interface: &str,
        property: &str,
    ) -> Result<u32, BusError> {
        let call = Call::new().string(interface).string(property);
        self.send(call, Some(SYSTEMD), path, PROPERTIES, "Get")
    }

    /// Asks the broker to route the manager's `JobRemoved` signals to us (needed on the session
    /// bus only; the private socket gets every signal), without waiting: its answer is read
    /// before the next call's.
    pub(crate) fn subscribe_job_removed(&mut self) -> Result<(), BusError> {
        if self.via_broker {
            let rule = format!(
                "type='signal',sender='{SYSTEMD}',path='{MANAGER_PATH}',interface='{MANAGER}',member='JobRemoved'"
            );
            let serial = self.send_to_broker("AddMatch", Call::new().string(&rule))?;
            self.answers_ahead.push((serial, Ahead::Return));
        }
        Ok(())
    }

    /// Waits for the manager's `JobRemoved` for `job` and returns its result (`done`, `failed`…).
    pub(crate) fn wait_for_job(&mut self, job: &str) -> Result<String, BusError> {
        if let Some((_, result)) = self.signals.iter().find(|(removed, _)| removed == job) {
            return Ok(result.clone());
        }
        loop {
            let message = self.read_message("waiting for the scope's job")?;
            if !self.sent_by_a_peer_we_asked(&message) {
                continue;
            }
            if let Some((removed, result)) = job_removed(&message) {
                if removed == job {
                    return Ok(result);
                }
            }
        }
    }
}

/// Whether a signal's header is that of the manager's `JobRemoved(uoss)`.
fn may_be_job_removed(header: &Message) -> bool {
    header.member.as_deref() == Some("JobRemoved")
        && header.interface.as_deref() == Some(MANAGER)
        && header.signature == "uoss"
}

/// The job path and result of a `JobRemoved(id, job, unit, result)` signal.
fn job_removed(message: &Message) -> Option<(String, String)> {
    if message.kind != Kind::Signal || !may_be_job_removed(message) {
        return None;
    }
    let job = message.body.get(1)?.as_str()?;
    let result = message.body.get(3).and_then(|v| v.as_str()).unwrap_or("");
    Some((job.to_owned(), result.to_owned()))
}

/// A reply as the caller takes it: a return, or the error it carries.
fn answer(message: Message) -> Result<Message, BusError> {
    if message.kind == Kind::Return {
        Ok(message)
    } else {
        Err(BusError::Refused {
            name: message.error_name.clone().unwrap_or_default(),
            message: message.first_str().unwrap_or_default().to_owned(),
        })
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
fn connect_one(address: &Address) -> Result<Socket, Unconnected> {
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
fn peer_credentials(fd: &OwnedFd) -> nix::Result<nix::sys::socket::UnixCredentials> {
    nix::sys::socket::getsockopt(fd, nix::sys::socket::sockopt::PeerCredentials)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let name = "bus::connection::tests::a_peer_outside_our_pid_namespace_reads_as_pid_0_and_is_judged_by_its_uid";
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
}

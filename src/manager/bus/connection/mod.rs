//! One connection to the user manager, every step (connect, auth, each call, each wait) under a
//! single deadline with `poll`, so a stopped or dead manager costs a request its bound and no more.

use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::Instant;

use rustix::event::PollFlags;
use rustix::io::Errno;
use rustix::net::{self, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};

use super::connect::Socket;
use super::error::BusError;
use super::wire::{self, Call, Kind, Message, NO_AUTO_START};
use crate::bounds::wait_ready;

/// The manager's well-known name, object and interface.
pub(crate) const SYSTEMD: &str = "org.freedesktop.systemd1";
pub(crate) const MANAGER_PATH: &str = "/org/freedesktop/systemd1";
pub(crate) const MANAGER: &str = "org.freedesktop.systemd1.Manager";
pub(in crate::manager) const PROPERTIES: &str = "org.freedesktop.DBus.Properties";
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

/// An authenticated connection to the manager.
pub(crate) struct Connection {
    pub(in crate::manager) fd: OwnedFd,
    /// The pid of the process at the other end ([`Socket::peer_pid`]).
    pub(in crate::manager) peer_pid: i32,
    /// The process that opened it.
    pub(in crate::manager) opened_by: u32,
    pub(in crate::manager) buf: Vec<u8>,
    pub(in crate::manager) serial: u32,
    pub(in crate::manager) started: Instant,
    pub(in crate::manager) deadline: Instant,
    /// Through a bus broker (the session bus) rather than the manager's private socket.
    pub(crate) via_broker: bool,
    /// `JobRemoved` signals (job path, result) that arrived while waiting for a reply, kept for a
    /// later wait.
    pub(in crate::manager) signals: VecDeque<(String, String)>,
    /// Bytes of a skipped message still to come and be dropped.
    pub(in crate::manager) skipping: usize,
    /// Whether `JobRemoved` signals are kept; when not, every signal is skipped unparsed (the
    /// private socket carries every unit change of the session to every connection).
    pub(in crate::manager) keeps_signals: bool,
    /// Whether every signal's body is parsed (a listener's connection, [`Connection::next_heard`]),
    /// not only `JobRemoved`'s.
    pub(in crate::manager) parses_every_signal: bool,
    /// The most one read takes (the fuzz target makes it small, to split a peer's bytes anywhere).
    pub(in crate::manager) read_size: usize,
    /// The authentication went out and its answer is still to be read ([`Connection::open_pipelined`]).
    pub(in crate::manager) authenticating: bool,
    /// Calls sent ahead (`Hello`, `AddMatch`…, and the question that tells which manager owns
    /// the name), whose answers come before any other and must each be a return.
    pub(in crate::manager) answers_ahead: Vec<(u32, Ahead)>,
    /// Answers that came before the one being read, to calls sent ahead: kept, not dropped.
    pub(in crate::manager) early: Vec<Message>,
    /// The unique name of the bus connection that owns `org.freedesktop.systemd1` (through a
    /// broker, once greeted): only its replies and signals are taken as the manager's.
    pub(in crate::manager) owner: Option<String>,
    /// Why this connection is to the private socket although the route tries the session bus
    /// first: the session bus was passed over, for this reason.
    pub(crate) passed_over: Option<String>,
    /// This connection's unique name on the bus (through a broker, once greeted).
    pub(in crate::manager) unique_name: Option<String>,
    /// The pid the broker names as this connection's process, once asked.
    pub(in crate::manager) sender_pid: Option<u32>,
    /// The owner's answer to the greeting's `Get(Manager, UnitPath)`, until taken.
    pub(in crate::manager) unit_path: Option<Result<Message, BusError>>,
    /// The authentication asks to pass descriptors (`NEGOTIATE_UNIX_FD`).
    pub(in crate::manager) negotiates_fds: bool,
    /// The server agreed to pass descriptors.
    pub(crate) fds_agreed: bool,
}

/// What a call sent ahead asks.
pub(in crate::manager) enum Ahead {
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
pub(in crate::manager) const BROKER: &str = "org.freedesktop.DBus";

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

    pub(super) fn unauthenticated(
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
    pub(super) fn fill(&mut self, phase: &'static str) -> Result<(), BusError> {
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
    pub(super) fn send_authentication(&mut self) -> Result<(), BusError> {
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
    pub(super) fn finish_authentication(&mut self) -> Result<(), BusError> {
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
    pub(in crate::manager) fn read_message(
        &mut self,
        phase: &'static str,
    ) -> Result<Message, BusError> {
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

    /// Whether `message` comes from the broker or from the owner of the manager's name, the only
    /// peers this client speaks to (anything on a private socket comes from the manager). Through
    /// a broker, any other sender's reply or signal is not the manager's, and is not taken for it.
    pub(in crate::manager) fn sent_by_a_peer_we_asked(&self, message: &Message) -> bool {
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
    pub(in crate::manager) fn send_to_broker(
        &mut self,
        member: &str,
        call: Call,
    ) -> Result<u32, BusError> {
        self.send(call, Some(BROKER), "/org/freedesktop/DBus", BROKER, member)
    }
}

/// Whether a signal's header is that of the manager's `JobRemoved(uoss)`.
fn may_be_job_removed(header: &Message) -> bool {
    header.member.as_deref() == Some("JobRemoved")
        && header.interface.as_deref() == Some(MANAGER)
        && header.signature == "uoss"
}

/// The job path and result of a `JobRemoved(id, job, unit, result)` signal.
pub(in crate::manager) fn job_removed(message: &Message) -> Option<(String, String)> {
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

#[cfg(test)]
mod tests;

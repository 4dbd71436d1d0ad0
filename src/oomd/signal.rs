//! systemd-oomd's own word on its kills: from 252 on, it sends `Killed(cgroup, reason)` from
//! `org.freedesktop.oom1` on the system bus after each kill, `reason` naming the rule
//! (`memory-used` for the swap rule, `memory-pressure`). The bus names the sender of every message,
//! and only a privileged service may own `org.freedesktop.oom1`, so a signal whose sender is that
//! name's owner is evidence no process of the user can make, unlike the extended attributes oomd
//! writes on the cgroup, which the cgroup's owner (the user) may write too.
//!
//! A broadcast reaches only those subscribed before it was sent, so the process subscribes when
//! the first handle that may need it is made (a scope with a memory controller, which oomd needs),
//! and keeps the subscription (one system bus connection and one thread) while any such handle
//! lives; the last one dropped hangs it up. There is one per system bus a handle names
//! (`DBUS_SYSTEM_BUS_ADDRESS`), each hearing its own oomd. Its thread sets it up (connects,
//! subscribes, asks who owns oomd's name and whether it sends the signal) within 10 s; handles
//! wait for that a quarter second at most from its start, and go on with it under way: the kills
//! heard once it is done count, but its silence never does for a scope claimed before then.
//!
//! The name is followed from owner to owner, whenever it changes hands: oomd restarted, replaced
//! by an upgrade, started by D-Bus activation after the subscription (a bus where no oomd runs is
//! subscribed to all the same). A `Killed` from whoever owns the name is heard. Its silence,
//! though, says "no kill" only for a scope whose whole life the name was held by an owner whose
//! introspection lists the signal (oomd before 252 sends none): where it was not (no oomd on the
//! bus, an owner not yet or never shown to send it), the signal cannot tell, and an answer rests
//! on what else there is.
//!
//! A signal on its way is caught up with, not waited for by the clock: oomd writes its mark,
//! kills and sends the signal in one turn of its loop, and D-Bus delivers one sender's messages in
//! order, so once a mark is seen, oomd's answer to a `Peer.Ping` sent after it comes after the
//! signal of that kill, however slow the machine (a fixed wait of 500 ms was once passed under
//! memory pressure). Only the owner's answer counts; the bus's (the owner gone) tells nothing.
//!
//! A kill belongs to the scope whose cgroup it hit, by identity: oomd names the cgroup by its path
//! from the root of its cgroup namespace, the initial one, and the kill is a handle's only where
//! that path is the handle's scope's path or one below it, and the cgroup at the scope's path is,
//! as the signal is heard, the very one the handle was made for (its inode, which the kernel never
//! gives to another cgroup), or none (the scope gone since, and no other made in its place). A
//! cgroup another tool made below its own scope and named after this one, or a later scope of the
//! same name, is never taken for it. A process in a cgroup namespace of its own cannot tell where
//! oomd's paths lead, and does not rely on the signal.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::bounds::{deadline_after, wait_ready};
use crate::manager::bus::wire::{Call, Kind, Message, Value, NO_AUTO_START};
use crate::manager::bus::{BusError, Connection};
use crate::per_process::{lock, PerProcess};

/// The name systemd-oomd owns on the system bus.
const OOMD: &str = "org.freedesktop.oom1";
const OOMD_PATH: &str = "/org/freedesktop/oom1";
const OOMD_MANAGER: &str = "org.freedesktop.oom1.Manager";
/// The system bus, where `DBUS_SYSTEM_BUS_ADDRESS` names none (the D-Bus specification's default).
const SYSTEM_BUS: &str = "unix:path=/run/dbus/system_bus_socket";
/// The longest a handle being made waits for its subscription to be set up: a system bus that
/// answers answers within milliseconds. A slower one is waited for by the subscription's thread
/// alone, and the handle hears oomd's kills once it is done (a machine amid the thrash oomd acts
/// on took longer than this, and a handle that gave up then never heard the kill 12 s later).
const SETUP_WAIT: Duration = Duration::from_millis(250);
/// The longest the subscription's thread takes to set it up, or to send a question on it: past
/// it, the bus is given up.
const SETUP_BOUND: Duration = Duration::from_secs(10);
/// How long a subscription's connection waits for its next message: for as long as it is held.
const LISTENING: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
/// After a subscription could not be set up (no system bus, an oomd without the signal),
/// handles made within this long do not try that bus again.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// This process's subscription on one system bus, while a handle holds it, and when one last
/// failed there.
struct Slot {
    address: Vec<u8>,
    current: Weak<Subscription>,
    failed: Option<Instant>,
}

/// The most system buses whose subscription (or last failure) a process keeps; beyond it, those
/// no handle holds are forgotten.
const KEPT_BUSES: usize = 16;

static SLOTS: PerProcess<Mutex<Vec<Slot>>> = PerProcess::new();

/// A live subscription to oomd's `Killed` signal, and the kills heard.
#[derive(Debug)]
pub(crate) struct Subscription {
    /// The process that set it up: its thread runs there alone.
    pid: u32,
    /// When its set-up began: handles made within [`SETUP_WAIT`] of it wait for its end.
    began: Instant,
    heard: Mutex<Heard>,
    changed: Condvar,
    /// The connection's socket, once connected: an asking thread sends its ping on it, and it is
    /// hung up when the last handle lets go.
    socket: OnceLock<OwnedFd>,
    /// Held while a message is written on the socket (by the thread or an asker): none interleave.
    writing: Mutex<()>,
    /// The serial of the next ping (in the upper half, which the thread's own calls never reach).
    next_ping: AtomicU32,
}

/// The bit that marks a ping's serial apart from the thread's own calls (a handful a day).
const PING: u32 = 0x8000_0000;

/// Where a ping to oomd stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ping {
    Awaiting,
    /// oomd answered: every signal it sent before is heard.
    Answered,
    /// The bus answered instead, or the name changed hands: nothing is shown.
    Unanswered,
}

#[derive(Debug, Default)]
struct Heard {
    /// Whether the set-up has ended, either way (`broken` where it failed). Until it is done, the
    /// silence of a claim says nothing.
    settled: bool,
    /// The scopes whose kills are listened for: one claim per handle's scope, while it lives.
    claims: Vec<Weak<Claim>>,
    /// False once the connection broke: kills since are not heard.
    broken: bool,
    /// Whether the name's owner now is shown to send the signal (its introspection lists it).
    owner_signals: bool,
    /// The unique name that owns oomd's name now, as the thread last heard; None where none does.
    owner: Option<String>,
    /// The pings sent and not yet taken back by their askers.
    pings: Vec<(u32, Ping)>,
}

/// One scope's claim on the kills oomd signals: its cgroup, by path and identity, and the reason
/// of the first kill found to be its.
#[derive(Debug)]
pub(crate) struct Claim {
    /// The scope's cgroup path, from the root of the cgroup hierarchy.
    cgroup: String,
    /// The scope's cgroup directory, and its inode number.
    dir: PathBuf,
    ino: u64,
    /// The reason of oomd's kill of the scope or of a cgroup below it, once heard.
    reason: Mutex<Option<String>>,
    /// Whether, at some moment of the claim's life, the name was held by no owner shown to send
    /// the signal: its silence then says nothing.
    unsure: AtomicBool,
}

/// What oomd's signal says of a scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Said {
    /// oomd killed the scope or a cgroup below it, for this reason (which names the rule).
    Killed(String),
    /// No such kill was signalled while the subscription was live.
    Nothing,
    /// The signal cannot be relied on here (the subscription broke, or belongs to the parent of a
    /// forked child, or the name was not held throughout by an owner shown to send it).
    CannotTell,
}

impl Subscription {
    /// A claim on oomd's kills of the scope whose cgroup is `cgroup` (from the hierarchy's root),
    /// at the directory `dir` with inode number `ino`; None where the kills cannot be matched to
    /// it by identity (a cgroup namespace of this process's own).
    pub(crate) fn claim(&self, cgroup: &str, dir: &Path, ino: u64) -> Option<Arc<Claim>> {
        if !in_the_initial_cgroup_namespace() {
            return None;
        }
        let mut heard = lock(&self.heard);
        let claim = Arc::new(Claim {
            cgroup: cgroup.to_owned(),
            dir: dir.to_path_buf(),
            ino,
            reason: Mutex::new(None),
            unsure: AtomicBool::new(!heard.owner_signals),
        });
        heard.claims.retain(|claim| claim.strong_count() > 0);
        heard.claims.push(Arc::downgrade(&claim));
        Some(claim)
    }

    /// What oomd signalled of the scope of `claim`. With `catch_up_by` (a mark is on the scope,
    /// or one may have been missed), a signal still on its way is waited for until that deadline:
    /// oomd marks, kills and signals in one turn of its loop, so its answer to a ping sent now
    /// comes after any signal of a kill whose mark was already there (D-Bus keeps one sender's
    /// messages in order). Without the answer, the silence says nothing.
    pub(crate) fn said_of(&self, claim: &Claim, catch_up_by: Option<Instant>) -> Said {
        if self.pid != std::process::id() {
            return Said::CannotTell;
        }
        // A kill already heard, or a caller with no time left, needs no ping.
        let known = lock(&claim.reason).is_some();
        let catch_up_by = catch_up_by.filter(|at| !known && *at > Instant::now());
        let ping = catch_up_by.map(|deadline| (self.ping(deadline), deadline));
        let mut heard = lock(&self.heard);
        let said = loop {
            if let Some(reason) = lock(&claim.reason).clone() {
                break Said::Killed(reason);
            }
            if heard.broken {
                break Said::CannotTell;
            }
            let (serial, deadline) = match ping {
                None => break silence(claim),
                Some((None, _)) => break Said::CannotTell,
                Some((Some(serial), deadline)) => (serial, deadline),
            };
            match heard.pings.iter().find(|(sent, _)| *sent == serial) {
                Some((_, Ping::Answered)) => break silence(claim),
                Some((_, Ping::Awaiting)) => {}
                Some((_, Ping::Unanswered)) | None => break Said::CannotTell,
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break Said::CannotTell;
            }
            heard = self.wait_for_change(heard, left);
        };
        if let Some((Some(serial), _)) = ping {
            heard.pings.retain(|(sent, _)| *sent != serial);
        }
        said
    }

    /// Sends oomd's owner a `Ping` by `deadline`; its serial, or None where there is no owner or
    /// it could not be sent by then. A ping cut off midway hangs the connection up, so that no
    /// half-written message stays on it; one not begun leaves it as it was.
    fn ping(&self, deadline: Instant) -> Option<u32> {
        let serial = PING | self.next_ping.fetch_add(1, Ordering::Relaxed);
        let bytes = {
            // The owner read and the ping listed at once: a change of owner after it finds the
            // ping, which the owner before will not be heard answering.
            let mut heard = lock(&self.heard);
            let owner = heard.owner.clone()?;
            heard.pings.push((serial, Ping::Awaiting));
            Call::new().finish(
                serial,
                NO_AUTO_START,
                Some(&owner),
                OOMD_PATH,
                "org.freedesktop.DBus.Peer",
                "Ping",
            )
        };
        let socket = self.socket.get()?;
        let sent = lock_by(&self.writing, deadline)
            .map_or(Sent::None, |_writing| send_whole(socket, &bytes, deadline));
        match sent {
            Sent::Whole => return Some(serial),
            Sent::Part => {
                let _ = rustix::net::shutdown(socket, rustix::net::Shutdown::Both);
            }
            Sent::None => {}
        }
        lock(&self.heard).pings.retain(|(sent, _)| *sent != serial);
        None
    }

    /// The answer to the ping `serial`, from oomd's owner (`by_owner`) or from the bus.
    fn answered(&self, serial: u32, by_owner: bool) {
        let mut heard = lock(&self.heard);
        for (sent, state) in heard.pings.iter_mut() {
            if *sent == serial {
                *state = if by_owner {
                    Ping::Answered
                } else {
                    Ping::Unanswered
                };
            }
        }
        self.changed.notify_all();
    }

    /// Gives oomd's kill of `cgroup` to the claim whose scope it hit.
    fn hear(&self, cgroup: &str, reason: &str) {
        let mut heard = lock(&self.heard);
        heard.claims.retain(|claim| claim.strong_count() > 0);
        for claim in heard.claims.iter().filter_map(Weak::upgrade) {
            if !is_at_or_below(cgroup, &claim.cgroup) {
                continue;
            }
            if claim.is_there_or_gone() {
                lock(&claim.reason).get_or_insert_with(|| reason.to_owned());
            } else {
                // Another cgroup stands at the scope's path now: the kill may have been this
                // scope's, before it went, and cannot be told apart; its silence says nothing.
                claim.unsure.store(true, Ordering::Release);
            }
        }
        self.changed.notify_all();
    }

    /// The name changed hands (or has none now): until the new owner is shown to send the
    /// signal, the silence of every scope's claim made so far says nothing, and no ping to the
    /// one before is answered as heard.
    fn owner_changed(&self, owner: Option<String>) {
        let mut heard = lock(&self.heard);
        heard.owner_signals = false;
        heard.owner = owner;
        heard.claims.retain(|claim| claim.strong_count() > 0);
        for claim in heard.claims.iter().filter_map(Weak::upgrade) {
            claim.unsure.store(true, Ordering::Release);
        }
        for (_, state) in heard.pings.iter_mut() {
            if *state == Ping::Awaiting {
                *state = Ping::Unanswered;
            }
        }
        self.changed.notify_all();
    }

    /// The name's owner now is shown to send the signal: claims made from now on may rely on it.
    fn owner_shown(&self) {
        lock(&self.heard).owner_signals = true;
    }

    /// The set-up is done: `owner` (None where no one owns the name) and whether it is shown to
    /// send the signal.
    fn set_up(&self, owner: Option<String>, owner_signals: bool) {
        let mut heard = lock(&self.heard);
        heard.owner = owner;
        heard.owner_signals = owner_signals;
        heard.settled = true;
        self.changed.notify_all();
    }

    /// Waits by `deadline` for the set-up to end; false where it failed (or the connection broke).
    /// Still under way then, it goes on without the waiter.
    fn set_up_by(&self, deadline: Instant) -> bool {
        let mut heard = lock(&self.heard);
        while !heard.settled {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            heard = self.wait_for_change(heard, left);
        }
        !heard.broken
    }

    /// Waits at most `left` for what was heard to change, `heard` let go meanwhile.
    fn wait_for_change<'a>(
        &self,
        heard: std::sync::MutexGuard<'a, Heard>,
        left: Duration,
    ) -> std::sync::MutexGuard<'a, Heard> {
        match self.changed.wait_timeout(heard, left) {
            Ok((guard, _)) => guard,
            Err(poisoned) => poisoned.into_inner().0,
        }
    }

    fn broke(&self) {
        let mut heard = lock(&self.heard);
        heard.broken = true;
        heard.settled = true;
        self.changed.notify_all();
    }
}

/// The last handle gone, the connection is hung up, which ends its thread; a forked child's copy
/// is only closed, the connection being its parent's.
impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(socket) = self.socket.get().filter(|_| self.pid == std::process::id()) {
            let _ = rustix::net::shutdown(socket, rustix::net::Shutdown::Both);
        }
    }
}

/// What a claim's scope is told where no signal named it: no kill, where the name was held
/// throughout by an owner shown to send it; otherwise nothing can be told.
fn silence(claim: &Claim) -> Said {
    if claim.unsure.load(Ordering::Acquire) {
        Said::CannotTell
    } else {
        Said::Nothing
    }
}

/// How much of a message went out.
enum Sent {
    Whole,
    Part,
    None,
}

/// Writes all of `bytes` on the non-blocking `socket` by `deadline`.
fn send_whole(socket: &OwnedFd, bytes: &[u8], deadline: Instant) -> Sent {
    let mut left = bytes;
    let cut = |left: &[u8]| {
        if left.len() == bytes.len() {
            Sent::None
        } else {
            Sent::Part
        }
    };
    while !left.is_empty() {
        match rustix::net::send(socket, left, rustix::net::SendFlags::NOSIGNAL) {
            Ok(n) => left = &left[n..],
            Err(rustix::io::Errno::AGAIN) => {
                let time = deadline.saturating_duration_since(Instant::now());
                if time.is_zero()
                    || wait_ready(socket, rustix::event::PollFlags::OUT, time).is_err()
                {
                    return cut(left);
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return cut(left),
        }
    }
    Sent::Whole
}

/// Locks `mutex` by `deadline`; None where another holds it until then.
fn lock_by<T>(mutex: &Mutex<T>, deadline: Instant) -> Option<std::sync::MutexGuard<'_, T>> {
    loop {
        match mutex.try_lock() {
            Ok(guard) => return Some(guard),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => return Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(std::sync::TryLockError::WouldBlock) => return None,
        }
    }
}

impl Claim {
    /// Whether the cgroup at the claim's path is the one it was made for, or none: a kill heard
    /// now at that path is this scope's (gone since, with no other made in its place), not a
    /// later one's of the same name.
    fn is_there_or_gone(&self) -> bool {
        crate::kernel::cgroup::inode_at(&self.dir).map_or(true, |ino| ino == self.ino)
    }
}

/// Whether the cgroup path `killed` (oomd's, from the root of the hierarchy) is `scope` or a
/// cgroup below it: the same components, not a name found anywhere in the path.
fn is_at_or_below(killed: &str, scope: &str) -> bool {
    let scope = scope.trim_end_matches('/');
    !scope.is_empty()
        && killed
            .strip_prefix(scope)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The inode every kernel gives the initial cgroup namespace (`CGROUP_NS_INIT_INO`): only there
/// are oomd's paths (from its namespace's root, the initial one) this process's paths too.
const INITIAL_CGROUP_NAMESPACE: u64 = 0xEFFF_FFFB;

/// Whether this process is in the initial cgroup namespace.
fn in_the_initial_cgroup_namespace() -> bool {
    rustix::fs::stat("/proc/self/ns/cgroup")
        .is_ok_and(|meta| meta.st_ino == INITIAL_CGROUP_NAMESPACE)
}

/// This process's subscription to oomd's `Killed` signal, its set-up started now if there is none
/// and waited for at most [`SETUP_WAIT`]; None where none can be had (no system bus, oomd too old
/// for the signal, a thread that cannot start), or one failed a moment ago. A set-up still under
/// way is handed over all the same: the kills it hears once done count, its silence does not.
/// `env` names the system bus (`DBUS_SYSTEM_BUS_ADDRESS`).
pub(crate) fn subscription(env: &[(OsString, OsString)]) -> Option<Arc<Subscription>> {
    let subscription = current_or_started(system_bus_address(env))?;
    // Every handle waits until the same moment: on a bus that hangs, only those made within the
    // first quarter second of the set-up pay for it.
    let waited_by = subscription.began + SETUP_WAIT;
    subscription.set_up_by(waited_by).then_some(subscription)
}

/// The live subscription on the bus at `address`, or a new one whose thread sets it up.
fn current_or_started(address: Vec<u8>) -> Option<Arc<Subscription>> {
    let this_process = SLOTS.get();
    let mut slots = lock(&this_process);
    if let Some(slot) = slots.iter().find(|slot| slot.address == address) {
        // A live subscription whose connection broke hears nothing more: a new one is made.
        if let Some(live) = slot
            .current
            .upgrade()
            .filter(|live| !lock(&live.heard).broken)
        {
            return Some(live);
        }
        if slot.failed.is_some_and(|at| at.elapsed() < RETRY_AFTER) {
            return None;
        }
    }
    if slots.len() >= KEPT_BUSES {
        slots.retain(|slot| slot.current.strong_count() > 0);
    }
    let at = match slots.iter().position(|slot| slot.address == address) {
        Some(at) => at,
        None => {
            slots.push(Slot {
                address: address.clone(),
                current: Weak::new(),
                failed: None,
            });
            slots.len() - 1
        }
    };
    let subscription = Arc::new(Subscription {
        pid: std::process::id(),
        began: Instant::now(),
        heard: Mutex::new(Heard::default()),
        changed: Condvar::new(),
        socket: OnceLock::new(),
        writing: Mutex::new(()),
        next_ping: AtomicU32::new(1),
    });
    let setting_up = Arc::clone(&subscription);
    let started = std::thread::Builder::new()
        .name("synaps-oomd-signal".into())
        .spawn(move || set_up_and_listen(&address, setting_up));
    let slot = &mut slots[at];
    match started {
        Ok(_) => {
            slot.current = Arc::downgrade(&subscription);
            slot.failed = None;
            Some(subscription)
        }
        Err(why) => {
            tracing::debug!(target: crate::diag::TARGET, "oomd's Killed signal is not heard here: no thread: {why}");
            slot.failed = Some(Instant::now());
            None
        }
    }
}

/// The subscription's thread: sets it up, holding it meanwhile (so a bus that hangs has one
/// set-up under way at a time, found by every handle made meanwhile, however many came and went),
/// then hears oomd for as long as a handle holds it. A set-up that fails marks the bus failed a
/// moment, so that handles made meanwhile do not try it again.
fn set_up_and_listen(address: &[u8], subscription: Arc<Subscription>) {
    match subscribe(address, &subscription) {
        Ok(connection) => {
            let held = Arc::downgrade(&subscription);
            // Were it the last hold, the subscription hangs up here and `listen` ends at once.
            drop(subscription);
            listen(connection, &held);
        }
        Err(why) => {
            tracing::debug!(target: crate::diag::TARGET, "oomd's Killed signal is not heard here: {}", why.told_of("the system bus"));
            let this_process = SLOTS.get();
            if let Some(slot) = lock(&this_process)
                .iter_mut()
                .find(|slot| std::ptr::eq(slot.current.as_ptr(), Arc::as_ptr(&subscription)))
            {
                slot.failed = Some(Instant::now());
            }
            subscription.broke();
        }
    }
}

/// The system bus's address: `DBUS_SYSTEM_BUS_ADDRESS` of `env`, else the default.
pub(crate) fn system_bus_address(env: &[(OsString, OsString)]) -> Vec<u8> {
    env.iter()
        .find(|(k, v)| k == "DBUS_SYSTEM_BUS_ADDRESS" && !v.is_empty())
        .map_or_else(
            || SYSTEM_BUS.as_bytes().to_vec(),
            |(_, v)| v.as_bytes().to_vec(),
        )
}

/// Connects to the system bus at `address`, subscribes to oomd's `Killed` signal and to changes
/// of who owns oomd's name, and checks that oomd is there and sends the signal, within
/// [`SETUP_BOUND`]; the connection to listen on.
fn subscribe(address: &[u8], subscription: &Subscription) -> Result<Connection, BusError> {
    let mut connection = Connection::listener(address, deadline_after(SETUP_BOUND))?;
    let socket = connection
        .hang_up_handle()
        .map_err(|e| BusError::Broken(e.to_string()))?;
    let _ = subscription.socket.set(socket);
    // Subscribed before the owner is asked for, so that no kill falls between the two.
    let killed = format!(
        "type='signal',sender='{OOMD}',path='{OOMD_PATH}',interface='{OOMD_MANAGER}',member='Killed'"
    );
    let owner_changes = format!(
        "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='{OOMD}'"
    );
    connection.call_broker("AddMatch", Call::new().string(&killed))?;
    connection.call_broker("AddMatch", Call::new().string(&owner_changes))?;
    // The set-up's answers are read past any signal, `NameOwnerChanged` among them: an oomd
    // replaced meanwhile is found by asking again after its introspection, until the owner asked
    // is the one that answered and still owns the name. With no owner, the subscription waits for
    // one (oomd started later, or by D-Bus activation).
    let mut owner_signals = false;
    let mut owner_now = None;
    while let Some(owner) = name_owner(&mut connection)? {
        connection.hear_from(Some(owner.clone()));
        let serial = introspect(&mut connection, &owner)?;
        let introspection = match connection.reply(serial) {
            Ok(introspection) => introspection,
            // The owner left before it answered: ask who owns the name now.
            Err(BusError::Refused { name, .. }) if owner_left(&name) => continue,
            Err(e) => return Err(e),
        };
        if !lists_killed(introspection.first_str().unwrap_or("")) {
            return Err(BusError::Refused {
                name: "org.freedesktop.DBus.Error.UnknownMethod".into(),
                message: "systemd-oomd here sends no Killed signal (it does from 252 on)".into(),
            });
        }
        if name_owner(&mut connection)?.as_ref() == Some(&owner) {
            owner_signals = true;
            owner_now = Some(owner);
            break;
        }
    }
    if !owner_signals {
        connection.hear_from(None);
    }
    // From now on the connection waits for signals for as long as it is held.
    connection.set_deadline(Instant::now() + LISTENING);
    subscription.set_up(owner_now, owner_signals);
    Ok(connection)
}

/// Whether systemd-oomd is on the system bus `env` names (something owns its name), asked by
/// `deadline`; why it cannot be told where the bus cannot be reached.
pub(crate) fn oomd_is_there(
    env: &[(OsString, OsString)],
    deadline: Instant,
) -> Result<bool, String> {
    let address = system_bus_address(env);
    let mut connection = Connection::listener(&address, deadline).map_err(|e| {
        format!(
            "the system bus at {} cannot be reached: {e}",
            String::from_utf8_lossy(&address)
        )
    })?;
    name_owner(&mut connection)
        .map(|owner| owner.is_some())
        .map_err(|e| e.to_string())
}

/// Asks `owner` for its introspection data (the answer comes later).
fn introspect(connection: &mut Connection, owner: &str) -> Result<u32, BusError> {
    connection.send(
        Call::new(),
        Some(owner),
        OOMD_PATH,
        "org.freedesktop.DBus.Introspectable",
        "Introspect",
    )
}

/// The unique name that owns oomd's name now; None where none does.
fn name_owner(connection: &mut Connection) -> Result<Option<String>, BusError> {
    match connection.call_broker("GetNameOwner", Call::new().string(OOMD)) {
        Ok(answer) => answer
            .first_str()
            .map(|owner| Some(owner.to_owned()))
            .ok_or_else(|| BusError::Broken("GetNameOwner gave no name".into())),
        Err(BusError::Refused { name, .. }) if owner_left(&name) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether the broker's error `name` says the peer asked left the bus (or never was on it).
fn owner_left(name: &str) -> bool {
    matches!(
        name,
        "org.freedesktop.DBus.Error.NoReply"
            | "org.freedesktop.DBus.Error.ServiceUnknown"
            | "org.freedesktop.DBus.Error.NameHasNoOwner"
    )
}

/// Whether oomd's introspection data lists its `Killed` signal.
fn lists_killed(xml: &str) -> bool {
    xml.contains(&format!("<interface name=\"{OOMD_MANAGER}\">"))
        && xml.contains("<signal name=\"Killed\">")
}

/// The subscription's thread: takes in each `Killed` oomd sends, and follows the name to each new
/// owner (oomd restarted, replaced, or started by activation), asking each for its introspection
/// data; ends when the connection breaks or is hung up.
fn listen(mut connection: Connection, held: &Weak<Subscription>) {
    // The introspection asked of the owner now, not yet answered.
    let mut asked: Option<u32> = None;
    while let Ok(message) = connection.next_heard() {
        let Some(subscription) = held.upgrade() else {
            return;
        };
        if message.kind != Kind::Signal {
            match message.reply_serial {
                Some(serial) if Some(serial) == asked => {
                    asked = None;
                    if message.kind == Kind::Return
                        && lists_killed(message.first_str().unwrap_or(""))
                    {
                        subscription.owner_shown();
                    }
                }
                Some(serial) if serial & PING != 0 => {
                    let by_owner = message.sender.as_deref() != Some("org.freedesktop.DBus");
                    subscription.answered(serial, by_owner);
                }
                _ => {}
            }
            continue;
        }
        match (message.interface.as_deref(), message.member.as_deref()) {
            (Some(OOMD_MANAGER), Some("Killed")) => {
                if let Some((cgroup, reason)) = killed(&message) {
                    tracing::debug!(target: crate::diag::TARGET, "systemd-oomd killed {cgroup} ({reason})");
                    subscription.hear(&cgroup, &reason);
                }
            }
            (Some("org.freedesktop.DBus"), Some("NameOwnerChanged"))
                if message.first_str() == Some(OOMD) =>
            {
                let new_owner = message.body.get(2).and_then(Value::as_str).unwrap_or("");
                let new_owner = (!new_owner.is_empty()).then(|| new_owner.to_owned());
                subscription.owner_changed(new_owner.clone());
                connection.hear_from(new_owner.clone());
                asked = None;
                if let Some(new_owner) = new_owner {
                    // The question goes out within the set-up's bound, or the connection is given
                    // up (a bus that no longer reads it), never held for good.
                    let _writing = lock(&subscription.writing);
                    connection.set_deadline(deadline_after(SETUP_BOUND));
                    let asking = introspect(&mut connection, &new_owner);
                    connection.set_deadline(Instant::now() + LISTENING);
                    match asking {
                        Ok(serial) => asked = Some(serial),
                        Err(_) => break,
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(subscription) = held.upgrade() {
        subscription.broke();
    }
}

/// The cgroup and reason of a `Killed(ss)` signal.
fn killed(signal: &Message) -> Option<(String, String)> {
    if signal.signature != "ss" {
        return None;
    }
    let cgroup = signal.body.first()?.as_str()?;
    let reason = signal.body.get(1)?.as_str()?;
    Some((cgroup.to_owned(), reason.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kill_is_the_scopes_only_at_its_path_or_below_it() {
        let unit = "synaps-tool-0123456789abcdef0123456789abcdef.scope";
        let scope = format!("/user.slice/user-1000.slice/user@1000.service/app.slice/{unit}");
        assert!(is_at_or_below(&scope, &scope));
        assert!(is_at_or_below(&format!("{scope}/leaf/deeper"), &scope));
        assert!(!is_at_or_below(&format!("{scope}x"), &scope));
        assert!(!is_at_or_below("/user.slice", &scope));
        assert!(!is_at_or_below("/", ""));
        // Another tool's cgroup named after this scope, below that tool's own scope or spelling
        // out this scope's whole path there: not this scope's.
        let other = "/user.slice/user-1000.slice/user@1000.service/app.slice/synaps-tool-aa.scope";
        assert!(!is_at_or_below(&format!("{other}/{unit}"), &scope));
        assert!(!is_at_or_below(&format!("{other}{scope}"), &scope));
        assert!(!is_at_or_below(&format!("/app.slice/{unit}"), &scope));
    }

    #[test]
    fn only_an_introspection_with_the_signal_counts() {
        let with = r#"<node><interface name="org.freedesktop.oom1.Manager"><method name="DumpByFileDescriptor"><arg type="h" direction="out"/></method><signal name="Killed"><arg type="s" name="cgroup"/><arg type="s" name="reason"/></signal></interface></node>"#;
        let without = r#"<node><interface name="org.freedesktop.oom1.Manager"><method name="DumpByFileDescriptor"/></interface></node>"#;
        assert!(lists_killed(with));
        assert!(!lists_killed(without));
    }
}

//! Turns: one conversation with the user manager at a time, per user, across every process that
//! uses this library, so that a burst of launches is scoped as a single one is.
//!
//! The manager runs jobs (a scope's start among them) only when no message is waiting on any of
//! its connections: its run queue has the lowest priority of its event loop (systemd
//! src/core/manager.h, `EVENT_PRIORITY_RUN_QUEUE`). Launchers that all talk at once keep it
//! answering for as long as the burst lasts, and it starts no scope until the last of them has
//! spoken: of 256 launcher programs started at once here, the first was moved into its scope
//! after 2 to 6 s, past the bound of most of them. Taking turns, each scope's start job runs in
//! the gap before the next turn's first message, and the manager's moves of processes into
//! their scopes come a few milliseconds apart, where the kernel makes them cheap (the first move
//! after a pause waits for an RCU grace period, 7 to 16 ms here; those that follow within one
//! take about 0.1 ms).
//!
//! Turns come in the order they were asked for, across processes: a request draws a ticket, and
//! its turn comes once every earlier ticket has ended. A ticket is one byte of
//! `$XDG_RUNTIME_DIR/synaps-scope.turn`, locked by its holder (an open file description lock,
//! `F_OFD_SETLK`) from the draw to the end of its turn. The kernel releases it however its holder
//! ends, so a ticket whose holder died holds no one back. The file's header counts the tickets
//! drawn and names the last whose turn came; it is read and written under a lock of its own, held
//! for the few system calls of a draw. Waiting costs no CPU: a ticket waits (in one thread per
//! process) blocked on the lock of the live ticket just ahead of it, so the end of a turn wakes
//! the next in line and no other. An `flock`, which these turns were before, wakes every waiter
//! and lets the first to run win: in a burst of 256, one launch lost every draw for 2.7 s while
//! the others went through, and ran before its scope was made. Within a process, requests are
//! served in the order they came, one ticket at a time. A turn is held from the connection to the
//! last answer the conversation needs, never while waiting for a job.
//!
//! Each turn counts itself in the lock file, so that waiters see the turns go round. A request
//! waits for its turn as long as they do, until a tenth of the time left to its deadline, at most
//! 100 ms, remains for the conversation. When no turn has begun for [`STALL`] (a holder stopped in
//! the middle of its turn, a manager that stopped answering), it talks to the manager anyway.
//! When the turns go round but its own has not come in that time, the manager is busier than the
//! request's bound allows: the request ends as one the manager did not answer in time would,
//! rather than crowd in and hold back every turn that is going round. A ticket outlives a request
//! that stopped waiting for it: it goes to the process's next request, or is given up when its
//! turn comes and no request is left, so the tickets behind it lose nothing. A thread already in
//! a turn takes no second one, and a caller can keep the turn of one conversation for the next
//! ([`keeping`]: a probe, then a scope made in place).

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::marker::PhantomData;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg};
use nix::libc;
use rustix::fs::{self, Mode, OFlags};

use super::Route;
use crate::per_process::{lock, lock_if_free, PerProcess};

/// The turn lock's name in the runtime directory.
const LOCK_NAME: &str = "synaps-scope.turn";
/// How long the turns may stand still before a waiting request stops waiting: a turn takes a
/// few milliseconds (a connection, an authentication and a call or two), tens under load.
const STALL: Duration = Duration::from_millis(500);
/// The most of a request's time kept for its conversation once its turn has come.
const RESERVE: Duration = Duration::from_millis(100);
/// How often a waiting request looks whether the turns go round.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// Where the lock file counts the turns taken (little-endian u64, as every field).
const TURNS_AT: u64 = 0;
/// Where it keeps the number of the next ticket.
const NEXT_AT: u64 = 8;
/// Where it keeps the number of the last ticket whose turn came.
const SERVED_AT: u64 = 16;
/// The header's length: the fields above, locked together.
const HEADER_LEN: u64 = 24;
/// Where the tickets' bytes begin: ticket `n`'s is at `PLACES_AT + n % PLACES`.
const PLACES_AT: u64 = 4096;
/// How many tickets can wait at once; a request that finds its ticket's byte still held by one
/// drawn this many tickets earlier talks to the manager without a turn.
const PLACES: u64 = 4096;
/// How long a draw first sleeps between tries while another holds the header (for a few system
/// calls); each sleep doubles, up to [`HEADER_RETRY_MAX`], so that a holder that stopped costs a
/// waiter a few dozen wake-ups before [`STALL`] ends the wait.
const HEADER_RETRY: Duration = Duration::from_micros(200);
const HEADER_RETRY_MAX: Duration = Duration::from_millis(10);

thread_local! {
    /// How many turns this thread is in (the outermost holds the ticket).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Whether the outermost turn that ends on this thread is kept ([`keeping`]).
    static KEEP: Cell<bool> = const { Cell::new(false) };
    /// The turn kept.
    static KEPT: RefCell<Option<(Ticket, Arc<Local>)>> = const { RefCell::new(None) };
}

/// The turns went round, but this request's did not come within its time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NoTurn {
    /// How long the request waited.
    pub(crate) waited: Duration,
}

/// A turn to talk to the manager, held until dropped.
#[must_use = "a turn ends when it is dropped"]
pub(crate) struct Turn {
    /// The ticket whose turn this is, and the process's side of the lock; None when the turn holds
    /// no ticket (nested in another, none could be had, or the wait was given up).
    held: Option<(Ticket, Arc<Local>)>,
    /// A turn ends on the thread that took it (it counts in that thread's [`DEPTH`]).
    _not_send: PhantomData<*const ()>,
}

impl Turn {
    fn unheld() -> Self {
        Turn {
            held: None,
            _not_send: PhantomData,
        }
    }

    /// Whether this turn holds a ticket.
    #[cfg(test)]
    fn is_held(&self) -> bool {
        self.held.is_some()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let depth = DEPTH.with(|depth| {
            depth.set(depth.get().saturating_sub(1));
            depth.get()
        });
        if depth == 0 && KEEP.with(Cell::get) {
            if let Some(held) = self.held.take() {
                KEPT.with(|kept| *kept.borrow_mut() = Some(held));
                return;
            }
        }
        if let Some((ticket, local)) = self.held.take() {
            let mut state = local.state();
            state.drawn = false;
            // The next ticket's holder wakes now.
            drop(ticket);
            drop(state);
            local.changed.notify_all();
        }
    }
}

/// A place in the queue: its byte of the lock file, locked until the ticket is dropped.
struct Ticket {
    number: u64,
    file: OwnedFd,
    /// The process that drew it.
    pid: u32,
}

impl Ticket {
    fn new(number: u64, file: OwnedFd) -> Self {
        Ticket {
            number,
            file,
            pid: std::process::id(),
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // Unlocked, not only closed: a child forked meanwhile shares the open file, and would
        // otherwise hold the ticket for as long as it lives. A forked child's copy of a ticket is
        // only closed: the ticket is its parent's.
        if self.pid == std::process::id() {
            let _ = set_lock(&self.file, Lock::Unlock, Span::Place(self.number), false);
        }
    }
}

/// One process's side of one turn lock.
struct Local {
    path: OsString,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// The process's ticket whose turn has come, not yet handed to a request.
    ready: Option<Ticket>,
    /// The process holds a ticket: waiting for its turn, ready, or in a request's turn.
    drawn: bool,
    /// Why the wait for the process's last ticket failed, for the next request to say.
    failed: Option<Errno>,
    /// The requests waiting for a turn, by the order they came in.
    waiting: BTreeSet<u64>,
    /// The number of the next request to come.
    arrivals: u64,
}

impl Local {
    fn new(path: OsString) -> Arc<Self> {
        Arc::new(Local {
            path,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Nothing of this process uses it: no request, no waiting thread, no ticket.
    fn unused(self: &Arc<Self>) -> bool {
        Arc::strong_count(self) == 1
            && lock_if_free(&self.state).is_some_and(|state| !state.drawn && state.ready.is_none())
    }
}

/// The most turn locks (runtime directories) a process keeps its side of; beyond it, unused ones
/// are forgotten, so a host that names ever new runtime directories keeps flat memory and time.
const LOCALS_KEPT: usize = 16;

static LOCALS: PerProcess<Mutex<Vec<Arc<Local>>>> = PerProcess::new();

/// This process's side of the lock at `path`. A forked child starts afresh: its parent's tickets
/// and waiting threads are not its own.
fn local_for(path: OsString) -> Arc<Local> {
    let all = LOCALS.get();
    let mut locals = lock(&all);
    if let Some(local) = locals.iter().find(|local| local.path == path) {
        return Arc::clone(local);
    }
    if locals.len() >= LOCALS_KEPT {
        locals.retain(|local| !local.unused());
    }
    let local = Local::new(path);
    locals.push(Arc::clone(&local));
    local
}

fn open_lock(path: &OsString) -> rustix::io::Result<OwnedFd> {
    fs::open(
        path,
        OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NOCTTY,
        Mode::RUSR | Mode::WUSR,
    )
}

/// Waits for this request's turn to talk to the manager on `route`, for as long as the turns go
/// round, until a tenth of the time left until `deadline`, at most 100 ms, remains. Routes
/// without a runtime directory (the session bus alone) take no turns; nor does a thread already
/// in one.
///
/// # Errors
/// [`NoTurn`] when the turns went round all that time without this request's.
pub(crate) fn take(route: &Route, deadline: Instant) -> Result<Turn, NoTurn> {
    if enter() > 0 {
        return Ok(Turn::unheld());
    }
    let Some(dir) = route.runtime_dir() else {
        return Ok(Turn::unheld());
    };
    let mut path = dir.to_owned();
    path.push("/");
    path.push(LOCK_NAME);
    take_in(&local_for(path), deadline)
}

/// Counts a turn begun on this thread; how many it was in before.
fn enter() -> usize {
    DEPTH.with(|depth| depth.replace(depth.get() + 1))
}

/// [`take`] with the process's side of the lock given.
fn take_in(local: &Arc<Local>, deadline: Instant) -> Result<Turn, NoTurn> {
    let started = Instant::now();
    // A tenth of the time left, at most 100 ms, is kept for the conversation itself (a turn's
    // takes milliseconds).
    let left = deadline.saturating_duration_since(started);
    let give_up = started + left - (left / 10).min(RESERVE);
    // What the lock file says of the turns taken, read while waiting.
    let counter = open_lock(&local.path).ok();
    let mut turns_seen = counter.as_ref().map(turns_taken);
    let mut last_turn = started;
    let mut moved = false;
    let mut state = local.state();
    let me = state.arrivals;
    state.arrivals += 1;
    state.waiting.insert(me);
    let outcome = loop {
        if state.waiting.first() == Some(&me) {
            if let Some(ticket) = state.ready.take() {
                break Waited::Turn(ticket);
            }
            if let Some(e) = state.failed.take() {
                break Waited::WithoutTurn(format!("turn lock: {e}"));
            }
            if !state.drawn {
                state.drawn = true;
                drop(state);
                let drawn = draw(&local.path, give_up.min(Instant::now() + STALL));
                state = local.state();
                match drawn {
                    Ok(Some(Drawn::Now(ticket))) => break Waited::Turn(ticket),
                    Ok(Some(Drawn::Behind(ticket, ahead))) => {
                        if !wait_behind(local, ticket, ahead) {
                            state.drawn = false;
                            break Waited::WithoutTurn("no thread to wait in".to_owned());
                        }
                    }
                    Ok(Some(Drawn::Crowded)) => {
                        state.drawn = false;
                        break Waited::WithoutTurn(format!(
                            "{PLACES} or more requests wait for a turn"
                        ));
                    }
                    // The header stayed locked for as long as turns may stand still (a holder
                    // stopped or hostile), or until it was time to give up (the looks below end
                    // the wait).
                    Ok(None) => {
                        state.drawn = false;
                        if Instant::now() < give_up {
                            break Waited::WithoutTurn(format!(
                                "the turn file's header stayed locked for {} ms",
                                STALL.as_millis()
                            ));
                        }
                    }
                    Err(e) => {
                        state.drawn = false;
                        break Waited::WithoutTurn(format!("turn lock: {e}"));
                    }
                }
            }
        }
        let now = Instant::now();
        let turns = counter.as_ref().map(turns_taken);
        if turns != turns_seen {
            turns_seen = turns;
            last_turn = now;
            moved = true;
        }
        if now >= give_up && moved {
            break Waited::TimedOut(now.duration_since(started));
        }
        if now >= give_up || now.duration_since(last_turn) >= STALL {
            break Waited::WithoutTurn(format!(
                "no turn has begun for {} ms",
                now.duration_since(last_turn).as_millis()
            ));
        }
        let wake = give_up.min(now + LOOK_EVERY);
        state = local
            .changed
            .wait_timeout(state, wake - now)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    };
    state.waiting.remove(&me);
    let not_had = match outcome {
        Waited::Turn(ticket) => {
            drop(state);
            count_turn(&ticket.file);
            return Ok(Turn {
                held: Some((ticket, Arc::clone(local))),
                _not_send: PhantomData,
            });
        }
        Waited::WithoutTurn(why) => Ok(why),
        Waited::TimedOut(waited) => Err(NoTurn { waited }),
    };
    // A ticket whose turn came with no request left to take it is given up; one still waiting
    // goes to the next request.
    if state.waiting.is_empty() && state.ready.take().is_some() {
        state.drawn = false;
    }
    drop(state);
    local.changed.notify_all();
    match not_had {
        Ok(why) => {
            tracing::debug!(target: crate::diag::TARGET, "{why}; talking to the manager without a turn");
            Ok(Turn::unheld())
        }
        Err(no) => {
            // This take counted in DEPTH; no turn came of it.
            DEPTH.with(|depth| depth.set(depth.get().saturating_sub(1)));
            Err(no)
        }
    }
}

/// What a wait for a turn came to.
enum Waited {
    Turn(Ticket),
    WithoutTurn(String),
    TimedOut(Duration),
}
/// A ticket drawn.
enum Drawn {
    /// Its turn has come: no earlier ticket is held.
    Now(Ticket),
    /// Its turn comes after the ticket numbered here (the latest earlier one still held) ends.
    Behind(Ticket, u64),
    /// Its byte is still held by a ticket drawn [`PLACES`] earlier.
    Crowded,
}

/// Draws the next ticket from the lock file at `path`; None when another held the header until
/// `stop`.
fn draw(path: &OsString, stop: Instant) -> Result<Option<Drawn>, Errno> {
    let file = open_lock(path).map_err(|e| Errno::from_raw(e.raw_os_error()))?;
    let Some(header) = Header::lock_by(&file, stop)? else {
        return Ok(None);
    };
    let number = header.read(NEXT_AT);
    if !set_lock(&file, Lock::Write, Span::Place(number), false)? {
        return Ok(Some(Drawn::Crowded));
    }
    header.write(NEXT_AT, number.wrapping_add(1));
    let ahead = header.held_ahead_of(number);
    if let Ok(None) = ahead {
        header.write(SERVED_AT, number);
    }
    drop(header);
    let ticket = Ticket::new(number, file);
    Ok(Some(match ahead? {
        None => Drawn::Now(ticket),
        Some(ahead) => Drawn::Behind(ticket, ahead),
    }))
}

/// Starts this process's thread that waits for `ticket`'s turn, behind the ticket numbered
/// `ahead`, and hands it to the process's next waiting request (or gives it up if none is left).
/// Whether it started.
fn wait_behind(local: &Arc<Local>, ticket: Ticket, ahead: u64) -> bool {
    let local = Arc::clone(local);
    std::thread::Builder::new()
        .name("synaps-scope turn".into())
        .spawn(move || {
            let came = wait_for_turn(&ticket, ahead);
            let mut state = local.state();
            match came {
                Ok(()) if !state.waiting.is_empty() => state.ready = Some(ticket),
                Ok(()) => {
                    state.drawn = false;
                    drop(ticket);
                }
                Err(e) => {
                    state.drawn = false;
                    state.failed = Some(e);
                    drop(ticket);
                }
            }
            drop(state);
            local.changed.notify_all();
        })
        .is_ok()
}

/// Blocks until every ticket before `ticket` has ended, waiting on the latest one still held
/// (first the one numbered `ahead`), and records that its turn came.
fn wait_for_turn(ticket: &Ticket, mut ahead: u64) -> Result<(), Errno> {
    loop {
        // A read lock is granted once the ticket ahead is unlocked: it ended, however.
        set_lock(&ticket.file, Lock::Read, Span::Place(ahead), true)?;
        set_lock(&ticket.file, Lock::Unlock, Span::Place(ahead), false)?;
        let header = Header::wait(&ticket.file)?;
        match header.held_ahead_of(ticket.number)? {
            Some(next) => ahead = next,
            None => {
                header.write(SERVED_AT, ticket.number);
                return Ok(());
            }
        }
    }
}

/// The lock file's header, locked until dropped.
struct Header<'a> {
    file: &'a OwnedFd,
}

impl<'a> Header<'a> {
    /// Locks the header through `file`, waiting as long as it takes (for a thread that only
    /// waits).
    fn wait(file: &'a OwnedFd) -> Result<Self, Errno> {
        set_lock(file, Lock::Write, Span::Header, true)?;
        Ok(Header { file })
    }

    /// Locks the header through `file`, trying until `stop`; None when that passed.
    fn lock_by(file: &'a OwnedFd, stop: Instant) -> Result<Option<Self>, Errno> {
        let mut pause = HEADER_RETRY;
        loop {
            if set_lock(file, Lock::Write, Span::Header, false)? {
                return Ok(Some(Header { file }));
            }
            let now = Instant::now();
            if now >= stop {
                return Ok(None);
            }
            std::thread::sleep(pause.min(stop - now));
            pause = (pause * 2).min(HEADER_RETRY_MAX);
        }
    }

    fn read(&self, at: u64) -> u64 {
        read_field(self.file, at)
    }

    fn write(&self, at: u64, value: u64) {
        // Best effort: a field not written costs waiters time (a ticket that looks held ahead of
        // them), never a turn taken twice at once, which the tickets' own locks rule out.
        let _ = rustix::io::pwrite(self.file, &value.to_le_bytes(), at);
    }

    /// The latest ticket before `number`, from the last served on, that its holder still holds.
    fn held_ahead_of(&self, number: u64) -> Result<Option<u64>, Errno> {
        let served = self.read(SERVED_AT);
        // Tickets more than PLACES back share bytes with later ones; they ended long ago.
        let oldest = served.max(number.saturating_sub(PLACES - 1));
        for earlier in (oldest..number).rev() {
            if is_locked(self.file, Span::Place(earlier))? {
                return Ok(Some(earlier));
            }
        }
        Ok(None)
    }
}

impl Drop for Header<'_> {
    fn drop(&mut self) {
        let _ = set_lock(self.file, Lock::Unlock, Span::Header, false);
    }
}

/// A part of the lock file that is locked on its own.
#[derive(Clone, Copy)]
enum Span {
    Header,
    /// A ticket's byte.
    Place(u64),
}

#[derive(Clone, Copy)]
enum Lock {
    Read,
    Write,
    Unlock,
}

/// An open file description lock request for `span`.
fn request(lock: Lock, span: Span) -> libc::flock {
    let (start, len) = match span {
        Span::Header => (0, HEADER_LEN),
        Span::Place(number) => (PLACES_AT + number % PLACES, 1),
    };
    let kind = match lock {
        Lock::Read => libc::F_RDLCK,
        Lock::Write => libc::F_WRLCK,
        Lock::Unlock => libc::F_UNLCK,
    };
    libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        // Both fit: the file's locks end before 8 KiB.
        l_start: start as libc::off_t,
        l_len: len as libc::off_t,
        l_pid: 0,
    }
}

/// Sets `lock` on `span` of `file`, waiting for a conflicting lock to go if `wait`; whether it
/// was set (false: another holds a conflicting one).
fn set_lock(file: &OwnedFd, lock: Lock, span: Span, wait: bool) -> Result<bool, Errno> {
    let request = request(lock, span);
    loop {
        let arg = if wait {
            FcntlArg::F_OFD_SETLKW(&request)
        } else {
            FcntlArg::F_OFD_SETLK(&request)
        };
        match fcntl(file, arg) {
            Ok(_) => return Ok(true),
            Err(Errno::EINTR) => continue,
            Err(Errno::EAGAIN | Errno::EACCES) if !wait => return Ok(false),
            Err(e) => return Err(e),
        }
    }
}

/// Whether another open file holds a write lock on `span` of `file`.
fn is_locked(file: &OwnedFd, span: Span) -> Result<bool, Errno> {
    let mut probe = request(Lock::Read, span);
    fcntl(file, FcntlArg::F_OFD_GETLK(&mut probe))?;
    Ok(i32::from(probe.l_type) != libc::F_UNLCK)
}

/// Runs `first` keeping the turn it ends on this thread, if it held one, for what the caller does
/// next (a scope made in place after the probe): returned, held, instead of released.
pub(crate) fn keeping<T>(first: impl FnOnce() -> T) -> (T, Option<Turn>) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            KEEP.with(|keep| keep.set(false));
        }
    }
    let reset = Reset;
    KEEP.with(|keep| keep.set(true));
    let out = first();
    drop(reset);
    let kept = KEPT.with(|kept| kept.borrow_mut().take()).map(|held| {
        DEPTH.with(|depth| depth.set(depth.get() + 1));
        Turn {
            held: Some(held),
            _not_send: PhantomData,
        }
    });
    (out, kept)
}

/// A field of the lock file's header (0 where the file is shorter).
fn read_field(file: &OwnedFd, at: u64) -> u64 {
    let mut field = [0u8; 8];
    match rustix::io::pread(file, &mut field, at) {
        Ok(8) => u64::from_le_bytes(field),
        _ => 0,
    }
}

/// How many turns the lock file says were taken (it wraps; only changes matter).
fn turns_taken(file: &OwnedFd) -> u64 {
    read_field(file, TURNS_AT)
}

/// Counts one more turn in the lock file, by the turn's holder (best effort: waiters that cannot
/// see the turns go round only stop waiting sooner).
fn count_turn(file: &OwnedFd) {
    let next = turns_taken(file).wrapping_add(1);
    let _ = rustix::io::pwrite(file, &next.to_le_bytes(), TURNS_AT);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::Fallback;
    use std::time::Duration;

    fn route_in(dir: &std::path::Path) -> Route {
        let env = [(
            OsString::from("XDG_RUNTIME_DIR"),
            dir.as_os_str().to_owned(),
        )];
        Route::from_env(&env, Fallback::Since257)
    }

    /// A turn taken as another process would take it: through a side of the lock of its own.
    fn take_as(local: &Arc<Local>, deadline: Instant) -> Result<Turn, NoTurn> {
        enter();
        take_in(local, deadline)
    }

    /// A ticket drawn and held by the test itself, as a process that is not this library's
    /// request would (one stopped mid-turn, or about to die).
    fn foreign_ticket(path: &OsString) -> (Ticket, bool) {
        match draw(path, Instant::now() + Duration::from_secs(1)) {
            Ok(Some(Drawn::Now(ticket))) => (ticket, true),
            Ok(Some(Drawn::Behind(ticket, _))) => (ticket, false),
            _ => panic!("no ticket drawn"),
        }
    }

    /// Waits until `count` tickets have been drawn from the lock file at `path`.
    fn until_drawn(path: &OsString, count: u64) {
        let file = open_lock(path).unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        while read_field(&file, NEXT_AT) < count {
            assert!(
                Instant::now() < until,
                "tickets drawn: {}",
                read_field(&file, NEXT_AT)
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn scratch(label: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("synaps-turn-{label}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn one_turn_at_a_time_and_the_next_follows_at_once() {
        let dir = scratch("order");
        let route = route_in(&dir);
        let far = Instant::now() + Duration::from_secs(10);
        let first = take(&route, far).unwrap();
        assert!(first.is_held());
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let route = route.clone();
                std::thread::spawn(move || {
                    let turn = take(&route, Instant::now() + Duration::from_secs(10)).unwrap();
                    let got = Instant::now();
                    std::thread::sleep(Duration::from_millis(5));
                    (turn.is_held(), got)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        let released = Instant::now();
        drop(first);
        let mut got: Vec<Instant> = waiters
            .into_iter()
            .map(|w| {
                let (held, got) = w.join().unwrap();
                assert!(held, "every waiter got a turn of its own");
                got
            })
            .collect();
        got.sort();
        assert!(got[0] >= released, "none before the release");
        for pair in got.windows(2) {
            assert!(
                pair[1] - pair[0] >= Duration::from_millis(5),
                "one at a time"
            );
        }
        assert!(
            got[7] - released < Duration::from_millis(200),
            "{:?} for eight 5 ms turns",
            got[7] - released
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_turn_stuck_in_another_process_delays_a_request_by_the_stall_only() {
        let dir = scratch("stall");
        let route = route_in(&dir);
        let path = dir.join(LOCK_NAME).into_os_string();
        // Another process's ticket, its turn come and never ended while this lasts.
        let (stuck, now) = foreign_ticket(&path);
        assert!(now);
        let started = Instant::now();
        let turn = take(&route, started + Duration::from_secs(3)).unwrap();
        let waited = started.elapsed();
        assert!(!turn.is_held(), "talks without a turn");
        assert!(
            waited >= STALL && waited < STALL + LOOK_EVERY * 3,
            "{waited:?}"
        );
        drop(turn);
        // A short bound ends the wait sooner, leaving a tenth of it for the conversation.
        let started = Instant::now();
        let turn = take(&route, started + Duration::from_millis(400)).unwrap();
        assert!(!turn.is_held());
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(360) && waited < Duration::from_millis(400),
            "{waited:?}"
        );
        drop(turn);
        // Once the holder is gone, turns are had again.
        drop(stuck);
        let again = take(&route, Instant::now() + Duration::from_secs(2)).unwrap();
        assert!(again.is_held());
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// The CPU time this thread has used so far.
    fn thread_cpu() -> Duration {
        let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
        let on_cpu = schedstat.split_whitespace().next().unwrap();
        Duration::from_nanos(on_cpu.parse().unwrap())
    }

    #[test]
    fn a_header_held_by_a_stopped_process_delays_a_request_by_the_stall_only_at_no_cost() {
        let dir = scratch("header");
        let route = route_in(&dir);
        let path = dir.join(LOCK_NAME).into_os_string();
        // Another process's lock on the header, as one stopped in the middle of a draw holds it.
        let file = open_lock(&path).unwrap();
        let held = Header::wait(&file).unwrap();
        let cpu = thread_cpu();
        let started = Instant::now();
        let turn = take(&route, started + Duration::from_secs(3)).unwrap();
        let waited = started.elapsed();
        let burnt = thread_cpu() - cpu;
        assert!(!turn.is_held(), "talks without a turn");
        assert!(
            waited >= STALL && waited < STALL + LOOK_EVERY * 3,
            "{waited:?}"
        );
        assert!(burnt < Duration::from_millis(25), "{burnt:?} of CPU");
        drop(turn);
        drop(held);
        let again = take(&route, Instant::now() + Duration::from_secs(2)).unwrap();
        assert!(again.is_held());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_sides_of_the_locks_a_process_keeps_are_bounded_in_number_and_time() {
        let timed = |from: usize| {
            let started = Instant::now();
            for i in from..from + 1000 {
                drop(local_for(OsString::from(format!(
                    "/nowhere/{i}/{LOCK_NAME}"
                ))));
            }
            started.elapsed()
        };
        let first = timed(0);
        for from in (1000..100_000).step_by(1000) {
            timed(from);
        }
        let last = timed(100_000);
        // Other tests of this process may hold a few sides of their own meanwhile.
        assert!(lock(&LOCALS.get()).len() <= LOCALS_KEPT * 2);
        assert!(
            last < first * 3 + Duration::from_millis(5),
            "{first:?}, then {last:?}"
        );
    }

    /// While a turn is held through `first`, 16 requests ask one after another, each through the
    /// side of the lock `side(i)` gives it, and each only once `asked(i)` has seen the one before
    /// it wait; the order in which their turns came.
    fn order_of_turns(
        first: &Arc<Local>,
        side: impl Fn(usize) -> Arc<Local>,
        asked: impl Fn(usize),
    ) -> Vec<usize> {
        let far = || Instant::now() + Duration::from_secs(10);
        let held = take_as(first, far()).unwrap();
        assert!(held.is_held());
        let order = Arc::new(Mutex::new(Vec::new()));
        let waiters: Vec<_> = (0..16)
            .map(|i| {
                let local = side(i);
                let order = Arc::clone(&order);
                let waiter = std::thread::spawn(move || {
                    let turn = take_as(&local, far()).unwrap();
                    assert!(turn.is_held(), "request {i} got a turn of its own");
                    order.lock().unwrap().push(i);
                    std::thread::sleep(Duration::from_millis(2));
                });
                asked(i);
                waiter
            })
            .collect();
        drop(held);
        for waiter in waiters {
            waiter.join().unwrap();
        }
        let order = order.lock().unwrap().clone();
        order
    }

    #[test]
    fn turns_come_in_the_order_they_were_asked_for_across_processes() {
        let dir = scratch("fifo");
        let path = dir.join(LOCK_NAME).into_os_string();
        let order = order_of_turns(
            &Local::new(path.clone()),
            |_| Local::new(path.clone()),
            // The first turn's ticket, then one more for each request that asked.
            |i| until_drawn(&path, i as u64 + 2),
        );
        assert_eq!(order, (0..16).collect::<Vec<_>>());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn requests_of_one_process_are_served_in_the_order_they_came() {
        let dir = scratch("local-fifo");
        let local = Local::new(dir.join(LOCK_NAME).into_os_string());
        let order = order_of_turns(
            &local,
            |_| Arc::clone(&local),
            |i| {
                while local.state().waiting.len() < i + 1 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            },
        );
        assert_eq!(order, (0..16).collect::<Vec<_>>());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_ticket_whose_holder_died_or_stopped_waiting_holds_no_one_back() {
        let dir = scratch("ended");
        let path = dir.join(LOCK_NAME).into_os_string();
        let far = || Instant::now() + Duration::from_secs(10);
        let first = take_as(&Local::new(path.clone()), far()).unwrap();
        // Behind it: a process that dies while it waits ...
        let (dies, now) = foreign_ticket(&path);
        assert!(!now);
        // ... a request that stops waiting (its bound is short, and no turn goes round) ...
        let gives_up = Local::new(path.clone());
        let short = std::thread::spawn(move || {
            let turn = take_as(&gives_up, Instant::now() + Duration::from_millis(300)).unwrap();
            assert!(!turn.is_held());
        });
        until_drawn(&path, 3);
        // ... and one that waits.
        let waits = Local::new(path.clone());
        let patient = std::thread::spawn(move || {
            let turn = take_as(&waits, far()).unwrap();
            (turn.is_held(), Instant::now())
        });
        until_drawn(&path, 4);
        short.join().unwrap();
        drop(dies);
        std::thread::sleep(Duration::from_millis(50));
        let released = Instant::now();
        drop(first);
        let (held, got) = patient.join().unwrap();
        assert!(held);
        assert!(
            got - released < Duration::from_millis(50),
            "{:?} after the turn ahead ended",
            got - released
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn never_two_turns_at_once_among_many_processes() {
        let dir = scratch("exclusive");
        let path = dir.join(LOCK_NAME).into_os_string();
        let in_turn = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let turns = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let processes: Vec<_> = (0..16).map(|_| Local::new(path.clone())).collect();
        let threads: Vec<_> = (0..64)
            .map(|i| {
                let local = Arc::clone(&processes[i % processes.len()]);
                let in_turn = Arc::clone(&in_turn);
                let turns = Arc::clone(&turns);
                std::thread::spawn(move || {
                    for _ in 0..8 {
                        let turn =
                            take_as(&local, Instant::now() + Duration::from_secs(20)).unwrap();
                        assert!(turn.is_held());
                        assert!(!in_turn.swap(true, std::sync::atomic::Ordering::SeqCst));
                        std::thread::sleep(Duration::from_micros(200));
                        in_turn.store(false, std::sync::atomic::Ordering::SeqCst);
                        turns.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(turns.load(std::sync::atomic::Ordering::SeqCst), 64 * 8);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_request_waits_past_the_stall_while_the_turns_go_round() {
        let dir = scratch("moving");
        let route = route_in(&dir);
        let path = dir.join(LOCK_NAME).into_os_string();
        let holder = take(&route, Instant::now() + Duration::from_secs(10)).unwrap();
        assert!(holder.is_held());
        let route2 = route.clone();
        let waiter = std::thread::spawn(move || {
            let started = Instant::now();
            let turn = take(&route2, started + Duration::from_secs(5)).unwrap();
            (turn.is_held(), started.elapsed())
        });
        // While the lock stays taken, turns are counted every 25 ms for twice the stall, as a
        // queue of other processes' turns would count them.
        let lock = open_lock(&path).unwrap();
        let until = Instant::now() + STALL * 2;
        while Instant::now() < until {
            count_turn(&lock);
            std::thread::sleep(Duration::from_millis(25));
        }
        drop(holder);
        let (held, waited) = waiter.join().unwrap();
        assert!(held, "waited for its turn, not past the turns");
        assert!(waited >= STALL * 2, "{waited:?}");

        // Turns that go round without this request's until a tenth of its bound is left: it
        // ends as a request the manager did not answer in time, rather than crowd in.
        let holder = take(&route, Instant::now() + Duration::from_secs(10)).unwrap();
        let route3 = route.clone();
        let waiter = std::thread::spawn(move || {
            let started = Instant::now();
            let outcome = take(&route3, started + Duration::from_millis(800)).map(|t| t.is_held());
            (outcome.map_err(|no| no.waited), started.elapsed())
        });
        let until = Instant::now() + Duration::from_millis(900);
        while Instant::now() < until {
            count_turn(&lock);
            std::thread::sleep(Duration::from_millis(25));
        }
        drop(holder);
        let (outcome, took) = waiter.join().unwrap();
        let waited = outcome.expect_err("no turn");
        assert!(
            waited >= Duration::from_millis(720) && took < Duration::from_millis(800),
            "{waited:?} {took:?}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_thread_in_a_turn_takes_no_second_one() {
        let dir = scratch("nested");
        let route = route_in(&dir);
        let started = Instant::now();
        let outer = take(&route, started + Duration::from_secs(4)).unwrap();
        assert!(outer.is_held());
        let inner = take(&route, started + Duration::from_secs(4)).unwrap();
        assert!(!inner.is_held());
        drop(inner);
        drop(outer);
        assert!(started.elapsed() < Duration::from_millis(100));
        // A turn kept from one conversation for the next is the same turn, still held.
        let ((), kept) = keeping(|| {
            let probe = take(&route, Instant::now() + Duration::from_secs(1)).unwrap();
            assert!(probe.is_held());
        });
        let kept = kept.expect("the probe's turn, kept");
        assert!(kept.is_held());
        assert!(!take(&route, Instant::now() + Duration::from_secs(1))
            .unwrap()
            .is_held());
        drop(kept);
        assert!(take(&route, Instant::now() + Duration::from_secs(1))
            .unwrap()
            .is_held());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn without_a_runtime_directory_or_a_usable_one_there_is_no_turn_and_no_wait() {
        let started = Instant::now();
        let no_dir = Route::from_env(
            &[(
                OsString::from("DBUS_SESSION_BUS_ADDRESS"),
                OsString::from("unix:path=/x"),
            )],
            Fallback::Since257,
        );
        assert!(!take(&no_dir, started + Duration::from_secs(5))
            .unwrap()
            .is_held());
        let missing = route_in(std::path::Path::new("/nonexistent/synaps"));
        assert!(!take(&missing, started + Duration::from_secs(5))
            .unwrap()
            .is_held());
        assert!(started.elapsed() < Duration::from_millis(50));
    }
}

//! The turn file, `$XDG_RUNTIME_DIR/synaps-scope.turn`, which every process of the user shares: a
//! queue of tickets. Its header counts the tickets drawn and the turns taken, and names the last
//! ticket whose turn came; it is locked with an open file description lock for the few system
//! calls of a draw. A ticket is one byte of the tickets file beside it
//! (`synaps-scope.turn.tickets`), locked by the process that drew it from its draw to the end of
//! its turn. A ticket's turn comes once every earlier one has ended.
//!
//! A ticket's lock is a process-associated (POSIX) record lock, not an open file description
//! lock: a forked child does not inherit it, and the kernel releases it when the process that drew
//! it ends, however it ends, even while a child it forked lives on with a copy of the file (an open
//! file description lock would be held for as long as any copy is open: a daemon's double fork that
//! outlives its parent would keep the ticket, and every launch of the user would then wait out the
//! no-turn rule). Such a lock is also released when its process closes any file descriptor of that
//! file: so the tickets file is opened once per process and turn file ([`tickets_file`]) and
//! closed only once no ticket of the process uses it. A host's own code may still open and close
//! it without knowing (an indexer, a clean-up of the runtime directory), so a ticket whose turn
//! has come is guarded as well, by an open file description lock in the guards file beside it
//! ([`Ticket`]). Waits for the ticket ahead are open file description locks, which the kernel
//! grants once the holder's record lock and its guard are gone, whichever process asks.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg};
use nix::libc;
use rustix::fs::{self, Mode, OFlags};

use crate::per_process::{lock, PerProcess};

/// The turn file's name in the runtime directory.
pub(super) const LOCK_NAME: &str = "synaps-scope.turn";

/// Where the lock file counts the turns taken (little-endian u64, as every field).
const TURNS_AT: u64 = 0;

/// Where it keeps the number of the next ticket.
pub(super) const NEXT_AT: u64 = 8;

/// Where it keeps the number of the last ticket whose turn came.
const SERVED_AT: u64 = 16;

/// The header's length: the fields above, locked together.
const HEADER_LEN: u64 = 24;

/// Where the tickets' bytes begin: ticket `n`'s is at `PLACES_AT + n % PLACES`.
const PLACES_AT: u64 = 4096;

/// How many tickets can wait at once; a request that finds its ticket's byte still held by one
/// drawn this many tickets earlier talks to the manager without a turn.
pub(super) const PLACES: u64 = 4096;

/// How long a draw first sleeps between tries while another holds the header (for a few system
/// calls); each sleep doubles, up to [`HEADER_RETRY_MAX`], so that a holder that stopped costs a
/// waiter a few dozen wake-ups before its wait ends.
const HEADER_RETRY: Duration = Duration::from_micros(200);
const HEADER_RETRY_MAX: Duration = Duration::from_millis(10);

/// What the tickets file's name adds to the turn file's.
const TICKETS_SUFFIX: &str = ".tickets";

/// What the guards file's name adds to the turn file's.
const GUARDS_SUFFIX: &str = ".guards";

/// A place in the queue: its byte of the tickets file, locked by this process until the ticket is
/// dropped.
///
/// A ticket whose turn has come is also guarded: the same byte of the guards file beside it,
/// locked through an open file description of the ticket's own. A record lock is released when
/// its process closes any descriptor of the file, which a host may do without knowing it (its
/// own code opening and closing every file of the runtime directory, or a request of its own that
/// spells the directory another way); the guard's lock is released only by the ticket's end, or
/// when the last copy of its description closes. Waiters wait for both, so a turn is held until
/// its holder lets it go. The guard's description is opened for the ticket alone and taken only
/// when its turn comes, so a child forked at another moment holds no copy of a guard that is
/// locked: only one forked during the turn, which does not exec and outlives a holder that died
/// in its turn, keeps the guard, and the waiters behind it then talk after the no-turn rule.
pub(super) struct Ticket {
    number: u64,
    /// The turn file (its header and counters).
    pub(super) file: OwnedFd,
    /// The tickets file, shared by every ticket of the process for this turn file.
    tickets: Arc<OwnedFd>,
    /// The guards file, opened for this ticket alone (None where it could not be opened: the
    /// ticket is then guarded by its record lock alone).
    guards: Option<OwnedFd>,
    /// The guard is locked: the ticket's turn has come.
    guarded: bool,
    /// The process that drew it.
    pid: u32,
}

impl Ticket {
    fn new(number: u64, file: OwnedFd, tickets: Arc<OwnedFd>, guards: Option<OwnedFd>) -> Self {
        Ticket {
            number,
            file,
            tickets,
            guards,
            guarded: false,
            pid: std::process::id(),
        }
    }

    /// Locks this ticket's guard: its turn has come (best effort: without it, the record lock
    /// alone holds the turn).
    pub(super) fn guard(&mut self) {
        if let Some(guards) = &self.guards {
            self.guarded = set_lock(
                guards,
                Lock::Write,
                Span::Place(self.number),
                Wait::No,
                Owner::File,
            )
            .unwrap_or(false);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // A forked child's copy of a ticket holds no record lock (its parent's is the parent's
        // alone) and unlocks nothing: the guard's lock, through a description the child shares,
        // is the parent's to release.
        if self.pid == std::process::id() {
            let place = Span::Place(self.number);
            if let (true, Some(guards)) = (self.guarded, &self.guards) {
                let _ = set_lock(guards, Lock::Unlock, place, Wait::No, Owner::File);
            }
            let _ = set_lock(&self.tickets, Lock::Unlock, place, Wait::No, Owner::Process);
        }
    }
}

/// This process's tickets files, by the path of their turn file: each open once, and closed when
/// no ticket of the process uses it any more (closing any descriptor of it would release every
/// ticket the process holds in it). A forked child opens its own.
static TICKETS: PerProcess<Mutex<Vec<TicketsFile>>> = PerProcess::new();

/// A turn file's path, and its tickets file while the process has it open.
type TicketsFile = (OsString, Weak<OwnedFd>);

/// The tickets file of the turn file at `path`, opened if the process has it open for no ticket.
fn tickets_file(path: &OsString) -> Result<Arc<OwnedFd>, Errno> {
    let all = TICKETS.get();
    let mut files = lock(&all);
    files.retain(|(_, file)| file.strong_count() > 0);
    if let Some(file) = files
        .iter()
        .find(|(turn, _)| turn == path)
        .and_then(|(_, file)| file.upgrade())
    {
        return Ok(file);
    }
    let mut tickets = path.clone();
    tickets.push(TICKETS_SUFFIX);
    let file = Arc::new(open_lock(&tickets).map_err(|e| Errno::from_raw(e.raw_os_error()))?);
    files.push((path.clone(), Arc::downgrade(&file)));
    Ok(file)
}

/// Opens the turn file at `path`, made if missing.
pub(super) fn open_lock(path: &OsString) -> rustix::io::Result<OwnedFd> {
    fs::open(
        path,
        OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NOCTTY,
        Mode::RUSR | Mode::WUSR,
    )
}

/// A ticket drawn.
pub(super) enum Drawn {
    /// Its turn has come: no earlier ticket is held.
    Now(Ticket),
    /// Its turn comes after the ticket numbered here (the latest earlier one still held) ends.
    Behind(Ticket, u64),
    /// Its byte is still held by a ticket drawn [`PLACES`] earlier.
    Crowded,
}

/// Draws the next ticket from the lock file at `path`; None when another held the header until
/// `stop`.
pub(super) fn draw(path: &OsString, stop: Instant) -> Result<Option<Drawn>, Errno> {
    let file = open_lock(path).map_err(|e| Errno::from_raw(e.raw_os_error()))?;
    let tickets = tickets_file(path)?;
    let mut guards_path = path.clone();
    guards_path.push(GUARDS_SUFFIX);
    let guards = open_lock(&guards_path).ok();
    let Some(header) = Header::lock_by(&file, stop)? else {
        return Ok(None);
    };
    let number = header.read(NEXT_AT);
    let place = Span::Place(number);
    if !set_lock(&tickets, Lock::Write, place, Wait::No, Owner::Process)? {
        return Ok(Some(Drawn::Crowded));
    }
    header.write(NEXT_AT, number.wrapping_add(1));
    let ahead = header.held_ahead_of(&tickets, guards.as_ref(), number);
    if let Ok(None) = ahead {
        header.write(SERVED_AT, number);
    }
    drop(header);
    let ticket = Ticket::new(number, file, tickets, guards);
    Ok(Some(match ahead? {
        None => Drawn::Now(ticket),
        Some(ahead) => Drawn::Behind(ticket, ahead),
    }))
}

/// Blocks until every ticket before `ticket` has ended, waiting on the latest one still held
/// (first the one numbered `ahead`), and records that its turn came.
pub(super) fn wait_for_turn(ticket: &Ticket, mut ahead: u64) -> Result<(), Errno> {
    loop {
        // A read lock is granted once the ticket ahead is unlocked: it ended, however.
        let place = Span::Place(ahead);
        set_lock(&ticket.tickets, Lock::Read, place, Wait::Yes, Owner::File)?;
        set_lock(&ticket.tickets, Lock::Unlock, place, Wait::No, Owner::File)?;
        // Its record lock may have gone with a descriptor its host closed: its guard holds the
        // turn until the ticket ends.
        if let Some(guards) = &ticket.guards {
            set_lock(guards, Lock::Read, place, Wait::Yes, Owner::File)?;
            set_lock(guards, Lock::Unlock, place, Wait::No, Owner::File)?;
        }
        let header = Header::wait(&ticket.file)?;
        match header.held_ahead_of(&ticket.tickets, ticket.guards.as_ref(), ticket.number)? {
            Some(next) => ahead = next,
            None => {
                header.write(SERVED_AT, ticket.number);
                return Ok(());
            }
        }
    }
}

/// The lock file's header, locked until dropped.
pub(super) struct Header<'a> {
    file: &'a OwnedFd,
}

impl<'a> Header<'a> {
    /// Locks the header through `file`, waiting as long as it takes (for a thread that only
    /// waits).
    pub(super) fn wait(file: &'a OwnedFd) -> Result<Self, Errno> {
        set_lock(file, Lock::Write, Span::Header, Wait::Yes, Owner::File)?;
        Ok(Header { file })
    }

    /// Locks the header through `file`, trying until `stop`; None when that passed.
    fn lock_by(file: &'a OwnedFd, stop: Instant) -> Result<Option<Self>, Errno> {
        let mut pause = HEADER_RETRY;
        loop {
            if set_lock(file, Lock::Write, Span::Header, Wait::No, Owner::File)? {
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

    /// The latest ticket before `number`, from the last served on, that its holder still holds
    /// (in `tickets`, or its guard in `guards`).
    fn held_ahead_of(
        &self,
        tickets: &OwnedFd,
        guards: Option<&OwnedFd>,
        number: u64,
    ) -> Result<Option<u64>, Errno> {
        let served = self.read(SERVED_AT);
        // Tickets more than PLACES back share bytes with later ones; they ended long ago.
        let oldest = served.max(number.saturating_sub(PLACES - 1));
        for earlier in (oldest..number).rev() {
            let place = Span::Place(earlier);
            if is_locked(tickets, place)? || guards.map_or(Ok(false), |g| is_locked(g, place))? {
                return Ok(Some(earlier));
            }
        }
        Ok(None)
    }
}

impl Drop for Header<'_> {
    fn drop(&mut self) {
        let _ = set_lock(self.file, Lock::Unlock, Span::Header, Wait::No, Owner::File);
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

/// Whether setting a lock waits for a conflicting one to go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    Yes,
    No,
}

/// Who holds a lock: the open file description it is set through (released when its last
/// descriptor closes, in whichever process), or the process (released when the process ends or
/// closes any descriptor of the file; never inherited by a forked child).
#[derive(Clone, Copy)]
enum Owner {
    File,
    Process,
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

/// Sets `lock` on `span` of `file` for `owner`, waiting for a conflicting lock to go if `wait`;
/// whether it was set (false: another holds a conflicting one).
fn set_lock(
    file: &OwnedFd,
    lock: Lock,
    span: Span,
    wait: Wait,
    owner: Owner,
) -> Result<bool, Errno> {
    let request = request(lock, span);
    loop {
        let arg = match (owner, wait) {
            (Owner::File, Wait::Yes) => FcntlArg::F_OFD_SETLKW(&request),
            (Owner::File, Wait::No) => FcntlArg::F_OFD_SETLK(&request),
            (Owner::Process, Wait::Yes) => FcntlArg::F_SETLKW(&request),
            (Owner::Process, Wait::No) => FcntlArg::F_SETLK(&request),
        };
        match fcntl(file, arg) {
            Ok(_) => return Ok(true),
            Err(Errno::EINTR) => continue,
            Err(Errno::EAGAIN | Errno::EACCES) if wait == Wait::No => return Ok(false),
            Err(e) => return Err(e),
        }
    }
}

/// Whether a write lock on `span` of `file` is held by a process (this one included) or through
/// another open file.
fn is_locked(file: &OwnedFd, span: Span) -> Result<bool, Errno> {
    let mut probe = request(Lock::Read, span);
    fcntl(file, FcntlArg::F_OFD_GETLK(&mut probe))?;
    Ok(i32::from(probe.l_type) != libc::F_UNLCK)
}

/// A field of the lock file's header (0 where the file is shorter).
pub(super) fn read_field(file: &OwnedFd, at: u64) -> u64 {
    let mut field = [0u8; 8];
    match rustix::io::pread(file, &mut field, at) {
        Ok(8) => u64::from_le_bytes(field),
        _ => 0,
    }
}

/// How many turns the lock file says were taken (it wraps; only changes matter).
pub(super) fn turns_taken(file: &OwnedFd) -> u64 {
    read_field(file, TURNS_AT)
}

/// Counts one more turn in the lock file, by the turn's holder (best effort: waiters that cannot
/// see the turns go round only stop waiting sooner).
pub(super) fn count_turn(file: &OwnedFd) {
    let next = turns_taken(file).wrapping_add(1);
    let _ = rustix::io::pwrite(file, &next.to_le_bytes(), TURNS_AT);
}

//! The turn file, `$XDG_RUNTIME_DIR/synaps-scope.turn`, which every process of the user shares: a
//! queue of tickets. A ticket is one byte of the file, locked by its holder (an open file
//! description lock) from its draw to the end of its turn, so that the kernel ends it however its
//! holder ends; the header counts the tickets drawn and the turns taken, and names the last ticket
//! whose turn came. A ticket's turn comes once every earlier one has ended.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg};
use nix::libc;
use rustix::fs::{self, Mode, OFlags};

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

/// A place in the queue: its byte of the lock file, locked until the ticket is dropped.
pub(super) struct Ticket {
    number: u64,
    pub(super) file: OwnedFd,
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

/// Blocks until every ticket before `ticket` has ended, waiting on the latest one still held
/// (first the one numbered `ahead`), and records that its turn came.
pub(super) fn wait_for_turn(ticket: &Ticket, mut ahead: u64) -> Result<(), Errno> {
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
pub(super) struct Header<'a> {
    file: &'a OwnedFd,
}

impl<'a> Header<'a> {
    /// Locks the header through `file`, waiting as long as it takes (for a thread that only
    /// waits).
    pub(super) fn wait(file: &'a OwnedFd) -> Result<Self, Errno> {
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

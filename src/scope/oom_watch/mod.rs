//! Watches the scopes that handles were made for, while they run, for what goes with their cgroups
//! when the manager collects them: the kernel's OOM kills (`memory.events`) and the cgroups a tool
//! made below its scope (where systemd-oomd, which kills leaf cgroups, leaves its mark).
//!
//! A scope made like `systemd-run --collect` is removed the moment its last process has died, and
//! with it its files and every cgroup below it; a caller that asks how its tool ended only after
//! the tool's exit status is in would find nothing to read. So one thread per process waits on one
//! inotify instance for every scope with a handle: the scope's `memory.events` and `cgroup.events`
//! (the kernel tells a change of either as `IN_MODIFY`), its directory, and every cgroup below it:
//! - each time the kernel says `memory.events` changed, the `oom_kill` count is copied out. The
//!   kernel counts a kill before the victim dies, but holds a file's change notice back when one
//!   came less than 20 ms before (as `max` events do, just before an OOM kill); so once `max` or
//!   `oom` rises, the count is read every millisecond for the next 50 ms;
//! - once the scope is empty, the count is read a last time; should the manager have removed the
//!   cgroup first, the parent slice's counts tell its kills (`oom_count`), or say that they
//!   cannot be told: the answer is then "at least the kills seen", never "none";
//! - the scope and each cgroup made below it, however many and in whatever order they come and
//!   go, are watched as they appear: the marks oomd and a handle's kill write on a cgroup (an
//!   extended attribute, which the kernel tells as `IN_ATTRIB`) are read as they are written,
//!   while the cgroup is still there, and remembered with the scope.
//!
//! A watch is an inotify watch, not a descriptor: what a process holds open for all its handles is
//! the one inotify instance, however many scopes and cgroups it watches; each reading opens what it
//! reads and closes it, checking that the cgroup at the path is still the one watched. Once a
//! scope is empty, its count is final and its files are no longer watched, but a mark may still
//! come (oomd before 251 marks after its kill), so its directory is held open until the manager
//! removes it (a descriptor for that moment only), and its watches go with it, or with its last
//! handle, whichever comes first ([`release`]). Asking how a scope
//! ended first takes in every notice the kernel has queued (`catch_up`), so a mark written before
//! the question is in the answer. A forked child starts a watcher of its own on first use and
//! never reads the parent's (`crate::per_process`).

use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustix::io::Errno;

use crate::kernel::cgroup::has_any_mark;
use crate::kernel::oom_count::{Counter, Events, Reading};
use crate::oomd::OOMD_MARKS;
use crate::per_process::lock;

/// The marks written on a cgroup that tell how a scope ended: oomd's ([`OOMD_MARKS`]), and the one
/// a scope handle's kill writes before it kills.
pub(crate) const HANDLE_KILL_MARK: &str = "user.synaps_kill";
const MARKS: [&str; 3] = [OOMD_MARKS[0], OOMD_MARKS[1], HANDLE_KILL_MARK];

/// Where a scope's count stands.
const WATCHING: u8 = 0;
/// Read a last time once the scope was empty: the count is final.
const FINAL: u8 = 1;
/// The cgroup was removed before the last read: kills after the last read made are not known.
const LOST: u8 = 2;
/// How long the count is read every millisecond once `max` or `oom` rose: past the kernel's
/// 20 ms hold-back of a change notice, with room to spare.
const HOT: Duration = Duration::from_millis(50);

/// What the watcher learns of one scope while it runs; shared with its handles. A forked child's
/// copy is a snapshot: the watcher's thread was not copied, and a lock it held at the fork stays
/// held there, so the child only reads what needs no lock.
#[derive(Debug)]
pub(crate) struct ScopeWatch {
    /// The process whose watcher fills it.
    pid: u32,
    /// The most `oom_kill` seen in `memory.events`.
    kills: AtomicU64,
    /// `WATCHING`, `FINAL` or `LOST`.
    settled: AtomicU8,
    /// Whether the scope has a memory controller: without one there is no count.
    counted: bool,
    /// What reads the count, until the last reading ([`ScopeWatch::settle`]) takes it.
    counter: Mutex<Option<Counter>>,
    /// The marks ([`MARKS`], a bit each) seen on the scope's cgroup or on cgroups below it.
    marked: AtomicU8,
    /// The scope or a cgroup below it went unwatched, or its marks could not be read when written
    /// (inotify dropped events, had no watch left, or the cgroup was gone by then).
    marks_missed: AtomicBool,
    /// The scope's directory, held open from the moment it is empty until the manager removes
    /// it: a mark written in between (oomd before 251 marks after its kill) is read through it
    /// even when the removal came before the mark's notice was read.
    held: Mutex<Option<OwnedFd>>,
}

/// The kernel's OOM kills in a scope, as far as they are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OomKills {
    /// Read once the scope was empty: every kill.
    Exactly(u64),
    /// The cgroup was removed before its count could be read a last time: these many, perhaps
    /// more.
    AtLeast(u64),
}

impl ScopeWatch {
    fn new(counter: Option<Counter>) -> Self {
        ScopeWatch {
            pid: std::process::id(),
            kills: AtomicU64::new(0),
            settled: AtomicU8::new(WATCHING),
            counted: counter.is_some(),
            counter: Mutex::new(counter),
            marked: AtomicU8::new(0),
            marks_missed: AtomicBool::new(false),
            held: Mutex::new(None),
        }
    }

    /// Reads the count with `counter` (this watch's); the scope's events, or None once it is gone.
    fn read(&self, counter: &mut Counter) -> Option<Events> {
        match counter.read(self.kills.load(Ordering::Acquire)) {
            Reading::There(events) => {
                self.kills.fetch_max(events.oom_kill, Ordering::AcqRel);
                Some(events)
            }
            Reading::GoneWith(_) | Reading::GoneUntold => None,
        }
    }

    /// Reads the count a last time, the scope being empty; once only. Where the scope is gone
    /// already, its kills are told from its parent's count, or marked lost.
    fn settle(&self) {
        let Some(mut counter) = lock(&self.counter).take() else {
            return;
        };
        let settled = match counter.read(self.kills.load(Ordering::Acquire)) {
            Reading::There(events) => {
                self.kills.fetch_max(events.oom_kill, Ordering::AcqRel);
                FINAL
            }
            Reading::GoneWith(kills) => {
                self.kills.fetch_max(kills, Ordering::AcqRel);
                FINAL
            }
            Reading::GoneUntold => LOST,
        };
        self.settled.store(settled, Ordering::Release);
    }

    /// The OOM kills of a scope that is empty: waits for the watcher's last read, up to
    /// `deadline`, and makes it here if the watcher has not come to it by then (the kernel may
    /// hold back a change notice of a file for up to 20 ms, and drops it when the cgroup goes).
    /// None without a memory controller.
    pub(crate) fn kills_once_empty(&self, deadline: Instant) -> Option<OomKills> {
        if !self.counted {
            return None;
        }
        if self.pid != std::process::id() {
            return Some(OomKills::AtLeast(self.kills.load(Ordering::Acquire)));
        }
        let patience = deadline.min(Instant::now() + Duration::from_millis(100));
        while self.settled.load(Ordering::Acquire) == WATCHING && Instant::now() < patience {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.settle();
        let kills = self.kills.load(Ordering::Acquire);
        Some(if self.settled.load(Ordering::Acquire) == FINAL {
            OomKills::Exactly(kills)
        } else {
            OomKills::AtLeast(kills)
        })
    }

    /// Whether any of `names` is on the scope's cgroup now, read through its directory held since
    /// it was empty (false where none is held, or in a forked child, which the watcher never
    /// fills).
    pub(crate) fn held_marked(&self, names: &[&str]) -> bool {
        self.pid == std::process::id()
            && lock(&self.held)
                .as_ref()
                .is_some_and(|dir| has_any_mark(dir, names))
    }

    /// Whether any of `names` (of [`MARKS`]) was seen on the scope's cgroup or a cgroup below it.
    pub(crate) fn marked(&self, names: &[&str]) -> bool {
        let seen = self.marked.load(Ordering::Acquire);
        MARKS
            .iter()
            .enumerate()
            .any(|(bit, mark)| seen & (1 << bit) != 0 && names.contains(mark))
    }

    /// Whether the scope or cgroups below it went unwatched (inotify dropped events or had no
    /// watch left, or a mark could not be read when written, or this is a forked child's
    /// snapshot, which no thread fills).
    pub(crate) fn marks_missed(&self) -> bool {
        self.marks_missed.load(Ordering::Acquire) || self.pid != std::process::id()
    }

    /// Reads the marks on the cgroup at `path` (the scope's or one below it) into what is seen;
    /// returns the line that tells the marks new to it, to be logged once no lock is held.
    fn read_marks(&self, path: &Path) -> Option<String> {
        self.read_marks_with(path, |mark, value| rustix::fs::getxattr(path, mark, value))
    }

    /// Reads the marks on the cgroup open as `dir` (at `path`) into what is seen, as `read_marks`.
    fn read_marks_of(&self, dir: BorrowedFd<'_>, path: &Path) -> Option<String> {
        self.read_marks_with(path, |mark, value| rustix::fs::fgetxattr(dir, mark, value))
    }

    /// Reads the marks on the scope's own cgroup: through its directory held since it was empty
    /// where it is, else at `path`.
    fn read_own_marks(&self, path: &Path) -> Option<String> {
        let held = lock(&self.held);
        match held.as_ref() {
            Some(dir) => {
                self.read_marks_with(path, |mark, value| rustix::fs::fgetxattr(dir, mark, value))
            }
            None => self.read_marks(path),
        }
    }

    /// Reads the marks of the cgroup at `path` with `get` into what is seen; the line that tells
    /// the marks new to it, if any.
    fn read_marks_with(
        &self,
        path: &Path,
        get: impl Fn(&str, &mut [u8]) -> Result<usize, Errno>,
    ) -> Option<String> {
        let mut seen = 0u8;
        for (bit, mark) in MARKS.iter().enumerate() {
            let mut value = [0u8; 32];
            match get(mark, &mut value) {
                Ok(n) if n > 0 => seen |= 1 << bit,
                Err(Errno::RANGE) => seen |= 1 << bit,
                // No such mark, or none can be written here (Linux before 5.7 takes no user
                // extended attributes on cgroups): nothing missed.
                Ok(_) | Err(Errno::NODATA | Errno::OPNOTSUPP) => {}
                Err(_) => {
                    // Gone before it could be read: a mark on it would not be known.
                    self.marks_missed.store(true, Ordering::Release);
                    return None;
                }
            }
        }
        let before = self.marked.fetch_or(seen, Ordering::AcqRel);
        if seen & !before == 0 {
            return None;
        }
        let marks: Vec<&str> = MARKS
            .iter()
            .enumerate()
            .filter(|(bit, _)| seen & !before & (1 << bit) != 0)
            .map(|(_, mark)| *mark)
            .collect();
        Some(format!(
            "marks read on {}: {}",
            path.display(),
            marks.join(" ")
        ))
    }
}

mod watcher;

pub(crate) use watcher::{catch_up, release, watch};

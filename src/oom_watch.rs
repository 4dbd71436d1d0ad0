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

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, ReadFlags, WatchFlags};
use rustix::io::Errno;

use crate::cgroup;
use crate::cgroup_tree::{self, Met};
use crate::oom_count::{field, open_at, read_at_start, Counter, Events, Reading};
use crate::per_process::{lock, PerProcess};

/// The marks written on a cgroup that tell how a scope ended: the extended attributes
/// systemd-oomd writes on a cgroup it kills (before the kill from 251 on, after it on every
/// version since 247), and the one a scope handle's kill writes before it kills.
pub(crate) const OOMD_MARKS: [&str; 2] = ["user.oomd_ooms", "user.oomd_kill"];
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
    /// When (the monotonic clock, in nanoseconds) the watch last learnt of a mark or of the scope's
    /// end: oomd's signal comes within its own delay of both.
    news_at: AtomicU64,
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
            news_at: AtomicU64::new(monotonic_nanos()),
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
        self.news_at.store(monotonic_nanos(), Ordering::Release);
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

    /// How long ago the watch last learnt of a mark or of the scope's end.
    pub(crate) fn since_news(&self) -> Duration {
        let then = self.news_at.load(Ordering::Acquire);
        Duration::from_nanos(monotonic_nanos().saturating_sub(then))
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
        self.news_at.store(monotonic_nanos(), Ordering::Release);
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

/// Whether any of the extended attributes `names` is on the cgroup open as `dir`, whatever its
/// value: a value too long for the buffer (ERANGE) is there all the same.
pub(crate) fn has_any_mark(dir: &OwnedFd, names: &[&str]) -> bool {
    names.iter().any(|name| {
        let mut value = [0u8; 32];
        match rustix::fs::fgetxattr(dir, *name, &mut value) {
            Ok(n) => n > 0,
            Err(e) => e == Errno::RANGE,
        }
    })
}

/// The monotonic clock, in nanoseconds: a time that atomics can hold and a forked child can read.
fn monotonic_nanos() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(now.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(now.tv_nsec).unwrap_or(0))
}

/// One watched scope: where it is, its inotify watches, and what is learnt.
struct Watched {
    /// The scope's directory and its inode number.
    dir: PathBuf,
    ino: u64,
    /// The watches on the scope's directory (first) and on each cgroup below it.
    directories: Vec<i32>,
    /// The watches on the scope's `cgroup.events` and `memory.events`.
    files: Vec<i32>,
    shared: Arc<ScopeWatch>,
    /// `max` + `oom` as last read: when it rises, an OOM kill may follow.
    pressure: u64,
    /// Until when the count is read every millisecond.
    hot_until: Option<Instant>,
    /// Whether the scope is empty: its count is final, and only its marks are still watched,
    /// until the manager removes it.
    emptied: bool,
}

impl Watched {
    /// Reads the scope's count (on a change notice, or while hot); true where it is removed.
    fn reading_finds_it_gone(&mut self, now: Instant) -> bool {
        let read = lock(&self.shared.counter)
            .as_mut()
            .map(|counter| self.shared.read(counter));
        match read {
            Some(Some(events)) => {
                if events.pressure() > self.pressure {
                    self.hot_until = Some(now + HOT);
                }
                self.pressure = events.pressure();
                false
            }
            Some(None) => true,
            None => false,
        }
    }

    /// Whether processes are in the scope (`cgroup.events`); false once it is gone.
    fn populated(&self) -> bool {
        populated(&self.dir, self.ino)
    }

    /// The scope is empty: its count is read a last time, its files are no longer watched, and
    /// its directory is held open until the manager removes it, its marks still watched.
    fn empty(&mut self, inotify_fd: &OwnedFd, watches: &mut HashMap<i32, (u64, Watching)>) {
        self.emptied = true;
        self.hot_until = None;
        self.shared.settle();
        for wd in self.files.drain(..) {
            watches.remove(&wd);
            let _ = inotify::remove_watch(inotify_fd, wd);
        }
        *lock(&self.shared.held) = cgroup::open_same(&self.dir, self.ino);
    }
}

/// What an inotify watch descriptor watches.
#[derive(Clone, Debug)]
enum Watching {
    /// A directory: the scope's (the first of its directories) or a cgroup's below it.
    Directory(PathBuf),
    /// The scope's `cgroup.events` or `memory.events`.
    File,
}

/// What the watcher's thread and the handles share.
#[derive(Default)]
struct Table {
    /// By token.
    scopes: HashMap<u64, Watched>,
    /// The token of each scope watched, by its cgroup's inode number: handles on one scope share
    /// one watch.
    by_inode: HashMap<u64, u64>,
    /// What each inotify watch descriptor watches, and for which scope's token.
    watches: HashMap<i32, (u64, Watching)>,
    /// The scopes whose last handle went once they held no process, by inode number, with their
    /// directory: what was learnt of each, for a handle made on it again while its cgroup is
    /// there (no watch: nothing more comes of an empty scope but a mark on its own cgroup, which
    /// a handle reads there).
    released: HashMap<u64, (PathBuf, Arc<ScopeWatch>)>,
    /// How many released scopes there were after the last look for removed ones: the next look
    /// comes once there are twice as many, so that keeping them costs O(1) a release.
    released_looked: usize,
    /// Lines to log once the table's lock is let go: a log sink may take a lock of its host's
    /// (Python's GIL, Node's event loop) that a thread waiting for this table holds.
    said: Vec<String>,
}

impl Table {
    /// Forgets the released scopes whose cgroup the manager has removed, once there are twice as
    /// many as after the last look (at least 64).
    fn forget_removed(&mut self) {
        if self.released.len() < (2 * self.released_looked).max(64) {
            return;
        }
        self.released
            .retain(|ino, (dir, _)| cgroup::open_same(dir, *ino).is_some());
        self.released_looked = self.released.len();
    }

    /// What was learnt of the released scope at `dir` (inode number `ino`), while its cgroup is
    /// there; a released scope whose cgroup is gone is forgotten.
    fn released(&mut self, dir: &Path, ino: u64) -> Option<Arc<ScopeWatch>> {
        let (was_at, watch) = self.released.get(&ino)?;
        if was_at == dir && cgroup::open_same(dir, ino).is_some() {
            return Some(Arc::clone(watch));
        }
        self.released.remove(&ino);
        None
    }

    /// Keeps `line`, if any, to be logged once the table's lock is let go.
    fn say(&mut self, line: Option<String>) {
        self.said.extend(line);
    }
}

/// Logs what the watch found while it held the table's lock (see [`Table::said`]); called with no
/// lock held.
fn say(lines: Vec<String>) {
    for line in lines {
        tracing::debug!(target: crate::diag::TARGET, "{line}");
    }
}

/// The watcher of this process: its inotify instance and what each token watches.
struct Watcher {
    inotify: Arc<OwnedFd>,
    table: Arc<Mutex<Table>>,
    next_token: u64,
}

/// This process's watcher, once started (a forked child's is its own: the parent's thread was not
/// copied).
static WATCHER: PerProcess<Mutex<Option<Watcher>>> = PerProcess::new();

/// The inotify events a scope's directory, and each cgroup below it, is watched for: cgroups made
/// in it, and marks written on it.
const DIRECTORY_EVENTS: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::ONLYDIR);

/// Starts watching the scope `unit` whose cgroup directory is `dir`, inode number `ino`. Returns
/// what is learnt of it (the count already read once, where the cgroup has a memory controller),
/// or None where the watch could not be set up (a count of zero would then be a guess, not a
/// reading).
pub(crate) fn watch(dir: &Path, ino: u64, unit: &str) -> Option<Arc<ScopeWatch>> {
    let this_process = WATCHER.get();
    let mut guard = lock(&this_process);
    if guard.is_none() {
        *guard = Some(start()?);
    }
    let watcher = guard.as_mut()?;
    let table = Arc::clone(&watcher.table);
    let mut table = lock(&table);
    let watched = watch_locked(watcher, &mut table, dir, ino, unit);
    let said = std::mem::take(&mut table.said);
    drop(table);
    drop(guard);
    say(said);
    watched
}

/// [`watch`], with this process's watcher and its table locked.
fn watch_locked(
    watcher: &mut Watcher,
    table: &mut Table,
    dir: &Path,
    ino: u64,
    unit: &str,
) -> Option<Arc<ScopeWatch>> {
    if let Some(shared) = table
        .by_inode
        .get(&ino)
        .and_then(|token| table.scopes.get(token))
        .map(|scope| Arc::clone(&scope.shared))
    {
        return Some(shared);
    }
    if let Some(shared) = table.released(dir, ino) {
        return Some(shared);
    }
    let token = watcher.next_token;
    watcher.next_token += 1;
    let counter = Counter::open(dir, ino, unit);
    let shared = Arc::new(ScopeWatch::new(counter));
    let mut scope = Watched {
        dir: dir.to_path_buf(),
        ino,
        directories: Vec::new(),
        files: Vec::new(),
        shared: Arc::clone(&shared),
        pressure: 0,
        hot_until: None,
        emptied: false,
    };
    // The files first, then a reading: a change after the reading is told.
    let inotify_fd = &*watcher.inotify;
    for name in [c"cgroup.events", c"memory.events"] {
        match watch_file(inotify_fd, dir, ino, name) {
            Some(wd) => {
                scope.files.push(wd);
                table.watches.insert(wd, (token, Watching::File));
            }
            None if name == c"cgroup.events" || shared.counted => {
                forget(inotify_fd, table, &scope);
                return None;
            }
            None => {}
        }
    }
    let first = lock(&shared.counter)
        .as_mut()
        .map(|counter| shared.read(counter));
    match first {
        Some(Some(events)) => scope.pressure = events.pressure(),
        // Gone before its first reading: no count to start from.
        Some(None) => {
            forget(inotify_fd, table, &scope);
            return None;
        }
        None => {}
    }
    if !scope.populated() {
        // Already empty: the last read is this one, and only marks may still come.
        scope.empty(inotify_fd, &mut table.watches);
    }
    watch_directory(inotify_fd, table, token, &mut scope, dir.to_path_buf());
    if scope.directories.is_empty() {
        shared.marks_missed.store(true, Ordering::Release);
    }
    table.scopes.insert(token, scope);
    table.by_inode.insert(ino, token);
    Some(shared)
}

/// Watches the file `name` of the cgroup at `dir` (inode number `ino`) for changes: through the
/// cgroup opened and checked, so that the watch is on this very cgroup's file.
fn watch_file(inotify_fd: &OwnedFd, dir: &Path, ino: u64, name: &std::ffi::CStr) -> Option<i32> {
    let cgroup = cgroup::open_same(dir, ino)?;
    add_watch_on(
        inotify_fd,
        open_at(&cgroup, name)?.as_fd(),
        WatchFlags::MODIFY,
    )
}

/// Watches what `open` is open as (the inode itself, through its `/proc/self/fd` link), not
/// whatever its path leads to by then.
fn add_watch_on(inotify_fd: &OwnedFd, open: BorrowedFd<'_>, events: WatchFlags) -> Option<i32> {
    let link = format!("/proc/self/fd/{}", open.as_raw_fd());
    inotify::add_watch(inotify_fd, link, events).ok()
}

/// Takes away a scope's watches (not yet in the table's scopes).
fn forget(inotify_fd: &OwnedFd, table: &mut Table, scope: &Watched) {
    for wd in scope.files.iter().chain(&scope.directories) {
        table.watches.remove(wd);
        let _ = inotify::remove_watch(inotify_fd, *wd);
    }
}

/// Watches `directory` (the scope's, or a cgroup below it) for cgroups made in it and for marks
/// written on it, reads the marks already there, and watches each cgroup already in it in turn
/// (made before the watch).
fn watch_directory(
    inotify_fd: &OwnedFd,
    table: &mut Table,
    token: u64,
    scope: &mut Watched,
    directory: PathBuf,
) {
    let mut first = scope.directories.is_empty().then_some(scope.ino);
    let walked = cgroup_tree::walk(&directory, |dir, path, met| {
        if met == Met::Leaf {
            return true;
        }
        // The scope's own is this very cgroup, checked by its inode.
        if let Some(ino) = first.take() {
            if rustix::fs::fstat(dir).map(|meta| meta.st_ino).ok() != Some(ino) {
                return false;
            }
        }
        // Past what a path can name, its events could not be followed: marks there are missed.
        if path.as_os_str().len() >= PATH_MAX {
            scope.shared.marks_missed.store(true, Ordering::Release);
            return false;
        }
        let Some(wd) = add_watch_on(inotify_fd, dir, DIRECTORY_EVENTS) else {
            // Gone already (it held no process worth a mark any more), or no watch left.
            if !gone(path) {
                scope.shared.marks_missed.store(true, Ordering::Release);
            }
            return false;
        };
        // Watched already (inotify gives the same descriptor): it was watched before it was
        // listed, so whatever was made in it since told of itself. Walking it again for each
        // cgroup made below it cost a chain of N cgroups N^2 / 2 visits.
        if table.watches.get(&wd).is_some_and(|(t, _)| *t == token) {
            return false;
        }
        scope.directories.push(wd);
        table
            .watches
            .insert(wd, (token, Watching::Directory(path.to_path_buf())));
        let said = scope.shared.read_marks_of(dir, path);
        table.say(said);
        true
    });
    if walked.is_err() && !gone(&directory) {
        scope.shared.marks_missed.store(true, Ordering::Release);
    }
}

/// The longest path the kernel looks up (`PATH_MAX`, with its NUL).
const PATH_MAX: usize = 4096;

/// Whether the cgroup at `path` is gone: a path too long to look up is not.
fn gone(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

fn start() -> Option<Watcher> {
    let inotify_fd = Arc::new(
        inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok()?,
    );
    let table = Arc::new(Mutex::new(Table::default()));
    let (thread_inotify, thread_table) = (Arc::clone(&inotify_fd), Arc::clone(&table));
    std::thread::Builder::new()
        .name("synaps-scope-oom-watch".into())
        .spawn(move || run(&thread_inotify, &thread_table))
        .ok()?;
    Some(Watcher {
        inotify: inotify_fd,
        table,
        next_token: 0,
    })
}

/// The watcher's loop: on each change, copies the count out (and every millisecond while a
/// scope is hot); once a scope is empty, reads it a last time and holds its directory until it is
/// removed; watches each cgroup made below a scope, and reads the marks written on each.
fn run(inotify_fd: &OwnedFd, table: &Mutex<Table>) {
    let mut hot = false;
    loop {
        let timeout = hot.then_some(Timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000,
        });
        let mut fds = [PollFd::new(inotify_fd, PollFlags::IN)];
        if poll(&mut fds, timeout.as_ref()).is_err() {
            continue; // EINTR
        }
        let said = {
            let mut table = lock(table);
            hot = take_in(inotify_fd, &mut table);
            std::mem::take(&mut table.said)
        };
        say(said);
    }
}

/// Takes in every notice inotify holds now, and reads each scope woken by one (or hot) once;
/// returns whether any scope is hot.
fn take_in(inotify_fd: &OwnedFd, table: &mut MutexGuard<'_, Table>) -> bool {
    let now = Instant::now();
    let woken = read_inotify(inotify_fd, table);
    let table = &mut **table;
    let mut hot = false;
    let mut removed = Vec::new();
    for (token, scope) in &mut table.scopes {
        let was_woken = woken.contains(token);
        if scope.emptied {
            // Woken only where inotify dropped notices: one of them may have been its removal.
            if was_woken && cgroup::open_same(&scope.dir, scope.ino).is_none() {
                removed.push(*token);
            }
            continue;
        }
        if scope.hot_until.is_some_and(|until| until <= now) {
            scope.hot_until = None;
        }
        if !was_woken && scope.hot_until.is_none() {
            continue;
        }
        if scope.reading_finds_it_gone(now) || (was_woken && !scope.populated()) {
            scope.empty(inotify_fd, &mut table.watches);
        }
        hot |= scope.hot_until.is_some();
    }
    for token in removed {
        let_go(inotify_fd, table, token);
    }
    hot
}

/// Takes in, on the calling thread, every notice inotify holds for this process's watches now:
/// a mark written (or a scope emptied) before the call is then in what the watches have seen.
/// Nothing where no watch was ever made here.
pub(crate) fn catch_up() {
    let this_process = WATCHER.get();
    let shared = lock(&this_process)
        .as_ref()
        .map(|watcher| (Arc::clone(&watcher.inotify), Arc::clone(&watcher.table)));
    if let Some((inotify_fd, table)) = shared {
        let said = {
            let mut table = lock(&table);
            take_in(&inotify_fd, &mut table);
            std::mem::take(&mut table.said)
        };
        say(said);
    }
}

/// Takes in what inotify says: a cgroup made below a watched one is watched in turn, a mark
/// written is read, a removed scope directory lets its scope go. Returns the tokens of the scopes
/// whose files changed.
fn read_inotify(inotify_fd: &OwnedFd, table: &mut MutexGuard<'_, Table>) -> Vec<u64> {
    let mut woken = Vec::new();
    let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
    let mut reader = inotify::Reader::new(inotify_fd, &mut buf);
    loop {
        let event = match reader.next() {
            Ok(event) => event,
            Err(Errno::INTR) => continue,
            Err(_) => return woken, // EAGAIN: all read.
        };
        let wd = event.wd();
        let flags = event.events();
        if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
            for (token, scope) in &table.scopes {
                scope.shared.marks_missed.store(true, Ordering::Release);
                woken.push(*token);
            }
            continue;
        }
        let Some((token, watching)) = table.watches.get(&wd).cloned() else {
            continue;
        };
        if flags.contains(ReadFlags::IGNORED) {
            table.watches.remove(&wd);
            let is_scope_itself = table
                .scopes
                .get(&token)
                .is_some_and(|scope| scope.directories.first() == Some(&wd));
            if is_scope_itself {
                let_go(inotify_fd, table, token);
            } else if let Some(scope) = table.scopes.get_mut(&token) {
                scope.directories.retain(|watch| *watch != wd);
                scope.files.retain(|watch| *watch != wd);
            }
            continue;
        }
        let Watching::Directory(directory) = watching else {
            woken.push(token);
            continue;
        };
        let name = event
            .file_name()
            .map(|name| directory.join(std::ffi::OsStr::from_bytes(name.to_bytes())));
        if flags.contains(ReadFlags::ATTRIB) {
            // A mark written on the directory itself, or on a cgroup in it (told to both); a
            // file's change of mode is no mark.
            let said = table.scopes.get(&token).and_then(|scope| {
                let is_scope_itself = scope.directories.first() == Some(&wd);
                match name {
                    None if is_scope_itself => scope.shared.read_own_marks(&directory),
                    None => scope.shared.read_marks(&directory),
                    Some(made) if flags.contains(ReadFlags::ISDIR) => {
                        scope.shared.read_marks(&made)
                    }
                    Some(_) => None,
                }
            });
            table.say(said);
            continue;
        }
        if !flags.contains(ReadFlags::CREATE | ReadFlags::ISDIR) {
            continue;
        }
        let Some(made) = name else {
            continue;
        };
        let table = &mut **table;
        let Some(mut scope) = table.scopes.remove(&token) else {
            continue;
        };
        watch_directory(inotify_fd, table, token, &mut scope, made);
        table.scopes.insert(token, scope);
    }
}

/// No handle asks about the scope any more (`watch` is the last one's, `ino` its cgroup's inode
/// number). Once it holds no process, what is learnt of it is complete: its inotify watches are
/// taken away now, while the process runs, and its held directory closed, and what it learnt is
/// kept for a handle made on it later while its cgroup is there ([`Table::released`]). A watch
/// still in place when a process exits costs that exit a kernel grace period (10 to 15 ms
/// measured): a waiter that drops its handle before it exits returns as soon as its command. A
/// scope that still runs stays watched until the manager removes it, as before: a cgroup made and
/// removed below it meanwhile, with oomd's mark, would otherwise go unseen by a later handle.
pub(crate) fn release(watch: Arc<ScopeWatch>, ino: u64) {
    if watch.pid != std::process::id() {
        return; // A forked child's copy: the parent's watcher has it.
    }
    let this_process = WATCHER.get();
    let guard = lock(&this_process);
    let Some(watcher) = guard.as_ref() else {
        return;
    };
    let mut table = lock(&watcher.table);
    let Some(&token) = table.by_inode.get(&ino) else {
        return;
    };
    let Some(scope) = table.scopes.get(&token) else {
        return;
    };
    // The table's and this one: no other handle shares the watch (checked and dropped under the
    // table's lock, so two handles let go at once cannot both leave it).
    let last = Arc::ptr_eq(&scope.shared, &watch) && Arc::strong_count(&watch) == 2;
    if last && !populated(&scope.dir, scope.ino) {
        let dir = scope.dir.clone();
        let_go(&watcher.inotify, &mut table, token);
        table.forget_removed();
        table.released.insert(ino, (dir, Arc::clone(&watch)));
    }
    drop(watch);
}

/// The scope's directory is removed: reads its count a last time (where it was not yet empty when
/// last read), lets go of its directory, and takes away what watched it.
fn let_go(inotify_fd: &OwnedFd, table: &mut Table, token: u64) {
    let Some(scope) = table.scopes.remove(&token) else {
        return;
    };
    scope.shared.settle();
    *lock(&scope.shared.held) = None;
    forget(inotify_fd, table, &scope);
    table.by_inode.retain(|_, watched| *watched != token);
}

/// `populated` of the cgroup at `dir` while it is the one with inode number `ino`; false once it
/// is gone.
fn populated(dir: &Path, ino: u64) -> bool {
    cgroup::open_same(dir, ino)
        .and_then(|cgroup| open_at(&cgroup, c"cgroup.events"))
        .and_then(|file| read_at_start(&file))
        .and_then(|text| field(&text, "populated"))
        == Some(1)
}

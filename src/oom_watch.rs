//! Watches the scopes that handles were made for, while they run, for what goes with their cgroups
//! when the manager collects them: the kernel's OOM kills (`memory.events`) and the cgroups a tool
//! made below its scope (where systemd-oomd, which kills leaf cgroups, leaves its mark).
//!
//! A scope made like `systemd-run --collect` is removed the moment its last process has died, and
//! with it its files and every cgroup below it; a caller that asks how its tool ended only after
//! the tool's exit status is in would find nothing to read. So one thread per process waits
//! (`epoll`) on the `memory.events` and `cgroup.events` of every scope with a handle, and on its
//! directories (`inotify`):
//! - each time the kernel says `memory.events` changed, the `oom_kill` count is copied out. The
//!   kernel counts a kill before the victim dies, but holds a file's change notice back when one
//!   came less than 20 ms before (as `max` events do, just before an OOM kill); so once `max` or
//!   `oom` rises, the count is read every millisecond for the next 50 ms;
//! - once the scope is empty, the count is read a last time; should the manager have removed the
//!   cgroup first, the parent slice's counts tell its kills (`oom_count`), or say that they
//!   cannot be told: the answer is then "at least the kills seen", never "none";
//! - each cgroup made below the scope, however many and in whatever order they come and go, is
//!   watched by inotify as it appears (a watch, not a descriptor): the marks oomd and a handle's
//!   kill write on a cgroup (an extended attribute, which the kernel tells as `IN_ATTRIB`) are
//!   read as they are written, while the cgroup is still there, and remembered with the scope.
//!
//! What a watch holds is bounded by the scopes still running that have a handle: a scope's files
//! are closed once it is empty or removed. A forked child starts a watcher of its own on first use
//! and never reads the parent's (`crate::per_process`).

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::buffer::spare_capacity;
use rustix::event::epoll::{self, CreateFlags, EventData, EventFlags};
use rustix::event::Timespec;
use rustix::fs::inotify::{self, ReadFlags, WatchFlags};
use rustix::fs::{openat, Mode, OFlags};
use rustix::io::Errno;

use crate::oom_count::{field, read_at_start, Counter, Events, Reading};
use crate::per_process::{lock, PerProcess};

/// The marks written on a cgroup that tell how a scope ended: the extended attributes
/// systemd-oomd writes on a cgroup it kills (before the kill from 251 on, after it on every
/// version since 247), and the one a scope handle's kill writes before it kills.
pub(crate) const OOMD_MARKS: [&str; 2] = ["user.oomd_ooms", "user.oomd_kill"];
pub(crate) const HANDLE_KILL_MARK: &str = "user.synaps_kill";
const MARKS: [&str; 3] = [OOMD_MARKS[0], OOMD_MARKS[1], HANDLE_KILL_MARK];

/// The epoll token of the inotify instance; scopes' tokens are even (`memory.events`) and odd
/// (`cgroup.events`) numbers below it.
const INOTIFY_TOKEN: u64 = u64::MAX;

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
    /// The marks ([`MARKS`], a bit each) seen on cgroups below the scope.
    marked_below: AtomicU8,
    /// A cgroup below the scope went unwatched, or its marks could not be read when written
    /// (inotify dropped events, had no watch left, or the cgroup was gone by then).
    leaves_missed: AtomicBool,
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
            marked_below: AtomicU8::new(0),
            leaves_missed: AtomicBool::new(false),
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

    /// Whether any of `names` (of [`MARKS`]) was seen on a cgroup made below the scope.
    pub(crate) fn marked_below(&self, names: &[&str]) -> bool {
        let seen = self.marked_below.load(Ordering::Acquire);
        MARKS
            .iter()
            .enumerate()
            .any(|(bit, mark)| seen & (1 << bit) != 0 && names.contains(mark))
    }

    /// Whether cgroups below the scope went unwatched (inotify dropped events or had no watch
    /// left, or a mark could not be read when written, or this is a forked child's snapshot,
    /// which no thread fills).
    pub(crate) fn leaves_missed(&self) -> bool {
        self.leaves_missed.load(Ordering::Acquire) || self.pid != std::process::id()
    }

    /// Reads the marks on the cgroup at `path`, below the scope, into what is seen of it.
    fn read_marks(&self, path: &Path) {
        let mut seen = 0u8;
        for (bit, mark) in MARKS.iter().enumerate() {
            let mut value = [0u8; 32];
            match rustix::fs::getxattr(path, *mark, &mut value) {
                Ok(n) if n > 0 => seen |= 1 << bit,
                Err(Errno::RANGE) => seen |= 1 << bit,
                Ok(_) | Err(Errno::NODATA) => {}
                Err(_) => {
                    // Gone before it could be read: a mark on it would not be known.
                    self.leaves_missed.store(true, Ordering::Release);
                    return;
                }
            }
        }
        self.marked_below.fetch_or(seen, Ordering::AcqRel);
    }
}

/// One watched scope: its open `cgroup.events`, its inotify watches, and what is learnt.
struct Watched {
    cgroup_events: OwnedFd,
    /// The watches on the scope's directory and on each kept cgroup below it.
    watches: Vec<i32>,
    shared: Arc<ScopeWatch>,
    /// `max` + `oom` as last read: when it rises, an OOM kill may follow.
    pressure: u64,
    /// Until when the count is read every millisecond.
    hot_until: Option<Instant>,
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
}

/// What the watcher's thread and the handles share.
#[derive(Default)]
struct Table {
    /// By token.
    scopes: HashMap<u64, Watched>,
    /// The token of each scope watched, by its cgroup's inode number: handles on one scope share
    /// one watch.
    by_inode: HashMap<u64, u64>,
    /// Each directory watched for new cgroups and marks (inotify's watch descriptor): its scope's
    /// token and the directory's path.
    directories: HashMap<i32, (u64, PathBuf)>,
}

/// The watcher of this process: its epoll and inotify instances and what each token watches.
struct Watcher {
    epoll: Arc<OwnedFd>,
    inotify: Arc<OwnedFd>,
    table: Arc<Mutex<Table>>,
    next_token: u64,
}

/// This process's watcher, once started (a forked child's is its own: the parent's thread was not
/// copied).
static WATCHER: PerProcess<Mutex<Option<Watcher>>> = PerProcess::new();

/// Starts watching the scope whose cgroup is open as `dir`. Returns what is learnt of it (the
/// count already read once, where the cgroup has a memory controller), or None where the watch
/// could not be set up (a count of zero would then be a guess, not a reading).
pub(crate) fn watch(dir: &OwnedFd, unit: &str) -> Option<Arc<ScopeWatch>> {
    let inode = rustix::fs::fstat(dir).ok()?.st_ino;
    let open = |name: &str| {
        openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        )
        .ok()
    };
    let counter = Counter::open(dir, unit);
    let cgroup_events = open("cgroup.events")?;
    let this_process = WATCHER.get();
    let mut guard = lock(&this_process);
    if guard.is_none() {
        *guard = Some(start()?);
    }
    let watcher = guard.as_mut()?;
    let mut table = lock(&watcher.table);
    if let Some(shared) = table
        .by_inode
        .get(&inode)
        .and_then(|token| table.scopes.get(token))
        .map(|scope| Arc::clone(&scope.shared))
    {
        return Some(shared);
    }
    let token = watcher.next_token;
    watcher.next_token += 2;
    // Edge-triggered: the kernel signals each change of the file once (EPOLLPRI). The
    // registration goes with the descriptor, closed at the last read.
    let flags = EventFlags::PRI | EventFlags::ERR | EventFlags::ET;
    let shared = Arc::new(ScopeWatch::new(counter));
    let mut first = Events::default();
    if let Some(counter) = lock(&shared.counter).as_mut() {
        first = shared.read(counter)?;
        epoll::add(
            &*watcher.epoll,
            counter.events_fd(),
            EventData::new_u64(token),
            flags,
        )
        .ok()?;
    }
    if !populated(&cgroup_events) {
        // Already empty: nothing will change, and the last read is this one.
        shared.settle();
        return Some(shared);
    }
    epoll::add(
        &*watcher.epoll,
        &cgroup_events,
        EventData::new_u64(token + 1),
        flags,
    )
    .ok()?;
    let mut scope = Watched {
        cgroup_events,
        watches: Vec::new(),
        shared: Arc::clone(&shared),
        pressure: first.pressure(),
        hot_until: None,
    };
    match rustix::fs::readlink(format!("/proc/self/fd/{}", dir.as_raw_fd()), Vec::new()) {
        Ok(path) => watch_directory(
            &watcher.inotify,
            &mut table,
            token,
            &mut scope,
            PathBuf::from(std::ffi::OsString::from_vec(path.into_bytes())),
        ),
        Err(_) => shared.leaves_missed.store(true, Ordering::Release),
    }
    table.scopes.insert(token, scope);
    table.by_inode.insert(inode, token);
    Some(shared)
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
    let added = inotify::add_watch(
        inotify_fd,
        directory.as_path(),
        WatchFlags::CREATE | WatchFlags::ATTRIB | WatchFlags::ONLYDIR,
    );
    let Ok(wd) = added else {
        // Gone already (it held no process worth a mark any more), or no watch left.
        if directory.exists() {
            scope.shared.leaves_missed.store(true, Ordering::Release);
        }
        return;
    };
    scope.watches.push(wd);
    table.directories.insert(wd, (token, directory.clone()));
    if scope.watches.len() > 1 {
        scope.shared.read_marks(&directory);
    }
    let Ok(entries) = std::fs::read_dir(&directory) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            watch_directory(inotify_fd, table, token, scope, entry.path());
        }
    }
}

fn start() -> Option<Watcher> {
    let epoll = Arc::new(epoll::create(CreateFlags::CLOEXEC).ok()?);
    let inotify_fd = Arc::new(
        inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok()?,
    );
    epoll::add(
        &*epoll,
        &*inotify_fd,
        EventData::new_u64(INOTIFY_TOKEN),
        EventFlags::IN,
    )
    .ok()?;
    let table = Arc::new(Mutex::new(Table::default()));
    let (thread_epoll, thread_inotify, thread_table) = (
        Arc::clone(&epoll),
        Arc::clone(&inotify_fd),
        Arc::clone(&table),
    );
    std::thread::Builder::new()
        .name("synaps-scope-oom-watch".into())
        .spawn(move || run(&thread_epoll, &thread_inotify, &thread_table))
        .ok()?;
    Some(Watcher {
        epoll,
        inotify: inotify_fd,
        table,
        next_token: 0,
    })
}

/// The watcher's loop: on each change, copies the count out (and every millisecond while a
/// scope is hot); once a scope is empty or removed, reads it a last time and lets go of it; opens
/// each cgroup made below a scope.
fn run(epoll_fd: &OwnedFd, inotify_fd: &OwnedFd, table: &Mutex<Table>) {
    let mut events = Vec::with_capacity(64);
    let mut hot = false;
    loop {
        events.clear();
        let timeout = hot.then_some(Timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000,
        });
        if epoll::wait(epoll_fd, spare_capacity(&mut events), timeout.as_ref()).is_err() {
            continue; // EINTR
        }
        let mut table = lock(table);
        let now = Instant::now();
        let mut woken = Vec::new();
        for event in &events {
            match event.data.u64() {
                INOTIFY_TOKEN => read_inotify(epoll_fd, inotify_fd, &mut table),
                token => woken.push(token & !1),
            }
        }
        // Each scope woken (either file) or hot is read once this round.
        hot = false;
        let mut done = Vec::new();
        for (token, scope) in &mut table.scopes {
            let was_woken = woken.contains(token);
            if scope.hot_until.is_some_and(|until| until <= now) {
                scope.hot_until = None;
            }
            if !was_woken && scope.hot_until.is_none() {
                continue;
            }
            if scope.reading_finds_it_gone(now) || (was_woken && !populated(&scope.cgroup_events)) {
                done.push(*token);
            }
            hot |= scope.hot_until.is_some();
        }
        for token in done {
            let_go(epoll_fd, inotify_fd, &mut table, token);
        }
    }
}

/// Takes in what inotify says: a cgroup made below a watched one is kept; a removed scope
/// directory lets its scope go.
fn read_inotify(epoll_fd: &OwnedFd, inotify_fd: &OwnedFd, table: &mut MutexGuard<'_, Table>) {
    let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
    let mut reader = inotify::Reader::new(inotify_fd, &mut buf);
    loop {
        let event = match reader.next() {
            Ok(event) => event,
            Err(Errno::INTR) => continue,
            Err(_) => return, // EAGAIN: all read.
        };
        let wd = event.wd();
        let flags = event.events();
        if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
            for scope in table.scopes.values() {
                scope.shared.leaves_missed.store(true, Ordering::Release);
            }
            continue;
        }
        let Some((token, directory)) = table.directories.get(&wd).cloned() else {
            continue;
        };
        if flags.contains(ReadFlags::IGNORED) {
            table.directories.remove(&wd);
            let is_scope_itself = table
                .scopes
                .get(&token)
                .is_some_and(|scope| scope.watches.first() == Some(&wd));
            if is_scope_itself {
                let_go(epoll_fd, inotify_fd, table, token);
            } else if let Some(scope) = table.scopes.get_mut(&token) {
                scope.watches.retain(|watch| *watch != wd);
            }
            continue;
        }
        let name = event
            .file_name()
            .map(|name| directory.join(std::ffi::OsStr::from_bytes(name.to_bytes())));
        if flags.contains(ReadFlags::ATTRIB) {
            // A mark written on the directory itself, or on a cgroup in it (told to both).
            let marked = name.unwrap_or(directory);
            if let Some(scope) = table.scopes.get(&token) {
                scope.shared.read_marks(&marked);
            }
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

/// Reads a scope's count a last time and closes what watched it.
fn let_go(epoll_fd: &OwnedFd, inotify_fd: &OwnedFd, table: &mut Table, token: u64) {
    let Some(scope) = table.scopes.remove(&token) else {
        return;
    };
    scope.shared.settle();
    let _ = epoll::delete(epoll_fd, &scope.cgroup_events);
    for wd in &scope.watches {
        table.directories.remove(wd);
        let _ = inotify::remove_watch(inotify_fd, *wd);
    }
    table.by_inode.retain(|_, watched| *watched != token);
}

/// `populated` of an open `cgroup.events`; false once the cgroup is gone.
fn populated(cgroup_events: &OwnedFd) -> bool {
    read_at_start(cgroup_events).and_then(|text| field(&text, "populated")) == Some(1)
}

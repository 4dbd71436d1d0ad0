//! The watcher: one inotify instance and one thread per process, watching every handle's scope
//! and the cgroups made below it, and reading the counts and marks as the kernel tells of them.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, ReadFlags, WatchFlags};
use rustix::io::Errno;

use crate::kernel::cgroup;
use crate::kernel::cgroup_tree::{self, Met};
use crate::kernel::oom_count::{field, open_at, read_at_start, Counter};
use crate::per_process::{lock, PerProcess};

use super::{ScopeWatch, HOT};

/// One watched scope: where it is, its inotify watches, and what is learnt.
pub(super) struct Watched {
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
pub(super) enum Watching {
    /// A directory: the scope's (the first of its directories) or a cgroup's below it.
    Directory(PathBuf),
    /// The scope's `cgroup.events` or `memory.events`.
    File,
}

/// What the watcher's thread and the handles share.
#[derive(Default)]
pub(super) struct Table {
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
pub(super) fn say(lines: Vec<String>) {
    for line in lines {
        tracing::debug!(target: crate::diag::TARGET, "{line}");
    }
}

/// The watcher of this process: its inotify instance and what each token watches.
pub(super) struct Watcher {
    inotify: Arc<OwnedFd>,
    table: Arc<Mutex<Table>>,
    next_token: u64,
}

/// This process's watcher, once started (a forked child's is its own: the parent's thread was not
/// copied).
pub(super) static WATCHER: PerProcess<Mutex<Option<Watcher>>> = PerProcess::new();

/// The inotify events a scope's directory, and each cgroup below it, is watched for: cgroups made
/// in it, and marks written on it.
pub(super) const DIRECTORY_EVENTS: WatchFlags = WatchFlags::CREATE
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
pub(super) fn watch_locked(
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
pub(super) fn watch_file(
    inotify_fd: &OwnedFd,
    dir: &Path,
    ino: u64,
    name: &std::ffi::CStr,
) -> Option<i32> {
    let cgroup = cgroup::open_same(dir, ino)?;
    add_watch_on(
        inotify_fd,
        open_at(&cgroup, name)?.as_fd(),
        WatchFlags::MODIFY,
    )
}

/// Watches what `open` is open as (the inode itself, through its `/proc/self/fd` link), not
/// whatever its path leads to by then.
pub(super) fn add_watch_on(
    inotify_fd: &OwnedFd,
    open: BorrowedFd<'_>,
    events: WatchFlags,
) -> Option<i32> {
    let link = format!("/proc/self/fd/{}", open.as_raw_fd());
    inotify::add_watch(inotify_fd, link, events).ok()
}

/// Takes away a scope's watches (not yet in the table's scopes).
pub(super) fn forget(inotify_fd: &OwnedFd, table: &mut Table, scope: &Watched) {
    for wd in scope.files.iter().chain(&scope.directories) {
        table.watches.remove(wd);
        let _ = inotify::remove_watch(inotify_fd, *wd);
    }
}

/// Watches `directory` (the scope's, or a cgroup below it) for cgroups made in it and for marks
/// written on it, reads the marks already there, and watches each cgroup already in it in turn
/// (made before the watch).
pub(super) fn watch_directory(
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
pub(super) const PATH_MAX: usize = 4096;

/// Whether the cgroup at `path` is gone: a path too long to look up is not.
pub(super) fn gone(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

pub(super) fn start() -> Option<Watcher> {
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
pub(super) fn run(inotify_fd: &OwnedFd, table: &Mutex<Table>) {
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
pub(super) fn take_in(inotify_fd: &OwnedFd, table: &mut MutexGuard<'_, Table>) -> bool {
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
pub(super) fn read_inotify(inotify_fd: &OwnedFd, table: &mut MutexGuard<'_, Table>) -> Vec<u64> {
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
pub(super) fn let_go(inotify_fd: &OwnedFd, table: &mut Table, token: u64) {
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
pub(super) fn populated(dir: &Path, ino: u64) -> bool {
    cgroup::open_same(dir, ino)
        .and_then(|cgroup| open_at(&cgroup, c"cgroup.events"))
        .and_then(|file| read_at_start(&file))
        .and_then(|text| field(&text, "populated"))
        == Some(1)
}

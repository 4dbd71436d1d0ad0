//! Counts the kernel's OOM kills in watched scopes as they happen. A scope made like
//! `systemd-run --collect` is removed the moment its last process has died, and with it its
//! `memory.events`; a caller that asks how its tool ended only after the tool's exit status is in
//! would find nothing to read. So one thread per process waits (`epoll`, no polling) on the
//! `memory.events` and `cgroup.events` of every scope a handle was made for, and copies the
//! `oom_kill` count out each time the kernel says it changed, until the scope is empty.
//!
//! What a watch holds is bounded by the scopes still running that have a handle: a scope's files are
//! closed once it is empty (or removed). A forked child starts a watcher of its own on first use and
//! never reads the parent's (`crate::per_process`).

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustix::buffer::spare_capacity;
use rustix::event::epoll::{self, CreateFlags, EventData, EventFlags};
use rustix::fs::{openat, Mode, OFlags};

use crate::per_process::{lock, PerProcess};

/// The `oom_kill` count of one scope's `memory.events` as last seen; shared with its handles.
#[derive(Debug, Default)]
pub(crate) struct OomKills(AtomicU64);

impl OomKills {
    /// The most OOM kills seen in the scope so far.
    pub(crate) fn seen(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    fn record(&self, kills: u64) {
        self.0.fetch_max(kills, Ordering::AcqRel);
    }
}

/// One watched scope: its open `memory.events` and `cgroup.events`, and where the count goes.
struct Watched {
    memory_events: OwnedFd,
    cgroup_events: OwnedFd,
    kills: Arc<OomKills>,
}

/// The watcher of this process: its epoll instance and what each token watches.
struct Watcher {
    epoll: Arc<OwnedFd>,
    watched: Arc<Mutex<HashMap<u64, Watched>>>,
    next_token: u64,
}

/// This process's watcher, once started (a forked child's is its own: the parent's thread was not
/// copied).
static WATCHER: PerProcess<Mutex<Option<Watcher>>> = PerProcess::new();

/// Starts counting the kernel's OOM kills in the cgroup open as `dir`. Returns the shared count
/// (already read once), or None where the cgroup has no memory controller (nothing to count) or the
/// watch could not be set up (a count of zero would then be a guess, not a reading).
pub(crate) fn watch(dir: &OwnedFd) -> Option<Arc<OomKills>> {
    let open = |name: &str| {
        openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        )
        .ok()
    };
    let memory_events = open("memory.events")?;
    let cgroup_events = open("cgroup.events")?;
    let kills = Arc::new(OomKills::default());
    kills.record(oom_kills(&memory_events)?);
    let this_process = WATCHER.get();
    let mut guard = lock(&this_process);
    if guard.is_none() {
        *guard = Some(start()?);
    }
    let watcher = guard.as_mut()?;
    let token = watcher.next_token;
    watcher.next_token += 2;
    let mut watched = lock(&watcher.watched);
    // Edge-triggered: the kernel signals each change of the file once (EPOLLPRI).
    let flags = EventFlags::PRI | EventFlags::ERR | EventFlags::ET;
    epoll::add(
        &*watcher.epoll,
        &memory_events,
        EventData::new_u64(token),
        flags,
    )
    .ok()?;
    if epoll::add(
        &*watcher.epoll,
        &cgroup_events,
        EventData::new_u64(token + 1),
        flags,
    )
    .is_err()
    {
        let _ = epoll::delete(&*watcher.epoll, &memory_events);
        return None;
    }
    watched.insert(
        token,
        Watched {
            memory_events,
            cgroup_events,
            kills: Arc::clone(&kills),
        },
    );
    Some(kills)
}

fn start() -> Option<Watcher> {
    let epoll = Arc::new(epoll::create(CreateFlags::CLOEXEC).ok()?);
    let watched = Arc::new(Mutex::new(HashMap::new()));
    let (thread_epoll, thread_watched) = (Arc::clone(&epoll), Arc::clone(&watched));
    std::thread::Builder::new()
        .name("synaps-scope-oom-watch".into())
        .spawn(move || run(&thread_epoll, &thread_watched))
        .ok()?;
    Some(Watcher {
        epoll,
        watched,
        next_token: 0,
    })
}

/// The watcher's loop: on each change, copies the count out; once a scope is empty or removed,
/// reads it a last time and closes its files.
fn run(epoll: &OwnedFd, watched: &Mutex<HashMap<u64, Watched>>) {
    let mut events = Vec::with_capacity(64);
    loop {
        events.clear();
        if epoll::wait(epoll, spare_capacity(&mut events), None).is_err() {
            continue; // EINTR
        }
        let mut table = lock(watched);
        for event in &events {
            let token = event.data.u64() & !1;
            let Some(scope) = table.get(&token) else {
                continue;
            };
            let count = oom_kills(&scope.memory_events);
            if let Some(kills) = count {
                scope.kills.record(kills);
            }
            if count.is_none() || !populated(&scope.cgroup_events) {
                if let Some(done) = table.remove(&token) {
                    let _ = epoll::delete(epoll, &done.memory_events);
                    let _ = epoll::delete(epoll, &done.cgroup_events);
                }
            }
        }
    }
}

/// `oom_kill` of an open `memory.events`; None once the cgroup is gone (ENODEV).
fn oom_kills(memory_events: &OwnedFd) -> Option<u64> {
    let text = read_at_start(memory_events)?;
    Some(field(&text, "oom_kill").unwrap_or(0))
}

/// `populated` of an open `cgroup.events`; false once the cgroup is gone.
fn populated(cgroup_events: &OwnedFd) -> bool {
    read_at_start(cgroup_events).and_then(|text| field(&text, "populated")) == Some(1)
}

fn read_at_start(fd: &OwnedFd) -> Option<String> {
    let mut buf = [0u8; 512];
    let n = rustix::io::pread(fd, &mut buf, 0).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// The value of `key` in a flat-keyed cgroup file (`key value` lines).
pub(crate) fn field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == key).then(|| value.trim().parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_keyed_fields_read_as_the_kernel_writes_them() {
        let events = "low 0\nhigh 3\nmax 7\noom 2\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(field(events, "oom_kill"), Some(1));
        assert_eq!(field(events, "oom"), Some(2));
        assert_eq!(field(events, "missing"), None);
        assert_eq!(field("populated 0\nfrozen 0\n", "populated"), Some(0));
    }
}

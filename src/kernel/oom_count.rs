//! The kernel's count of OOM kills in one scope (`memory.events`: `oom_kill`), read so that it
//! survives the scope: the manager removes a scope's cgroup, and its `memory.events` with it, the
//! moment its last process has died, and a reading made after that is refused (ENODEV).
//!
//! The kernel counts a kill in the victim's cgroup and in every ancestor's, before the victim dies.
//! The parent slice outlives the scope, so each reading of the scope is preceded by a reading of
//! the parent and of each of its children (a snapshot, taken again until the parent's count held
//! still across it). Once the scope is gone, a new snapshot says how many kills came below the
//! parent since, and which children went: what the children still there do not account for came
//! in those that went; where the scope is the only one that went, those kills were its own. So a
//! count is lost only where another child of the same slice went in the same moment and the
//! kills cannot be told apart; it then reads as at least those seen.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{openat, Dir, FileType, Mode, OFlags};

use crate::kernel::cgroup;

/// What is read of a `memory.events`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Events {
    pub(crate) max: u64,
    pub(crate) oom: u64,
    pub(crate) oom_kill: u64,
}

impl Events {
    /// What rises before an OOM kill: `max` (the limit reached) and `oom` (reclaim failed).
    pub(crate) fn pressure(self) -> u64 {
        self.max.saturating_add(self.oom)
    }
}

/// The kills below a parent slice at one moment: its own count and each child's.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Snapshot {
    parent: u64,
    children: HashMap<CString, u64>,
}

/// One scope's count and what reads it: by path, each reading opening the cgroup afresh and
/// checking it is the same one (a process holds no descriptor per scope).
#[derive(Debug)]
pub(crate) struct Counter {
    /// The scope's directory and its inode number.
    scope: (PathBuf, u64),
    /// The parent slice's directory and inode number, and the scope's name in it.
    parent: Option<(PathBuf, u64, CString)>,
    /// The snapshot taken before the scope's last reading.
    before: Option<Snapshot>,
}

/// What a reading made of a scope's count found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reading {
    /// The scope is there; its events.
    There(Events),
    /// The scope is gone, and the parent's count says how many kills were its own in all.
    GoneWith(u64),
    /// The scope is gone, and its kills since the last reading cannot be told.
    GoneUntold,
}

impl Counter {
    /// The counter of the scope at `dir` (inode number `ino`), named `name` in its parent; None
    /// without a memory controller, or where the scope is gone already.
    pub(crate) fn open(dir: &Path, ino: u64, name: &str) -> Option<Counter> {
        let scope = cgroup::open_same(dir, ino)?;
        open_at(&scope, c"memory.events")?;
        let parent = dir.parent().and_then(|parent| {
            let fd = openat(
                &scope,
                c"..",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .ok()?;
            let ino = rustix::fs::fstat(&fd).ok()?.st_ino;
            Some((parent.to_path_buf(), ino, CString::new(name).ok()?))
        });
        Some(Counter {
            scope: (dir.to_path_buf(), ino),
            parent,
            before: None,
        })
    }

    /// Reads the scope's count, the parent's snapshot first; once the scope is gone, tells its
    /// kills from the parent's. `seen` is the most kills seen in it so far.
    pub(crate) fn read(&mut self, seen: u64) -> Reading {
        let now = self.parent.as_ref().and_then(|(dir, ino, _)| {
            let parent = cgroup::open_same(dir, *ino)?;
            snapshot(&parent)
        });
        let (dir, ino) = &self.scope;
        let events = cgroup::open_same(dir, *ino)
            .and_then(|scope| open_at(&scope, c"memory.events"))
            .and_then(|file| read_events(&file));
        if let Some(events) = events {
            self.before = now;
            return Reading::There(events);
        }
        let (Some((_, _, name)), Some(before), Some(now)) = (&self.parent, &self.before, &now)
        else {
            return Reading::GoneUntold;
        };
        match kills_of_the_gone(name, before, now) {
            Some(since) => {
                Reading::GoneWith(seen.max(before.children.get(name).copied().unwrap_or(0) + since))
            }
            None => Reading::GoneUntold,
        }
    }
}

/// How many kills came in the child `name` between the snapshots `before` (which had it) and
/// `now` (which does not): what the children still there do not account for, where `name` is the
/// only child that went, or none at all is unaccounted for. None where that cannot be told.
fn kills_of_the_gone(name: &CStr, before: &Snapshot, now: &Snapshot) -> Option<u64> {
    let below = now.parent.checked_sub(before.parent)?;
    let mut accounted: u64 = 0;
    for (child, count) in &now.children {
        let then = before.children.get(child).copied().unwrap_or(0);
        accounted = accounted.checked_add(count.checked_sub(then)?)?;
    }
    let unaccounted = below.checked_sub(accounted)?;
    let gone: Vec<&CString> = before
        .children
        .keys()
        .filter(|child| !now.children.contains_key(*child))
        .collect();
    if unaccounted == 0 || gone.as_slice() == [name] {
        Some(unaccounted)
    } else {
        None
    }
}

/// The kills below the parent slice open as `dir`: its count and each child's, read until the
/// parent's count held still across the reading (at most three tries).
fn snapshot(dir: &OwnedFd) -> Option<Snapshot> {
    for _ in 0..3 {
        let parent = read_events(&open_at(dir, c"memory.events")?)?.oom_kill;
        let mut children = HashMap::new();
        let mut entries = Dir::read_from(dir).ok()?;
        while let Some(Ok(entry)) = entries.next() {
            let name = entry.file_name();
            if entry.file_type() != FileType::Directory || name.to_bytes().starts_with(b".") {
                continue;
            }
            let mut path = name.to_bytes().to_vec();
            path.extend_from_slice(b"/memory.events");
            let Ok(path) = CString::new(path) else {
                continue;
            };
            if let Some(events) = open_at(dir, &path).and_then(|fd| read_events(&fd)) {
                children.insert(name.to_owned(), events.oom_kill);
            }
        }
        let again = read_events(&open_at(dir, c"memory.events")?)?.oom_kill;
        if again == parent {
            return Some(Snapshot { parent, children });
        }
    }
    None
}

pub(crate) fn open_at(dir: &OwnedFd, path: &CStr) -> Option<OwnedFd> {
    openat(
        dir,
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .ok()
}

/// `max`, `oom` and `oom_kill` of an open `memory.events`; None once the cgroup is gone (ENODEV).
pub(crate) fn read_events(memory_events: impl AsFd) -> Option<Events> {
    let text = read_at_start(memory_events)?;
    let value = |key| field(&text, key).unwrap_or(0);
    Some(Events {
        max: value("max"),
        oom: value("oom"),
        oom_kill: value("oom_kill"),
    })
}

/// The start of an open cgroup file; None once the cgroup is gone.
pub(crate) fn read_at_start(fd: impl AsFd) -> Option<String> {
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

    fn snapshot_of(parent: u64, children: &[(&str, u64)]) -> Snapshot {
        Snapshot {
            parent,
            children: children
                .iter()
                .map(|(name, count)| (CString::new(*name).unwrap(), *count))
                .collect(),
        }
    }

    #[test]
    fn flat_keyed_fields_read_as_the_kernel_writes_them() {
        let events = "low 0\nhigh 3\nmax 7\noom 2\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(field(events, "oom_kill"), Some(1));
        assert_eq!(field(events, "oom"), Some(2));
        assert_eq!(field(events, "missing"), None);
        assert_eq!(field("populated 0\nfrozen 0\n", "populated"), Some(0));
    }

    #[test]
    fn the_kills_of_the_one_child_that_went_are_what_the_others_do_not_account_for() {
        let name = c"synaps-tool-a.scope";
        let before = snapshot_of(5, &[("synaps-tool-a.scope", 1), ("other.scope", 4)]);
        // Two more kills below the parent: one in the other child, one unaccounted for.
        let now = snapshot_of(7, &[("other.scope", 5)]);
        assert_eq!(kills_of_the_gone(name, &before, &now), Some(1));
        // None unaccounted for: none of its own, whoever else went.
        let quiet = snapshot_of(5, &[("other.scope", 4)]);
        assert_eq!(kills_of_the_gone(name, &before, &quiet), Some(0));
        let both_gone = snapshot_of(5, &[]);
        assert_eq!(kills_of_the_gone(name, &before, &both_gone), Some(0));
        // Kills unaccounted for, and two children went: whose cannot be told.
        let two = snapshot_of(
            5,
            &[
                ("synaps-tool-a.scope", 1),
                ("b.scope", 0),
                ("other.scope", 4),
            ],
        );
        assert_eq!(
            kills_of_the_gone(name, &two, &snapshot_of(6, &[("other.scope", 4)])),
            None
        );
        // A new child's kills are its own.
        let newcomer = snapshot_of(7, &[("other.scope", 4), ("new.scope", 2)]);
        assert_eq!(kills_of_the_gone(name, &before, &newcomer), Some(0));
        // Counts that fell (a child removed and made again under its name) cannot be told.
        let fell = snapshot_of(6, &[("other.scope", 0)]);
        assert_eq!(kills_of_the_gone(name, &before, &fell), None);
    }
}

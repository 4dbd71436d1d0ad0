//! The cgroup systemd-oomd would pick below a monitored unit, ranked as oomd ranks its candidates
//! (leaves, and groups the kernel kills whole; its `ManagedOOMPreference=` read as oomd reads it).

use std::collections::HashMap;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

use crate::kernel::cgroup_tree::{self, Met};
use crate::oomd::inputs::{monitored_dir, parses_true, stat_field, Meminfo};
use crate::oomd::rules::{CoveringRule, OomdRule};

/// The candidate cgroup below the rule's unit that oomd ranks first (a leaf, or a group the
/// kernel kills whole): under the pressure rule the most
/// reclaim since the last look (`pgscan`), then the most memory; under the swap rule the most
/// swap, past 5% of the machine's. Cgroups that oomd's preference omits are left out and those it
/// avoids ranked last ([`Preference::of`]).
pub(crate) fn pick(
    rule: &CoveringRule,
    leaf_pgscan: &mut HashMap<u64, u64>,
) -> Option<(PathBuf, u64)> {
    let root = monitored_dir(&rule.cgroup).ok()?;
    pick_below(&root, rule, leaf_pgscan)
}

/// [`pick`] among the cgroups below the monitored unit's directory `root`.
pub(crate) fn pick_below(
    root: &Path,
    rule: &CoveringRule,
    leaf_pgscan: &mut HashMap<u64, u64>,
) -> Option<(PathBuf, u64)> {
    let root_owner = rustix::fs::stat(root).ok().map(|meta| meta.st_uid);
    let swap_floor = Meminfo::read().map_or(0, |m| m.swap_total * 1024 / 20);
    let mut best: Option<(LeafRank, PathBuf, u64)> = None;
    // oomd's candidates (`recursively_get_cgroup_context`, src/oom/oomd-manager.c): the leaves
    // below the monitored unit, but a cgroup below it with `memory.oom.group` set is one
    // candidate, whole, never gone into. A tree that cannot be walked (gone meanwhile) has none.
    let _ = cgroup_tree::walk(root, |dir, path, met| {
        let whole = met == Met::Entered && path != root && oom_group(dir);
        if met == Met::Leaf || whole {
            if let Some((rank, ino)) = rank(rule, dir, root_owner, swap_floor, leaf_pgscan) {
                if best.as_ref().map_or(true, |(top, ..)| rank > *top) {
                    best = Some((rank, path.to_path_buf(), ino));
                }
            }
        }
        !whole
    });
    best.map(|(_, dir, ino)| (dir, ino))
}

/// Whether the cgroup open as `dir` has `memory.oom.group` set: the kernel then kills it whole,
/// and oomd ranks it as one candidate.
pub(crate) fn oom_group(dir: BorrowedFd<'_>) -> bool {
    cgroup_tree::read_at(dir, "memory.oom.group").is_ok_and(|text| text.trim() == "1")
}

/// How oomd ranks a candidate: not avoided first, then its reclaim since the last look and its
/// memory (the pressure rule), or its swap (the swap rule).
pub(crate) type LeafRank = (bool, u64, u64);

/// How oomd ranks the leaf cgroup open as `dir`, and its inode; None where oomd passes it over
/// (omitted, or using nothing the rule looks at). Read through the descriptor, at any depth.
pub(crate) fn rank(
    rule: &CoveringRule,
    dir: BorrowedFd<'_>,
    root_owner: Option<u32>,
    swap_floor: u64,
    leaf_pgscan: &mut HashMap<u64, u64>,
) -> Option<(LeafRank, u64)> {
    let meta = rustix::fs::fstat(dir).ok()?;
    let avoid = match Preference::of(dir, meta.st_uid, root_owner) {
        Preference::Omit => return None,
        Preference::Avoid => true,
        Preference::None => false,
    };
    let read = |name: &str| cgroup_tree::read_at(dir, name).ok();
    let rank = match rule.rule {
        OomdRule::MemoryPressure => {
            let current = read("memory.current").and_then(|t| t.trim().parse().ok());
            let pgscan = read("memory.stat").and_then(|t| stat_field(&t, "pgscan"));
            let (current, pgscan) = (current.unwrap_or(0), pgscan.unwrap_or(0));
            if pgscan == 0 && current == 0 {
                return None;
            }
            let before = leaf_pgscan.insert(meta.st_ino, pgscan).unwrap_or(pgscan);
            (!avoid, pgscan.saturating_sub(before), current)
        }
        OomdRule::Swap => {
            let swap = read("memory.swap.current").and_then(|t| t.trim().parse().ok());
            let swap = swap.unwrap_or(0);
            if swap <= swap_floor {
                return None;
            }
            (!avoid, swap, 0)
        }
    };
    Some((rank, meta.st_ino))
}

/// oomd's preference for a candidate cgroup (`ManagedOOMPreference=`, which the manager writes as
/// `user.oomd_avoid` and `user.oomd_omit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Preference {
    None,
    Avoid,
    Omit,
}

impl Preference {
    /// The preference as oomd reads it: each attribute a boolean as systemd parses one (anything
    /// else, like no attribute, is unset), `omit` over `avoid`; and only on a cgroup owned by root
    /// or by the owner of the monitored unit's cgroup (`root_owner`), so that a user cannot shield
    /// a cgroup of someone else's tree.
    /// `dir` is the cgroup's directory, open, and `owner` its owner.
    pub(crate) fn of(dir: BorrowedFd<'_>, owner: u32, root_owner: Option<u32>) -> Self {
        let honoured = owner == 0 || Some(owner) == root_owner;
        let set = |name: &str| {
            let mut value = [0u8; 8];
            // Every value systemd takes for a boolean fits: a longer one (ERANGE) is not one.
            rustix::fs::fgetxattr(dir, name, &mut value)
                .is_ok_and(|n| std::str::from_utf8(&value[..n]).is_ok_and(parses_true))
        };
        if !honoured {
            Preference::None
        } else if set("user.oomd_omit") {
            Preference::Omit
        } else if set("user.oomd_avoid") {
            Preference::Avoid
        } else {
            Preference::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::time::Duration;

    #[test]
    fn oomd_s_preference_is_read_as_oomd_reads_it() {
        let dir = std::env::temp_dir().join(format!("synaps-oomd-pref-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let uid = rustix::process::getuid().as_raw();
        let made = |name: &str, marks: &[(&str, &[u8])]| {
            let leaf = dir.join(name);
            std::fs::create_dir_all(&leaf).unwrap();
            for (mark, value) in marks {
                rustix::fs::setxattr(&leaf, *mark, value, rustix::fs::XattrFlags::empty())
                    .expect("the temporary directory's file system takes user xattrs");
            }
            leaf
        };
        let of_owned = |leaf: &Path, root_owner: Option<u32>| {
            let dir = std::fs::File::open(leaf).unwrap();
            let owner = rustix::fs::fstat(&dir).unwrap().st_uid;
            Preference::of(dir.as_fd(), owner, root_owner)
        };
        let of = |leaf: &Path| of_owned(leaf, Some(uid));
        assert_eq!(of(&made("none", &[])), Preference::None);
        assert_eq!(
            of(&made("omit", &[("user.oomd_omit", b"1")])),
            Preference::Omit
        );
        assert_eq!(
            of(&made("avoid", &[("user.oomd_avoid", b"Yes")])),
            Preference::Avoid
        );
        let both = made(
            "both",
            &[("user.oomd_avoid", b"1"), ("user.oomd_omit", b"on")],
        );
        assert_eq!(of(&both), Preference::Omit, "omit over avoid");
        let off = made(
            "off",
            &[("user.oomd_omit", b"0"), ("user.oomd_avoid", b"false")],
        );
        assert_eq!(
            of(&off),
            Preference::None,
            "a false boolean is no preference"
        );
        let odd = made(
            "odd",
            &[("user.oomd_omit", b"2"), ("user.oomd_avoid", b"truely yes")],
        );
        assert_eq!(of(&odd), Preference::None, "what is no boolean is unset");
        // Honoured only where the cgroup is root's or the monitored unit's owner's.
        let foreign = made("foreign", &[("user.oomd_omit", b"1")]);
        if uid == 0 {
            let other = rustix::process::Uid::from_raw(4242);
            rustix::fs::chown(&foreign, Some(other), None).unwrap();
            let omit = dir.join("omit");
            assert_eq!(
                of_owned(&omit, Some(4242)),
                Preference::Omit,
                "root's cgroup"
            );
        }
        assert_eq!(
            of_owned(&foreign, Some(uid + 1)),
            Preference::None,
            "someone else's cgroup shields nothing"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn oomd_s_candidates_are_the_leaves_and_the_groups_it_kills_whole() {
        let root = std::env::temp_dir().join(format!("synaps-oomd-pick-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let cgroup = |path: &str, current: u64, group: bool| {
            let dir = root.join(path);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("memory.current"), format!("{current}\n")).unwrap();
            std::fs::write(dir.join("memory.stat"), "anon 0\npgscan 7\n").unwrap();
            let flag = if group { "1\n" } else { "0\n" };
            std::fs::write(dir.join("memory.oom.group"), flag).unwrap();
        };
        cgroup("small", 100, false);
        cgroup("nest/deeper", 300, false);
        cgroup("group", 500, true);
        cgroup("group/inside", 1000, false);
        let rule = CoveringRule {
            rule: OomdRule::MemoryPressure,
            unit: "test.slice".into(),
            cgroup: "/test.slice".into(),
            limit: 50.0,
            duration: Duration::from_secs(30),
        };
        let (picked, _) = pick_below(&root, &rule, &mut HashMap::new()).unwrap();
        assert_eq!(
            picked,
            root.join("group"),
            "a group is one candidate, whole"
        );
        std::fs::write(root.join("group/memory.oom.group"), "0\n").unwrap();
        let (picked, _) = pick_below(&root, &rule, &mut HashMap::new()).unwrap();
        assert_eq!(picked, root.join("group/inside"), "else its leaves are");
        std::fs::remove_dir_all(&root).unwrap();
    }
}

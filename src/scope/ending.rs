//! How a scope ended: killed by systemd-oomd (and under which rule), by the kernel's OOM killer, by
//! a scope handle's kill, or on its own; and what that answer rests on ([`Evidence`]). The manager
//! collects a scope the moment it ends, its cgroup with it, so a handle keeps what it needs to
//! answer afterwards:
//! - the marks written on the scope's cgroup and on the cgroups a tool made below it, read as they
//!   are written (`oom_watch`). systemd-oomd writes `user.oomd_ooms` on the cgroup it kills before
//!   the kill (251 and later) and `user.oomd_kill` after it (every version); a handle's kill that
//!   found processes writes `user.synaps_kill` before it kills. The user owns these cgroups, so
//!   any process of the user could have written any of them: a mark is evidence a tool can forge.
//! - systemd-oomd's `Killed` signal (252 and later), heard on the system bus from the owner of
//!   `org.freedesktop.oom1` (`oomd::signal`): evidence no process of the user can make, which also
//!   names the rule. Where it is heard, an oomd mark without the signal is not taken for oomd's.
//! - the kernel's OOM kills (`memory.events`: `oom_kill`, counting the cgroups below too), counted
//!   while the scope runs and read a last time once it is empty (`oom_watch`).
//!
//! A handle holds no descriptor: the scope's cgroup is opened when it is looked at, and checked to
//! be the one the handle was made for (its inode number). Once a scope has ended, the first answer
//! given is kept, and every later ask gets it again at once.
//!
//! Without the signal, which oomd rule acted is told from the rules that cover the scope
//! (`ManagedOOMSwap=kill` or `ManagedOOMMemoryPressure=kill` on its slices, on `user@UID.service`
//! or on `-.slice`), asked of the user manager and the system manager, when only one kind covers it
//! and both managers answered.

use std::ffi::OsString;
use std::fmt;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::kernel::cgroup::{self, has_any_mark};
use crate::oomd::rules::{self, OomdDefaults, OomdRule};
use crate::oomd::signal::{self, Claim, Said, Subscription};
use crate::oomd::OOMD_MARKS;
use crate::per_process::lock;
use crate::scope::oom_watch::{self, OomKills, ScopeWatch, HANDLE_KILL_MARK};

/// How a scope ended, as far as its handle can tell.
///
/// Exhaustive on purpose: every surface maps each ending, and a new one must not compile unmapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScopeEnding {
    /// Processes are still in the scope.
    Running,
    /// systemd-oomd killed it (the scope's cgroup or one below it). `rule` is the one oomd's
    /// signal names; without the signal, the one rule that covers the scope, None where both do or
    /// a manager could not say.
    KilledByOomd {
        /// The rule that acted, where only one could have.
        rule: Option<OomdRule>,
    },
    /// The kernel's OOM killer killed a process in it (a memory limit of its slice, say), whatever
    /// ended the rest.
    KilledByKernelOom {
        /// How many processes it killed (at least: see [`Evidence::MemoryEventsLost`]).
        kills: u64,
    },
    /// A scope handle's kill (this handle or another, in any process) found processes in it and
    /// killed them. A kill that found the scope empty (a clean-up after the tool's exit) is not
    /// this.
    KilledByHandle,
    /// Its processes ended without any of the above.
    EndedOnItsOwn,
    /// It ended, but how cannot be told: no evidence of a kill, and no memory controller to count
    /// the kernel's OOM kills by (or the count was lost: the cgroup went before its last read).
    Unknown,
}

impl ScopeEnding {
    /// The ending's word on every surface: `running`, `oomd`, `kernel-oom`, `handle-kill`,
    /// `on-its-own` or `unknown`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ScopeEnding::Running => "running",
            ScopeEnding::KilledByOomd { .. } => "oomd",
            ScopeEnding::KilledByKernelOom { .. } => "kernel-oom",
            ScopeEnding::KilledByHandle => "handle-kill",
            ScopeEnding::EndedOnItsOwn => "on-its-own",
            ScopeEnding::Unknown => "unknown",
        }
    }
}

impl fmt::Display for ScopeEnding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScopeEnding::Running => f.write_str("still running"),
            ScopeEnding::KilledByOomd { rule: Some(rule) } => {
                write!(f, "killed by systemd-oomd ({} rule)", rule.as_str())
            }
            ScopeEnding::KilledByOomd { rule: None } => f.write_str("killed by systemd-oomd"),
            ScopeEnding::KilledByKernelOom { kills } => {
                write!(f, "{kills} process(es) killed by the kernel's OOM killer")
            }
            ScopeEnding::KilledByHandle => f.write_str("killed through a scope handle"),
            ScopeEnding::EndedOnItsOwn => f.write_str("ended on its own"),
            ScopeEnding::Unknown => f.write_str("ended; how cannot be told here"),
        }
    }
}

/// What an answer of [`ScopeHandle::ending`](crate::ScopeHandle::ending) rests on.
///
/// Exhaustive on purpose: every surface maps each one, and a new one must not compile unmapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Evidence {
    /// The kernel says processes are in the scope (`cgroup.events`).
    CgroupEvents,
    /// systemd-oomd's `Killed` signal on the system bus, sent by the owner of
    /// `org.freedesktop.oom1`: no process of the user can send it.
    OomdSignal,
    /// oomd's mark on the cgroup (`user.oomd_ooms`, `user.oomd_kill`), where its signal could not
    /// be heard: any process of the user could have written it.
    OomdMark,
    /// A kill through this handle or a clone of it, in this process.
    OwnKill,
    /// The mark of a handle's kill in another process (`user.synaps_kill`): any process of the
    /// user could have written it.
    KillMark,
    /// The kernel's count of OOM kills (`memory.events`), read once the scope was empty.
    MemoryEvents,
    /// The kernel's count of OOM kills, but the cgroup went before its last read: kills after the
    /// last read made are not known.
    MemoryEventsLost,
    /// Nothing: no mark, no signal, no count.
    Nothing,
}

impl Evidence {
    /// The evidence's word on every surface: `cgroup-events`, `oomd-signal`, `oomd-mark`,
    /// `own-kill`, `kill-mark`, `memory-events`, `memory-events-lost` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            Evidence::CgroupEvents => "cgroup-events",
            Evidence::OomdSignal => "oomd-signal",
            Evidence::OomdMark => "oomd-mark",
            Evidence::OwnKill => "own-kill",
            Evidence::KillMark => "kill-mark",
            Evidence::MemoryEvents => "memory-events",
            Evidence::MemoryEventsLost => "memory-events-lost",
            Evidence::Nothing => "none",
        }
    }

    /// Whether any process of the user could have made this evidence (a mark on a cgroup the user
    /// owns): a tool can forge it.
    pub fn forgeable(self) -> bool {
        matches!(self, Evidence::OomdMark | Evidence::KillMark)
    }
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Evidence::CgroupEvents => "the kernel's cgroup.events",
            Evidence::OomdSignal => "systemd-oomd's Killed signal",
            Evidence::OomdMark => "systemd-oomd's mark on the cgroup, which any process of the user could have written",
            Evidence::OwnKill => "this handle's own kill",
            Evidence::KillMark => "a handle's kill mark on the cgroup, which any process of the user could have written",
            Evidence::MemoryEvents => "the kernel's memory.events",
            Evidence::MemoryEventsLost => "the kernel's memory.events, whose last count was lost with the cgroup",
            Evidence::Nothing => "nothing",
        })
    }
}

/// How a scope ended, and what that rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ending {
    /// How it ended.
    pub how: ScopeEnding,
    /// What that answer rests on.
    pub evidence: Evidence,
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (told by {})", self.how, self.evidence)
    }
}

/// What a handle keeps from the moment it is made, to tell how its scope ended: no descriptor.
#[derive(Debug)]
pub(crate) struct Witness {
    /// The scope's cgroup directory, and the inode number of the cgroup the handle was made for.
    dir: PathBuf,
    ino: u64,
    /// What is watched while the scope runs: the kernel's OOM kills (with a memory controller),
    /// the marks on the scope and the cgroups made below it; None where the watch could not be
    /// set up.
    watch: Option<Arc<ScopeWatch>>,
    /// oomd's `Killed` signal, heard since before the handle was made, and the scope's claim on
    /// the kills it names; None where it cannot be.
    oomd: Option<(Arc<Subscription>, Arc<Claim>)>,
    /// The answer given once the scope had ended, kept for every later ask.
    told: Mutex<Option<Ending>>,
    /// The process the witness was made in: a forked child's copy keeps no answer (a lock held at
    /// the fork stays held there).
    made_in: u32,
}

impl Drop for Witness {
    /// The last handle on the scope is gone: what watches it goes now (see
    /// [`oom_watch::release`]).
    fn drop(&mut self) {
        if let Some(watch) = self.watch.take() {
            oom_watch::release(watch, self.ino);
        }
    }
}

impl Witness {
    /// Starts watching the scope `unit`, whose cgroup is `cgroup` (from the hierarchy's root) at
    /// the directory `dir` with inode number `ino` (first: a tool may run out of memory at once,
    /// and its count must be watched from the start), and subscribes to oomd's signal on the
    /// system bus that `env` names, claiming the kills of this cgroup. A kill that came before
    /// the claim could not be heard: where oomd's mark is already there once the claim is made,
    /// the signal is not relied on for this scope.
    pub(crate) fn keep(
        unit: &str,
        cgroup: &str,
        dir: &Path,
        ino: u64,
        env: &[(OsString, OsString)],
    ) -> Witness {
        let watch = oom_watch::watch(dir, ino, unit);
        let mut witness = Witness {
            dir: dir.to_path_buf(),
            ino,
            watch,
            oomd: None,
            told: Mutex::new(None),
            made_in: std::process::id(),
        };
        let claimed = signal::subscription(env).and_then(|subscription| {
            let claim = subscription.claim(cgroup, dir, ino)?;
            Some((subscription, claim))
        });
        witness.oomd = claimed.filter(|_| !witness.marked_anywhere(&OOMD_MARKS));
        witness
    }

    /// Marks the scope, open as `dir`, as killed through a handle, before a kill that found
    /// processes; false where the cgroup takes no extended attributes (Linux before 5.7).
    pub(crate) fn mark_handle_kill(dir: &OwnedFd) -> bool {
        rustix::fs::fsetxattr(dir, HANDLE_KILL_MARK, b"1", rustix::fs::XattrFlags::empty()).is_ok()
    }

    /// How the scope ended (`running` says whether it still holds processes) and on what that
    /// rests. `killed_here` says whether this handle or a clone of it killed processes in it.
    /// The first answer given once the scope has ended is kept and given again.
    pub(crate) fn ending(
        &self,
        running: bool,
        killed_here: bool,
        cgroup: &str,
        env: &[(OsString, OsString)],
        deadline: Instant,
    ) -> Ending {
        if running {
            return Ending {
                how: ScopeEnding::Running,
                evidence: Evidence::CgroupEvents,
            };
        }
        let keeps = self.made_in == std::process::id();
        if keeps {
            if let Some(told) = *lock(&self.told) {
                return told;
            }
        }
        let ending = self.tell(killed_here, cgroup, env, deadline);
        if keeps {
            return *lock(&self.told).get_or_insert(ending);
        }
        ending
    }

    /// How the scope, now empty, ended. An OOM kill, oomd's or the kernel's, comes first: it is
    /// what ended the tool, whatever swept up after it.
    fn tell(
        &self,
        killed_here: bool,
        cgroup: &str,
        env: &[(OsString, OsString)],
        deadline: Instant,
    ) -> Ending {
        let told = |how, evidence| Ending { how, evidence };
        // Every notice the kernel queued before this ask is taken in first: a mark written, or
        // the scope's end, is then in what the watch has seen.
        if self.watch.is_some() {
            oom_watch::catch_up();
        }
        let oomd_marked = self.marked_anywhere(&OOMD_MARKS);
        // A cgroup whose marks could not be read (removed as they were written) may have held
        // oomd's.
        let marks_missed = self.watch.as_ref().is_some_and(|w| w.marks_missed());
        let said = self.oomd.as_ref().map(|(oomd, claim)| {
            // oomd marks before it kills and signals after, in one turn of its loop: with a mark
            // (or a cgroup whose marks went unread), its signal may still be on its way, and is
            // caught up with by asking oomd itself for an answer, which comes after it.
            let wait = (oomd_marked || marks_missed).then_some(deadline);
            oomd.said_of(claim, wait)
        });
        match said {
            Some(Said::Killed(ref reason)) => {
                let rule = OomdRule::of_reason(reason);
                return told(ScopeEnding::KilledByOomd { rule }, Evidence::OomdSignal);
            }
            Some(Said::Nothing) => {}
            Some(Said::CannotTell) | None if oomd_marked => {
                return told(
                    ScopeEnding::KilledByOomd {
                        rule: oomd_rule(cgroup, env, deadline),
                    },
                    Evidence::OomdMark,
                );
            }
            Some(Said::CannotTell) | None => {}
        }
        let counted = self
            .watch
            .as_ref()
            .and_then(|w| w.kills_once_empty(deadline));
        let (kills, exact) = match counted {
            Some(OomKills::Exactly(kills)) => (Some(kills), true),
            Some(OomKills::AtLeast(kills)) => (Some(kills), false),
            None => (None, false),
        };
        let count = if exact {
            Evidence::MemoryEvents
        } else {
            Evidence::MemoryEventsLost
        };
        if let Some(kills @ 1..) = kills {
            return told(ScopeEnding::KilledByKernelOom { kills }, count);
        }
        if killed_here {
            return told(ScopeEnding::KilledByHandle, Evidence::OwnKill);
        }
        if self.marked_anywhere(&[HANDLE_KILL_MARK]) {
            return told(ScopeEnding::KilledByHandle, Evidence::KillMark);
        }
        // No kill of any kind is known. A cgroup whose marks went unread could still have held
        // oomd's, unless oomd's signal, heard throughout, would have told.
        let all_seen = !marks_missed || said == Some(Said::Nothing);
        match kills {
            Some(0) if exact && all_seen => told(ScopeEnding::EndedOnItsOwn, count),
            Some(_) => told(ScopeEnding::Unknown, count),
            None => told(ScopeEnding::Unknown, Evidence::Nothing),
        }
    }

    /// Whether any of `names` was seen on the scope's cgroup or on a cgroup made below it, or is
    /// on the scope's cgroup now (where it is still the handle's, or held since it was empty).
    fn marked_anywhere(&self, names: &[&str]) -> bool {
        self.watch
            .as_ref()
            .is_some_and(|watch| watch.marked(names) || watch.held_marked(names))
            || cgroup::open_same(&self.dir, self.ino).is_some_and(|dir| has_any_mark(&dir, names))
    }
}

/// Which rule could have made oomd kill the scope at `cgroup`: the one kind that its ancestors
/// are set to kill by, asked of the manager that owns each. None where both kinds do, or where any
/// manager could not say.
fn oomd_rule(cgroup: &str, env: &[(OsString, OsString)], deadline: Instant) -> Option<OomdRule> {
    let covering = rules::covering(cgroup, env, &OomdDefaults::default(), deadline).ok()?;
    let mut rules: Vec<OomdRule> = covering.iter().map(|covering| covering.rule).collect();
    rules.sort_by_key(|rule| rule.as_str());
    rules.dedup();
    match rules.as_slice() {
        [rule] => Some(*rule),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ending_and_rule_has_one_word() {
        let endings = [
            ScopeEnding::Running,
            ScopeEnding::KilledByOomd { rule: None },
            ScopeEnding::KilledByKernelOom { kills: 1 },
            ScopeEnding::KilledByHandle,
            ScopeEnding::EndedOnItsOwn,
            ScopeEnding::Unknown,
        ];
        let words: std::collections::HashSet<_> = endings.iter().map(ScopeEnding::as_str).collect();
        assert_eq!(words.len(), endings.len());
        assert_ne!(OomdRule::Swap.as_str(), OomdRule::MemoryPressure.as_str());
    }
}

//! systemd-oomd's inputs, read as oomd reads them: a monitored unit's pressure and reclaim at its
//! cadence (with the kernel's PSI trigger while calm), `/proc/meminfo`'s memory and swap and the
//! pace swap fills at, and the marks that say oomd has acted.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};

use crate::kernel::cgroup::{self, has_any_mark, Cgroup};
use crate::kernel::pressure;
use crate::oomd::warning::CannotWarnKind;
use crate::oomd::OOMD_MARKS;

/// The directory of a monitored unit's cgroup (from the hierarchy's root).
pub(crate) fn monitored_dir(cgroup: &str) -> Result<PathBuf, (CannotWarnKind, String)> {
    Cgroup::at(cgroup)
        .map(|cgroup| cgroup.dir().to_path_buf())
        .map_err(|e| (CannotWarnKind::Unreadable, e.to_string()))
}

/// What the thread keeps of one monitored unit under the pressure rule.
pub(crate) struct Monitor {
    pub(crate) dir: PathBuf,
    pub(crate) limit: f64,
    /// The kernel's trigger on its `memory.pressure`, where one could be set.
    pub(crate) trigger: Option<OwnedFd>,
    pub(crate) avg10: f64,
    /// Since when the pressure is over the limit (oomd's own moment, at its cadence).
    pub(crate) above_since: Option<Instant>,
    /// The unit's `pgscan` when last read, and when it last rose.
    pub(crate) pgscan: Option<u64>,
    pub(crate) reclaimed_at: Option<Instant>,
    /// The cgroup oomd would pick now (its directory and inode number), once asked this round.
    pub(crate) pick: Option<Option<(PathBuf, u64)>>,
    /// The pick of the round before, while the pressure was over the limit.
    pub(crate) last_pick: Option<(PathBuf, u64)>,
    /// Until when oomd, having just acted here, acts on nothing more (its post-action delay).
    pub(crate) quiet_until: Option<Instant>,
    /// The unit's cgroup went away under its trigger (which then errs at once, every time): read at
    /// oomd's cadence, and armed again once a cgroup of that name is back.
    pub(crate) lost: bool,
}

/// How long ago reclaim must have gone on for oomd to act on pressure.
pub(crate) const RECLAIM_RECENT: Duration = Duration::from_secs(30);
/// How long oomd acts on nothing more under the pressure rule after a kill: the pressure lags, and
/// what is left is not to be killed for what the killed cgroup caused.
pub(crate) const POST_ACTION_DELAY: Duration = Duration::from_secs(15);
/// oomd's cadence for the pressure rule, and this thread's while a figure is raised.
pub(crate) const CADENCE: Duration = Duration::from_secs(1);
/// How soon swap, at the pace it fills, must reach its limit for the swap rule to be on its way.
pub(crate) const SWAP_HORIZON: Duration = Duration::from_secs(10);
/// The cadence while swap is past half its limit, or memory within 20 points of it: a runaway can
/// fill a gigabyte of swap in a second or two.
pub(crate) const SWAP_CADENCE: Duration = Duration::from_millis(100);
/// The window of the kernel's trigger: Linux 6.4 and later take an unprivileged trigger only in
/// multiples of 2 s.
pub(crate) const TRIGGER_WINDOW_USEC: u64 = 2_000_000;

/// A PSI trigger on `dir`'s `memory.pressure`: woken when full stalls reach half of `limit` over
/// the window. None where the kernel refuses one (no PSI, or no unprivileged trigger).
pub(crate) fn arm(dir: &Path, limit: f64) -> Option<OwnedFd> {
    let file = match rustix::fs::open(
        dir.join("memory.pressure"),
        OFlags::RDWR | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(file) => file,
        Err(e) => {
            tracing::debug!(target: crate::diag::TARGET, "no PSI trigger on {}: {e}; read at oomd's cadence", dir.display());
            return None;
        }
    };
    let stall = ((limit / 200.0) * TRIGGER_WINDOW_USEC as f64).max(1.0) as u64;
    let trigger = format!("full {stall} {TRIGGER_WINDOW_USEC}\0");
    match rustix::io::write(&file, trigger.as_bytes()) {
        Ok(_) => {
            tracing::debug!(target: crate::diag::TARGET, "a PSI trigger on {} ({}): woken by the kernel while the pressure is calm", dir.display(), trigger.trim_end_matches('\0'));
            Some(file)
        }
        Err(e) => {
            tracing::debug!(target: crate::diag::TARGET, "no PSI trigger on {}: {e}; read at oomd's cadence", dir.display());
            None
        }
    }
}

impl Monitor {
    /// The monitor of the unit whose cgroup is `dir`, under `limit`, nothing read yet.
    pub(crate) fn new(dir: PathBuf, limit: f64, trigger: Option<OwnedFd>) -> Self {
        Monitor {
            dir,
            limit,
            trigger,
            avg10: 0.0,
            above_since: None,
            pgscan: None,
            reclaimed_at: None,
            pick: None,
            last_pick: None,
            quiet_until: None,
            lost: false,
        }
    }

    /// Lets go of a trigger whose cgroup went away: polled, it would wake the thread at once, every
    /// time (the kernel errs on a trigger of a removed cgroup).
    pub(crate) fn lose(&mut self, now: Instant) {
        tracing::debug!(target: crate::diag::TARGET, "the cgroup {} went away under its PSI trigger; read at oomd's cadence until it is back", self.dir.display());
        self.trigger = None;
        self.lost = true;
        // Gone while over its limit with a pick: oomd's kill may have taken the unit's own cgroup.
        if self.above_since.is_some() && self.last_pick.is_some() {
            self.quiet_until = Some(now + POST_ACTION_DELAY);
        }
    }

    /// Where the cgroup went away and one of its name is back, a trigger on the new one, and its
    /// readings from afresh (the cgroup oomd ranks is another).
    pub(crate) fn follow(&mut self) {
        if !self.lost || cgroup::inode_at(&self.dir).is_none() {
            return;
        }
        // Where no trigger can be set yet (its pressure files hidden), tried again next round.
        let Some(trigger) = arm(&self.dir, self.limit) else {
            return;
        };
        let quiet_until = self.quiet_until;
        *self = Monitor::new(self.dir.clone(), self.limit, Some(trigger));
        self.quiet_until = quiet_until;
    }

    /// Reads the unit's pressure and reclaim, as oomd does at each of its rounds. Where the cgroup
    /// oomd would have picked last round bears oomd's mark, or is gone, while the pressure is over
    /// the limit, oomd is taken to have killed it, and to act on nothing more here for its
    /// post-action delay (the tool left beside it would rank first while it dies).
    pub(crate) fn read(&mut self, now: Instant) {
        let avg10 = std::fs::read_to_string(self.dir.join("memory.pressure"))
            .ok()
            .and_then(|text| pressure::parse(&text))
            .and_then(|p| p.full)
            .map_or(0.0, |full| full.avg10);
        self.avg10 = avg10;
        if avg10 > self.limit {
            self.above_since.get_or_insert(now);
        } else {
            self.above_since = None;
        }
        let stat = std::fs::read_to_string(self.dir.join("memory.stat"));
        if let Some(pgscan) = stat.ok().and_then(|text| stat_field(&text, "pgscan")) {
            if self.pgscan.is_some_and(|before| pgscan > before) {
                self.reclaimed_at = Some(now);
            }
            self.pgscan = Some(pgscan);
        }
        if let Some(Some(pick)) = self.pick.take() {
            self.last_pick = Some(pick);
        }
        // oomd marks the cgroup it kills before it kills (251 and later), and the cgroup goes once
        // its processes have died: either says it acted, the mark at once.
        let acted = self.above_since.is_some()
            && self.last_pick.as_ref().is_some_and(|(dir, ino)| {
                cgroup::open_same(dir, *ino).map_or(true, |open| has_any_mark(&open, &OOMD_MARKS))
            });
        if acted {
            self.quiet_until = Some(now + POST_ACTION_DELAY);
            self.last_pick = None;
        }
        if self.above_since.is_none() {
            self.last_pick = None;
        }
    }

    /// Whether oomd is in its post-action delay here.
    pub(crate) fn quiet(&self, now: Instant) -> bool {
        self.quiet_until.is_some_and(|until| now < until)
    }
}

/// Whether `text` is a boolean that systemd's `parse_boolean` reads as true.
pub(crate) fn parses_true(text: &str) -> bool {
    ["1", "yes", "y", "true", "t", "on"]
        .iter()
        .any(|word| text.eq_ignore_ascii_case(word))
}

/// A field of a cgroup's `memory.stat`, given its text.
pub(crate) fn stat_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        (key == name).then(|| value.trim().parse().ok())?
    })
}

/// How fast swap fills: readings kept for about a second.
#[derive(Default)]
pub(crate) struct SwapPace {
    pub(crate) readings: std::collections::VecDeque<(Instant, f64)>,
}

impl SwapPace {
    /// Takes in `meminfo` read at `now`; the points of swap gained per second over the readings of
    /// about the last second (0 until there are two at least half a second apart).
    pub(crate) fn rising(&mut self, meminfo: &Meminfo, now: Instant) -> f64 {
        let used = meminfo.swap_used_percent();
        self.readings.push_back((now, used));
        while self.readings.len() > 2
            && self
                .readings
                .get(1)
                .is_some_and(|(at, _)| now.saturating_duration_since(*at) >= Duration::from_secs(1))
        {
            self.readings.pop_front();
        }
        match self.readings.front() {
            Some((at, before))
                if now.saturating_duration_since(*at) >= Duration::from_millis(500) =>
            {
                (used - before) / now.saturating_duration_since(*at).as_secs_f64()
            }
            _ => 0.0,
        }
    }
}

/// The machine's memory and swap, in kB, as oomd reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meminfo {
    pub(crate) mem_total: u64,
    pub(crate) mem_available: u64,
    pub(crate) swap_total: u64,
    pub(crate) swap_free: u64,
}

impl Meminfo {
    pub(crate) fn read() -> Option<Meminfo> {
        Meminfo::parse(&std::fs::read_to_string("/proc/meminfo").ok()?)
    }

    pub(crate) fn parse(text: &str) -> Option<Meminfo> {
        let field = |name: &str| {
            text.lines().find_map(|line| {
                let rest = line.strip_prefix(name)?.strip_prefix(':')?;
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
        };
        Some(Meminfo {
            mem_total: field("MemTotal")?,
            mem_available: field("MemAvailable")?,
            swap_total: field("SwapTotal")?,
            swap_free: field("SwapFree")?,
        })
    }

    pub(crate) fn swap_used_percent(&self) -> f64 {
        if self.swap_total == 0 {
            return 0.0;
        }
        self.swap_total.saturating_sub(self.swap_free) as f64 * 100.0 / self.swap_total as f64
    }

    pub(crate) fn memory_used_percent(&self) -> f64 {
        if self.mem_total == 0 {
            return 0.0;
        }
        self.mem_total.saturating_sub(self.mem_available) as f64 * 100.0 / self.mem_total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_the_pick_is_marked_or_gone_under_pressure_oomd_is_taken_to_rest_for_its_post_action_delay(
    ) {
        let dir = std::env::temp_dir().join(format!("synaps-oomd-warn-{}", std::process::id()));
        let leaf = dir.join("tool.scope");
        std::fs::create_dir_all(&leaf).unwrap();
        let pressure = "some avg10=20.00 avg60=1.00 avg300=0.00 total=1\nfull avg10=15.00 avg60=1.00 avg300=0.00 total=1\n";
        std::fs::write(dir.join("memory.pressure"), pressure).unwrap();
        let mut monitor = Monitor::new(dir.clone(), 2.0, None);
        let start = Instant::now();
        monitor.read(start);
        assert_eq!(monitor.avg10, 15.0);
        assert_eq!(monitor.above_since, Some(start));
        monitor.pick = Some(Some((leaf.clone(), cgroup::inode_at(&leaf).unwrap())));
        let later = start + Duration::from_secs(1);
        monitor.read(later);
        assert!(!monitor.quiet(later), "the pick is still there");
        // Marked by oomd, still there while its processes die: oomd acted.
        let marked = dir.join("marked.scope");
        std::fs::create_dir_all(&marked).unwrap();
        rustix::fs::setxattr(
            &marked,
            "user.oomd_ooms",
            b"1",
            rustix::fs::XattrFlags::empty(),
        )
        .expect("the temporary directory's file system takes user xattrs, as cgroup2 does");
        let mut other = Monitor::new(dir.clone(), 2.0, None);
        other.read(start);
        other.pick = Some(Some((marked.clone(), cgroup::inode_at(&marked).unwrap())));
        other.read(start + Duration::from_secs(1));
        assert!(
            other.quiet(start + Duration::from_secs(2)),
            "a marked pick is oomd's kill"
        );
        std::fs::remove_dir(&marked).unwrap();
        std::fs::remove_dir(&leaf).unwrap();
        let killed = start + Duration::from_secs(2);
        monitor.read(killed);
        assert!(monitor.quiet(killed + Duration::from_secs(14)));
        assert!(!monitor.quiet(killed + POST_ACTION_DELAY));
        assert_eq!(
            monitor.above_since,
            Some(start),
            "oomd keeps the moment the limit was crossed"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn swap_s_pace_is_taken_over_about_the_last_second() {
        let meminfo = |swap_used: u64| Meminfo {
            mem_total: 100,
            mem_available: 5,
            swap_total: 100,
            swap_free: 100 - swap_used,
        };
        let mut pace = SwapPace::default();
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        assert_eq!(pace.rising(&meminfo(10), start), 0.0, "one reading");
        assert_eq!(pace.rising(&meminfo(12), at(100)), 0.0, "too soon to tell");
        assert_eq!(pace.rising(&meminfo(20), at(500)), 20.0);
        assert_eq!(pace.rising(&meminfo(30), at(1000)), 20.0);
        // Readings older than about a second are let go: the pace is the recent one.
        assert_eq!(pace.rising(&meminfo(30), at(2100)), 0.0);
    }

    #[test]
    fn meminfo_is_read_as_oomd_reads_it() {
        let text = "MemTotal:        8000000 kB\nMemFree:  10 kB\nMemAvailable:    2000000 kB\nSwapTotal:       1000000 kB\nSwapFree:         250000 kB\n";
        let meminfo = Meminfo::parse(text).unwrap();
        assert_eq!(meminfo.memory_used_percent(), 75.0);
        assert_eq!(meminfo.swap_used_percent(), 75.0);
        assert_eq!(Meminfo::parse("MemTotal: 1 kB\n"), None);
    }
}

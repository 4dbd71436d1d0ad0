//! The judgement: for every watched scope, whether a rule that covers it is on its way to firing
//! and the scope is oomd's likeliest pick, and how sure; and what a watch is made of.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::kernel::cgroup;
use crate::oomd::inputs::{Meminfo, Monitor, RECLAIM_RECENT, SWAP_HORIZON};
use crate::oomd::pick::pick;
use crate::oomd::rules::{CoveringRule, OomdRule};
use crate::oomd::warning::{OomdWarning, Sureness};

/// What a watch calls with each warning.
pub(crate) type Deliver = Box<dyn Fn(&OomdWarning) + Send + Sync>;

/// Where a watch's warnings go, until the watch is dropped.
pub(crate) struct Sink {
    pub(crate) deliver: Mutex<Option<Deliver>>,
    /// Set by a watch dropped on the thread that delivers (from inside its own callback).
    pub(crate) closed: AtomicBool,
}

/// One scope a watch warns about.
pub(crate) struct Scope {
    pub(crate) unit: String,
    pub(crate) dir: PathBuf,
    pub(crate) ino: u64,
    /// The rules that cover it and can fire, each with the surest warning sent in this episode.
    pub(crate) rules: Vec<(CoveringRule, Option<Sureness>)>,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) watches: HashMap<u64, Registered>,
    pub(crate) next_id: u64,
    /// The thread's id, once started.
    pub(crate) thread: Option<std::thread::ThreadId>,
    /// Bumped at each change of the watches, so the thread plans anew.
    pub(crate) generation: u64,
}

pub(crate) struct Registered {
    pub(crate) sink: Arc<Sink>,
    pub(crate) scopes: Vec<Scope>,
}

/// Decides, for every watched scope, whether a rule that covers it is on its way and it is oomd's
/// likeliest pick; returns the warnings to deliver (each once per sureness and episode).
pub(crate) fn judge(
    state: &mut State,
    monitors: &mut HashMap<String, Monitor>,
    swap: Option<(&Meminfo, f64)>,
    leaf_pgscan: &mut HashMap<u64, u64>,
    now: Instant,
) -> Vec<(Arc<Sink>, OomdWarning)> {
    let mut swap_picks: HashMap<String, Option<(PathBuf, u64)>> = HashMap::new();
    let mut warnings = Vec::new();
    for watch in state.watches.values_mut() {
        for scope in &mut watch.scopes {
            for (rule, warned) in &mut scope.rules {
                let (verdict, pick) = match rule.rule {
                    OomdRule::MemoryPressure => {
                        let Some(monitor) = monitors.get_mut(&rule.cgroup) else {
                            *warned = None;
                            continue;
                        };
                        let verdict = pressure_verdict(
                            rule,
                            monitor.avg10,
                            monitor.above_since,
                            monitor.reclaimed_at,
                            now,
                        );
                        if verdict.is_none() {
                            *warned = None;
                            continue;
                        }
                        if monitor.quiet(now)
                            || warned.is_some_and(|before| Some(before) >= verdict.map(|v| v.2))
                        {
                            continue;
                        }
                        let pick = monitor
                            .pick
                            .get_or_insert_with(|| pick(rule, leaf_pgscan))
                            .clone();
                        (verdict, pick)
                    }
                    OomdRule::Swap => {
                        let verdict =
                            swap.and_then(|(meminfo, rising)| swap_verdict(rule, meminfo, rising));
                        if verdict.is_none() {
                            *warned = None;
                            continue;
                        }
                        if warned.is_some_and(|before| Some(before) >= verdict.map(|v| v.2)) {
                            continue;
                        }
                        let pick = swap_picks
                            .entry(rule.cgroup.clone())
                            .or_insert_with(|| pick(rule, leaf_pgscan))
                            .clone();
                        (verdict, pick)
                    }
                };
                let Some((figure, held_for, sure)) = verdict else {
                    continue;
                };
                let likeliest = pick.is_some_and(|(dir, _)| {
                    dir.starts_with(&scope.dir) && cgroup::inode_at(&scope.dir) == Some(scope.ino)
                });
                if !likeliest {
                    continue;
                }
                *warned = Some(sure);
                warnings.push((
                    Arc::clone(&watch.sink),
                    OomdWarning {
                        unit: scope.unit.clone(),
                        rule: rule.rule,
                        monitored: rule.unit.clone(),
                        figure,
                        limit: rule.limit,
                        held_for,
                        duration: rule.duration,
                        sure,
                    },
                ));
            }
        }
    }
    warnings
}

/// Whether the pressure rule is on its way: the figure, how long it has held, and how sure.
pub(crate) fn pressure_verdict(
    rule: &CoveringRule,
    avg10: f64,
    above_since: Option<Instant>,
    reclaimed_at: Option<Instant>,
    now: Instant,
) -> Option<(f64, Duration, Sureness)> {
    let since = above_since?;
    let held = now.saturating_duration_since(since);
    let reclaiming =
        reclaimed_at.is_some_and(|at| now.saturating_duration_since(at) <= RECLAIM_RECENT);
    let sure = if held >= rule.duration / 2 && reclaiming {
        Sureness::Likely
    } else {
        Sureness::Possible
    };
    Some((avg10, held, sure))
}

/// Whether the swap rule is on its way: swap used, and how sure. `rising` is how fast swap fills,
/// in points per second (over about the last second). `Possible` within 10 points of the limit,
/// or, with memory within 10 points and swap past half the limit, where swap at its pace reaches
/// the limit within [`SWAP_HORIZON`]; `Likely` within 3 points.
pub(crate) fn swap_verdict(
    rule: &CoveringRule,
    meminfo: &Meminfo,
    rising: f64,
) -> Option<(f64, Duration, Sureness)> {
    let (swap, memory) = (meminfo.swap_used_percent(), meminfo.memory_used_percent());
    let within = |points: f64| swap >= rule.limit - points && memory >= rule.limit - points;
    let soon = memory >= rule.limit - 10.0
        && swap >= rule.limit / 2.0
        && rising > 0.0
        && (rule.limit - swap) / rising <= SWAP_HORIZON.as_secs_f64();
    let sure = if within(3.0) {
        Sureness::Likely
    } else if within(10.0) || soon {
        Sureness::Possible
    } else {
        return None;
    };
    Some((swap, Duration::ZERO, sure))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(kind: OomdRule, limit: f64, duration: u64) -> CoveringRule {
        CoveringRule {
            rule: kind,
            unit: "user@1000.service".into(),
            cgroup: "/user.slice/user-1000.slice/user@1000.service".into(),
            limit,
            duration: Duration::from_secs(duration),
        }
    }

    #[test]
    fn pressure_warns_from_the_crossing_and_is_likely_after_half_the_duration_with_reclaim() {
        let rule = rule(OomdRule::MemoryPressure, 50.0, 20);
        let start = Instant::now();
        assert_eq!(
            pressure_verdict(&rule, 40.0, None, Some(start), start),
            None
        );
        let at = |secs| start + Duration::from_secs(secs);
        assert_eq!(
            pressure_verdict(&rule, 55.0, Some(start), Some(start), at(3)),
            Some((55.0, Duration::from_secs(3), Sureness::Possible))
        );
        assert_eq!(
            pressure_verdict(&rule, 70.0, Some(start), Some(at(9)), at(10)),
            Some((70.0, Duration::from_secs(10), Sureness::Likely))
        );
        // No reclaim for longer than oomd looks back: oomd would not act, so not likely.
        assert_eq!(
            pressure_verdict(&rule, 70.0, Some(start), Some(start), at(40)).map(|v| v.2),
            Some(Sureness::Possible)
        );
    }

    #[test]
    fn swap_warns_within_ten_points_of_the_limit_or_ten_seconds_of_it_and_is_likely_within_three() {
        let rule = rule(OomdRule::Swap, 90.0, 0);
        let meminfo = |mem_used: u64, swap_used: u64| Meminfo {
            mem_total: 100,
            mem_available: 100 - mem_used,
            swap_total: 100,
            swap_free: 100 - swap_used,
        };
        assert_eq!(swap_verdict(&rule, &meminfo(95, 70), 0.0), None);
        assert_eq!(
            swap_verdict(&rule, &meminfo(50, 95), 0.0),
            None,
            "memory is free"
        );
        assert_eq!(
            swap_verdict(&rule, &meminfo(95, 82), 0.0).map(|v| v.2),
            Some(Sureness::Possible)
        );
        assert_eq!(
            swap_verdict(&rule, &meminfo(95, 88), 0.0).map(|v| v.2),
            Some(Sureness::Likely)
        );
        // Filling at 3 points a second, 60 % is 10 s from the limit: on its way; at 2, not yet.
        assert_eq!(
            swap_verdict(&rule, &meminfo(95, 60), 3.0).map(|v| v.2),
            Some(Sureness::Possible)
        );
        assert_eq!(swap_verdict(&rule, &meminfo(95, 60), 2.0), None);
        assert_eq!(
            swap_verdict(&rule, &meminfo(95, 40), 50.0),
            None,
            "under half the limit"
        );
        assert_eq!(
            swap_verdict(&rule, &meminfo(70, 60), 50.0),
            None,
            "memory is free"
        );
    }
}

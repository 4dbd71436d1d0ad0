//! The one thread per process that serves every watch: asleep while none is made, reading oomd's
//! inputs at its cadence or woken by the kernel's trigger, judging, and delivering the warnings.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags, Timespec};

use crate::oomd::inputs::{arm, monitored_dir, Meminfo, Monitor, SwapPace, CADENCE, SWAP_CADENCE};
use crate::oomd::judgement::{judge, Registered, Scope, Sink, State};
use crate::oomd::rules::OomdRule;
use crate::oomd::warning::OomdWarning;
use crate::per_process::{lock, PerProcess};

/// Every watch of this process, and its thread.
#[derive(Default)]
pub(crate) struct Engine {
    pub(crate) state: Mutex<State>,
    /// Told when the first watch is made.
    pub(crate) watched: Condvar,
    /// Wakes the thread from its sleep on the kernel's triggers when watches change.
    pub(crate) wake: Mutex<Option<Arc<OwnedFd>>>,
}

pub(crate) static ENGINE: PerProcess<Engine> = PerProcess::new();

impl Engine {
    pub(crate) fn wake(&self) {
        if let Some(fd) = lock(&self.wake).as_ref() {
            let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
        }
    }
}

/// Adds a watch; starts this process's thread with the first.
pub(crate) fn register(sink: Arc<Sink>, scopes: Vec<Scope>) -> u64 {
    let engine = ENGINE.get();
    let id = {
        let mut state = lock(&engine.state);
        let id = state.next_id;
        state.next_id += 1;
        state.generation += 1;
        state.watches.insert(id, Registered { sink, scopes });
        if state.thread.is_none() {
            let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
                .ok()
                .map(Arc::new);
            *lock(&engine.wake) = fd;
            let thread_engine = Arc::clone(&engine);
            match std::thread::Builder::new()
                .name("synaps-oomdwarn".into())
                .spawn(move || run(&thread_engine))
            {
                Ok(thread) => state.thread = Some(thread.thread().id()),
                Err(e) => {
                    tracing::warn!(target: crate::diag::TARGET, "no thread to watch for systemd-oomd: {e}")
                }
            }
        }
        id
    };
    engine.watched.notify_all();
    engine.wake();
    id
}

pub(crate) fn run(engine: &Engine) {
    let mut monitors: HashMap<String, Monitor> = HashMap::new();
    let mut leaf_pgscan: HashMap<u64, u64> = HashMap::new();
    let mut swap_pace = SwapPace::default();
    let mut planned = u64::MAX;
    loop {
        // Nothing watched: asleep until a watch is made.
        let swap_limit = {
            let mut state = lock(&engine.state);
            while state.watches.is_empty() {
                monitors.clear();
                leaf_pgscan.clear();
                state = engine
                    .watched
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            if state.generation != planned {
                planned = state.generation;
                plan(&state, &mut monitors);
            }
            state
                .watches
                .values()
                .flat_map(|watch| &watch.scopes)
                .flat_map(|scope| &scope.rules)
                .filter(|(rule, _)| rule.rule == OomdRule::Swap)
                .map(|(rule, _)| rule.limit)
                .reduce(f64::min)
        };
        let now = Instant::now();
        for monitor in monitors.values_mut() {
            monitor.follow();
            monitor.read(now);
        }
        let swap = swap_limit.and_then(|_| Meminfo::read());
        let rising = swap
            .as_ref()
            .map_or(0.0, |meminfo| swap_pace.rising(meminfo, now));
        let warnings = {
            let mut state = lock(&engine.state);
            judge(
                &mut state,
                &mut monitors,
                swap.as_ref().map(|meminfo| (meminfo, rising)),
                &mut leaf_pgscan,
                now,
            )
        };
        for (sink, warning) in warnings {
            deliver(&sink, &warning);
        }
        let raised = monitors
            .values()
            .any(|monitor| monitor.avg10 >= monitor.limit / 2.0 || monitor.trigger.is_none());
        let swap_raised = match (swap_limit, &swap) {
            (Some(limit), Some(meminfo)) => {
                meminfo.swap_total > 0
                    && (meminfo.swap_used_percent() >= limit / 2.0
                        || meminfo.memory_used_percent() >= limit - 20.0)
            }
            _ => false,
        };
        let timeout = if swap_raised {
            Some(SWAP_CADENCE)
        } else if raised || swap.as_ref().is_some_and(|m| m.swap_total > 0) {
            Some(CADENCE)
        } else {
            None
        };
        for cgroup in sleep(engine, &monitors, timeout, raised) {
            if let Some(monitor) = monitors.get_mut(&cgroup) {
                monitor.lose(Instant::now());
            }
        }
    }
}

/// Takes in the watches as they now are: a monitor per unit whose pressure rule covers a scope.
pub(crate) fn plan(state: &State, monitors: &mut HashMap<String, Monitor>) {
    let mut wanted: HashMap<String, f64> = HashMap::new();
    for (rule, _) in state
        .watches
        .values()
        .flat_map(|watch| &watch.scopes)
        .flat_map(|scope| &scope.rules)
    {
        if rule.rule == OomdRule::MemoryPressure {
            wanted.entry(rule.cgroup.clone()).or_insert(rule.limit);
        }
    }
    monitors.retain(|cgroup, _| wanted.contains_key(cgroup));
    for (cgroup, limit) in wanted {
        if monitors.contains_key(&cgroup) {
            continue;
        }
        let Ok(dir) = monitored_dir(&cgroup) else {
            continue;
        };
        let trigger = arm(&dir, limit);
        monitors.insert(cgroup, Monitor::new(dir, limit, trigger));
    }
}

/// Sleeps until `timeout` (for ever where None), or until the kernel's trigger on a calm unit
/// fires, or until the watches change. Returns the units whose trigger errs: their cgroup is gone.
pub(crate) fn sleep(
    engine: &Engine,
    monitors: &HashMap<String, Monitor>,
    timeout: Option<Duration>,
    raised: bool,
) -> Vec<String> {
    let wake = lock(&engine.wake).clone();
    let mut fds: Vec<PollFd<'_>> = Vec::new();
    if let Some(wake) = wake.as_deref() {
        fds.push(PollFd::new(wake, PollFlags::IN));
    }
    let mut triggered: Vec<&String> = Vec::new();
    if !raised {
        for (cgroup, monitor) in monitors {
            if let Some(trigger) = monitor.trigger.as_ref() {
                fds.push(PollFd::new(trigger, PollFlags::PRI));
                triggered.push(cgroup);
            }
        }
    }
    let timespec = timeout.map(|t| Timespec {
        tv_sec: t.as_secs() as _,
        tv_nsec: t.subsec_nanos() as _,
    });
    if fds.is_empty() {
        std::thread::sleep(timeout.unwrap_or(CADENCE));
        return Vec::new();
    }
    let _ = poll(&mut fds, timespec.as_ref());
    let first_trigger = usize::from(wake.is_some());
    let gone = fds[first_trigger..]
        .iter()
        .zip(triggered)
        .filter(|(fd, _)| {
            fd.revents()
                .intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL)
        })
        .map(|(_, cgroup)| cgroup.clone())
        .collect();
    if let Some(wake) = wake.as_deref() {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(wake.as_fd(), &mut count);
    }
    gone
}

/// Calls a watch's callback with `warning`, unless the watch is gone; a panic in the callback
/// stays there.
pub(crate) fn deliver(sink: &Sink, warning: &OomdWarning) {
    let deliver = lock(&sink.deliver);
    if sink.closed.load(Ordering::Acquire) {
        return;
    }
    if let Some(callback) = deliver.as_ref() {
        let call = std::panic::AssertUnwindSafe(|| callback(warning));
        if std::panic::catch_unwind(call).is_err() {
            tracing::warn!(target: crate::diag::TARGET, "a warning's callback panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Issue 60, item 5: a trigger whose cgroup went away errs at once, every time; the thread
    /// lets it go (read at oomd's cadence: no loop), and arms one on a cgroup of that name once it
    /// is back. Needs a cgroup2 tree to write (the rig's).
    #[test]
    fn a_trigger_whose_cgroup_went_away_is_let_go_and_armed_again_when_it_is_back() {
        let Some(base) = std::env::var_os("SYNAPS_RIG_CGROUP") else {
            assert!(
                std::env::var_os("SYNAPS_SKIP_MANAGER_TESTS").is_some(),
                "this test needs a cgroup2 tree to write: run it through scripts/systemd-rig.sh, \
                 or set SYNAPS_SKIP_MANAGER_TESTS=1 to skip it on purpose"
            );
            return;
        };
        let dir = Path::new(&base).join(format!("oomd-follow-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        let trigger = arm(&dir, 60.0);
        assert!(trigger.is_some(), "no PSI trigger on {}", dir.display());
        let key = "/unit".to_owned();
        let mut monitors = HashMap::from([(key.clone(), Monitor::new(dir.clone(), 60.0, trigger))]);
        let engine = Engine::default();
        // Calm: the trigger sleeps out the bound.
        let started = Instant::now();
        assert!(sleep(&engine, &monitors, Some(Duration::from_millis(300)), false).is_empty());
        assert!(started.elapsed() >= Duration::from_millis(290));

        std::fs::remove_dir(&dir).unwrap();
        let started = Instant::now();
        let gone = sleep(&engine, &monitors, Some(Duration::from_secs(5)), false);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "the dead trigger woke the poll"
        );
        assert_eq!(gone, std::slice::from_ref(&key));
        let monitor = monitors.get_mut(&key).unwrap();
        monitor.lose(Instant::now());
        assert!(monitor.trigger.is_none() && monitor.lost);
        monitor.follow();
        assert!(monitor.lost, "no cgroup of that name yet");
        // Nothing left to poll: the thread reads at oomd's cadence.
        let started = Instant::now();
        assert!(sleep(&engine, &monitors, Some(Duration::from_millis(300)), false).is_empty());
        assert!(started.elapsed() >= Duration::from_millis(290));

        std::fs::create_dir(&dir).unwrap();
        let monitor = monitors.get_mut(&key).unwrap();
        monitor.follow();
        assert!(
            !monitor.lost && monitor.trigger.is_some(),
            "armed again on the new cgroup"
        );
        let started = Instant::now();
        assert!(sleep(&engine, &monitors, Some(Duration::from_millis(300)), false).is_empty());
        assert!(
            started.elapsed() >= Duration::from_millis(290),
            "the new trigger is calm"
        );
        drop(monitors);
        std::fs::remove_dir(&dir).unwrap();
    }
}

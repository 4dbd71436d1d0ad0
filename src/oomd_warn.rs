//! Warnings before systemd-oomd acts: a watch on one or more scopes tells its caller when a rule of
//! oomd's that covers a scope is on its way to firing and that scope is the one oomd would pick.
//!
//! oomd decides from files any process of the user can read, and so does the watch, the same way:
//! - the pressure rule: the `full avg10` of the monitored unit's `memory.pressure` over the unit's
//!   limit (its `ManagedOOMMemoryPressureLimit=`, else oomd.conf's default), held for the rule's
//!   duration, with reclaim going on; oomd then kills the leaf cgroup below that unit with the most
//!   reclaim (`pgscan` of `memory.stat` per second), then the most memory (`memory.current`);
//! - the swap rule: memory and swap both used past `SwapUsedLimit=` (`/proc/meminfo`); oomd then
//!   kills the leaf cgroup using the most swap (`memory.swap.current`).
//!
//! A warning is sent when the rule's figure crosses its limit (pressure), or comes within 10 points
//! of it or is due at its pace to reach it within 10 s (swap), while the scope ranks first among
//! oomd's candidates, `Possible`; and once more when it is `Likely` (the pressure has held for half
//! the rule's duration with reclaim going on, or swap is within 3 points). An episode ends when the figure falls back; a later one warns again.
//!
//! One thread per process serves every watch, started with the first and asleep (no timer at all)
//! while none is made. Under the pressure rule it reads at oomd's own cadence (each second) while
//! the pressure is past half its limit, and otherwise sleeps on a PSI trigger on each monitored
//! unit's `memory.pressure` (a 2 s window, which Linux 6.4 and later require of an unprivileged
//! trigger), woken by the kernel when stalls reach half the limit; where no trigger can be set, it
//! reads each second. The swap rule has no trigger: while one is watched on a machine with swap,
//! `/proc/meminfo` is read each second, and every 100 ms once swap is past half its limit or memory
//! within 20 points of it (a runaway can fill a gigabyte of swap in a second or two). A watch holds
//! no descriptor of its own; the thread holds one per monitored unit (usually one) and an eventfd.
//! A forked child's copies of a watch never fire there.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags, Timespec};
use rustix::fs::{Mode, OFlags};

use crate::bounds::deadline_after;
use crate::cgroup::{self, Cgroup};
use crate::cgroup_tree::{self, Met};

use crate::handle::ScopeHandle;
use crate::oom_watch::{has_any_mark, OOMD_MARKS};
use crate::oomd_rules::{self, CoveringRule, OomdDefaults, OomdRule};
use crate::oomd_signal;
use crate::per_process::{lock, PerProcess};
use crate::pressure;

/// A warning that systemd-oomd is on its way to kill a scope.
#[derive(Clone, Debug, PartialEq)]
pub struct OomdWarning {
    /// The scope's unit.
    pub unit: String,
    /// The rule on its way to firing.
    pub rule: OomdRule,
    /// The unit the rule is set on (`user@1000.service` for the pressure rule as Debian and Fedora
    /// ship it, `-.slice` for the swap rule).
    pub monitored: String,
    /// In percent: the monitored unit's memory pressure (`full avg10`), or the share of swap used.
    pub figure: f64,
    /// In percent: the figure at which oomd acts.
    pub limit: f64,
    /// How long the pressure has been over its limit (zero under the swap rule).
    pub held_for: Duration,
    /// How long it must hold before oomd acts (zero under the swap rule, which acts at once).
    pub duration: Duration,
    /// How sure the warning is.
    pub sure: Sureness,
}

/// How sure a warning is.
///
/// Exhaustive on purpose: every surface maps each, and a new one must not compile unmapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sureness {
    /// The rule's figure is past its limit (pressure) or within 10 points of it or 10 s (swap), and the
    /// scope ranks first among oomd's candidates: oomd acts if it goes on so.
    Possible,
    /// The pressure has held past its limit for half the rule's duration with reclaim going on, or
    /// swap is within 3 points of its limit: oomd acts soon unless it eases.
    Likely,
}

impl Sureness {
    /// The word on every surface: `possible` or `likely`.
    pub fn as_str(self) -> &'static str {
        match self {
            Sureness::Possible => "possible",
            Sureness::Likely => "likely",
        }
    }
}

impl fmt::Display for OomdWarning {
    /// One line that names oomd, the rule and the scope's unit, with the figures.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "systemd-oomd's {} rule is on its way to killing {} ({}): ",
            self.rule.as_str(),
            self.unit,
            self.sure.as_str()
        )?;
        match self.rule {
            OomdRule::MemoryPressure => write!(
                f,
                "the memory pressure of {} is {:.2}%, over its limit of {:.2}% for {:.0} s of {:.0} s",
                self.monitored,
                self.figure,
                self.limit,
                self.held_for.as_secs_f64(),
                self.duration.as_secs_f64()
            ),
            OomdRule::Swap => write!(
                f,
                "swap is {:.2}% used, and {}'s rule acts past {:.2}%",
                self.figure, self.monitored, self.limit
            ),
        }
    }
}

impl CannotWarn {
    /// Whether oomd may still act on the scope, unseen: a rule covers it but cannot be followed
    /// here (not: no oomd, no rule, no swap for the swap rule, the scope gone).
    pub fn oomd_may_act(&self) -> bool {
        matches!(
            self.kind,
            CannotWarnKind::NoPsi
                | CannotWarnKind::Unreadable
                | CannotWarnKind::NoMemoryController
                | CannotWarnKind::CannotAsk
        )
    }
}

/// Why a scope cannot be warned about.
///
/// Exhaustive on purpose: every surface maps each, and a new one must not compile unmapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CannotWarnKind {
    /// systemd-oomd is not running (nothing owns `org.freedesktop.oom1`), or the system bus that
    /// would tell cannot be reached.
    NoOomd,
    /// No rule of oomd's covers the scope: oomd does not act on it.
    NoRule,
    /// The kernel has no pressure stall information (PSI), which the pressure rule reads.
    NoPsi,
    /// A file oomd reads cannot be read here.
    Unreadable,
    /// The machine has no swap: the swap rule cannot fire.
    NoSwap,
    /// The scope has no memory controller: oomd cannot rank it, nor kill it by rule.
    NoMemoryController,
    /// The scope is gone.
    ScopeGone,
    /// A manager could not say which rules cover the scope.
    CannotAsk,
}

impl CannotWarnKind {
    /// The word on every surface.
    pub fn as_str(self) -> &'static str {
        match self {
            CannotWarnKind::NoOomd => "no-oomd",
            CannotWarnKind::NoRule => "no-rule",
            CannotWarnKind::NoPsi => "no-psi",
            CannotWarnKind::Unreadable => "unreadable",
            CannotWarnKind::NoSwap => "no-swap",
            CannotWarnKind::NoMemoryController => "no-memory-controller",
            CannotWarnKind::ScopeGone => "scope-gone",
            CannotWarnKind::CannotAsk => "cannot-ask",
        }
    }
}

/// Why a scope cannot be warned about, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CannotWarn {
    /// The scope's unit.
    pub unit: String,
    /// Why, as a kind.
    pub kind: CannotWarnKind,
    /// Why, in words.
    pub message: String,
}

impl fmt::Display for CannotWarn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} cannot be warned about: {}", self.unit, self.message)
    }
}

impl std::error::Error for CannotWarn {}

/// What a watch calls with each warning.
type Deliver = Box<dyn Fn(&OomdWarning) + Send + Sync>;

/// Where a watch's warnings go, until the watch is dropped.
struct Sink {
    deliver: Mutex<Option<Deliver>>,
    /// Set by a watch dropped on the thread that delivers (from inside its own callback).
    closed: AtomicBool,
}

/// A watch on scopes for systemd-oomd's rules: warnings go to its callback or channel, on this
/// process's one watching thread, until it is dropped; none is delivered after `drop` returns
/// (dropped from inside its own callback, none after that callback returns).
pub struct OomdWatch {
    id: u64,
    pid: u32,
    sink: Arc<Sink>,
    watched: Vec<String>,
    cannot: Vec<CannotWarn>,
}

impl fmt::Debug for OomdWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OomdWatch")
            .field("watched", &self.watched)
            .field("cannot", &self.cannot)
            .finish_non_exhaustive()
    }
}

impl OomdWatch {
    /// Watches the scopes of `handles`, asking the managers and the system bus (`env`'s) within
    /// `timeout` which rules cover each; `on_warning` is called with each warning, on this
    /// process's watching thread. Scopes that cannot be warned about are listed by
    /// [`Self::cannot_warn`]; where none can, the error says why of the first.
    pub fn new<F>(
        handles: &[ScopeHandle],
        env: &[(OsString, OsString)],
        timeout: Duration,
        on_warning: F,
    ) -> Result<OomdWatch, CannotWarn>
    where
        F: Fn(&OomdWarning) + Send + Sync + 'static,
    {
        let deadline = deadline_after(timeout);
        let defaults = OomdDefaults::of_this_machine();
        let oomd = oomd_signal::oomd_is_there(env, deadline);
        let mut scopes = Vec::new();
        let mut cannot = Vec::new();
        for handle in handles {
            match scope_of(handle, &oomd, env, &defaults, deadline) {
                Ok(scope) => scopes.push(scope),
                Err(why) => cannot.push(why),
            }
        }
        if scopes.is_empty() {
            return Err(cannot.into_iter().next().unwrap_or(CannotWarn {
                unit: String::new(),
                kind: CannotWarnKind::ScopeGone,
                message: "no scope was given to watch".into(),
            }));
        }
        for why in &cannot {
            tracing::warn!(target: crate::diag::TARGET, "{why}");
        }
        let sink = Arc::new(Sink {
            deliver: Mutex::new(Some(Box::new(on_warning))),
            closed: AtomicBool::new(false),
        });
        let watched = scopes.iter().map(|scope| scope.unit.clone()).collect();
        let id = register(Arc::clone(&sink), scopes);
        Ok(OomdWatch {
            id,
            pid: std::process::id(),
            sink,
            watched,
            cannot,
        })
    }

    /// [`Self::new`] with the warnings sent to a channel.
    pub fn channel(
        handles: &[ScopeHandle],
        env: &[(OsString, OsString)],
        timeout: Duration,
    ) -> Result<(OomdWatch, mpsc::Receiver<OomdWarning>), CannotWarn> {
        let (sender, receiver) = mpsc::channel();
        let sender = Mutex::new(sender);
        let watch = OomdWatch::new(handles, env, timeout, move |warning| {
            let _ = lock(&sender).send(warning.clone());
        })?;
        Ok((watch, receiver))
    }

    /// The units of the scopes this watch can warn about.
    pub fn watched(&self) -> &[String] {
        &self.watched
    }

    /// The scopes given that this watch cannot warn about, and why.
    pub fn cannot_warn(&self) -> &[CannotWarn] {
        &self.cannot
    }
}

impl Drop for OomdWatch {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            // A forked child's copy: the watch is the parent's, and never fires here.
            return;
        }
        let engine = ENGINE.get();
        let delivering_thread = {
            let mut state = lock(&engine.state);
            state.watches.remove(&self.id);
            state.thread
        };
        engine.wake();
        if delivering_thread == Some(std::thread::current().id()) {
            // Dropped from inside a callback: the one delivery in flight is this call's own.
            self.sink.closed.store(true, Ordering::Release);
        } else {
            // Waits for a delivery in flight, and makes sure none follows.
            lock(&self.sink.deliver).take();
        }
    }
}

impl ScopeHandle {
    /// Watches this handle's scope for systemd-oomd's rules (see [`OomdWatch::new`]).
    pub fn watch_oomd<F>(
        &self,
        env: &[(OsString, OsString)],
        timeout: Duration,
        on_warning: F,
    ) -> Result<OomdWatch, CannotWarn>
    where
        F: Fn(&OomdWarning) + Send + Sync + 'static,
    {
        OomdWatch::new(std::slice::from_ref(self), env, timeout, on_warning)
    }
}

/// One scope a watch warns about.
struct Scope {
    unit: String,
    dir: PathBuf,
    ino: u64,
    /// The rules that cover it and can fire, each with the surest warning sent in this episode.
    rules: Vec<(CoveringRule, Option<Sureness>)>,
}

/// The scope of `handle` with the rules that cover it and can fire, or why it cannot be warned.
fn scope_of(
    handle: &ScopeHandle,
    oomd: &Result<bool, String>,
    env: &[(OsString, OsString)],
    defaults: &OomdDefaults,
    deadline: Instant,
) -> Result<Scope, CannotWarn> {
    let unit = handle.unit().to_owned();
    let cannot = |kind, message: String| CannotWarn {
        unit: unit.clone(),
        kind,
        message,
    };
    let (cgroup_path, ino) = handle.identity();
    let dir = handle.cgroup_dir().to_path_buf();
    if cgroup::inode_at(&dir) != Some(ino) {
        return Err(cannot(
            CannotWarnKind::ScopeGone,
            "the scope is gone".into(),
        ));
    }
    match oomd {
        Ok(true) => {}
        Ok(false) => {
            return Err(cannot(
                CannotWarnKind::NoOomd,
                "systemd-oomd is not running (nothing owns org.freedesktop.oom1 on the system bus)"
                    .into(),
            ))
        }
        Err(why) => return Err(cannot(CannotWarnKind::NoOomd, why.clone())),
    }
    let covering = oomd_rules::covering(cgroup_path, env, defaults, deadline)
        .map_err(|why| cannot(CannotWarnKind::CannotAsk, why))?;
    if covering.is_empty() {
        return Err(cannot(
            CannotWarnKind::NoRule,
            "no unit above it has ManagedOOMMemoryPressure=kill or ManagedOOMSwap=kill".into(),
        ));
    }
    if !dir.join("memory.current").exists() {
        return Err(cannot(
            CannotWarnKind::NoMemoryController,
            "its cgroup has no memory controller, so oomd neither ranks nor kills it".into(),
        ));
    }
    let mut rules = Vec::new();
    let mut first_why = None;
    for rule in covering {
        match can_fire(&rule) {
            Ok(()) => rules.push((rule, None)),
            Err((kind, message)) => {
                first_why.get_or_insert_with(|| cannot(kind, message));
            }
        }
    }
    if rules.is_empty() {
        return Err(first_why.expect("a rule was there"));
    }
    Ok(Scope {
        unit,
        dir,
        ino,
        rules,
    })
}

/// Whether `rule` can fire on this machine, and can be followed; why not where it cannot.
fn can_fire(rule: &CoveringRule) -> Result<(), (CannotWarnKind, String)> {
    // oomd acts past its limit (`avg10 > limit`, `oomd_pressure_above`; swap free below
    // `10000 - limit` permyriad, `oomd_swap_free_below`, both of src/oom/oomd-util.c): a limit of
    // 100% is never passed.
    if rule.limit >= 100.0 {
        return Err((
            CannotWarnKind::NoRule,
            format!(
                "the {} rule of {} has a limit of 100%, which oomd never acts past",
                rule.rule.as_str(),
                rule.unit
            ),
        ));
    }
    match rule.rule {
        OomdRule::MemoryPressure => {
            let file = monitored_dir(&rule.cgroup)?.join("memory.pressure");
            match std::fs::read_to_string(&file) {
                Ok(text) if pressure::parse(&text).is_some_and(|p| p.full.is_some()) => Ok(()),
                Ok(_) => Err((
                    CannotWarnKind::NoPsi,
                    format!("{} holds no full line", file.display()),
                )),
                Err(e) if !Path::new("/proc/pressure/memory").exists() => Err((
                    CannotWarnKind::NoPsi,
                    format!("the kernel has no pressure stall information ({e})"),
                )),
                Err(e) => Err((
                    CannotWarnKind::Unreadable,
                    format!("{} cannot be read: {e}", file.display()),
                )),
            }
        }
        OomdRule::Swap => match Meminfo::read() {
            Some(meminfo) if meminfo.swap_total > 0 => Ok(()),
            Some(_) => Err((
                CannotWarnKind::NoSwap,
                format!(
                    "the machine has no swap, so the swap rule of {} cannot fire",
                    rule.unit
                ),
            )),
            None => Err((
                CannotWarnKind::Unreadable,
                "/proc/meminfo cannot be read".into(),
            )),
        },
    }
}

/// The directory of a monitored unit's cgroup (from the hierarchy's root).
fn monitored_dir(cgroup: &str) -> Result<PathBuf, (CannotWarnKind, String)> {
    Cgroup::at(cgroup)
        .map(|cgroup| cgroup.dir().to_path_buf())
        .map_err(|e| (CannotWarnKind::Unreadable, e.to_string()))
}

/// Every watch of this process, and its thread.
#[derive(Default)]
struct Engine {
    state: Mutex<State>,
    /// Told when the first watch is made.
    watched: Condvar,
    /// Wakes the thread from its sleep on the kernel's triggers when watches change.
    wake: Mutex<Option<Arc<OwnedFd>>>,
}

#[derive(Default)]
struct State {
    watches: HashMap<u64, Registered>,
    next_id: u64,
    /// The thread's id, once started.
    thread: Option<std::thread::ThreadId>,
    /// Bumped at each change of the watches, so the thread plans anew.
    generation: u64,
}

struct Registered {
    sink: Arc<Sink>,
    scopes: Vec<Scope>,
}

static ENGINE: PerProcess<Engine> = PerProcess::new();

impl Engine {
    fn wake(&self) {
        if let Some(fd) = lock(&self.wake).as_ref() {
            let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
        }
    }
}

/// Adds a watch; starts this process's thread with the first.
fn register(sink: Arc<Sink>, scopes: Vec<Scope>) -> u64 {
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

/// What the thread keeps of one monitored unit under the pressure rule.
struct Monitor {
    dir: PathBuf,
    limit: f64,
    /// The kernel's trigger on its `memory.pressure`, where one could be set.
    trigger: Option<OwnedFd>,
    avg10: f64,
    /// Since when the pressure is over the limit (oomd's own moment, at its cadence).
    above_since: Option<Instant>,
    /// The unit's `pgscan` when last read, and when it last rose.
    pgscan: Option<u64>,
    reclaimed_at: Option<Instant>,
    /// The cgroup oomd would pick now (its directory and inode number), once asked this round.
    pick: Option<Option<(PathBuf, u64)>>,
    /// The pick of the round before, while the pressure was over the limit.
    last_pick: Option<(PathBuf, u64)>,
    /// Until when oomd, having just acted here, acts on nothing more (its post-action delay).
    quiet_until: Option<Instant>,
    /// The unit's cgroup went away under its trigger (which then errs at once, every time): read at
    /// oomd's cadence, and armed again once a cgroup of that name is back.
    lost: bool,
}

/// How long ago reclaim must have gone on for oomd to act on pressure.
const RECLAIM_RECENT: Duration = Duration::from_secs(30);
/// How long oomd acts on nothing more under the pressure rule after a kill: the pressure lags, and
/// what is left is not to be killed for what the killed cgroup caused.
const POST_ACTION_DELAY: Duration = Duration::from_secs(15);
/// oomd's cadence for the pressure rule, and this thread's while a figure is raised.
const CADENCE: Duration = Duration::from_secs(1);
/// How soon swap, at the pace it fills, must reach its limit for the swap rule to be on its way.
const SWAP_HORIZON: Duration = Duration::from_secs(10);
/// The cadence while swap is past half its limit, or memory within 20 points of it: a runaway can
/// fill a gigabyte of swap in a second or two.
const SWAP_CADENCE: Duration = Duration::from_millis(100);
/// The window of the kernel's trigger: Linux 6.4 and later take an unprivileged trigger only in
/// multiples of 2 s.
const TRIGGER_WINDOW_USEC: u64 = 2_000_000;

fn run(engine: &Engine) {
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
fn plan(state: &State, monitors: &mut HashMap<String, Monitor>) {
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

/// A PSI trigger on `dir`'s `memory.pressure`: woken when full stalls reach half of `limit` over
/// the window. None where the kernel refuses one (no PSI, or no unprivileged trigger).
fn arm(dir: &Path, limit: f64) -> Option<OwnedFd> {
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
    fn new(dir: PathBuf, limit: f64, trigger: Option<OwnedFd>) -> Self {
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
    fn lose(&mut self, now: Instant) {
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
    fn follow(&mut self) {
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
    fn read(&mut self, now: Instant) {
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
    fn quiet(&self, now: Instant) -> bool {
        self.quiet_until.is_some_and(|until| now < until)
    }
}

/// Sleeps until `timeout` (for ever where None), or until the kernel's trigger on a calm unit
/// fires, or until the watches change. Returns the units whose trigger errs: their cgroup is gone.
fn sleep(
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

/// Decides, for every watched scope, whether a rule that covers it is on its way and it is oomd's
/// likeliest pick; returns the warnings to deliver (each once per sureness and episode).
fn judge(
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
fn pressure_verdict(
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
fn swap_verdict(
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

/// The candidate cgroup below the rule's unit that oomd ranks first (a leaf, or a group the
/// kernel kills whole): under the pressure rule the most
/// reclaim since the last look (`pgscan`), then the most memory; under the swap rule the most
/// swap, past 5% of the machine's. Cgroups that oomd's preference omits are left out and those it
/// avoids ranked last ([`Preference::of`]).
fn pick(rule: &CoveringRule, leaf_pgscan: &mut HashMap<u64, u64>) -> Option<(PathBuf, u64)> {
    let root = monitored_dir(&rule.cgroup).ok()?;
    pick_below(&root, rule, leaf_pgscan)
}

/// [`pick`] among the cgroups below the monitored unit's directory `root`.
fn pick_below(
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
fn oom_group(dir: BorrowedFd<'_>) -> bool {
    cgroup_tree::read_at(dir, "memory.oom.group").is_ok_and(|text| text.trim() == "1")
}

/// How oomd ranks a candidate: not avoided first, then its reclaim since the last look and its
/// memory (the pressure rule), or its swap (the swap rule).
type LeafRank = (bool, u64, u64);

/// How oomd ranks the leaf cgroup open as `dir`, and its inode; None where oomd passes it over
/// (omitted, or using nothing the rule looks at). Read through the descriptor, at any depth.
fn rank(
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
enum Preference {
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
    fn of(dir: BorrowedFd<'_>, owner: u32, root_owner: Option<u32>) -> Self {
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

/// Whether `text` is a boolean that systemd's `parse_boolean` reads as true.
fn parses_true(text: &str) -> bool {
    ["1", "yes", "y", "true", "t", "on"]
        .iter()
        .any(|word| text.eq_ignore_ascii_case(word))
}

/// A field of a cgroup's `memory.stat`, given its text.
fn stat_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        (key == name).then(|| value.trim().parse().ok())?
    })
}

/// Calls a watch's callback with `warning`, unless the watch is gone; a panic in the callback
/// stays there.
fn deliver(sink: &Sink, warning: &OomdWarning) {
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

/// How fast swap fills: readings kept for about a second.
#[derive(Default)]
struct SwapPace {
    readings: std::collections::VecDeque<(Instant, f64)>,
}

impl SwapPace {
    /// Takes in `meminfo` read at `now`; the points of swap gained per second over the readings of
    /// about the last second (0 until there are two at least half a second apart).
    fn rising(&mut self, meminfo: &Meminfo, now: Instant) -> f64 {
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
struct Meminfo {
    mem_total: u64,
    mem_available: u64,
    swap_total: u64,
    swap_free: u64,
}

impl Meminfo {
    fn read() -> Option<Meminfo> {
        Meminfo::parse(&std::fs::read_to_string("/proc/meminfo").ok()?)
    }

    fn parse(text: &str) -> Option<Meminfo> {
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

    fn swap_used_percent(&self) -> f64 {
        if self.swap_total == 0 {
            return 0.0;
        }
        self.swap_total.saturating_sub(self.swap_free) as f64 * 100.0 / self.swap_total as f64
    }

    fn memory_used_percent(&self) -> f64 {
        if self.mem_total == 0 {
            return 0.0;
        }
        self.mem_total.saturating_sub(self.mem_available) as f64 * 100.0 / self.mem_total as f64
    }
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

    #[test]
    fn every_word_is_distinct() {
        let kinds = [
            CannotWarnKind::NoOomd,
            CannotWarnKind::NoRule,
            CannotWarnKind::NoPsi,
            CannotWarnKind::Unreadable,
            CannotWarnKind::NoSwap,
            CannotWarnKind::NoMemoryController,
            CannotWarnKind::ScopeGone,
            CannotWarnKind::CannotAsk,
        ];
        let words: std::collections::HashSet<_> = kinds.iter().map(|k| k.as_str()).collect();
        assert_eq!(words.len(), kinds.len());
        assert_ne!(Sureness::Possible.as_str(), Sureness::Likely.as_str());
    }
}

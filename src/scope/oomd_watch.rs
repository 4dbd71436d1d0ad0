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

use std::ffi::OsString;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::bounds::deadline_after;
use crate::kernel::cgroup;
use crate::kernel::pressure;
use crate::oomd::inputs::{monitored_dir, Meminfo};
use crate::oomd::judgement::{Scope, Sink};
use crate::oomd::rules::{self, CoveringRule, OomdDefaults, OomdRule};
use crate::oomd::signal;
use crate::oomd::warning::{CannotWarn, CannotWarnKind, OomdWarning};
use crate::oomd::watch::{register, ENGINE};
use crate::per_process::lock;
use crate::scope::handle::ScopeHandle;

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
        let oomd = signal::oomd_is_there(env, deadline);
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

/// The scope of `handle` with the rules that cover it and can fire, or why it cannot be warned.
pub(crate) fn scope_of(
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
    let covering = rules::covering(cgroup_path, env, defaults, deadline)
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
pub(crate) fn can_fire(rule: &CoveringRule) -> Result<(), (CannotWarnKind, String)> {
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

//! Turns: one conversation with the user manager at a time, per user, across every process that
//! uses this library, so that a burst of launches is scoped as a single one is.
//!
//! The manager runs jobs (a scope's start among them) only when no message is waiting on any of
//! its connections: its run queue has the lowest priority of its event loop (systemd
//! src/core/manager.h, `EVENT_PRIORITY_RUN_QUEUE`). Launchers that all talk at once keep it
//! answering for as long as the burst lasts, and it starts no scope until the last of them has
//! spoken: of 256 launcher programs started at once here, the first was moved into its scope
//! after 2 to 6 s, past the bound of most of them. Taking turns, each scope's start job runs in
//! the gap before the next turn's first message, and the manager's moves of processes into
//! their scopes come a few milliseconds apart, where the kernel makes them cheap (the first move
//! after a pause waits for an RCU grace period, 7 to 16 ms here; those that follow within one
//! take about 0.1 ms).
//!
//! A turn is an exclusive `flock` on `$XDG_RUNTIME_DIR/synaps-scope.turn`, which the kernel
//! releases when its holder closes it, execs or dies, however it dies. It is held from the
//! connection to the last answer the conversation needs, never while waiting for a job. Waiting
//! costs no CPU: within a process, requests wait on a condition variable; across processes, one
//! thread per process at most waits in a blocking `flock` for all of that process's requests.
//! Each turn counts itself in the lock file, so that waiters see the turns go round. A request
//! waits for its turn as long as they do, until a tenth of the time left to its deadline, at most
//! 100 ms, remains for the conversation. When no turn has begun for [`STALL`] (a holder
//! stopped in the middle of its turn, a manager that stopped answering), it talks to the manager
//! anyway. When the turns go round but its own has not come in that time, the manager is busier
//! than the request's bound allows: the request ends as one the manager did not answer in time
//! would, rather than crowd in and hold back every turn that is going round. A thread already in
//! a turn takes no second one, and a caller can keep the turn of one conversation for the next
//! ([`keeping`]: a probe, then a scope made in place).

use std::cell::{Cell, RefCell};
use std::ffi::OsString;
use std::marker::PhantomData;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::fs::{self, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use super::Route;

/// The turn lock's name in the runtime directory.
const LOCK_NAME: &str = "synaps-scope.turn";
/// How long the turns may stand still before a waiting request stops waiting: a turn takes a
/// few milliseconds (a connection, an authentication and a call or two), tens under load.
const STALL: Duration = Duration::from_millis(500);
/// The most of a request's time kept for its conversation once its turn has come.
const RESERVE: Duration = Duration::from_millis(100);
/// How often a waiting request looks whether the turns go round.
const LOOK_EVERY: Duration = Duration::from_millis(50);

thread_local! {
    /// How many turns this thread is in (the outermost holds the lock).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Whether the outermost turn that ends on this thread is kept ([`keeping`]).
    static KEEP: Cell<bool> = const { Cell::new(false) };
    /// The turn kept.
    static KEPT: RefCell<Option<(OwnedFd, Arc<Local>)>> = const { RefCell::new(None) };
}

/// The turns went round, but this request's did not come within its time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NoTurn {
    /// How long the request waited.
    pub(crate) waited: Duration,
}

/// A turn to talk to the manager, held until dropped.
#[must_use = "a turn ends when it is dropped"]
pub(crate) struct Turn {
    /// The lock this turn holds, and the process's side of it; None when the turn holds no lock
    /// (nested in another, none could be had, or the wait was given up).
    held: Option<(OwnedFd, Arc<Local>)>,
    /// A turn ends on the thread that took it (it counts in that thread's [`DEPTH`]).
    _not_send: PhantomData<*const ()>,
}

impl Turn {
    /// Whether this turn holds the lock.
    #[cfg(test)]
    fn is_held(&self) -> bool {
        self.held.is_some()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let depth = DEPTH.with(|depth| {
            depth.set(depth.get().saturating_sub(1));
            depth.get()
        });
        if depth == 0 && KEEP.with(Cell::get) {
            if let Some(held) = self.held.take() {
                KEPT.with(|kept| *kept.borrow_mut() = Some(held));
                return;
            }
        }
        if let Some((lock, local)) = self.held.take() {
            let mut state = local.state();
            state.busy = false;
            // Closing the lock releases it for the other processes too.
            drop(lock);
            local.changed.notify_all();
        }
    }
}

/// One process's side of one turn lock.
struct Local {
    path: OsString,
    pid: u32,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// The lock, taken by this process's waiting thread and not yet handed to a request.
    ready: Option<OwnedFd>,
    /// A request of this process is in its turn.
    busy: bool,
    /// Requests of this process waiting for a turn.
    waiting: usize,
    /// A thread of this process is waiting in `flock` for the lock.
    waiter: bool,
}

impl Local {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// This process's side of the lock at `path`.
fn local_for(path: OsString) -> Arc<Local> {
    static LOCALS: Mutex<Vec<Arc<Local>>> = Mutex::new(Vec::new());
    let mut locals = LOCALS.lock().unwrap_or_else(|p| p.into_inner());
    let pid = std::process::id();
    // A forked child starts afresh: its parent's waiting thread is not its own.
    locals.retain(|local| local.pid == pid);
    if let Some(local) = locals.iter().find(|local| local.path == path) {
        return Arc::clone(local);
    }
    let local = Arc::new(Local {
        path,
        pid,
        state: Mutex::new(State::default()),
        changed: Condvar::new(),
    });
    locals.push(Arc::clone(&local));
    local
}

fn open_lock(path: &OsString) -> rustix::io::Result<OwnedFd> {
    fs::open(
        path,
        OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NOCTTY,
        Mode::RUSR | Mode::WUSR,
    )
}

/// Waits for this request's turn to talk to the manager on `route`, for as long as the turns go
/// round, until a tenth of the time left until `deadline`, at most 100 ms, remains. Routes without a runtime directory (the session bus alone) take no turns;
/// nor does a thread already in one.
///
/// # Errors
/// [`NoTurn`] when the turns went round all that time without this request's.
pub(crate) fn take(route: &Route, deadline: Instant) -> Result<Turn, NoTurn> {
    let depth = DEPTH.with(|depth| depth.replace(depth.get() + 1));
    let unheld = || Turn {
        held: None,
        _not_send: PhantomData,
    };
    if depth > 0 {
        return Ok(unheld());
    }
    let Some(dir) = route.runtime_dir() else {
        return Ok(unheld());
    };
    let mut path = dir.to_owned();
    path.push("/");
    path.push(LOCK_NAME);
    let started = Instant::now();
    // A tenth of the time left, at most 100 ms, is kept for the conversation itself (a turn's
    // takes milliseconds).
    let left = deadline.saturating_duration_since(started);
    let give_up = started + left - (left / 10).min(RESERVE);
    let local = local_for(path);
    // What the lock file says of the turns taken, read while waiting.
    let counter = open_lock(&local.path).ok();
    let mut turns_seen = counter.as_ref().map(turns_taken);
    let mut last_turn = started;
    let mut moved = false;
    let mut state = local.state();
    state.waiting += 1;
    let outcome = loop {
        if !state.busy {
            if let Some(lock) = state.ready.take() {
                break Waited::Turn(lock);
            }
            if !state.waiter {
                match try_lock(&local.path) {
                    Ok(Some(lock)) => break Waited::Turn(lock),
                    Ok(None) => state.waiter = wait_in_flock(&local),
                    Err(e) => break Waited::WithoutTurn(format!("turn lock: {e}")),
                }
            }
        }
        let now = Instant::now();
        let turns = counter.as_ref().map(turns_taken);
        if turns != turns_seen {
            turns_seen = turns;
            last_turn = now;
            moved = true;
        }
        if now >= give_up && moved {
            break Waited::TimedOut(now.duration_since(started));
        }
        if now >= give_up || now.duration_since(last_turn) >= STALL {
            break Waited::WithoutTurn(format!(
                "no turn has begun for {} ms",
                now.duration_since(last_turn).as_millis()
            ));
        }
        let wake = give_up.min(now + LOOK_EVERY);
        state = local
            .changed
            .wait_timeout(state, wake - now)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    };
    state.waiting -= 1;
    match outcome {
        Waited::Turn(lock) => {
            state.busy = true;
            drop(state);
            count_turn(&lock);
            Ok(Turn {
                held: Some((lock, local)),
                _not_send: PhantomData,
            })
        }
        Waited::WithoutTurn(why) => {
            tracing::debug!(target: crate::diag::TARGET, "{why}; talking to the manager without a turn");
            Ok(unheld())
        }
        Waited::TimedOut(waited) => {
            drop(state);
            // This take counted in DEPTH; no turn came of it.
            DEPTH.with(|depth| depth.set(depth.get().saturating_sub(1)));
            Err(NoTurn { waited })
        }
    }
}

/// What a wait for a turn came to.
enum Waited {
    Turn(OwnedFd),
    WithoutTurn(String),
    TimedOut(Duration),
}

/// Runs `first` keeping the turn it ends on this thread, if it held one, for what the caller does
/// next (a scope made in place after the probe): returned, held, instead of released.
pub(crate) fn keeping<T>(first: impl FnOnce() -> T) -> (T, Option<Turn>) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            KEEP.with(|keep| keep.set(false));
        }
    }
    let reset = Reset;
    KEEP.with(|keep| keep.set(true));
    let out = first();
    drop(reset);
    let kept = KEPT.with(|kept| kept.borrow_mut().take()).map(|held| {
        DEPTH.with(|depth| depth.set(depth.get() + 1));
        Turn {
            held: Some(held),
            _not_send: PhantomData,
        }
    });
    (out, kept)
}

/// How many turns the lock file says were taken (it wraps; only changes matter).
fn turns_taken(lock: &OwnedFd) -> u64 {
    let mut count = [0u8; 8];
    match rustix::io::pread(lock, &mut count, 0) {
        Ok(8) => u64::from_le_bytes(count),
        _ => 0,
    }
}

/// Counts one more turn in the lock file (best effort: waiters that cannot see the turns go
/// round only stop waiting sooner).
fn count_turn(lock: &OwnedFd) {
    let next = turns_taken(lock).wrapping_add(1);
    let _ = rustix::io::pwrite(lock, &next.to_le_bytes(), 0);
}

/// The lock at `path` if it is free now; None if another holds it.
fn try_lock(path: &OsString) -> rustix::io::Result<Option<OwnedFd>> {
    let lock = open_lock(path)?;
    match fs::flock(&lock, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(lock)),
        Err(Errno::WOULDBLOCK | Errno::INTR) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Starts this process's thread that waits in `flock` and leaves the lock ready for the next
/// waiting request (or releases it if none is left). Whether it started.
fn wait_in_flock(local: &Arc<Local>) -> bool {
    let Ok(lock) = open_lock(&local.path) else {
        return false;
    };
    let local = Arc::clone(local);
    std::thread::Builder::new()
        .name("synaps-scope turn".into())
        .spawn(move || {
            let locked = loop {
                match fs::flock(&lock, FlockOperation::LockExclusive) {
                    Err(Errno::INTR) => continue,
                    other => break other,
                }
            };
            let mut state = local.state();
            state.waiter = false;
            if locked.is_ok() && state.waiting > 0 && state.ready.is_none() {
                state.ready = Some(lock);
            }
            local.changed.notify_all();
        })
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::Fallback;
    use std::time::Duration;

    fn route_in(dir: &std::path::Path) -> Route {
        let env = [(
            OsString::from("XDG_RUNTIME_DIR"),
            dir.as_os_str().to_owned(),
        )];
        Route::from_env(&env, Fallback::Since257)
    }

    fn scratch(label: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("synaps-turn-{label}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn one_turn_at_a_time_and_the_next_follows_at_once() {
        let dir = scratch("order");
        let route = route_in(&dir);
        let far = Instant::now() + Duration::from_secs(10);
        let first = take(&route, far).unwrap();
        assert!(first.is_held());
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let route = route.clone();
                std::thread::spawn(move || {
                    let turn = take(&route, Instant::now() + Duration::from_secs(10)).unwrap();
                    let got = Instant::now();
                    std::thread::sleep(Duration::from_millis(5));
                    (turn.is_held(), got)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        let released = Instant::now();
        drop(first);
        let mut got: Vec<Instant> = waiters
            .into_iter()
            .map(|w| {
                let (held, got) = w.join().unwrap();
                assert!(held, "every waiter got a turn of its own");
                got
            })
            .collect();
        got.sort();
        assert!(got[0] >= released, "none before the release");
        for pair in got.windows(2) {
            assert!(
                pair[1] - pair[0] >= Duration::from_millis(5),
                "one at a time"
            );
        }
        assert!(
            got[7] - released < Duration::from_millis(200),
            "{:?} for eight 5 ms turns",
            got[7] - released
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_turn_stuck_in_another_process_delays_a_request_by_the_stall_only() {
        let dir = scratch("stall");
        let route = route_in(&dir);
        let path = dir.join(LOCK_NAME);
        // `flock(1)` from util-linux: another process, holding the lock for 5 s (-o: the lock
        // is its own, not its child's).
        let mut holder = std::process::Command::new("flock")
            .arg("-o")
            .arg(&path)
            .args(["sleep", "5"])
            .spawn()
            .expect("flock(1) runs");
        while !matches!(try_lock(&path.clone().into_os_string()), Ok(None)) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let started = Instant::now();
        let turn = take(&route, started + Duration::from_secs(3)).unwrap();
        let waited = started.elapsed();
        assert!(!turn.is_held(), "talks without a turn");
        assert!(
            waited >= STALL && waited < STALL + LOOK_EVERY * 3,
            "{waited:?}"
        );
        drop(turn);
        // A short bound ends the wait sooner, leaving a tenth of it for the conversation.
        let started = Instant::now();
        let turn = take(&route, started + Duration::from_millis(400)).unwrap();
        assert!(!turn.is_held());
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(360) && waited < Duration::from_millis(400),
            "{waited:?}"
        );
        drop(turn);
        // Once the holder is gone this process's waiting thread gets the lock for the next turn.
        holder.kill().unwrap();
        holder.wait().unwrap();
        let again = take(&route, Instant::now() + Duration::from_secs(2)).unwrap();
        assert!(again.is_held());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_request_waits_past_the_stall_while_the_turns_go_round() {
        let dir = scratch("moving");
        let route = route_in(&dir);
        let path = dir.join(LOCK_NAME).into_os_string();
        let holder = take(&route, Instant::now() + Duration::from_secs(10)).unwrap();
        assert!(holder.is_held());
        let route2 = route.clone();
        let waiter = std::thread::spawn(move || {
            let started = Instant::now();
            let turn = take(&route2, started + Duration::from_secs(5)).unwrap();
            (turn.is_held(), started.elapsed())
        });
        // While the lock stays taken, turns are counted every 25 ms for twice the stall, as a
        // queue of other processes' turns would count them.
        let lock = open_lock(&path).unwrap();
        let until = Instant::now() + STALL * 2;
        while Instant::now() < until {
            count_turn(&lock);
            std::thread::sleep(Duration::from_millis(25));
        }
        drop(holder);
        let (held, waited) = waiter.join().unwrap();
        assert!(held, "waited for its turn, not past the turns");
        assert!(waited >= STALL * 2, "{waited:?}");

        // Turns that go round without this request's until a tenth of its bound is left: it
        // ends as a request the manager did not answer in time, rather than crowd in.
        let holder = take(&route, Instant::now() + Duration::from_secs(10)).unwrap();
        let route3 = route.clone();
        let waiter = std::thread::spawn(move || {
            let started = Instant::now();
            let outcome = take(&route3, started + Duration::from_millis(800)).map(|t| t.is_held());
            (outcome.map_err(|no| no.waited), started.elapsed())
        });
        let until = Instant::now() + Duration::from_millis(900);
        while Instant::now() < until {
            count_turn(&lock);
            std::thread::sleep(Duration::from_millis(25));
        }
        drop(holder);
        let (outcome, took) = waiter.join().unwrap();
        let waited = outcome.expect_err("no turn");
        assert!(
            waited >= Duration::from_millis(720) && took < Duration::from_millis(800),
            "{waited:?} {took:?}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_thread_in_a_turn_takes_no_second_one() {
        let dir = scratch("nested");
        let route = route_in(&dir);
        let started = Instant::now();
        let outer = take(&route, started + Duration::from_secs(4)).unwrap();
        assert!(outer.is_held());
        let inner = take(&route, started + Duration::from_secs(4)).unwrap();
        assert!(!inner.is_held());
        drop(inner);
        drop(outer);
        assert!(started.elapsed() < Duration::from_millis(100));
        // A turn kept from one conversation for the next is the same turn, still held.
        let ((), kept) = keeping(|| {
            let probe = take(&route, Instant::now() + Duration::from_secs(1)).unwrap();
            assert!(probe.is_held());
        });
        let kept = kept.expect("the probe's turn, kept");
        assert!(kept.is_held());
        assert!(!take(&route, Instant::now() + Duration::from_secs(1))
            .unwrap()
            .is_held());
        drop(kept);
        assert!(take(&route, Instant::now() + Duration::from_secs(1))
            .unwrap()
            .is_held());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn without_a_runtime_directory_or_a_usable_one_there_is_no_turn_and_no_wait() {
        let started = Instant::now();
        let no_dir = Route::from_env(
            &[(
                OsString::from("DBUS_SESSION_BUS_ADDRESS"),
                OsString::from("unix:path=/x"),
            )],
            Fallback::Since257,
        );
        assert!(!take(&no_dir, started + Duration::from_secs(5))
            .unwrap()
            .is_held());
        let missing = route_in(std::path::Path::new("/nonexistent/synaps"));
        assert!(!take(&missing, started + Duration::from_secs(5))
            .unwrap()
            .is_held());
        assert!(started.elapsed() < Duration::from_millis(50));
    }
}

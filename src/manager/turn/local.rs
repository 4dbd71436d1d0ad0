//! One process's side of a turn file: its requests wait in the order they came, and one ticket at
//! a time is drawn for them. A ticket behind others is waited for in a thread of its own, blocked
//! on the lock of the ticket just ahead, and handed to the first request still waiting when its
//! turn comes (or given up, when none is).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::errno::Errno;

use super::file::{count_turn, draw, open_lock, turns_taken, wait_for_turn, Drawn, Ticket, PLACES};
use crate::per_process::{lock, lock_if_free, PerProcess};

/// How long the turns may stand still before a waiting request stops waiting: a turn takes a
/// few milliseconds (a connection, an authentication and a call or two), tens under load.
pub(super) const STALL: Duration = Duration::from_millis(500);

/// The most of a request's time kept for its conversation once its turn has come.
const RESERVE: Duration = Duration::from_millis(100);

/// How often a waiting request looks whether the turns go round.
pub(super) const LOOK_EVERY: Duration = Duration::from_millis(50);

/// The turns went round, but this request's did not come within its time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NoTurn {
    /// How long the request waited.
    pub(crate) waited: Duration,
}

/// One process's side of one turn lock.
pub(super) struct Local {
    path: OsString,
    /// The device and inode of the directory the turn file is in, where it could be looked at.
    identity: Option<(u64, u64)>,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
pub(super) struct State {
    /// The process's ticket whose turn has come, not yet handed to a request.
    ready: Option<Ticket>,
    /// The process holds a ticket: waiting for its turn, ready, or in a request's turn.
    drawn: bool,
    /// Why the wait for the process's last ticket failed, for the next request to say.
    failed: Option<Errno>,
    /// The requests waiting for a turn, by the order they came in.
    pub(super) waiting: BTreeSet<u64>,
    /// The number of the next request to come.
    arrivals: u64,
}

impl Local {
    pub(super) fn new(path: OsString) -> Arc<Self> {
        Arc::new(Local {
            identity: directory_identity(&path),
            path,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        })
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Ends the turn of `ticket`: the process draws again for its next request, and the next
    /// ticket's holder, in whichever process, wakes now.
    pub(super) fn end_turn(&self, ticket: Ticket) {
        let mut state = self.state();
        state.drawn = false;
        drop(ticket);
        drop(state);
        self.changed.notify_all();
    }

    /// Waits for the turn of a request of this process, as [`super::take`] says: the ticket whose
    /// turn came, None to talk to the manager without a turn (none could be had, or the turns
    /// stood still), or [`NoTurn`].
    pub(super) fn turn_for_request(
        self: &Arc<Self>,
        deadline: Instant,
    ) -> Result<Option<Ticket>, NoTurn> {
        wait_in(self, deadline)
    }

    /// Nothing of this process uses it: no request, no waiting thread, no ticket.
    fn unused(self: &Arc<Self>) -> bool {
        Arc::strong_count(self) == 1
            && lock_if_free(&self.state).is_some_and(|state| !state.drawn && state.ready.is_none())
    }
}

/// The most turn locks (runtime directories) a process keeps its side of; beyond it, unused ones
/// are forgotten, so a host that names ever new runtime directories keeps flat memory and time.
pub(super) const LOCALS_KEPT: usize = 16;

pub(super) static LOCALS: PerProcess<Mutex<Vec<Arc<Local>>>> = PerProcess::new();

/// This process's side of the lock at `path`. A forked child starts afresh: its parent's tickets
/// and waiting threads are not its own.
/// However the runtime directory is spelt (a slash more, a symlink), one turn file is one side:
/// found by the directory's device and inode where it can be looked at, else by the path.
pub(super) fn local_for(path: OsString) -> Arc<Local> {
    let all = LOCALS.get();
    let mut locals = lock(&all);
    let identity = directory_identity(&path);
    // A directory removed and made again may get the inode of the one before: a side is taken
    // for it only while its own path still leads to that directory.
    let same = |local: &&Arc<Local>| match (identity, local.identity) {
        (Some(ours), Some(theirs)) => {
            local.path == path || (ours == theirs && directory_identity(&local.path) == identity)
        }
        _ => local.path == path,
    };
    if let Some(local) = locals.iter().find(same) {
        return Arc::clone(local);
    }
    if locals.len() >= LOCALS_KEPT {
        locals.retain(|local| !local.unused());
    }
    let local = Local::new(path);
    locals.push(Arc::clone(&local));
    local
}

/// The device and inode of the directory that holds the turn file at `path`.
fn directory_identity(path: &OsString) -> Option<(u64, u64)> {
    let dir = std::path::Path::new(path).parent()?;
    let stat = rustix::fs::stat(dir).ok()?;
    Some((stat.st_dev, stat.st_ino))
}

/// [`Local::turn_for_request`].
fn wait_in(local: &Arc<Local>, deadline: Instant) -> Result<Option<Ticket>, NoTurn> {
    let started = Instant::now();
    // A tenth of the time left, at most 100 ms, is kept for the conversation itself (a turn's
    // takes milliseconds).
    let left = deadline.saturating_duration_since(started);
    let give_up = started + left - (left / 10).min(RESERVE);
    // What the lock file says of the turns taken, read while waiting.
    let counter = open_lock(&local.path).ok();
    let mut turns_seen = counter.as_ref().map(turns_taken);
    let mut last_turn = started;
    let mut moved = false;
    let mut state = local.state();
    let me = state.arrivals;
    state.arrivals += 1;
    state.waiting.insert(me);
    let outcome = loop {
        if state.waiting.first() == Some(&me) {
            if let Some(ticket) = state.ready.take() {
                break Waited::Turn(ticket);
            }
            if let Some(e) = state.failed.take() {
                break Waited::WithoutTurn(format!("turn lock: {e}"));
            }
            if !state.drawn {
                state.drawn = true;
                drop(state);
                let drawn = draw(&local.path, give_up.min(Instant::now() + STALL));
                state = local.state();
                match drawn {
                    Ok(Some(Drawn::Now(ticket))) => break Waited::Turn(ticket),
                    Ok(Some(Drawn::Behind(ticket, ahead))) => {
                        if !wait_behind(local, ticket, ahead) {
                            state.drawn = false;
                            break Waited::WithoutTurn("no thread to wait in".to_owned());
                        }
                    }
                    Ok(Some(Drawn::Crowded)) => {
                        state.drawn = false;
                        break Waited::WithoutTurn(format!(
                            "{PLACES} or more requests wait for a turn"
                        ));
                    }
                    // The header stayed locked for as long as turns may stand still (a holder
                    // stopped or hostile), or until it was time to give up (the looks below end
                    // the wait).
                    Ok(None) => {
                        state.drawn = false;
                        if Instant::now() < give_up {
                            break Waited::WithoutTurn(format!(
                                "the turn file's header stayed locked for {} ms",
                                STALL.as_millis()
                            ));
                        }
                    }
                    Err(e) => {
                        state.drawn = false;
                        break Waited::WithoutTurn(format!("turn lock: {e}"));
                    }
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
    state.waiting.remove(&me);
    let not_had = match outcome {
        Waited::Turn(mut ticket) => {
            drop(state);
            ticket.guard();
            count_turn(&ticket.file);
            return Ok(Some(ticket));
        }
        Waited::WithoutTurn(why) => Ok(why),
        Waited::TimedOut(waited) => Err(NoTurn { waited }),
    };
    // A ticket whose turn came with no request left to take it is given up; one still waiting
    // goes to the next request.
    if state.waiting.is_empty() && state.ready.take().is_some() {
        state.drawn = false;
    }
    drop(state);
    local.changed.notify_all();
    match not_had {
        Ok(why) => {
            tracing::debug!(target: crate::diag::TARGET, "{why}; talking to the manager without a turn");
            Ok(None)
        }
        Err(no) => Err(no),
    }
}

/// What a wait for a turn came to.
enum Waited {
    Turn(Ticket),
    WithoutTurn(String),
    TimedOut(Duration),
}

/// Starts this process's thread that waits for `ticket`'s turn, behind the ticket numbered
/// `ahead`, and hands it to the process's next waiting request (or gives it up if none is left).
/// Whether it started.
fn wait_behind(local: &Arc<Local>, ticket: Ticket, ahead: u64) -> bool {
    let local = Arc::clone(local);
    std::thread::Builder::new()
        .name("synaps-scope turn".into())
        .spawn(move || {
            let came = wait_for_turn(&ticket, ahead);
            let mut state = local.state();
            match came {
                Ok(()) if !state.waiting.is_empty() => state.ready = Some(ticket),
                Ok(()) => {
                    state.drawn = false;
                    drop(ticket);
                }
                Err(e) => {
                    state.drawn = false;
                    state.failed = Some(e);
                    drop(ticket);
                }
            }
            drop(state);
            local.changed.notify_all();
        })
        .is_ok()
}

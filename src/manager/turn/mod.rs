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
//! Turns come in the order they were asked for, across processes: a request draws a ticket, and
//! its turn comes once every earlier ticket has ended. A ticket is one byte of
//! `$XDG_RUNTIME_DIR/synaps-scope.turn.tickets`, locked by the process that drew it (a POSIX
//! record lock, `F_SETLK`) from the draw to the end of its turn. The kernel releases it however
//! that process ends, so a ticket whose holder died holds no one back, and a child it forked does
//! not inherit it (`file`). Once its turn has come it is also guarded by a lock no other
//! descriptor's close releases, so a turn is held until its holder lets it go, whatever else the
//! host opens and closes (`file::Ticket`). The turn file `$XDG_RUNTIME_DIR/synaps-scope.turn` counts the tickets
//! drawn and names the last whose turn came; it is read and written under a lock of its own, held
//! for the few system calls of a draw. Waiting costs no CPU: a ticket waits (in one thread per
//! process) blocked on the lock of the live ticket just ahead of it, so the end of a turn wakes
//! the next in line and no other. An `flock`, which these turns were before, wakes every waiter
//! and lets the first to run win: in a burst of 256, one launch lost every draw for 2.7 s while
//! the others went through, and ran before its scope was made. Within a process (one side of the
//! lock per turn file, however its directory is spelt), requests are served in the order they
//! came, one ticket at a time. A turn is held from the connection to the
//! last answer the conversation needs; a scope made in place keeps it until its job has run
//! ([`keeping`]), so that the next launch's first message cannot hold that job back.
//!
//! Each turn counts itself in the lock file, so that waiters see the turns go round. A request
//! waits for its turn as long as they do, until a tenth of the time left to its deadline, at most
//! 100 ms, remains for the conversation. When no turn has begun for [`STALL`] (a holder stopped in
//! the middle of its turn, a manager that stopped answering), it talks to the manager anyway.
//! When the turns go round but its own has not come in that time, the manager is busier than the
//! request's bound allows: the request ends as one the manager did not answer in time would,
//! rather than crowd in and hold back every turn that is going round. A ticket outlives a request
//! that stopped waiting for it: it goes to the process's next request, or is given up when its
//! turn comes and no request is left, so the tickets behind it lose nothing. A thread already in
//! a turn takes no second one, and a caller can keep the turn of one conversation for the next
//! ([`keeping`]: a probe, then a scope made in place).
//!
//! Three parts: the turn file every process shares, a queue of tickets ([`file`]); one process's
//! side of it, where its requests wait in the order they came and one ticket at a time is drawn
//! ([`local`]); and here, the turn a thread holds, nested turns and kept ones.

mod file;
mod local;
#[cfg(test)]
mod tests;

use std::cell::{Cell, RefCell};
use std::ffi::OsStr;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

use file::{Ticket, LOCK_NAME};
use local::{local_for, Local};

pub(crate) use local::NoTurn;

thread_local! {
    /// How many turns this thread is in (the outermost holds the ticket).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Whether the outermost turn that ends on this thread is kept ([`keeping`]).
    static KEEP: Cell<bool> = const { Cell::new(false) };
    /// The turn kept.
    static KEPT: RefCell<Option<(Ticket, Arc<Local>)>> = const { RefCell::new(None) };
}

/// A turn to talk to the manager, held until dropped.
#[must_use = "a turn ends when it is dropped"]
pub(crate) struct Turn {
    /// The ticket whose turn this is, and the process's side of the lock; None when the turn holds
    /// no ticket (nested in another, none could be had, or the wait was given up).
    held: Option<(Ticket, Arc<Local>)>,
    /// A turn ends on the thread that took it (it counts in that thread's [`DEPTH`]).
    _not_send: PhantomData<*const ()>,
}

impl Turn {
    fn unheld() -> Self {
        Turn {
            held: None,
            _not_send: PhantomData,
        }
    }

    /// Whether this turn holds a ticket.
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
        if let Some((ticket, local)) = self.held.take() {
            local.end_turn(ticket);
        }
    }
}

/// Waits for this request's turn to talk to the manager through the turn file in `runtime_dir`,
/// for as long as the turns go round, until a tenth of the time left until `deadline`, at most
/// 100 ms, remains. Without a runtime directory (the session bus alone) there are no turns; nor
/// does a thread already in one take another.
///
/// # Errors
/// [`NoTurn`] when the turns went round all that time without this request's.
pub(crate) fn take(runtime_dir: Option<&OsStr>, deadline: Instant) -> Result<Turn, NoTurn> {
    if enter() > 0 {
        return Ok(Turn::unheld());
    }
    let Some(dir) = runtime_dir else {
        return Ok(Turn::unheld());
    };
    let mut path = dir.to_owned();
    path.push("/");
    path.push(LOCK_NAME);
    take_in(&local_for(path), deadline)
}

/// Counts a turn begun on this thread; how many it was in before.
fn enter() -> usize {
    DEPTH.with(|depth| depth.replace(depth.get() + 1))
}

/// [`take`] with the process's side of the lock given (a turn already counted by [`enter`]).
fn take_in(local: &Arc<Local>, deadline: Instant) -> Result<Turn, NoTurn> {
    match local.turn_for_request(deadline) {
        Ok(Some(ticket)) => Ok(Turn {
            held: Some((ticket, Arc::clone(local))),
            _not_send: PhantomData,
        }),
        Ok(None) => Ok(Turn::unheld()),
        Err(no) => {
            // This take counted in DEPTH; no turn came of it.
            DEPTH.with(|depth| depth.set(depth.get().saturating_sub(1)));
            Err(no)
        }
    }
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

//! Authenticated connections kept for a moment after a probe, so that a burst of requests costs the
//! manager one connection setup (its most expensive part of a probe: about 2 ms of its time on
//! systemd 252, 3 ms on 257) rather than one each. A kept connection still gets a fresh question
//! per request (R5), under that request's deadline; one that broke is replaced within the same
//! deadline. Connections idle longer than [`KEEP_FOR`] are ended by a reaper thread that exits
//! when none is left, so an idle process holds nothing open (on the private socket the manager
//! sends every unit change to every connection), and neither does a child forked meanwhile
//! (`Connection`'s drop hangs up the socket they share). A forked child never uses its parent's
//! connections, and closes its copies of them on its first request.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::comeback::Comeback;
use super::{BusError, Connection, Route};
use crate::manager::turn;
use crate::per_process::{lock, lock_if_free, Mine, PerProcess};

/// How long an idle connection is kept.
const KEEP_FOR: Duration = Duration::from_millis(500);
/// At most this many idle connections are kept (per process, all routes).
const MAX_IDLE: usize = 8;

struct Idle {
    route: Route,
    connection: Connection,
    since: Instant,
}

#[derive(Default)]
struct Kept {
    idle: Vec<Idle>,
    /// This process's reaper thread runs.
    reaping: bool,
}

#[derive(Default)]
struct Pool {
    kept: Mutex<Kept>,
    changed: Condvar,
}

static POOL: PerProcess<Pool> = PerProcess::new();

/// This process's pool; a forked child's first use closes its copies of the parent's connections
/// (closed only: the parent's stay open for the parent).
fn pool() -> Arc<Mine<Pool>> {
    POOL.get_inheriting(|parents| {
        if let Some(mut kept) = lock_if_free(&parents.kept) {
            kept.idle.clear();
        }
        Pool::default()
    })
}
/// Runs `ask` on a kept connection for `route` if there is one, else on a new one (`fresh` says
/// which, so a question can be lighter on a new connection, whose auth already proves a running
/// manager). The connection is kept afterwards unless it broke or timed out.
/// A session bus that says the manager is not on it (it may have left since the connection was
/// made) is passed over for the route's private socket: the questions asked here only read.
///
/// A manager away for a moment (re-executing, restarting: [`Route::manager_away`]) is waited for
/// within `deadline` and asked again (`comeback`); so is, once and at once, a question the
/// manager left unanswered (its name's owner left the bus, the connection broke): these questions
/// change nothing, so asking again is always safe.
pub(crate) fn with_connection<T>(
    route: &Route,
    deadline: Instant,
    mut ask: impl FnMut(&mut Connection, bool) -> Result<T, BusError>,
) -> Result<T, BusError> {
    let mut comeback = Comeback::new(route);
    let mut asked_again = false;
    loop {
        match with_connection_or_private(route, deadline, &mut ask) {
            Err(e) if route.manager_away(&e) && comeback.wait(deadline) => {}
            Err(e)
                if !asked_again && (e.means_owner_left() || matches!(e, BusError::Broken(_))) =>
            {
                tracing::debug!(target: crate::diag::TARGET, "{e}; asking again");
                asked_again = true;
            }
            outcome => {
                if !matches!(&outcome, Err(e) if route.manager_away(e)) {
                    comeback.reached();
                }
                return outcome;
            }
        }
    }
}

/// [`with_connection`] along `route`, and along its private socket when its session bus says the
/// manager is not on it.
fn with_connection_or_private<T>(
    route: &Route,
    deadline: Instant,
    mut ask: impl FnMut(&mut Connection, bool) -> Result<T, BusError>,
) -> Result<T, BusError> {
    match with_connection_along(route, deadline, &mut ask) {
        Err(e) if e.means_no_manager_on_bus() || e.means_no_such_method() => {
            match route.without_session_bus() {
                Some(private) => {
                    tracing::debug!(target: crate::diag::TARGET, "session bus: {e}; asking on the private socket");
                    with_connection_along(&private, deadline, &mut ask)
                }
                None => Err(e),
            }
        }
        outcome => outcome,
    }
}

/// [`with_connection`] along `route` alone.
fn with_connection_along<T>(
    route: &Route,
    deadline: Instant,
    ask: &mut impl FnMut(&mut Connection, bool) -> Result<T, BusError>,
) -> Result<T, BusError> {
    if let Some(mut connection) = take_renewed(route, deadline) {
        match ask(&mut connection, false) {
            Err(BusError::Broken(why)) => {
                tracing::debug!(target: crate::diag::TARGET, "a kept connection broke ({why}); connecting anew");
            }
            outcome => {
                keep_if_sound(route, connection, &outcome);
                return outcome;
            }
        }
    }
    // A new connection takes a turn: connections set up by many processes at once are what a
    // burst costs the manager most. A question on a kept one is a round trip.
    let _turn = turn::take(route.runtime_dir(), deadline).map_err(|no| BusError::TimedOut {
        phase: "waiting for its turn behind other requests",
        after: no.waited,
    })?;
    let mut connection = Connection::open(route, deadline)?;
    connection.ignore_signals();
    let outcome = ask(&mut connection, true);
    keep_if_sound(route, connection, &outcome);
    outcome
}

/// A kept connection for `route`, renewed for `deadline`, else a new one: for a conversation that
/// ends with the connection let go (a scope made for the calling process, which then execs).
/// A kept one is taken only once the broker has said that the manager's name has the owner it
/// had (one round trip to the broker): the call that follows changes something, and must go to
/// the manager that this connection greeted.
pub(crate) fn take_or_open(route: &Route, deadline: Instant) -> Result<Connection, BusError> {
    if let Some(mut connection) = take_renewed(route, deadline) {
        if connection.authenticated().is_ok() {
            return Ok(connection);
        }
    }
    Connection::open(route, deadline)
}

/// A kept connection for `route`, its conversations now bounded by `deadline`.
fn take_renewed(route: &Route, deadline: Instant) -> Option<Connection> {
    let mut connection = take(route)?;
    connection.renew(deadline).ok()?;
    Some(connection)
}

fn keep_if_sound<T>(route: &Route, connection: Connection, outcome: &Result<T, BusError>) {
    if matches!(outcome, Ok(_) | Err(BusError::Refused { .. })) {
        put(route, connection);
    }
}

fn take(route: &Route) -> Option<Connection> {
    let pool = pool();
    let mut kept = lock(&pool.kept);
    let at = kept.idle.iter().rposition(|idle| &idle.route == route)?;
    Some(kept.idle.swap_remove(at).connection)
}

fn put(route: &Route, connection: Connection) {
    let pool = pool();
    let mut kept = lock(&pool.kept);
    if kept.idle.len() >= MAX_IDLE {
        return;
    }
    kept.idle.push(Idle {
        route: route.clone(),
        connection,
        since: Instant::now(),
    });
    if !kept.reaping {
        let reaper = Arc::clone(&pool);
        let started = std::thread::Builder::new()
            .name("synaps-scope bus reaper".into())
            .spawn(move || reap(&reaper));
        // Without a reaper nothing may be kept: the manager would write to it forever.
        match started {
            Ok(_) => kept.reaping = true,
            Err(_) => kept.idle.clear(),
        }
    }
    drop(kept);
    pool.changed.notify_all();
}

/// Ends connections idle for [`KEEP_FOR`]; exits when none is left.
fn reap(pool: &Pool) {
    let mut kept = lock(&pool.kept);
    loop {
        let now = Instant::now();
        kept.idle
            .retain(|idle| now.duration_since(idle.since) < KEEP_FOR);
        let Some(oldest) = kept.idle.iter().map(|idle| idle.since).min() else {
            kept.reaping = false;
            return;
        };
        let wait = (oldest + KEEP_FOR).saturating_duration_since(now);
        kept = pool
            .changed
            .wait_timeout(kept, wait)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

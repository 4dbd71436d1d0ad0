//! What the launcher program does before it execs the command (A1): a transient scope for its own
//! pid, made over D-Bus with the properties `systemd-run --user --scope --collect` sends, and the
//! wait for the scope's start job, all by one deadline.

use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use crate::input::inputs::NO_USER_BUS;
use crate::input::limits::{BusValue, Limit, Limits};
use crate::input::unit_name::parse_unit_name;
use crate::kernel::cgroup;
use crate::manager::bus::comeback::Comeback;
use crate::manager::bus::wire::{Call, Property, Value};
use crate::manager::bus::{
    identity_on, manager_version, pool, BusError, Connection, Fallback, Identity, Route, MANAGER,
    MANAGER_PATH,
};
use crate::manager::turn::{self, Turn};

/// One scope to make for the calling process.
#[derive(Clone, Debug)]
pub struct ScopeRequest<'a> {
    /// The unit name (`synaps-<kind>-<hex>.scope`).
    pub unit: &'a str,
    /// The slice, already mangled and checked (see `unit_name::mangle_slice`).
    pub slice: Option<&'a str>,
    /// The Description, already safe (see `unit_name::description`).
    pub description: &'a str,
    /// The scope's resource limits, each sent typed as the manager takes it.
    pub limits: &'a Limits,
    /// `required` mode: a start that this process cannot see in its own cgroup (the file hidden,
    /// as a sandbox may hide `/proc`) is not believed on the manager's word alone, for the
    /// command must never run unscoped.
    pub required: bool,
}

/// One launch's request, and when the launch began.
struct Launch<'r, 'a> {
    request: &'r ScopeRequest<'a>,
    /// `CLOCK_MONOTONIC` in microseconds as the launch sent its first start (as it began, until
    /// then), as the manager stamps a unit's activation (`ActiveEnterTimestampMonotonic`): a unit
    /// of the launch's name that was active before it is not the launch's own. None where this
    /// process's clock is not the manager's (a time namespace with an offset).
    since: std::cell::Cell<Option<u64>>,
    sent_one: std::cell::Cell<bool>,
}

impl<'r, 'a> Launch<'r, 'a> {
    /// The launch of `request`, beginning now. Only a unit name this library makes
    /// (`synaps-<kind>-<32 hex>.scope`) is taken: whatever a unit of that name turns out to be,
    /// it is a scope whose cgroup is named as the unit is, and no other unit (a service, a socket,
    /// a timer) can be mistaken for one this launch made.
    fn new(request: &'r ScopeRequest<'a>) -> Result<Self, NotMade> {
        if parse_unit_name(request.unit).is_none() {
            return Err(NotMade::before_sending(format!(
                "{} is not a unit name the launcher program makes (synaps-KIND-<32 hex \
                 digits>.scope)",
                request.unit
            )));
        }
        let since = std::cell::Cell::new(monotonic_us());
        Ok(Launch {
            request,
            since,
            sent_one: std::cell::Cell::new(false),
        })
    }

    /// Marks the first start sent now.
    fn sending_a_start(&self) {
        if !self.sent_one.replace(true) {
            self.since.set(monotonic_us());
        }
    }

    fn unit(&self) -> &'a str {
        self.request.unit
    }
}

/// `CLOCK_MONOTONIC` now, in microseconds; None in a time namespace whose monotonic clock is
/// offset from the host's, where the manager's stamps cannot be compared with it.
fn monotonic_us() -> Option<u64> {
    let offset = std::fs::read_to_string("/proc/self/timens_offsets").unwrap_or_default();
    let offset_clock = offset.lines().any(|line| {
        let mut words = line.split_whitespace();
        matches!(words.next(), Some("monotonic" | "1")) && words.any(|n| n != "0")
    });
    if offset_clock {
        return None;
    }
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    Some(u64::try_from(now.tv_sec).ok()? * 1_000_000 + u64::try_from(now.tv_nsec).ok()? / 1_000)
}

/// Why the scope was not made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotMade {
    /// In words for the person reading the command's stderr.
    pub why: String,
    /// The request reached the manager and got no answer by the deadline: the manager may still
    /// make the scope, with this process in it, when it gets to it.
    pub may_yet_be_made: bool,
    /// What became of the request decides what comes next (within the bound).
    pub(crate) next: Next,
}

/// What a launch does after a try that did not make the scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nothing more: the outcome is final.
    Final,
    /// The manager was away and nothing reached it: wait for it and try again (`comeback`).
    TryAgain,
    /// The manager's name's owner left the bus without answering the start: whether the manager
    /// acted on it first is asked once it is back (`settle`).
    AskWhetherMade,
    /// The manager had the unit and dropped it before its start job moved this process: the
    /// command has not run, so the scope is made again at once.
    StartAgain,
    /// The owner of the manager's name on the session bus turned out not to be the manager (it
    /// refused the start as a method it does not have, or said the scope was made when this
    /// process was not moved): the start goes to the private socket, if there is one.
    TakePrivate,
}

impl NotMade {
    /// What the launcher says on stderr before it runs `program` anyway (or, `required`, instead
    /// of running it) when the scope `unit` was not made.
    pub fn message(&self, program: &str, unit: &str, required: bool) -> String {
        let why = &self.why;
        if required {
            format!(
                "not running {program}: no scope {unit} ({why}), and process scopes are required"
            )
        } else if self.may_yet_be_made {
            format!(
                "warning: running {program} before its scope {unit} was confirmed ({why}); the \
                 manager may still move it there"
            )
        } else {
            format!("warning: running {program} without a scope: {unit} could not be made ({why})")
        }
    }

    fn before_sending(why: impl Into<String>) -> Self {
        NotMade {
            why: why.into(),
            may_yet_be_made: false,
            next: Next::Final,
        }
    }

    /// Not made, and what comes next.
    fn then(why: impl Into<String>, next: Next) -> Self {
        NotMade {
            next,
            ..NotMade::before_sending(why)
        }
    }

    /// The manager has a unit of this launch's name that this launch did not make: another
    /// process's (a wrapped argv spawned twice, a name passed to the launcher program by hand).
    /// Nothing is sent about it; the launch is one whose scope could not be made.
    fn name_taken(unit: &str) -> Self {
        NotMade::before_sending(format!(
            "the user manager already has a unit named {unit}, which is not this launch's: it \
             holds other processes, or was there before this launch began (the same wrapped \
             command line launched twice?); it is left as it is"
        ))
    }

    /// `error` met along `route` before the start was sent: tried again if the manager was only
    /// away.
    fn unsent(route: &Route, error: BusError) -> Self {
        NotMade {
            next: if route.manager_away(&error) {
                Next::TryAgain
            } else {
                Next::Final
            },
            ..NotMade::before_sending(error.to_string())
        }
    }

    /// `error` met after the start was sent. A start the manager left unanswered as it went
    /// away (its name's owner left the bus, or it closed the connection: a re-exec, a crash) is
    /// settled by asking it once it is back.
    fn after_sending(error: BusError) -> Self {
        let went_away = error.means_owner_left() || matches!(error, BusError::Broken(_));
        NotMade {
            may_yet_be_made: went_away || !matches!(error, BusError::Refused { .. }),
            next: if went_away {
                Next::AskWhetherMade
            } else {
                Next::Final
            },
            why: error.to_string(),
        }
    }
}

/// Makes the scope for the calling process by `deadline`, reaching the manager as
/// `env` says (the launcher program's own environment, which is the command's).
pub fn make_own_scope(
    env: &[(OsString, OsString)],
    request: &ScopeRequest<'_>,
    deadline: Instant,
) -> Result<(), NotMade> {
    let route = Route::from_env(env, Fallback::SessionFirst);
    if !route.is_configured() {
        return Err(NotMade::before_sending(NO_USER_BUS));
    }
    let launch = Launch::new(request)?;
    let mut turn = Some(take_turn(&route, deadline)?);
    until_made(&route, &launch, deadline, |along| {
        let bus =
            Connection::open_pipelined(along, deadline).map_err(|e| NotMade::unsent(along, e))?;
        make_own_scope_over(along, bus, &mut turn, &launch, deadline)
    })
}

/// Runs `attempt` along `route` until the scope is made or a try's outcome is final, within
/// `deadline`: a manager that was away (re-executing, restarting) is waited for and tried again,
/// since nothing reached it; a start left unanswered by a manager that left the bus is settled by
/// asking the manager, once back, whether it made the scope ([`settle`]); an owner of the
/// manager's name that turned out not to be the manager sends the tries to the private socket.
/// The command has not run: a try again runs it once, scoped, and a second start of the same
/// unit could never make a second scope (the manager refuses a unit name it has).
fn until_made(
    route: &Route,
    launch: &Launch<'_, '_>,
    deadline: Instant,
    mut attempt: impl FnMut(&Route) -> Result<(), NotMade>,
) -> Result<(), NotMade> {
    let mut comeback = Comeback::new(route);
    let mut along = route.clone();
    let mut pause = Duration::from_millis(2);
    loop {
        let not_made = match attempt(&along) {
            Ok(()) => {
                comeback.reached();
                return Ok(());
            }
            Err(not_made) => not_made,
        };

        match not_made.next {
            Next::TryAgain if comeback.wait(deadline) => {}
            // A unit of the launch's name on its way out is waited for, not asked after in a loop.
            Next::StartAgain if Instant::now() + pause < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(START_AGAIN_LONGEST_PAUSE);
            }
            Next::TakePrivate => match along.private_to_fall_back_to() {
                Some(private) => {
                    tracing::debug!(target: crate::diag::TARGET, "{}; taking the private socket", not_made.why);
                    along = private;
                }
                None => return Err(not_made),
            },
            Next::AskWhetherMade => match settle(route, launch, deadline) {
                Settled::NotMade | Settled::Going => {}
                Settled::Made => {
                    comeback.reached();
                    return watch_own_cgroup(route, launch, deadline);
                }
                Settled::StartedWithoutUs(run) => {
                    stop_empty_scope(route, launch.unit(), &run, deadline)
                }
                Settled::StartedWithOthers => return Err(NotMade::name_taken(launch.unit())),
                Settled::Unknown => return Err(not_made),
            },
            Next::TryAgain | Next::StartAgain | Next::Final => return Err(not_made),
        }
    }
}

/// What the manager says of a start it left unanswered.
enum Settled {
    /// It has the unit: its start job will move this process there.
    Made,
    /// It does not have it, having answered since it came back: the start never took effect.
    NotMade,
    /// It could not be asked within the bound.
    Unknown,
    /// Its start job ran, and this process is not in it: the manager lost the scope's processes
    /// on the way (systemd 247 does across a reload or re-exec between the start and its job),
    /// and the scope holds no process at all: the run of the unit (`InvocationID`) judged so.
    StartedWithoutUs(Vec<u8>),
    /// Its start job ran, this process is not in it, and other processes are (or they could not
    /// be counted): another's unit under this name, or this launch's holding another process (a
    /// relay the manager named as the sender), which is never stopped.
    StartedWithOthers,
    /// It is on its way out (deactivating, failed, inactive with no job, or empty since before
    /// the launch began): no start job of it will move this process, and the manager collects it.
    Going,
}

/// What the manager says of a unit of the launch's name: asked once it is back, within
/// `deadline`, never changing anything.
struct UnitState {
    active_state: String,
    /// The unit has a job queued (its start job not yet run, or another's job).
    has_job: bool,
    /// `ActiveEnterTimestampMonotonic`: when it last became active (0: never).
    active_since: u64,
    /// `InvocationID`: which run of the unit this is (a unit collected and made again under the
    /// name has another).
    invocation: Vec<u8>,
}

/// Asks the manager (once it is back, within `deadline`) whether it has the unit of `launch`'s
/// name, and whether that unit is the launch's own. Nothing but the launch's process in it, or
/// its start job still to run, makes it the launch's own; an active unit whose cgroup holds
/// processes is another's; one that is going (deactivating, failed, inactive with no job, or
/// active and empty since before the launch began) is waited for, and the start made again once
/// the manager has collected it. Only an active unit that became active since the launch began
/// and holds no process at all is stopped (systemd 247's lost move).
fn settle(route: &Route, launch: &Launch<'_, '_>, deadline: Instant) -> Settled {
    let unit = launch.unit();
    let asked = unit_state(route, unit, deadline);
    let state = match asked {
        Ok(state) => state,
        Err(BusError::Refused { name, .. }) if name == NO_SUCH_UNIT => return Settled::NotMade,
        Err(e) => {
            tracing::debug!(target: crate::diag::TARGET, "whether {unit} was made: {e}");
            return Settled::Unknown;
        }
    };
    if cgroup::own_is_in_unit(unit) == Some(true) || state.has_job {
        return Settled::Made;
    }
    if state.active_state != "active" {
        return Settled::Going;
    }
    // Where the clocks cannot be compared, every empty unit is taken to be another's.
    let before_the_launch = launch
        .since
        .get()
        .map_or(true, |since| state.active_since < since);
    match processes_in_cgroup(route, unit, deadline) {
        // Another launch's scope, emptied and not yet collected (the same wrapped line run again
        // at once): waited for, never stopped.
        Ok(0) if before_the_launch => Settled::Going,
        Ok(0) => Settled::StartedWithoutUs(state.invocation),
        // An empty scope the manager collected since it was asked after.
        Err(BusError::Refused { name, .. }) if name == NO_SUCH_UNIT => Settled::NotMade,
        // Moved there since it was looked at: the process counted was this one.
        _ if cgroup::own_is_in_unit(unit) == Some(true) => Settled::Made,
        Ok(_) | Err(_) => Settled::StartedWithOthers,
    }
}

/// What the manager says of the unit `unit`, by `deadline`.
fn unit_state(route: &Route, unit: &str, deadline: Instant) -> Result<UnitState, BusError> {
    pool::with_connection(route, deadline, |bus, _| {
        let path = bus.call_manager("GetUnit", Call::new().string(unit))?;
        let path = path.first_str().unwrap_or_default().to_owned();
        let mut property = |name: &str| {
            let serial = bus.send_get(&path, UNIT, name)?;
            bus.reply(serial)
        };
        let active_state = property("ActiveState")?
            .first_str()
            .unwrap_or_default()
            .to_owned();
        // `Job` is `(uo)`: the job's id, 0 for none.
        let has_job = match property("Job")?.body.first() {
            Some(Value::Variant(job)) => matches!(&**job, Value::List(fields)
                if fields.first().and_then(Value::as_u64).unwrap_or(0) != 0),
            _ => false,
        };
        let active_since = property("ActiveEnterTimestampMonotonic")?
            .body
            .first()
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let invocation = match property("InvocationID")?.body.first() {
            Some(Value::Variant(id)) => match &**id {
                Value::Bytes(bytes) => bytes.clone(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        Ok(UnitState {
            active_state,
            has_job,
            active_since,
            invocation,
        })
    })
}

/// How many processes the manager says the cgroup of the unit `unit` holds (`GetUnitProcesses`,
/// systemd 238 and later), counting those listed in the unit's own cgroup or below it (a unit name
/// this library makes needs no escaping as a cgroup's name: the launcher program takes no other).
fn processes_in_cgroup(route: &Route, unit: &str, deadline: Instant) -> Result<usize, BusError> {
    let reply = pool::with_connection(route, deadline, |bus, _| {
        bus.call_manager("GetUnitProcesses", Call::new().string(unit))
    })?;
    let in_its_cgroup = |process: &Value| match process {
        Value::List(fields) => fields
            .first()
            .and_then(Value::as_str)
            .map_or(true, |cgroup| cgroup.split('/').any(|part| part == unit)),
        _ => true,
    };
    match reply.body.first() {
        Some(Value::List(processes)) => Ok(processes.iter().filter(|p| in_its_cgroup(p)).count()),
        _ => Err(BusError::Broken(
            "GetUnitProcesses answered with no list of processes".into(),
        )),
    }
}

/// Stops the scope `unit` this launch started, which its start left with no process at all (the
/// manager lost this process on the way), so that the start can be made again under its name. A
/// unit that holds any process is never stopped ([`Settled::StartedWithOthers`]).
fn stop_empty_scope(route: &Route, unit: &str, invocation: &[u8], deadline: Instant) {
    // Asked again at once: the run of the unit that was judged, still empty, is the one stopped
    // (a unit collected and made again since, under the same name, is left as it is).
    let same_run = unit_state(route, unit, deadline).is_ok_and(|now| now.invocation == invocation)
        && matches!(processes_in_cgroup(route, unit, deadline), Ok(0));
    if !same_run {
        return;
    }
    let stopped = pool::with_connection(route, deadline, |bus, _| {
        bus.call_manager("StopUnit", Call::new().string(unit).string("replace"))
    });
    if let Err(e) = stopped {
        tracing::debug!(target: crate::diag::TARGET, "stopping {unit}, started without this process: {e}");
    }
}

/// The unit interface, whose `ActiveState` says whether a start job ran.
const UNIT: &str = "org.freedesktop.systemd1.Unit";

/// The manager's answers for a unit it does not have, and for a start of one it has.
const NO_SUCH_UNIT: &str = "org.freedesktop.systemd1.NoSuchUnit";
const UNIT_EXISTS: &str = "org.freedesktop.systemd1.UnitExists";

/// [`make_own_scope`] along `route` in the request's `turn` (the probe's, kept; else one taken
/// now), over the connection the request's probe left open if there is one: for a caller that
/// execs the command itself (the command line's `run`).
pub(crate) fn enter_own_scope(
    route: &Route,
    turn: Option<Turn>,
    request: &ScopeRequest<'_>,
    deadline: Instant,
) -> Result<(), NotMade> {
    let launch = Launch::new(request)?;
    let mut turn = Some(match turn {
        Some(turn) => turn,
        None => take_turn(route, deadline)?,
    });
    until_made(route, &launch, deadline, |along| {
        let bus = pool::take_or_open(along, deadline).map_err(|e| NotMade::unsent(along, e))?;
        make_own_scope_over(along, bus, &mut turn, &launch, deadline)
    })
}

/// This request's turn with the manager on `route` (`crate::manager::turn`).
fn take_turn(route: &Route, deadline: Instant) -> Result<Turn, NotMade> {
    turn::take(route.runtime_dir(), deadline).map_err(|no| {
        NotMade::before_sending(
            BusError::TimedOut {
                phase: "waiting for its turn behind other launches",
                after: no.waited,
            }
            .to_string(),
        )
    })
}

/// [`make_own_scope`] over an open connection along `route`, in the request's `turn`, which ends
/// once the scope's start job has run (or [`LISTEN_FOR_JOB_END`] after the manager's answer); the
/// connection is let go then too. A session bus that says the manager is not on it never passed
/// the call on, so the call is made again along the route's private socket, if it has one.
fn make_own_scope_over(
    route: &Route,
    mut bus: Connection,
    turn: &mut Option<Turn>,
    launch: &Launch<'_, '_>,
    deadline: Instant,
) -> Result<(), NotMade> {
    let request = launch.request;
    let before = |e: BusError| NotMade::unsent(route, e);
    // The manager must move this process and no other (A7): "the sender" only where this process
    // is the peer the manager asks about; else its pid, where the manager counts pids alike; else
    // a pidfd; else the private socket, whose credentials are this process's own; else nothing.
    // The pidfd shown to reach the broker, kept open until it goes with the start.
    let pidfd;
    let (who, mut bus) = match identity_on(route, &mut bus, deadline).map_err(before)? {
        Identity::TheSender => (Who::Pid(THE_SENDER), bus),
        Identity::OwnPid => (Who::Pid(std::process::id()), bus),
        Identity::PidFd {
            bus: by_pidfd,
            pidfd: shown,
        } => {
            pidfd = shown;
            (Who::PidFd(pidfd.as_fd()), *by_pidfd)
        }
        Identity::TakePrivate(why) => {
            let private = route
                .private_to_fall_back_to()
                .ok_or_else(|| NotMade::before_sending(why.clone()))?;
            tracing::debug!(target: crate::diag::TARGET, "{why}; taking the private socket");
            drop(bus);
            let bus = Connection::open_pipelined(&private, deadline).map_err(before)?;
            return make_own_scope_over(&private, bus, turn, launch, deadline);
        }
        Identity::Nothing(why) => return Err(NotMade::before_sending(why)),
    };
    // A share goes on the bus scaled as the manager's own systemd-run scales it, which changed in
    // 248: asked only where the request has one. The question changes nothing, so a manager gone
    // meanwhile (a re-exec) is waited for and asked again, and one not on the session bus is asked
    // on the private socket, as for the start; a refusal to say (a filtering proxy) is taken as the
    // newest.
    let manager = match request.limits.iter().any(Limit::is_share) {
        false => None,
        true => match manager_version(&mut bus) {
            Ok(version) => Some(version),
            Err(e) if bus.via_broker && e.means_no_manager_on_bus() => {
                drop(bus);
                return over_the_private_socket(route, e, turn, launch, deadline);
            }
            Err(e)
                if (e.means_owner_left() || matches!(e, BusError::Broken(_)))
                    && route.manager_has_lived() =>
            {
                return Err(NotMade::unsent(route, BusError::Away(e.to_string())))
            }
            Err(e @ BusError::Refused { .. }) if !e.means_no_such_method() => {
                tracing::debug!(target: crate::diag::TARGET, "the manager's version not said ({e}); a share scaled as the newest systemd scales it");
                None
            }
            Err(e) => return Err(before(e)),
        },
    };
    // Both ways here (a new connection, or a kept one taken renewed) bound it by `deadline`.
    bus.listen_for_jobs();
    bus.subscribe_job_removed().map_err(before)?;
    let call = start_scope_call(request, who, manager);
    launch.sending_a_start();
    let sent = match who {
        Who::Pid(_) => bus.send_manager("StartTransientUnit", call),
        Who::PidFd(pidfd) => bus.send_with_fd(
            call,
            pidfd,
            crate::manager::bus::SYSTEMD,
            MANAGER_PATH,
            MANAGER,
            "StartTransientUnit",
        ),
    };
    let serial = sent.map_err(NotMade::after_sending)?;
    // On a pipelined connection the call went out with the authentication; refused, it was
    // never read as a call.
    let answered = match bus.authenticated() {
        Ok(()) => bus.reply(serial).map_err(|e| (e, true)),
        Err(e) => Err((e, false)),
    };
    let reply = match answered {
        Ok(reply) => reply,
        // The name is no proof that the unit is this launch's: a wrapped argv spawned twice
        // names the same unit. Nor is the refusal proof that it is another's: systemd 247 acts
        // on a start it had when a reload came, and acts on it again after the reload, refusing
        // it then with `UnitExists`, so the launch never gets the job its start made. This
        // process seen in the unit is the proof ([`exists_already`]).
        Err((BusError::Refused { name, .. }, true)) if name == UNIT_EXISTS => {
            drop(turn.take());
            return exists_already(route, launch, deadline);
        }
        Err((e, true)) if bus.via_broker && e.means_no_such_method() => {
            return Err(NotMade {
                why: format!(
                    "the owner of the manager's name on the session bus is no manager: {e}"
                ),
                may_yet_be_made: false,
                next: Next::TakePrivate,
            })
        }
        Err((e, _)) if bus.via_broker && e.means_no_manager_on_bus() => {
            drop(bus);
            return over_the_private_socket(route, e, turn, launch, deadline);
        }
        // Refused before its authentication was answered, the call was never read: a manager
        // going away (re-executing) drops its connections so.
        Err((e @ BusError::Broken(_), false)) if route.manager_has_lived() => {
            return Err(NotMade::unsent(route, BusError::Away(e.to_string())))
        }
        Err((e, false)) => return Err(before(e)),
        Err((e, true)) => return Err(NotMade::after_sending(e)),
    };
    let job = reply
        .first_str()
        .ok_or_else(|| NotMade::before_sending("StartTransientUnit gave no job path"))?
        .to_owned();
    wait_for_start(route, bus, turn.take(), &job, launch, deadline)
}

/// [`make_own_scope_over`] the private socket of `route`, whose session bus said `error`: the
/// manager is not on it, so nothing was passed on. Where the route has no private socket, `error`.
fn over_the_private_socket(
    route: &Route,
    error: BusError,
    turn: &mut Option<Turn>,
    launch: &Launch<'_, '_>,
    deadline: Instant,
) -> Result<(), NotMade> {
    let before = |e: BusError| NotMade::unsent(route, e);
    let Some(private) = route.without_session_bus() else {
        return Err(before(error));
    };
    tracing::debug!(target: crate::diag::TARGET, "{error}; trying the private socket");
    let bus = Connection::open_pipelined(&private, deadline).map_err(before)?;
    make_own_scope_over(&private, bus, turn, launch, deadline)
}

/// In `PIDs`, the process that sent the call, as the manager knows it: from the socket's
/// credentials (private socket) or the broker's (session bus), read in the manager's own pid
/// namespace. The launcher's own pid number would be read there too, and in a pid namespace of
/// its own (`unshare --pid`, bwrap, a container) it names another process, which would be moved.
const THE_SENDER: u32 = 0;

/// How the scope's process is named in `StartTransientUnit` (`bus::Identity`).
#[derive(Clone, Copy)]
enum Who<'fd> {
    /// `PIDs=[pid]`: [`THE_SENDER`], or this process's own pid.
    Pid(u32),
    /// `PIDFDs=[a pidfd of this process]`, this one, attached to the call.
    PidFd(BorrowedFd<'fd>),
}

/// `StartTransientUnit` of the scope `request` for `who`, with the properties systemd-run sends
/// for `--scope --collect`, but for `AddRef`: systemd-run sends it through a broker to pin the
/// unit for as long as its bus name lives, which for the launcher program ends at its `execve`,
/// while the scope holds the command's pid from its start job on (and a unit with a job or a
/// process is never collected). It costs the manager a match on the broker and the name's
/// disappearance to handle: 0.29 ms a launch and a quarter of its CPU per launch, measured.
/// `manager`: the manager's major version, where the request has a share ([`Limit::on_the_bus`]).
fn start_scope_call(request: &ScopeRequest<'_>, who: Who<'_>, manager: Option<u32>) -> Call {
    let pids;
    let mut properties = vec![
        ("Description", Property::Str(request.description)),
        ("CollectMode", Property::Str("inactive-or-failed")),
    ];
    if let Some(slice) = request.slice {
        properties.push(("Slice", Property::Str(slice)));
    }
    let limits: Vec<(String, BusValue)> = request
        .limits
        .iter()
        .map(|limit| limit.on_the_bus(manager))
        .collect();
    properties.extend(limits.iter().map(|(name, value)| {
        let value = match *value {
            BusValue::U64(n) => Property::U64(n),
            BusValue::U32(n) => Property::U32(n),
        };
        (name.as_str(), value)
    }));
    properties.push(match who {
        Who::Pid(pid) => {
            pids = [pid];
            ("PIDs", Property::Pids(&pids))
        }
        Who::PidFd(_) => ("PIDFDs", Property::OnePidFd),
    });
    Call::new()
        .string(request.unit)
        .string("fail")
        .properties(&properties)
        .no_aux_units()
}

/// A connection kept open across launches, on which another process is put in its scope with one
/// call: the floor a launch through the launcher program is measured against
/// (`benches/launch.rs`), not a way the library launches.
pub struct KeptConnection {
    bus: Connection,
}

impl KeptConnection {
    /// Opens a connection as the launcher program would with `env`, by `deadline`.
    pub fn open(env: &[(OsString, OsString)], deadline: Instant) -> Result<Self, String> {
        let route = Route::from_env(env, Fallback::SessionFirst);
        let mut bus = Connection::open(&route, deadline).map_err(|e| e.to_string())?;
        bus.listen_for_jobs();
        bus.subscribe_job_removed().map_err(|e| e.to_string())?;
        bus.authenticated().map_err(|e| e.to_string())?;
        Ok(KeptConnection { bus })
    }

    /// Puts `pid` in the new scope `request` and waits for its start job, by `deadline`.
    pub fn start_scope(
        &mut self,
        request: &ScopeRequest<'_>,
        pid: u32,
        deadline: Instant,
    ) -> Result<(), String> {
        self.bus.renew(deadline).map_err(|e| e.to_string())?;
        let manager = match request.limits.iter().any(Limit::is_share) {
            true => Some(manager_version(&mut self.bus).map_err(|e| e.to_string())?),
            false => None,
        };
        let call = start_scope_call(request, Who::Pid(pid), manager);
        let serial = self
            .bus
            .send_manager("StartTransientUnit", call)
            .map_err(|e| e.to_string())?;
        let reply = self.bus.reply(serial).map_err(|e| e.to_string())?;
        let job = reply.first_str().unwrap_or_default().to_owned();
        match self.bus.wait_for_job(&job).map_err(|e| e.to_string())? {
            result if result == "done" => Ok(()),
            result => Err(format!("the start job ended '{result}'")),
        }
    }
}

mod wait;

use wait::{exists_already, wait_for_start, watch_own_cgroup, START_AGAIN_LONGEST_PAUSE};

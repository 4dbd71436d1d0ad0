//! The wait for the scope's start: its job's end heard on the connection for a moment, then the
//! launcher program's own cgroup watched until the manager has moved it, asking the manager only
//! where the start seems lost.

use std::time::{Duration, Instant};

use crate::kernel::cgroup;
use crate::manager::bus::{BusError, Connection, Route};
use crate::manager::turn::Turn;

use super::{settle, stop_empty_scope, Launch, Next, NotMade, Settled};

/// How long the launcher listens on its connection for the end of its scope's start job before
/// it lets the connection go and watches its own cgroup instead. On a quiet manager the job ends
/// within a few milliseconds of the reply, so a job that fails is reported at once, with its
/// result, as systemd-run reports it. Beyond this no connection is held: the manager sends every
/// unit's signals to every connection on its private socket, and runs jobs only when no message
/// is waiting, so a burst of launchers that each held theirs until their job ended would cost it
/// on the order of n² messages and hold back every job of the burst.
pub(super) const LISTEN_FOR_JOB_END: Duration = Duration::from_millis(25);
/// How long a scope's start job may take before the manager is asked whether it still has the
/// unit: far longer than a job takes on a manager that has it (a few milliseconds, tens in a
/// burst), so that only a start the manager lost costs it a question.
pub(super) const ASK_AFTER: Duration = Duration::from_millis(200);
/// The longest pause before a start is made again after the unit of its name was found on its
/// way out: each try asks the manager a few questions, which a unit that stays is not worth
/// asking more often.
pub(super) const START_AGAIN_LONGEST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between two looks at the cgroup.
pub(super) const LONGEST_PAUSE: Duration = Duration::from_millis(8);

/// Waits, by `deadline`, for the start job `job` of the scope `unit` that holds this process.
pub(super) fn wait_for_start(
    route: &Route,
    mut bus: Connection,
    turn: Option<Turn>,
    job: &str,
    launch: &Launch<'_, '_>,
    deadline: Instant,
) -> Result<(), NotMade> {
    let (request, unit) = (launch.request, launch.unit());
    let via_broker = bus.via_broker;
    let cgroup_readable = cgroup::own_is_in_unit(unit).is_some();
    let listen_until = if cgroup_readable {
        deadline.min(Instant::now() + LISTEN_FOR_JOB_END)
    } else {
        deadline
    };
    let ended = job_end(&mut bus, job, unit, cgroup_readable, listen_until);
    // The turn lasts until the job has run (or the listening ends): the manager runs jobs only
    // when no message waits, so a next turn begun at the reply could hold this job back, and the
    // turns after it theirs, for as long as the turns go round.
    drop(turn);
    match ended {
        Ok(JobEnd::SeenInCgroup) => {
            tracing::debug!(target: crate::diag::TARGET, "{unit} started: this process was seen in its cgroup");
            return Ok(());
        }
        // A peer that says the job is done when this process is not in the scope (the manager
        // moves it there before the job ends) is not believed.
        Ok(JobEnd::Reported(result))
            if result == "done" && cgroup::own_is_in_unit(unit) == Some(false) =>
        {
            return Err(NotMade::then(
                format!("the start job of {unit} was reported done, yet this process is not in it"),
                if via_broker {
                    Next::TakePrivate
                } else {
                    Next::Final
                },
            ));
        }
        Ok(JobEnd::Reported(result))
            if result == "done" && request.required && !cgroup_readable =>
        {
            return Err(NotMade::then(
                format!(
                    "the start job of {unit} was reported done, but this process cannot read its \
                     own cgroup (/proc/self/cgroup) to see that it is in the scope"
                ),
                Next::Final,
            ))
        }
        Ok(JobEnd::Reported(result)) if result == "done" => {
            tracing::debug!(target: crate::diag::TARGET, "{unit} started: its start job was reported done");
            return Ok(());
        }
        Ok(JobEnd::Reported(result)) => {
            return Err(NotMade::then(
                format!("the start job of {unit} finished with result '{result}'"),
                Next::Final,
            ))
        }
        Err(BusError::TimedOut { .. }) if listen_until < deadline => {}
        Err(e) => return Err(NotMade::after_sending(e)),
    }
    drop(bus);
    watch_own_cgroup(route, launch, deadline)
}

/// The manager refused this launch's start with `UnitExists`: the unit is this launch's own only
/// where this process is in it, or is on its way there (the unit's start job has not run yet).
/// An active unit that holds other processes and not this one is another's (or holds a process
/// the manager named in this one's place) and is left as it is: the scope could not be made, and
/// nothing is sent about that unit. One that holds no process at all (systemd 247 across a
/// reload) is stopped and made again, which ends nothing.
pub(super) fn exists_already(
    route: &Route,
    launch: &Launch<'_, '_>,
    deadline: Instant,
) -> Result<(), NotMade> {
    let unit = launch.unit();
    if cgroup::own_is_in_unit(unit) == Some(true) {
        return Ok(());
    }
    match settle(route, launch, deadline) {
        Settled::Made => watch_own_cgroup(route, launch, deadline),
        Settled::StartedWithOthers => Err(NotMade::name_taken(unit)),
        Settled::StartedWithoutUs(run) => {
            stop_empty_scope(route, unit, &run, deadline);
            Err(NotMade::then(
                format!("the user manager started {unit} without this process in it"),
                Next::StartAgain,
            ))
        }
        Settled::NotMade => Err(NotMade::then(
            format!("the user manager dropped {unit} as it refused it"),
            Next::StartAgain,
        )),
        Settled::Going => Err(NotMade::then(
            format!("the user manager has {unit} on its way out"),
            Next::StartAgain,
        )),
        Settled::Unknown => Err(NotMade::before_sending(format!(
            "the user manager refused {unit} as one it has, and could not be asked whose it is"
        ))),
    }
}

/// Waits, by `deadline`, to see this process in the cgroup of `unit`, whose start job the manager
/// has and has not yet run. A job that has not run after [`ASK_AFTER`] is asked after, along
/// `route`, every [`ASK_AFTER`]: a manager that no longer has the unit (its start job failed
/// after a reload or re-exec lost the scope's processes, and it was collected) will never move
/// this process, and the scope is made again ([`Next::StartAgain`]).
pub(super) fn watch_own_cgroup(
    route: &Route,
    launch: &Launch<'_, '_>,
    deadline: Instant,
) -> Result<(), NotMade> {
    let unit = launch.unit();
    let mut pause = Duration::from_millis(1);
    let mut ask_at = Instant::now() + ASK_AFTER;
    loop {
        if cgroup::own_is_in_unit(unit) == Some(true) {
            return Ok(());
        }
        let now = Instant::now();
        if now >= ask_at && now < deadline {
            let settled = settle(route, launch, deadline);
            match settled {
                Settled::StartedWithoutUs(ref run) => stop_empty_scope(route, unit, run, deadline),
                Settled::StartedWithOthers => return Err(NotMade::name_taken(unit)),
                Settled::Made | Settled::NotMade | Settled::Going | Settled::Unknown => {}
            }
            if let Settled::NotMade | Settled::StartedWithoutUs(_) | Settled::Going = settled {
                return Err(NotMade::then(
                    format!("the user manager dropped {unit} before this process was in it"),
                    Next::StartAgain,
                ));
            }
            ask_at = Instant::now() + ASK_AFTER;
            continue;
        }
        if now >= deadline {
            return Err(NotMade {
                may_yet_be_made: true,
                ..NotMade::then(
                    format!(
                        "the user manager had not started {unit}: its start job was still \
                         waiting when the bound ran out"
                    ),
                    Next::Final,
                )
            });
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

/// How often the launcher looks at its own cgroup while it listens for its job's end: the manager
/// moves it there as the job's last step, 0.2-0.25 ms before the job's `JobRemoved` reaches it
/// (measured on 252 through either way), so a move seen is the scope started, sooner.
pub(super) const LOOK_AT_CGROUP_EVERY: Duration = Duration::from_micros(40);

/// How the end of a scope's start job was learnt.
pub(super) enum JobEnd {
    /// This process was seen in the scope's cgroup: the job's last step is done.
    SeenInCgroup,
    /// The job's `JobRemoved` came, with this result.
    Reported(String),
}

/// The end of the start job `job` of `unit` by `listen_until`: its `JobRemoved`, or this process
/// seen in the scope's cgroup (when the cgroup can be read), whichever comes first.
pub(super) fn job_end(
    bus: &mut Connection,
    job: &str,
    unit: &str,
    cgroup_readable: bool,
    listen_until: Instant,
) -> Result<JobEnd, BusError> {
    loop {
        let look = if cgroup_readable {
            listen_until.min(Instant::now() + LOOK_AT_CGROUP_EVERY)
        } else {
            listen_until
        };
        bus.set_deadline(look);
        match bus.wait_for_job(job) {
            Err(BusError::TimedOut { .. }) if look < listen_until => {
                if cgroup::own_is_in_unit(unit) == Some(true) {
                    return Ok(JobEnd::SeenInCgroup);
                }
            }
            ended => return ended.map(JobEnd::Reported),
        }
    }
}

//! The probe (R5, R6, A1): one bounded conversation with the user manager over D-Bus, reached as
//! the wrapper will reach it, that gives the verdict a `systemd-run --user --scope --slice=S` would
//! give, without making a unit. Its failure is reported once per slice (R11, module `warn`).

use std::sync::{Condvar, Mutex};
use std::time::Instant;

use crate::manager::bus::wire::Call;
use crate::manager::bus::{
    identity_on, pool, sender_on, BusError, Connection, Identity, Route, Sender, MANAGER,
    MANAGER_PATH,
};
use crate::per_process::{lock, PerProcess};

/// What a probe that reached the manager found beside its verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reached {
    /// The manager's end of the connection (or the broker's) is outside this process's pid
    /// namespace: the manager cannot be told of a process of ours by its pid number.
    pub(crate) pids_differ: bool,
    /// The manager's own cgroup (its `ControlGroup`), whose controllers are the ones a scope's
    /// limits can be enforced by; None where the manager did not name one.
    pub(crate) manager_cgroup: Option<String>,
}

/// Asks the manager on `route`, by `deadline`, whether a scope in `unit_slice` (the slice as
/// systemd names it, already mangled; None: systemd's default) can be made. Ok means a scope
/// launch would be accepted.
///
/// Requests of one process that ask the same question at the same time share one conversation:
/// a request takes the answer of a probe that began after it did (fresh for it, R5) and, if that
/// probe failed, had as long to wait as this request has; it waits for one within its own bound,
/// or asks itself when none is under way. So 256 threads launching at
/// once cost the manager a handful of questions, one after another, instead of 256 connections
/// at once (which, beside their own cost, hold back every scope's start, `crate::manager::turn`).
pub(crate) fn probe(
    route: &Route,
    unit_slice: Option<&str>,
    deadline: Instant,
) -> Result<Reached, String> {
    // A forked child asks for itself: its parent's probes are not its own.
    static SHARED: PerProcess<Shared> = PerProcess::new();
    let shared = SHARED.get();
    let asked = Instant::now();
    let key = (route.clone(), unit_slice.map(str::to_owned));
    let mut questions = lock(&shared.questions);
    loop {
        let at = match questions.iter().position(|q| q.key == key) {
            Some(at) => at,
            None => {
                if questions.len() >= MAX_QUESTIONS {
                    if let Some(idle) = questions.iter().position(|q| !q.asking) {
                        questions.remove(idle);
                    }
                }
                questions.push(Question {
                    key: key.clone(),
                    asking: false,
                    answer: None,
                });
                questions.len() - 1
            }
        };
        let question = &mut questions[at];
        if let Some(last) = &question.answer {
            // A failure counts only if its probe could wait as long as this request may.
            if last.began >= asked && (last.answer.is_ok() || last.deadline >= deadline) {
                return last.answer.clone();
            }
        }
        if !question.asking {
            question.asking = true;
            drop(questions);
            let began = Instant::now();
            let answer = ask(route, unit_slice, deadline);
            let mut questions = lock(&shared.questions);
            if let Some(question) = questions.iter_mut().find(|q| q.key == key) {
                question.asking = false;
                question.answer = Some(Answer {
                    began,
                    deadline,
                    answer: answer.clone(),
                });
            }
            shared.answered.notify_all();
            return answer;
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(BusError::TimedOut {
                phase: "waiting for another request's probe",
                after: now.duration_since(asked),
            }
            .to_string());
        }
        questions = shared
            .answered
            .wait_timeout(questions, deadline - now)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

/// The questions this process is asking or has asked, by route and slice (a handful at most:
/// one per route and slice a host uses).
#[derive(Default)]
struct Shared {
    questions: Mutex<Vec<Question>>,
    answered: Condvar,
}

/// The most questions remembered (one per route and slice a host uses; the oldest idle one goes).
const MAX_QUESTIONS: usize = 64;

struct Question {
    key: (Route, Option<String>),
    /// A request is asking now.
    asking: bool,
    /// The last answer.
    answer: Option<Answer>,
}

/// The last answer to a question.
struct Answer {
    /// When its probe began, and the bound it had.
    began: Instant,
    deadline: Instant,
    answer: Result<Reached, String>,
}

/// One probe: a conversation of this request's own.
fn ask(route: &Route, unit_slice: Option<&str>, deadline: Instant) -> Result<Reached, String> {
    pool::with_connection(route, deadline, |bus, _fresh| {
        // The launch takes the private socket where the session bus cannot name its process
        // as the sender; on the private socket, and where there is none, it cannot be scoped
        // unless some identity names it alone (the sender, its pid, a pidfd), and says so now.
        if route.is_the_launcher_programs()
            && (!bus.via_broker || route.private_to_fall_back_to().is_none())
        {
            if let Identity::Nothing(why) = identity_on(route, bus, deadline)? {
                return Ok(Err(why));
            }
        }
        // From a pid namespace the broker is outside of, the launch takes the private socket,
        // whose other end it cannot look at either: asked there as the launch will ask.
        if let (true, true, Some(private)) = (
            route.is_the_launcher_programs(),
            bus.via_broker && bus.peer_outside_our_pid_namespace(),
            route.private_to_fall_back_to(),
        ) {
            // What goes wrong there is the private socket's, and says why this launch cannot be
            // scoped; the kept connection to the bus is not at fault.
            let identity = Connection::open_pipelined(&private, deadline)
                .and_then(|mut over_private| identity_on(&private, &mut over_private, deadline));
            match identity {
                Ok(Identity::Nothing(why)) => return Ok(Err(why)),
                Err(e) => return Ok(Err(format!("the manager's private socket: {e}"))),
                Ok(_) => {}
            }
        }
        // systemd-run names itself by its pid and, once its scope is made, reads the scope's
        // invocation ID from `unit/self`, the sender's unit: where the manager names another
        // process as the sender (a relay, a proxy), that read fails, and systemd-run exits 1 with
        // its scope made and the command never run.
        if !route.is_the_launcher_programs() {
            if let Sender::Another(why) = sender_on(bus)? {
                return Ok(Err(format!(
                    "{why}; systemd-run would make the scope and then fail to find it as its own \
                     unit, never running the command"
                )));
            }
        }
        if let Some(slice) = unit_slice {
            if let Err(refused) = slice_verdict(bus, slice)? {
                return Ok(Err(refused));
            }
        }
        // One question more, which a running manager answers on its own event loop: its cgroup,
        // whose controllers are the ones a launch's limits need.
        let cgroup = bus.send_get(MANAGER_PATH, MANAGER, "ControlGroup")?;
        // A manager that will not say is no failure of the probe: its limits are then unknown.
        let manager_cgroup = match bus.reply(cgroup) {
            Ok(reply) => reply
                .first_str()
                .filter(|path| path.starts_with('/'))
                .map(str::to_owned),
            Err(BusError::Refused { name, .. }) if NO_SUCH_PROPERTY.contains(&name.as_str()) => {
                None
            }
            Err(e) => return Err(e),
        };
        Ok(Ok(Reached {
            pids_differ: bus.peer_outside_our_pid_namespace(),
            manager_cgroup,
        }))
    })
    .map_err(|e| e.to_string())?
}

/// How a manager says it has no such property: sd-bus's words, then older ones.
const NO_SUCH_PROPERTY: [&str; 2] = [
    "org.freedesktop.DBus.Error.UnknownProperty",
    "org.freedesktop.DBus.Error.InvalidArgs",
];

/// What starting a scope in `slice` would meet: the slice and each slice above it must load,
/// and none may be masked (the manager then refuses the scope's start job). The outer Err is the
/// conversation failing; the inner one, the manager's refusal of the slice.
fn slice_verdict(bus: &mut Connection, slice: &str) -> Result<Result<(), String>, BusError> {
    let mut chain = vec![slice.to_owned()];
    let stem = slice.trim_end_matches(".slice");
    for (at, _) in stem.match_indices('-').filter(|&(at, _)| at > 0) {
        chain.push(format!("{}.slice", &stem[..at]));
    }
    // Every question at once, answered in order: two round trips however deep the slice.
    let loads = chain
        .iter()
        .map(|unit| bus.send_manager("LoadUnit", Call::new().string(unit)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut paths = Vec::with_capacity(chain.len());
    for serial in loads {
        let loaded = bus.reply(serial)?;
        let Some(path) = loaded.first_str() else {
            return Ok(Err("LoadUnit gave no object path".into()));
        };
        paths.push(path.to_owned());
    }
    let gets = paths
        .iter()
        .map(|path| bus.send_get(path, "org.freedesktop.systemd1.Unit", "LoadState"))
        .collect::<Result<Vec<_>, _>>()?;
    for (unit, serial) in chain.iter().zip(gets) {
        let state = bus.reply(serial)?;
        let refused = match state.first_str() {
            Some("loaded") => continue,
            Some("masked") => format!("Unit {unit} is masked."),
            Some(other) => format!("Unit {unit} failed to load properly ({other})."),
            None => "no LoadState in the reply".to_owned(),
        };
        return Ok(Err(refused));
    }
    Ok(Ok(()))
}

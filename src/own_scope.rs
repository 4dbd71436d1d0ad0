//! What the launcher program does before it execs the command (A1): a transient scope for its own
//! pid, made over D-Bus with the properties `systemd-run --user --scope --collect` sends, and the
//! wait for the scope's start job, all by one deadline.

use std::ffi::OsString;
use std::time::Instant;

use crate::bus::wire::{Call, Property};
use crate::bus::{BusError, Connection, Fallback, Route};
use crate::DirectReason;

/// One scope to make for the calling process.
#[derive(Clone, Debug)]
pub struct ScopeRequest<'a> {
    /// The unit name (`synaps-<kind>-<hex>.scope`).
    pub unit: &'a str,
    /// The slice, already mangled and checked (see `unit_name::mangle_slice`).
    pub slice: Option<&'a str>,
    /// The Description, already safe (see `unit_name::description`).
    pub description: &'a str,
}

/// Why the scope was not made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotMade {
    /// In words for the person reading the command's stderr.
    pub why: String,
    /// The request reached the manager and got no answer by the deadline: the manager may still
    /// make the scope, with this process in it, when it gets to it.
    pub may_yet_be_made: bool,
}

impl NotMade {
    fn before_sending(why: impl Into<String>) -> Self {
        NotMade {
            why: why.into(),
            may_yet_be_made: false,
        }
    }

    fn after_sending(error: BusError) -> Self {
        NotMade {
            may_yet_be_made: !matches!(error, BusError::Refused { .. }),
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
    let route = Route::from_env(env, Fallback::Since257);
    if !route.is_configured() {
        return Err(NotMade::before_sending(DirectReason::NoUserBus.to_string()));
    }
    let before = |e: BusError| NotMade::before_sending(e.to_string());
    let mut bus = Connection::open(&route, deadline).map_err(before)?;
    bus.subscribe_job_removed().map_err(before)?;
    let pid = [std::process::id()];
    let mut properties = vec![
        ("Description", Property::Str(request.description)),
        ("CollectMode", Property::Str("inactive-or-failed")),
    ];
    if bus.via_broker {
        properties.push(("AddRef", Property::Bool(true)));
    }
    if let Some(slice) = request.slice {
        properties.push(("Slice", Property::Str(slice)));
    }
    properties.push(("PIDs", Property::Pids(&pid)));
    let call = Call::new()
        .string(request.unit)
        .string("fail")
        .properties(&properties)
        .no_aux_units();
    let reply = bus
        .call_manager("StartTransientUnit", call)
        .map_err(NotMade::after_sending)?;
    let job = reply
        .first_str()
        .ok_or_else(|| NotMade::before_sending("StartTransientUnit gave no job path"))?
        .to_owned();
    match bus
        .wait_for_job(&job)
        .map_err(NotMade::after_sending)?
        .as_str()
    {
        "done" => Ok(()),
        result => Err(NotMade::before_sending(format!(
            "the start job of {} finished with result '{result}'",
            request.unit
        ))),
    }
}

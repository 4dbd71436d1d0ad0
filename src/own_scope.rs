//! What the launcher program does before it execs the command (A1): a transient scope for its own
//! pid, made over D-Bus with the properties `systemd-run --user --scope --collect` sends, and the
//! wait for the scope's start job, all by one deadline.

use std::ffi::OsString;
use std::time::Instant;

use crate::bus::wire::{Call, Property};
use crate::bus::{Connection, Fallback, Route};

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

/// Makes the scope for the calling process by `deadline`, reaching the manager as
/// `env` says (the launcher program's own environment, which is the command's). Err says why, in
/// words for the person reading the command's stderr.
pub fn make_own_scope(
    env: &[(OsString, OsString)],
    request: &ScopeRequest<'_>,
    deadline: Instant,
) -> Result<(), String> {
    let route = Route::from_env(env, Fallback::Since257);
    if !route.is_configured() {
        return Err(
            "no user manager to reach: neither XDG_RUNTIME_DIR nor DBUS_SESSION_BUS_ADDRESS is set"
                .to_owned(),
        );
    }
    let mut bus = Connection::open(&route, deadline).map_err(|e| e.to_string())?;
    bus.subscribe_job_removed().map_err(|e| e.to_string())?;
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
        .map_err(|e| format!("Failed to start transient scope unit: {e}"))?;
    let job = reply
        .first_str()
        .ok_or("StartTransientUnit gave no job path")?
        .to_owned();
    match bus.wait_for_job(&job).map_err(|e| e.to_string())?.as_str() {
        "done" => Ok(()),
        result => Err(format!(
            "the start job of {} finished with result '{result}'",
            request.unit
        )),
    }
}

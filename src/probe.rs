//! The probe (R5, R6, A1): one bounded conversation with the user manager over D-Bus, reached as
//! the wrapper will reach it, that gives the verdict a `systemd-run --user --scope --slice=S` would
//! give, without making a unit. Its failure is reported once per slice (R11, module `warn`).

use std::time::Instant;

use crate::bus::wire::Call;
use crate::bus::{pool, BusError, Connection, Route};

/// Asks the manager on `route`, by `deadline`, whether a scope in `unit_slice` (the slice as
/// systemd names it, already mangled; None: systemd's default) can be made. Ok means a scope
/// launch would be accepted.
pub(crate) fn probe(
    route: &Route,
    unit_slice: Option<&str>,
    deadline: Instant,
) -> Result<(), String> {
    pool::with_connection(route, deadline, |bus, fresh| match unit_slice {
        Some(slice) => slice_verdict(bus, slice),
        // The manager's own event loop answers the auth of its private socket, so a new
        // connection there has already heard from a running manager; a kept one, or one through
        // the session bus (whose Hello reaches the broker only), asks it.
        None if fresh && !bus.via_broker => Ok(Ok(())),
        None => bus.ping().map(Ok),
    })
    .map_err(|e| e.to_string())?
}

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

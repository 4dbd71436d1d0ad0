//! The probe (R5, R6, A1): one bounded conversation with the user manager over D-Bus, reached as
//! the wrapper will reach it, that gives the verdict a `systemd-run --user --scope --slice=S` would
//! give, without making a unit. Its failure is reported once per slice (R11, module `warn`).

use std::time::Instant;

use crate::bus::wire::Call;
use crate::bus::{pool, BusError, Connection, Route};
use crate::unit_name::mangle_slice;

/// Asks the manager on `route`, by `deadline`, whether a scope in `slice` (None: systemd's
/// default) can be made. Ok means a scope launch would be accepted.
pub(crate) fn probe(route: &Route, slice: Option<&str>, deadline: Instant) -> Result<(), String> {
    let slice = slice.map(mangle_slice).transpose()?;
    let mut refusal = None;
    pool::with_connection(route, deadline, |bus, fresh| {
        match &slice {
            Some(slice) => match slice_verdict(bus, slice) {
                Err(Verdict::Refused(why)) => {
                    refusal = Some(why);
                    Ok(())
                }
                Err(Verdict::Bus(e)) => Err(e),
                Ok(()) => Ok(()),
            },
            // The manager's own event loop answers the auth of its private socket, so a new
            // connection there has already heard from a running manager; a kept one, or one
            // through the session bus (whose Hello reaches the broker only), asks it.
            None if fresh && !bus.via_broker => Ok(()),
            None => bus.ping(),
        }
    })
    .map_err(|e| e.to_string())?;
    refusal.map_or(Ok(()), Err)
}

enum Verdict {
    Bus(BusError),
    Refused(String),
}

impl From<BusError> for Verdict {
    fn from(e: BusError) -> Self {
        Verdict::Bus(e)
    }
}

/// What starting a scope in `slice` would meet: the slice and each slice above it must load,
/// and none may be masked (the manager then refuses the scope's start job).
fn slice_verdict(bus: &mut Connection, slice: &str) -> Result<(), Verdict> {
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
        let path = loaded
            .first_str()
            .ok_or_else(|| Verdict::Refused("LoadUnit gave no object path".into()))?;
        paths.push(path.to_owned());
    }
    let gets = paths
        .iter()
        .map(|path| bus.send_get(path, "org.freedesktop.systemd1.Unit", "LoadState"))
        .collect::<Result<Vec<_>, _>>()?;
    for (unit, serial) in chain.iter().zip(gets) {
        let state = bus.reply(serial)?;
        match state.first_str() {
            Some("loaded") => {}
            Some("masked") => return Err(Verdict::Refused(format!("Unit {unit} is masked."))),
            Some(other) => {
                return Err(Verdict::Refused(format!(
                    "Unit {unit} failed to load properly ({other})."
                )))
            }
            None => return Err(Verdict::Refused("no LoadState in the reply".into())),
        }
    }
    Ok(())
}

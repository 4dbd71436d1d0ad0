//! The user manager: how it is reached (`bus`, with the route to it and who a peer is), how its
//! conversations take turns (`turn`), its version, the bounded probe of it, the slice checks, and
//! the questions asked of it beyond the probe: a unit's properties (a slice's limits, a scope's
//! cgroup) and the manager's own version. They go over the same D-Bus client as the probe, on a
//! kept connection where there is one, each within the caller's bound; no helper process is
//! started, so neither PATH nor a `systemctl` binary changes an answer.

pub(crate) mod bus;
mod calls;
pub(crate) mod helper_process;
pub(crate) mod probe;
pub(crate) mod slice_check;
pub(crate) mod turn;
pub(crate) mod version;

use std::fmt::Write as _;
use std::time::Instant;

use crate::manager::bus::wire::Value;
use crate::manager::bus::{pool, BusError, Route, MANAGER, MANAGER_PATH};
use crate::manager::version::parse_major;

/// The interfaces whose properties the library reads.
pub(crate) const UNIT: &str = "org.freedesktop.systemd1.Unit";
pub(crate) const SLICE: &str = "org.freedesktop.systemd1.Slice";
pub(crate) const SCOPE: &str = "org.freedesktop.systemd1.Scope";
pub(crate) const SERVICE: &str = "org.freedesktop.systemd1.Service";

/// The object path of `unit`, as the manager names it (sd-bus's label escaping: every byte but
/// ASCII letters, and digits after the first byte, becomes `_xx`). Asking a path whose unit is not
/// loaded makes the manager load it, as `systemctl show` does.
pub(crate) fn unit_path(unit: &str) -> String {
    let mut path = String::from("/org/freedesktop/systemd1/unit/");
    if unit.is_empty() {
        path.push('_');
    }
    for (at, byte) in unit.bytes().enumerate() {
        if byte.is_ascii_alphabetic() || (at > 0 && byte.is_ascii_digit()) {
            path.push(char::from(byte));
        } else {
            let _ = write!(path, "_{byte:02x}");
        }
    }
    path
}

/// The values of `properties` (interface, name) of the object at `path`, asked all at once (one
/// round trip) on `route` by `deadline`.
pub(crate) fn properties(
    route: &Route,
    path: &str,
    properties: &[(&str, &str)],
    deadline: Instant,
) -> Result<Vec<Value>, BusError> {
    pool::with_connection(route, deadline, |bus, _fresh| {
        let serials = properties
            .iter()
            .map(|(interface, name)| bus.send_get(path, interface, name))
            .collect::<Result<Vec<_>, _>>()?;
        serials
            .into_iter()
            .map(|serial| {
                let mut reply = bus.reply(serial)?;
                match reply.body.pop() {
                    Some(Value::Variant(value)) if reply.body.is_empty() => Ok(*value),
                    _ => Err(BusError::Broken(
                        "a property's reply held no single variant".into(),
                    )),
                }
            })
            .collect()
    })
}

/// What the user manager says of its own version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagerVersion {
    /// The leading number (`262` of `262.1-1`), when there is one.
    pub major: Option<u32>,
    /// The whole version string, as the manager reports it.
    pub full: String,
}

/// The version the user manager itself reports (its `Version` property, e.g. `262.1-1`), asked
/// on `route` by `deadline`. It can differ from systemd-run's after a partial upgrade or before a
/// re-exec.
pub(crate) fn manager_version(route: &Route, deadline: Instant) -> Result<ManagerVersion, String> {
    let values = properties(route, MANAGER_PATH, &[(MANAGER, "Version")], deadline)
        .map_err(|e| e.to_string())?;
    let full = values
        .first()
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| "the manager reported no Version".to_owned())?;
    Ok(ManagerVersion {
        major: parse_major(full),
        full: full.to_owned(),
    })
}

/// How the probe's route reaches the manager now (`Route::way`): a connection along it, kept or
/// new, says whether it went through the session bus or the private socket, and why the session
/// bus was passed over where it was (not the user's manager on it, a silent broker).
pub(crate) fn way_to_manager(route: &Route, deadline: Instant) -> Result<String, String> {
    pool::with_connection(route, deadline, |bus, _fresh| {
        let way = route.way(bus.via_broker);
        Ok(match &bus.passed_over {
            Some(why) => format!("{way} (the session bus passed over: {why})"),
            None => way,
        })
    })
    .map_err(|e| e.to_string())
}

/// A duration in microseconds as systemd prints one (`format_timespan` with no rounding, as
/// `systemctl show` does for a `…USec` property): `500ms`, `1.500000s`, `1min 30s`, `infinity`.
pub(crate) fn format_timespan(usec: u64) -> String {
    const UNITS: [(&str, u64); 9] = [
        ("y", 31_557_600_000_000),
        ("month", 2_629_800_000_000),
        ("w", 604_800_000_000),
        ("d", 86_400_000_000),
        ("h", 3_600_000_000),
        ("min", 60_000_000),
        ("s", 1_000_000),
        ("ms", 1_000),
        ("us", 1),
    ];
    if usec == u64::MAX {
        return "infinity".to_owned();
    }
    if usec == 0 {
        return "0".to_owned();
    }
    let mut out = String::new();
    let mut left = usec;
    for (suffix, unit) in UNITS {
        if left == 0 {
            break;
        }
        if left < unit {
            continue;
        }
        let (whole, rest) = (left / unit, left % unit);
        let separator = if out.is_empty() { "" } else { " " };
        // Under a minute, a remainder is shown as decimals of this unit, all of them.
        if left < 60_000_000 && rest > 0 && unit > 1 {
            let digits = unit.ilog10() as usize;
            let _ = write!(out, "{separator}{whole}.{rest:0digits$}{suffix}");
            break;
        }
        let _ = write!(out, "{separator}{whole}{suffix}");
        left = rest;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_paths_are_escaped_as_sd_bus_escapes_them() {
        assert_eq!(
            unit_path("app.slice"),
            "/org/freedesktop/systemd1/unit/app_2eslice"
        );
        assert_eq!(
            unit_path("synaps-tool-0a.scope"),
            "/org/freedesktop/systemd1/unit/synaps_2dtool_2d0a_2escope"
        );
        assert_eq!(
            unit_path("1x.slice"),
            "/org/freedesktop/systemd1/unit/_31x_2eslice"
        );
        assert_eq!(unit_path(""), "/org/freedesktop/systemd1/unit/_");
        // The manager's own unit, whose path `bus::route` compares answers with.
        assert_eq!(
            unit_path("init.scope"),
            "/org/freedesktop/systemd1/unit/init_2escope"
        );
    }

    #[test]
    fn timespans_read_as_systemctl_prints_them() {
        for (usec, shown) in [
            (u64::MAX, "infinity"),
            (0, "0"),
            (1, "1us"),
            (500_000, "500ms"),
            (1_000_000, "1s"),
            (1_500_000, "1.500000s"),
            (1_500, "1.500ms"),
            (2_000_000_000, "33min 20s"),
            (90_000_000, "1min 30s"),
            (3_600_000_001, "1h 1us"),
        ] {
            assert_eq!(format_timespan(usec), shown, "{usec}");
        }
    }
}

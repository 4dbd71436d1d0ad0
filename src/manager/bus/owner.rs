//! Which owner of `org.freedesktop.systemd1` on a bus is the manager a route leads to: told by
//! its answer to the greeting's `Get(Manager, UnitPath)` (`connection` asks, the route judges).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use super::connection::SYSTEMD;
use super::error::BusError;
use super::wire::{self, Message};

/// Which manager a connection through a broker must reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Expected {
    /// The user manager whose runtime directory is this (`XDG_RUNTIME_DIR`), or, where none is
    /// set, any user manager.
    UserManagerOf(Option<OsString>),
    /// Any manager (the system manager, on the system bus).
    Any,
}

/// Whether the owner of `org.freedesktop.systemd1` on a bus is the manager `expected`, from its
/// answer to `Get(Manager, UnitPath)`: a manager keeps its transient units in
/// `$XDG_RUNTIME_DIR/systemd/transient` (a user manager) or `/run/systemd/transient` (the
/// system manager), and lists that directory in its unit path. So a user manager of another
/// runtime directory, of another user, the system manager, and a program that is no systemd
/// manager (it cannot answer) are each told apart from ours. Another user manager is taken only
/// where no manager listens in our runtime directory (`listens_in`: its private socket is
/// there), as systemd-run up to 256 and `ScopeHandle::from_manager` then take it too: with a
/// stale `XDG_RUNTIME_DIR`, the session bus's manager is the one manager there is. Err says
/// which it was.
pub(super) fn which_manager(
    answer: Result<Message, BusError>,
    expected: &Expected,
    listens_in: impl FnOnce(&OsStr) -> bool,
) -> Result<(), String> {
    const SYSTEM_TRANSIENT: &str = "/run/systemd/transient";
    let reply = answer.map_err(|e| {
        format!("the owner of {SYSTEMD} there does not answer as a systemd manager ({e})")
    })?;
    let paths: &[wire::Value] = match reply.body.first() {
        Some(wire::Value::Variant(inner)) => match inner.as_ref() {
            wire::Value::List(items) => items,
            _ => &[],
        },
        _ => &[],
    };
    let transient = paths
        .iter()
        .filter_map(wire::Value::as_str)
        .find(|path| path.ends_with("/systemd/transient"));
    let Expected::UserManagerOf(runtime) = expected else {
        return Ok(());
    };
    let theirs = match transient {
        None => {
            return Err(format!(
                "the owner of {SYSTEMD} there lists no transient units' directory in its unit \
                 path: not a systemd manager"
            ))
        }
        Some(SYSTEM_TRANSIENT) => return Err(format!("{SYSTEMD} there is the system manager")),
        Some(theirs) => theirs,
    };
    let Some(runtime) = runtime else {
        return Ok(());
    };
    let ours = transient_dir_of(runtime.as_bytes());
    // The runtime directory as the manager may have resolved it, looked up only where the plain
    // name differs (a greeting is on every launch's path).
    let canonical_matches = || {
        std::fs::canonicalize(runtime)
            .is_ok_and(|dir| theirs.as_bytes() == transient_dir_of(dir.as_os_str().as_bytes()))
    };
    if theirs.as_bytes() == ours.as_slice() || canonical_matches() || !listens_in(runtime) {
        return Ok(());
    }
    Err(format!(
        "{SYSTEMD} there is another manager: its transient units are in {theirs}, not in {}",
        String::from_utf8_lossy(&ours)
    ))
}

/// Whether a manager's private socket is in the runtime directory `runtime` (a socket file at
/// `systemd/private`; one a dead manager left is not told apart, and fails when connected).
pub(super) fn manager_listens_in(runtime: &OsStr) -> bool {
    let mut private = runtime.to_owned();
    private.push("/systemd/private");
    rustix::fs::stat(private.as_os_str()).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Socket
    })
}

/// `<runtime>/systemd/transient`, the transient units' directory of the user manager whose
/// runtime directory is `runtime`.
fn transient_dir_of(runtime: &[u8]) -> Vec<u8> {
    let mut dir = runtime.to_vec();
    while dir.len() > 1 && dir.ends_with(b"/") {
        dir.pop();
    }
    dir.extend_from_slice(b"/systemd/transient");
    dir
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::bus::wire::Kind;

    /// A manager's answer to `Get(Manager, UnitPath)` listing `paths`.
    fn unit_path_answer(paths: &[&str]) -> Result<Message, BusError> {
        Ok(Message {
            kind: Kind::Return,
            serial: 9,
            reply_serial: Some(3),
            path: None,
            interface: None,
            member: None,
            error_name: None,
            sender: Some(":1.4".into()),
            signature: "v".into(),
            body: vec![wire::Value::Variant(Box::new(wire::Value::List(
                paths
                    .iter()
                    .map(|p| wire::Value::Str((*p).to_owned()))
                    .collect(),
            )))],
        })
    }

    #[test]
    fn the_owner_of_the_managers_name_is_told_by_its_transient_units_directory() {
        let ours = Expected::UserManagerOf(Some("/run/user/7/".into()));
        let listens = |_: &OsStr| true;
        let user = [
            "/home/u/.config/systemd/user",
            "/run/user/7/systemd/transient",
        ];
        assert_eq!(
            which_manager(unit_path_answer(&user), &ours, listens),
            Ok(())
        );
        let other = ["/run/user/8/systemd/transient", "/usr/lib/systemd/user"];
        let why = which_manager(unit_path_answer(&other), &ours, listens).unwrap_err();
        assert!(
            why.contains("another manager") && why.contains("/run/user/8/systemd/transient"),
            "{why}"
        );
        let system = ["/etc/systemd/system", "/run/systemd/transient"];
        let why = which_manager(unit_path_answer(&system), &ours, listens).unwrap_err();
        assert!(why.contains("the system manager"), "{why}");
        let stranger = Err(BusError::Refused {
            name: "org.freedesktop.DBus.Error.UnknownMethod".into(),
            message: "no such method".into(),
        });
        let why = which_manager(stranger, &ours, listens).unwrap_err();
        assert!(
            why.contains("does not answer as a systemd manager"),
            "{why}"
        );
        let why = which_manager(unit_path_answer(&[]), &ours, listens).unwrap_err();
        assert!(why.contains("not a systemd manager"), "{why}");
        // Where no manager listens in the runtime directory (a stale one), the session bus's
        // manager is the one there is.
        assert_eq!(
            which_manager(unit_path_answer(&other), &ours, |_: &OsStr| false),
            Ok(())
        );
        // Without a runtime directory any user manager is the user's; the system bus's route
        // takes the system manager.
        let any_user = Expected::UserManagerOf(None);
        assert_eq!(
            which_manager(unit_path_answer(&other), &any_user, listens),
            Ok(())
        );
        assert!(which_manager(unit_path_answer(&system), &any_user, listens).is_err());
        assert_eq!(
            which_manager(unit_path_answer(&system), &Expected::Any, listens),
            Ok(())
        );
    }
}

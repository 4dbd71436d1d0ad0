//! What became of a bus conversation, and how it is told.

use std::fmt;
use std::time::Duration;

/// What became of a bus conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BusError {
    /// No connection could be made (no socket, refused, not ours).
    Connect(String),
    /// The deadline passed during `phase`.
    TimedOut {
        phase: &'static str,
        after: Duration,
    },
    /// The connection broke, or the peer spoke something other than D-Bus.
    Broken(String),
    /// The manager answered with an error.
    Refused { name: String, message: String },
    /// The session bus's `org.freedesktop.systemd1` is not the manager the route leads to
    /// (another user's, the system manager, or a program that is not a systemd manager).
    NotTheManager(String),
    /// The manager is not there, and nothing was sent to it: its socket refuses or is gone from a
    /// runtime directory a manager made, or the broker says nobody owns its name (or its owner
    /// left while asked a question that changes nothing). So it is while a manager re-executes or
    /// restarts (`crate::manager::bus::comeback`). In words, whole.
    Away(String),
}

impl BusError {
    /// The broker says nobody owns the manager's name: the manager is not on this session bus
    /// (a bus of a session that systemd does not run, or before the manager joined it).
    pub(crate) fn means_no_manager_on_bus(&self) -> bool {
        matches!(self, BusError::Refused { name, .. } if name == "org.freedesktop.DBus.Error.NameHasNoOwner"
            || name == "org.freedesktop.DBus.Error.ServiceUnknown")
    }

    /// The owner of the manager's name answered that it has no such method, interface or object:
    /// a program that owns the name but is no manager.
    pub(crate) fn means_no_such_method(&self) -> bool {
        matches!(self, BusError::Refused { name, .. } if name == "org.freedesktop.DBus.Error.UnknownMethod"
            || name == "org.freedesktop.DBus.Error.UnknownInterface"
            || name == "org.freedesktop.DBus.Error.UnknownObject")
    }

    /// The broker says the owner of the manager's name left the bus with this call unanswered.
    /// Whether the manager acted on the call first is not known.
    pub(crate) fn means_owner_left(&self) -> bool {
        matches!(self, BusError::Refused { name, .. } if name == "org.freedesktop.DBus.Error.NoReply")
    }
}

impl BusError {
    /// What went wrong, naming the manager that was asked (`manager`: "the user manager", "the
    /// system manager"), so that a message never blames the one that answered.
    pub(crate) fn told_of(&self, manager: &str) -> String {
        match self {
            BusError::Connect(why) => format!("could not connect to {manager}: {why}"),
            BusError::TimedOut { phase, after } => format!(
                "{manager} did not answer ({phase}): timed out after {} ms",
                after.as_millis()
            ),
            BusError::Broken(why) => format!("the connection to {manager} broke: {why}"),
            BusError::Refused { name, message } => format!("{message} ({name})"),
            BusError::NotTheManager(why) => format!("not this user's manager: {why}"),
            // Said of the user manager where it was made (only a user manager's route is away).
            BusError::Away(why) => why.replacen(USER_MANAGER, manager, 1),
        }
    }
}

/// How a message names the manager of a user route.
pub(crate) const USER_MANAGER: &str = "the user manager";

impl fmt::Display for BusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.told_of(USER_MANAGER))
    }
}

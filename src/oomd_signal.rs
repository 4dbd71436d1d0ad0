//! systemd-oomd's own word on its kills: from 252 on, it sends `Killed(cgroup, reason)` from
//! `org.freedesktop.oom1` on the system bus after each kill, `reason` naming the rule
//! (`memory-used` for the swap rule, `memory-pressure`). The bus names the sender of every message,
//! and only a privileged service may own `org.freedesktop.oom1`, so a signal whose sender is that
//! name's owner is evidence no process of the user can make, unlike the extended attributes oomd
//! writes on the cgroup, which the cgroup's owner (the user) may write too.
//!
//! A broadcast reaches only those subscribed before it was sent, so the process subscribes when
//! the first handle that may need it is made (a scope with a memory controller, which oomd needs),
//! and keeps the subscription (one system bus connection and one thread) while any such handle
//! lives; the last one dropped hangs it up. A subscription counts only where it was set up: oomd
//! owns the name and its introspection lists the signal (oomd before 252 sends none).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::bounds::deadline_after;
use crate::bus::wire::{Call, Message, Value};
use crate::bus::{BusError, Connection};
use crate::per_process::{lock, PerProcess};

/// The name systemd-oomd owns on the system bus.
const OOMD: &str = "org.freedesktop.oom1";
const OOMD_PATH: &str = "/org/freedesktop/oom1";
const OOMD_MANAGER: &str = "org.freedesktop.oom1.Manager";
/// The system bus, where `DBUS_SYSTEM_BUS_ADDRESS` names none (the D-Bus specification's default).
const SYSTEM_BUS: &str = "unix:path=/run/dbus/system_bus_socket";
/// The longest setting up a subscription may take (a handle is being made meanwhile): a system
/// bus that answers answers within milliseconds.
const SETUP_BOUND: Duration = Duration::from_millis(250);
/// After a subscription could not be set up (no system bus, no oomd, an oomd without the signal),
/// handles made within this long do not try that bus again.
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// The most kills kept: oomd kills one cgroup per action, at most one action per interval.
const KEPT_KILLS: usize = 256;

/// This process's subscription, while a handle holds it, and on which bus and when one last
/// failed.
#[derive(Default)]
struct Slot {
    current: Weak<Subscription>,
    failed: Option<(Vec<u8>, Instant)>,
}

static SLOT: PerProcess<Mutex<Slot>> = PerProcess::new();

/// A live subscription to oomd's `Killed` signal, and the kills heard.
#[derive(Debug)]
pub(crate) struct Subscription {
    /// The process that set it up: its thread runs there alone.
    pid: u32,
    heard: Mutex<Heard>,
    changed: Condvar,
    /// The connection's socket, to hang it up when the last handle lets go.
    hang_up: OwnedFd,
}

#[derive(Debug, Default)]
struct Heard {
    /// (cgroup, reason) of each kill, oldest first.
    kills: VecDeque<(String, String)>,
    /// False once the connection broke: kills since are not heard.
    broken: bool,
}

/// What oomd's signal says of a scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Said {
    /// oomd killed the scope or a cgroup below it, for this reason (which names the rule).
    Killed(String),
    /// No such kill was signalled while the subscription was live.
    Nothing,
    /// The signal cannot be relied on here (the subscription broke, or belongs to the parent of a
    /// forked child).
    CannotTell,
}

impl Subscription {
    /// What oomd signalled of the scope `unit`: a kill of its cgroup or of one below it, waiting
    /// for it until `wait_until` where given.
    pub(crate) fn said_of(&self, unit: &str, wait_until: Option<Instant>) -> Said {
        if self.pid != std::process::id() {
            return Said::CannotTell;
        }
        let mut heard = lock(&self.heard);
        loop {
            if let Some((_, reason)) = heard
                .kills
                .iter()
                .find(|(cgroup, _)| names_scope(cgroup, unit))
            {
                return Said::Killed(reason.clone());
            }
            if heard.broken {
                return Said::CannotTell;
            }
            let left = wait_until.map_or(Duration::ZERO, |at| {
                at.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                return Said::Nothing;
            }
            heard = match self.changed.wait_timeout(heard, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    fn hear(&self, cgroup: String, reason: String) {
        let mut heard = lock(&self.heard);
        if heard.kills.len() == KEPT_KILLS {
            heard.kills.pop_front();
        }
        heard.kills.push_back((cgroup, reason));
        self.changed.notify_all();
    }

    fn broke(&self) {
        lock(&self.heard).broken = true;
        self.changed.notify_all();
    }
}

/// The last handle gone, the connection is hung up, which ends its thread; a forked child's copy
/// is only closed, the connection being its parent's.
impl Drop for Subscription {
    fn drop(&mut self) {
        if self.pid == std::process::id() {
            let _ = rustix::net::shutdown(&self.hang_up, rustix::net::Shutdown::Both);
        }
    }
}

/// Whether the cgroup path `cgroup` (as oomd names it, from the root of its cgroup namespace) is
/// the scope `unit`'s or one below it. Compared by the scope's name, which is unique (128 random
/// bits), so that a caller in a container, whose cgroup paths are shorter, still finds it.
fn names_scope(cgroup: &str, unit: &str) -> bool {
    cgroup
        .split('/')
        .any(|component| !unit.is_empty() && component == unit)
}

/// This process's subscription to oomd's `Killed` signal, set up now if there is none; None where
/// none can be had (no system bus, oomd not running or too old for the signal), or one failed a
/// moment ago. `env` names the system bus (`DBUS_SYSTEM_BUS_ADDRESS`).
pub(crate) fn subscription(env: &[(OsString, OsString)]) -> Option<Arc<Subscription>> {
    let this_process = SLOT.get();
    let mut slot = lock(&this_process);
    if let Some(live) = slot.current.upgrade() {
        return Some(live);
    }
    let address = system_bus_address(env);
    if slot
        .failed
        .as_ref()
        .is_some_and(|(bus, at)| *bus == address && at.elapsed() < RETRY_AFTER)
    {
        return None;
    }
    match subscribe(&address) {
        Ok(subscription) => {
            slot.current = Arc::downgrade(&subscription);
            slot.failed = None;
            Some(subscription)
        }
        Err(why) => {
            tracing::debug!(target: crate::diag::TARGET, "oomd's Killed signal is not heard here: {why}");
            slot.failed = Some((address, Instant::now()));
            None
        }
    }
}

/// The system bus's address: `DBUS_SYSTEM_BUS_ADDRESS` of `env`, else the default.
pub(crate) fn system_bus_address(env: &[(OsString, OsString)]) -> Vec<u8> {
    env.iter()
        .find(|(k, v)| k == "DBUS_SYSTEM_BUS_ADDRESS" && !v.is_empty())
        .map_or_else(
            || SYSTEM_BUS.as_bytes().to_vec(),
            |(_, v)| v.as_bytes().to_vec(),
        )
}

/// Connects to the system bus at `address`, subscribes to oomd's `Killed` signal and to changes
/// of who owns oomd's name, checks that oomd is there and sends the signal, and starts the thread
/// that hears it.
fn subscribe(address: &[u8]) -> Result<Arc<Subscription>, BusError> {
    let mut connection = Connection::listener(address, deadline_after(SETUP_BOUND))?;
    // Subscribed before the owner is asked for, so that no kill falls between the two.
    let killed = format!(
        "type='signal',sender='{OOMD}',path='{OOMD_PATH}',interface='{OOMD_MANAGER}',member='Killed'"
    );
    let owner_changes = format!(
        "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='{OOMD}'"
    );
    connection.call_broker("AddMatch", Call::new().string(&killed))?;
    connection.call_broker("AddMatch", Call::new().string(&owner_changes))?;
    let owner = connection
        .call_broker("GetNameOwner", Call::new().string(OOMD))?
        .first_str()
        .map(str::to_owned);
    connection.hear_from(owner);
    let serial = connection.send(
        Call::new(),
        Some(OOMD),
        OOMD_PATH,
        "org.freedesktop.DBus.Introspectable",
        "Introspect",
    )?;
    let introspection = connection.reply(serial)?;
    if !lists_killed(introspection.first_str().unwrap_or("")) {
        return Err(BusError::Refused {
            name: "org.freedesktop.DBus.Error.UnknownMethod".into(),
            message: "systemd-oomd here sends no Killed signal (it does from 252 on)".into(),
        });
    }
    let hang_up = connection
        .hang_up_handle()
        .map_err(|e| BusError::Broken(e.to_string()))?;
    // From now on the connection waits for signals for as long as it is held.
    connection.set_deadline(Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600));
    let subscription = Arc::new(Subscription {
        pid: std::process::id(),
        heard: Mutex::new(Heard::default()),
        changed: Condvar::new(),
        hang_up,
    });
    let held = Arc::downgrade(&subscription);
    std::thread::Builder::new()
        .name("synaps-oomd-signal".into())
        .spawn(move || listen(connection, &held))
        .map_err(|e| BusError::Broken(e.to_string()))?;
    Ok(subscription)
}

/// Whether oomd's introspection data lists its `Killed` signal.
fn lists_killed(xml: &str) -> bool {
    xml.contains(&format!("<interface name=\"{OOMD_MANAGER}\">"))
        && xml.contains("<signal name=\"Killed\">")
}

/// The subscription's thread: takes in each `Killed` oomd sends, and follows the name to a new
/// owner (oomd restarted); ends when the connection breaks or is hung up.
fn listen(mut connection: Connection, held: &Weak<Subscription>) {
    while let Ok(signal) = connection.next_signal() {
        let Some(subscription) = held.upgrade() else {
            return;
        };
        match (signal.interface.as_deref(), signal.member.as_deref()) {
            (Some(OOMD_MANAGER), Some("Killed")) => {
                if let Some((cgroup, reason)) = killed(&signal) {
                    tracing::debug!(target: crate::diag::TARGET, "systemd-oomd killed {cgroup} ({reason})");
                    subscription.hear(cgroup, reason);
                }
            }
            (Some("org.freedesktop.DBus"), Some("NameOwnerChanged"))
                if signal.first_str() == Some(OOMD) =>
            {
                let new_owner = signal.body.get(2).and_then(Value::as_str).unwrap_or("");
                connection.hear_from((!new_owner.is_empty()).then(|| new_owner.to_owned()));
            }
            _ => {}
        }
    }
    if let Some(subscription) = held.upgrade() {
        subscription.broke();
    }
}

/// The cgroup and reason of a `Killed(ss)` signal.
fn killed(signal: &Message) -> Option<(String, String)> {
    if signal.signature != "ss" {
        return None;
    }
    let cgroup = signal.body.first()?.as_str()?;
    let reason = signal.body.get(1)?.as_str()?;
    Some((cgroup.to_owned(), reason.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kill_names_the_scope_by_its_unit_anywhere_in_the_path() {
        let unit = "synaps-tool-0123456789abcdef0123456789abcdef.scope";
        let path = format!("/user.slice/user-1000.slice/user@1000.service/app.slice/{unit}");
        assert!(names_scope(&path, unit));
        assert!(names_scope(&format!("{path}/leaf/deeper"), unit));
        assert!(names_scope(&format!("/app.slice/{unit}"), unit));
        assert!(!names_scope(&format!("{path}x"), unit));
        assert!(!names_scope("/user.slice", unit));
        assert!(!names_scope("/", ""));
    }

    #[test]
    fn only_an_introspection_with_the_signal_counts() {
        let with = r#"<node><interface name="org.freedesktop.oom1.Manager"><method name="DumpByFileDescriptor"><arg type="h" direction="out"/></method><signal name="Killed"><arg type="s" name="cgroup"/><arg type="s" name="reason"/></signal></interface></node>"#;
        let without = r#"<node><interface name="org.freedesktop.oom1.Manager"><method name="DumpByFileDescriptor"/></interface></node>"#;
        assert!(lists_killed(with));
        assert!(!lists_killed(without));
    }
}

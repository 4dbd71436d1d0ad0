//! Who is who on a connection: the process at the socket's other end, the processes a broker
//! names as the manager's owner and as this connection's own, and from these how a launch names
//! its process to the manager (`Identity`) and who the manager takes for the sender (`Sender`).

use std::time::Instant;

use super::connection::{MANAGER_PATH, SYSTEMD};
use super::route::{Route, BROKER_PATIENCE};
use super::wire::{self, Call};
use super::{BusError, Connection};

impl Connection {
    /// Whether the process at the other end (the manager, or the broker) is outside this
    /// process's pid namespace: its pid reads 0 here (`SO_PEERCRED`), and a pid number of ours
    /// names another process there, or none. A process in a sandbox's or a container's pid
    /// namespace meets this; the manager then knows it only by its credentials as a sender, or
    /// by a pidfd.
    pub(crate) fn peer_outside_our_pid_namespace(&self) -> bool {
        self.peer_pid == 0
    }

    /// The pid of the process at the other end of the socket, as this process counts pids (0:
    /// outside its pid namespace).
    pub(crate) fn peer_pid(&self) -> i32 {
        self.peer_pid
    }

    /// Through a broker: the pid the broker names as the process of the connection that owns the
    /// manager's name (None on the private socket, or before the greeting named the owner).
    pub(crate) fn owner_pid_as_the_broker_names_it(&mut self) -> Result<Option<u32>, BusError> {
        let Some(owner) = self.owner.clone().filter(|_| self.via_broker) else {
            return Ok(None);
        };
        self.pid_of_connection(&owner)
    }

    /// The pid the broker names as the process of the bus connection `name`, if its answer holds
    /// one.
    fn pid_of_connection(&mut self, name: &str) -> Result<Option<u32>, BusError> {
        let reply = self.call_broker("GetConnectionUnixProcessID", Call::new().string(name))?;
        Ok(reply
            .body
            .first()
            .and_then(wire::Value::as_u64)
            .map(|pid| u32::try_from(pid).unwrap_or(0)))
    }

    /// Through a broker: the pid the broker names as this connection's process, which is what the
    /// manager is told when it asks who sent a call (`PIDs=[0]`, "the sender"). It is this
    /// process's own pid only where this process is the broker's peer and both count pids alike;
    /// through a relay (a byte relay, a sandbox's or container's bus proxy, a forwarded socket) it
    /// is the relay's, and from a pid namespace the broker is outside of, this process's pid
    /// there. None on the private socket, where the manager reads the socket's own credentials.
    pub(crate) fn sender_pid_as_the_broker_names_it(&mut self) -> Result<Option<u32>, BusError> {
        if !self.via_broker {
            return Ok(None);
        }
        if self.sender_pid.is_some() {
            return Ok(self.sender_pid);
        }
        let me = self
            .unique_name
            .clone()
            .ok_or_else(|| BusError::Broken("the broker gave this connection no name".into()))?;
        let pid = self.pid_of_connection(&me)?.ok_or_else(|| {
            BusError::Broken("the broker's GetConnectionUnixProcessID gave no pid".into())
        })?;
        self.sender_pid = Some(pid);
        Ok(self.sender_pid)
    }
}

/// How a launch names its process to the manager in `StartTransientUnit`: the first of these that
/// names this process and no other on the connection at hand.
pub(crate) enum Identity {
    /// `PIDs=[0]`, "the sender": this process is the peer the manager asks about (the private
    /// socket's own credentials, or a broker that names this process by its own pid).
    TheSender,
    /// `PIDs=[own pid]`: a relay in this pid namespace stands between, and the manager is shown
    /// to count pids as this process does ([`own_pid_names_this_process`]).
    OwnPid,
    /// `PIDFDs=[pidfd]`, a pidfd of this process, over `bus`, a connection of its own whose
    /// broker agreed to pass descriptors and was shown to get this one: where no pid names this
    /// process to the manager, and the manager takes a pidfd.
    PidFd {
        bus: Box<Connection>,
        pidfd: std::os::fd::OwnedFd,
    },
    /// None on this connection; the private socket, which the route has, names this process by
    /// the socket's own credentials (why the connection at hand does not).
    TakePrivate(String),
    /// None can be right (why): the launch is direct, and refused under `required`.
    Nothing(String),
}

/// The systemd release from which a manager takes `PIDFDs` in a scope's `StartTransientUnit`
/// (257 and 262 do in the rig; 254 and before refuse it as an unknown property). 255 and 256 are
/// not relied on.
pub(crate) const PIDFDS_SINCE: u32 = 257;

/// How this process is to be named to the manager on `bus` along `route` (see [`Identity`]),
/// within `deadline`.
pub(crate) fn identity_on(
    route: &Route,
    bus: &mut Connection,
    deadline: Instant,
) -> Result<Identity, BusError> {
    let why = match sender_on(bus)? {
        Sender::ThisProcess => return Ok(Identity::TheSender),
        Sender::Unknown(why) if !bus.via_broker => {
            return private_socket_from_a_pid_namespace(route, bus, why, deadline)
        }
        Sender::Another(why) | Sender::Unknown(why)
            if bus.via_broker && route.private_to_fall_back_to().is_some() =>
        {
            return Ok(Identity::TakePrivate(why))
        }
        Sender::Another(why) => {
            if own_pid_names_this_process(bus)? {
                return Ok(Identity::OwnPid);
            }
            // In front of the private socket no pidfd is tried: a relay there is not a broker.
            if !bus.via_broker {
                return Ok(Identity::Nothing(format!(
                    "{why}; the manager's pid namespace is not known to be this process's"
                )));
            }
            format!(
                "{why}; no private socket of the manager to take instead, and the manager's pid \
                 namespace is not known to be this process's"
            )
        }
        Sender::Unknown(why) => {
            format!("{why}; no private socket of the manager to take instead")
        }
    };
    Ok(match pidfd_connection(route, bus, deadline)? {
        Ok((connection, pidfd)) => Identity::PidFd {
            bus: Box::new(connection),
            pidfd,
        },
        Err(no) => Identity::Nothing(format!("{why}; {no}")),
    })
}

/// From a pid namespace of its own a launch cannot look at the other end of the private socket (its
/// pid reads 0 here): the manager itself (a container or sandbox given the socket), or a relay in
/// front of it (socat, systemd-socket-proxyd), which the manager would name as the sender, and
/// move. A descriptor the manager must receive tells them apart: sent with a `Ping` over a
/// connection of its own that agreed to pass descriptors, it reaches the manager, which answers,
/// where a relay that passes bytes only drops it (the manager then hangs up, or waits for it). An
/// end shown to pass it may still be a relay that passes descriptors: a pidfd of this process,
/// which names it whoever the end is, is the one identity left, where the manager takes one (257
/// on). Before 257, or not shown: no identity, and the launch is direct with the reason, before
/// anything is moved.
fn private_socket_from_a_pid_namespace(
    route: &Route,
    bus: &mut Connection,
    why: String,
    deadline: Instant,
) -> Result<Identity, BusError> {
    let version = manager_version(bus)?;
    let pidfd = match rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    ) {
        Ok(pidfd) => pidfd,
        Err(e) => {
            return Ok(Identity::Nothing(format!(
                "{why}; no pidfd of this process to show it by: {e}"
            )))
        }
    };
    let private = route.without_session_bus().unwrap_or_else(|| route.clone());
    let (socket, via_broker, started) = Connection::connect(&private)?;
    if via_broker {
        return Ok(Identity::Nothing(format!(
            "{why}; the private socket could not be connected again"
        )));
    }
    let mut connection = Connection::over_private_passing_fds(socket, started, deadline)?;
    if !connection.fds_agreed {
        return Ok(Identity::Nothing(format!(
            "{why}; its other end does not pass descriptors"
        )));
    }
    if !descriptor_reaches_the_manager(&mut connection, &pidfd)? {
        return Ok(Identity::Nothing(format!(
            "{why}; a descriptor sent on it did not reach the manager: a relay that passes bytes \
             only stands in front of it"
        )));
    }
    // A relay that passes descriptors passes this one too: the end is shown to pass it, not to be
    // the manager. Only a pidfd names this process whoever the end is; "the sender" would name the
    // end, which may be such a relay, and the manager would move it.
    if version < PIDFDS_SINCE {
        return Ok(Identity::Nothing(format!(
            "{why}; a descriptor sent on it reached the other end, which shows no more than that it \
             passes descriptors (a relay or proxy may), and this manager (systemd {version}) takes \
             no pidfd: only \"the sender\" would be left to name this process by, which names the \
             other end"
        )));
    }
    Ok(Identity::PidFd {
        bus: Box::new(connection),
        pidfd,
    })
}

/// On the private socket: a `Ping` carrying `fd`, and one without it right behind. The manager
/// answers its calls in order, so the second answered and not the first means the first never
/// reached it whole: its descriptor was dropped on the way, as a byte relay drops it (systemd then
/// drops the message, where older versions hang up, which says the same). No answer to either by
/// the connection's deadline is a manager that did not answer, not a relay, and fails the launch
/// as such; a slow manager is never mistaken for a relay.
fn descriptor_reaches_the_manager(
    connection: &mut Connection,
    fd: &std::os::fd::OwnedFd,
) -> Result<bool, BusError> {
    let with_fd = send_ping_with(connection, fd, SYSTEMD)?;
    let without = connection.send(Call::new(), Some(SYSTEMD), MANAGER_PATH, PEER, "Ping")?;
    match connection.answered_before(with_fd, without) {
        Ok(reached) => Ok(reached),
        Err(BusError::Broken(e)) => {
            tracing::debug!(target: crate::diag::TARGET, "a Ping with a descriptor: {e}");
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// The interface every D-Bus peer answers (`Ping`).
const PEER: &str = "org.freedesktop.DBus.Peer";

/// Sends `Peer.Ping` to `destination` on `connection` with `fd` attached: what only a peer that
/// passes descriptors can deliver. Returns the call's serial, for its answer.
fn send_ping_with(
    connection: &mut Connection,
    fd: &std::os::fd::OwnedFd,
    destination: &str,
) -> Result<u32, BusError> {
    connection.send_with_fd(
        Call::new().with_an_unnamed_fd(),
        std::os::fd::AsFd::as_fd(fd),
        destination,
        MANAGER_PATH,
        PEER,
        "Ping",
    )
}

/// Sends `Peer.Ping` to `destination` on `connection` with `fd` attached, and says whether it was
/// answered (an error answer too: the message was read whole, its descriptor with it) within
/// [`BROKER_PATIENCE`] or half of what is left to `deadline`; the connection is bound by
/// `deadline` again after.
fn pinged_with_a_descriptor(
    connection: &mut Connection,
    fd: &std::os::fd::OwnedFd,
    destination: &str,
    deadline: Instant,
) -> Result<bool, BusError> {
    let now = Instant::now();
    connection
        .set_deadline(now + (deadline.saturating_duration_since(now) / 2).min(BROKER_PATIENCE));
    let ping = send_ping_with(connection, fd, destination)?;
    let answered = match connection.reply(ping) {
        Ok(_) | Err(BusError::Refused { .. }) => true,
        Err(e) => {
            tracing::debug!(target: crate::diag::TARGET, "a Ping with a descriptor: {e}");
            false
        }
    };
    connection.set_deadline(deadline);
    Ok(answered)
}

/// The manager's major version, asked on `bus` (0 where it does not say).
pub(crate) fn manager_version(bus: &mut Connection) -> Result<u32, BusError> {
    let version = bus.manager_property("Version")?;
    Ok(version
        .first_str()
        .and_then(crate::manager::version::parse_major)
        .unwrap_or(0))
}

/// A connection of its own along `route`'s session bus on which a pidfd of this process (returned
/// with it) reaches the manager, or why there is none: the manager (asked on `bus`) must take one,
/// the broker must agree to pass descriptors, and a descriptor sent to the manager through it must
/// reach the manager (a relay that passes bytes only drops it; the broker then hangs up, or waits
/// for it, so the answer is waited for at most [`BROKER_PATIENCE`]).
fn pidfd_connection(
    route: &Route,
    bus: &mut Connection,
    deadline: Instant,
) -> Result<Result<(Connection, std::os::fd::OwnedFd), String>, BusError> {
    let version = manager_version(bus)?;
    if version < PIDFDS_SINCE {
        return Ok(Err(format!(
            "the manager (systemd {version}) takes no pidfd (PIDFDs, from systemd {PIDFDS_SINCE})"
        )));
    }
    let pidfd = match rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    ) {
        Ok(pidfd) => pidfd,
        Err(e) => return Ok(Err(format!("no pidfd of this process: {e}"))),
    };
    let (socket, via_broker, started) = Connection::connect(route)?;
    if !via_broker {
        return Ok(Err(
            "the session bus could not be connected again".to_owned()
        ));
    }
    let mut connection = Connection::greeting(route, socket, started, deadline, true)?;
    if !connection.fds_agreed {
        return Ok(Err("the session bus does not pass descriptors".to_owned()));
    }
    // The ping goes to the manager, through the broker: a proxy that filters what its sandbox
    // may say (xdg-dbus-proxy's `--talk=org.freedesktop.systemd1`, as Flatpak runs it) passes
    // calls to the manager and may deny or drop those to the broker itself.
    if !pinged_with_a_descriptor(&mut connection, &pidfd, SYSTEMD, deadline)? {
        return Ok(Err(
            "a descriptor sent on the session bus did not reach the manager: a relay that passes \
             bytes only stands between"
                .to_owned(),
        ));
    }
    Ok(Ok((connection, pidfd)))
}

/// Whom the manager names when asked who sent a call (`PIDs=[0]`, "the sender").
pub(crate) enum Sender {
    /// This process: on the private socket the manager reads the socket's own credentials;
    /// through a broker, the broker names this process by the pid this process has.
    ThisProcess,
    /// Another process (in words): a relay or proxy in this process's pid namespace stands
    /// between this process and the broker, which names the relay. The manager would move it
    /// (and with it every bus connection of the host behind it) into the scope.
    Another(String),
    /// Not known (in words): the broker's end of the socket is outside this process's pid
    /// namespace, and the pid it names cannot be compared with this process's.
    Unknown(String),
}

/// Whom the manager would name as the sender of a call on `bus`.
pub(crate) fn sender_on(bus: &mut Connection) -> Result<Sender, BusError> {
    if !bus.via_broker {
        return private_socket_peer(bus);
    }
    let me = std::process::id();
    Ok(match bus.sender_pid_as_the_broker_names_it()? {
        None => Sender::ThisProcess,
        Some(pid) if bus.peer_outside_our_pid_namespace() => Sender::Unknown(format!(
            "the session bus's broker is outside this process's pid namespace and names pid \
             {pid} as the sender of its calls, which cannot be told from a relay's here"
        )),
        Some(pid) if pid == me => Sender::ThisProcess,
        Some(pid) => Sender::Another(format!(
            "the session bus names pid {pid}, not this process ({me}), as the sender of its \
             calls: a relay or proxy stands between, and the manager would move that process \
             into the scope"
        )),
    })
}

/// The unit a user manager's own process is in, and its object path.
const MANAGERS_OWN_UNIT: &str = "init.scope";
const MANAGERS_OWN_UNIT_PATH: &str = "/org/freedesktop/systemd1/unit/init_2escope";

/// On the private socket the manager names as the sender the process at its end of the socket:
/// this process where the socket's other end is the manager itself (its process is in its own
/// `init.scope`), a relay where one stands in front of the socket (a forwarded or proxied
/// socket). The other end's cgroup is read here, or, where it cannot be, the manager is asked
/// which unit that pid is in. Outside this process's pid namespace the other end cannot be looked
/// at: who it is is not known ([`Sender::Unknown`]), and a descriptor shows it
/// ([`private_socket_from_a_pid_namespace`]).
fn private_socket_peer(bus: &mut Connection) -> Result<Sender, BusError> {
    let peer = bus.peer_pid();
    if peer == 0 {
        return Ok(Sender::Unknown(
            "the manager's private socket is served from outside this process's pid namespace, \
             where its other end cannot be looked at: the manager, or a relay in front of it that \
             the manager would name as the sender, and move"
                .to_owned(),
        ));
    }
    let Ok(pid) = u32::try_from(peer) else {
        return Ok(Sender::ThisProcess);
    };
    // A socket this very process serves (a stand-in of its own) names this process: no other
    // could be moved.
    if pid == std::process::id() {
        return Ok(Sender::ThisProcess);
    }
    let is_the_manager =
        match crate::kernel::cgroup::is_in_unit(&pid.to_string(), MANAGERS_OWN_UNIT) {
            Some(known) => known,
            None => bus.unit_of_pid(pid)?.as_deref() == Some(MANAGERS_OWN_UNIT_PATH),
        };
    Ok(if is_the_manager {
        Sender::ThisProcess
    } else {
        Sender::Another(format!(
            "the manager's private socket is served by pid {pid}, which is not the manager (not \
             in its {MANAGERS_OWN_UNIT}): a relay or proxy stands between, and the manager would \
             move that process into the scope"
        ))
    })
}

/// Through a relay or proxy in this process's pid namespace ([`Sender::Another`]): whether this
/// process's own pid number names it to the manager, which is so where the manager is in this
/// process's pid namespace. Through a broker that is known only where the broker counts pids as
/// this process does (it names the relay by the pid the relay has here): then the pid it names
/// for the manager's connection is the manager's here, and that process's pid namespace is
/// compared with this process's. On the private socket the manager names its own cgroup, and a
/// process of its `init.scope` there must be one of this pid namespace.
pub(crate) fn own_pid_names_this_process(bus: &mut Connection) -> Result<bool, BusError> {
    if !bus.via_broker {
        return Ok(manager_processes_here(bus)?
            .into_iter()
            .any(in_this_pid_namespace));
    }
    let relay_here = bus.peer_pid();
    let Some(relay_as_named) = bus.sender_pid_as_the_broker_names_it()? else {
        return Ok(false);
    };
    if relay_here <= 0 || i64::from(relay_as_named) != i64::from(relay_here) {
        return Ok(false);
    }
    Ok(bus
        .owner_pid_as_the_broker_names_it()?
        .is_some_and(in_this_pid_namespace))
}

/// The processes of the manager's own `init.scope`, as this process counts pids: the manager
/// names its cgroup (`ControlGroup`), and the kernel gives that cgroup's pids in the reader's pid
/// namespace (none where the manager's cgroup cannot be reached from here).
fn manager_processes_here(bus: &mut Connection) -> Result<Vec<u32>, BusError> {
    let reply = bus.manager_property("ControlGroup")?;
    let Some(root) = reply.first_str() else {
        return Ok(Vec::new());
    };
    let Ok(init) = crate::kernel::cgroup::Cgroup::at(&format!("{root}/{MANAGERS_OWN_UNIT}")) else {
        return Ok(Vec::new());
    };
    let procs = std::fs::read_to_string(init.dir().join("cgroup.procs")).unwrap_or_default();
    Ok(procs
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .filter(|&pid| pid != 0)
        .collect())
}

/// Whether the process `pid` (as this process counts pids) is in this process's pid namespace.
fn in_this_pid_namespace(pid: u32) -> bool {
    let namespace = |path: &str| rustix::fs::stat(path).ok().map(|st| (st.st_dev, st.st_ino));
    match (
        namespace(&format!("/proc/{pid}/ns/pid")),
        namespace("/proc/self/ns/pid"),
    ) {
        (Some(theirs), Some(ours)) => theirs == ours,
        _ => false,
    }
}

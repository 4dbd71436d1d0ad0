//! The way to a manager: which socket a route tries first (the private socket or the session
//! bus, as systemd-run of each era or the launcher program has it), and when a way is passed over
//! for the other (a broker silent a moment ago or failing its greeting, a manager that is not on
//! the bus or not ours). The conversation over the socket is `connection`'s.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use super::address::escape_address_value;
use super::broker_silence::{self, Heard};
use super::connect::{connect_private, connect_session, Socket, Unconnected};
use super::connection::{BrokerGreeting, Connection, READ_SIZE};
use super::error::BusError;
use super::owner::{manager_listens_in, which_manager, Expected};
use crate::input::inputs::UserBus;

/// The longest a greeting of the session bus's broker may take when the private socket is there
/// to fall back to: a broker that answers answers within milliseconds, even in a burst of
/// launches, and one that does not would otherwise cost every launch half its bound.
pub(super) const BROKER_PATIENCE: Duration = Duration::from_millis(250);

/// How the manager is reached. systemd-run's way: the private socket
/// `$XDG_RUNTIME_DIR/systemd/private` when `XDG_RUNTIME_DIR` is set, else the session bus. Up to
/// systemd 256, systemd-run also falls back to the session bus when the private socket cannot be
/// connected; from 257 it does not. The launcher program's way: the session bus first, the private
/// socket when the session bus cannot be connected or the manager is not on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Route {
    /// `XDG_RUNTIME_DIR`, where the private socket and the turn lock (`crate::manager::turn`) are.
    runtime: Option<OsString>,
    private: Option<OsString>,
    session: Option<Vec<u8>>,
    fallback: bool,
    session_first: bool,
    /// The route leads to the user manager of `runtime` (every route but the system manager's):
    /// a session bus whose `org.freedesktop.systemd1` is another manager is not taken.
    user_manager: bool,
}

/// Which way a route tries first, and whether it may try the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// systemd-run up to 256: any failure to connect the private socket tries the session bus.
    UpTo256,
    /// systemd-run 257 and later: the session bus only without `XDG_RUNTIME_DIR`.
    Since257,
    /// The launcher program and its probe: the session bus (`DBUS_SESSION_BUS_ADDRESS`, else
    /// `$XDG_RUNTIME_DIR/bus`) first, then the private socket. Through the broker a launch costs
    /// the manager a method call on the connection it already has; a new private connection costs
    /// it the setup of its whole object model for that connection (measured in
    /// `benches/launch.rs`, `docs/guarantees.md`).
    SessionFirst,
}

impl Fallback {
    /// The policy of a systemd-run of this major version (unknown counts as the newest).
    pub(crate) fn of_systemd_run(version: Option<u32>) -> Self {
        match version {
            Some(v) if v < 257 => Fallback::UpTo256,
            _ => Fallback::Since257,
        }
    }
}

impl Route {
    /// The route for the effective environment `env`.
    pub(crate) fn from_env(env: &[(OsString, OsString)], fallback: Fallback) -> Self {
        Route::to(UserBus::read(env), fallback)
    }

    /// The route to the manager named by `bus`.
    pub(crate) fn to(bus: UserBus<'_>, fallback: Fallback) -> Self {
        let runtime = bus.runtime_dir;
        let private = runtime.map(|dir| {
            let mut path = dir.to_owned();
            path.push("/systemd/private");
            path
        });
        let session = match bus.bus_address {
            Some(address) => Some(address.as_bytes().to_vec()),
            None if fallback != Fallback::Since257 => runtime.map(|dir| {
                let mut address = b"unix:path=".to_vec();
                address.extend(escape_address_value(dir.as_bytes()));
                address.extend_from_slice(b"/bus");
                address
            }),
            None => None,
        };
        Route {
            runtime: runtime.map(OsStr::to_owned),
            private,
            session,
            fallback: fallback == Fallback::UpTo256,
            session_first: fallback == Fallback::SessionFirst,
            user_manager: true,
        }
    }

    /// The route to the system manager over the system bus at `address`.
    pub(crate) fn to_system_manager(address: &OsStr) -> Self {
        Route {
            user_manager: false,
            ..Route::to(
                UserBus {
                    runtime_dir: None,
                    bus_address: Some(address),
                },
                Fallback::Since257,
            )
        }
    }

    /// How a message names the manager this route leads to.
    pub(crate) fn manager_words(&self) -> &'static str {
        if self.user_manager {
            super::error::USER_MANAGER
        } else {
            "the system manager"
        }
    }

    /// Which manager a broker's `org.freedesktop.systemd1` must be for this route.
    fn expected_manager(&self) -> Expected {
        if self.user_manager {
            Expected::UserManagerOf(self.runtime.clone())
        } else {
            Expected::Any
        }
    }

    /// The way this route falls back to when the manager is not on its session bus: the private
    /// socket alone. None when there is no such other way.
    pub(crate) fn without_session_bus(&self) -> Option<Route> {
        (self.session_first && self.private.is_some()).then(|| Route {
            session: None,
            session_first: false,
            fallback: false,
            ..self.clone()
        })
    }

    /// Whether this is the launcher program's route (and its probe's), which names its process
    /// to the manager as the sender of the call (systemd-run sends its pid, or a pidfd).
    pub(crate) fn is_the_launcher_programs(&self) -> bool {
        self.session_first
    }

    /// The order this route tries its ways in, in words.
    pub(crate) fn order(&self) -> &'static str {
        if self.session_first {
            "the launcher program's: the session bus first (the manager answers a call there on \
             the one connection it keeps to the bus), then the private socket (a new connection \
             there costs the manager its setup)"
        } else if self.fallback {
            "systemd-run's up to 256: the private socket, then the session bus"
        } else {
            "systemd-run's from 257: the private socket when XDG_RUNTIME_DIR is set, else the \
             session bus"
        }
    }

    /// The way a connection along this route went, in words: `session bus unix:path=…` or
    /// `private socket /run/user/…/systemd/private`.
    pub(crate) fn way(&self, via_broker: bool) -> String {
        match (via_broker, &self.session, &self.private) {
            (true, Some(list), _) => format!("session bus {}", String::from_utf8_lossy(list)),
            (false, _, Some(path)) => {
                format!(
                    "private socket {}",
                    String::from_utf8_lossy(path.as_bytes())
                )
            }
            _ => "none".to_owned(),
        }
    }

    /// The way to fall back to when the session bus's broker fails its greeting: the private
    /// socket, where one is there (a container given only the bus socket has none, and its broker
    /// then gets the request's whole bound).
    pub(crate) fn private_to_fall_back_to(&self) -> Option<Route> {
        self.without_session_bus()
            .filter(|_| self.runtime_dir().is_some_and(manager_listens_in))
    }

    /// What the runtime directory says of the session bus's broker (`broker_silence`), on a route
    /// that may take the private socket instead; else nothing (nor is anything read). A mark of
    /// silence is heeded only where the private socket is there ([`Connection::open_as`]).
    fn broker_heard(&self) -> Heard {
        match (self.without_session_bus(), self.runtime_dir()) {
            (Some(_), Some(runtime)) => broker_silence::heard(runtime),
            _ => Heard::Nothing,
        }
    }

    /// Whether a manager has lived where this route leads: the runtime directory (or, without
    /// one, the directory of the session bus's socket) holds the `systemd` directory a user
    /// manager makes there. Only then is a socket that refuses, or a name without an owner, a
    /// manager away for a moment rather than no manager at all.
    pub(crate) fn manager_has_lived(&self) -> bool {
        let dir = match (&self.runtime, &self.session) {
            (Some(runtime), _) => Some(std::path::PathBuf::from(runtime)),
            (None, Some(list)) => super::address::parse(list).ok().and_then(|addresses| {
                addresses.into_iter().find_map(|address| match address {
                    super::address::Address::Path(path) => {
                        std::path::Path::new(&path).parent().map(|p| p.to_owned())
                    }
                    super::address::Address::Abstract(_) => None,
                })
            }),
            (None, None) => None,
        };
        dir.is_some_and(|dir| dir.join("systemd").is_dir())
    }

    /// Whether `error` means the manager is away for a moment with nothing sent to it
    /// (`comeback`): [`BusError::Away`], or a broker that says nobody owns the manager's name
    /// where a manager has lived.
    pub(crate) fn manager_away(&self, error: &BusError) -> bool {
        matches!(error, BusError::Away(_))
            || (error.means_no_manager_on_bus() && self.manager_has_lived())
    }

    /// Whether `error`, met while a connection along this route was being made (before anything
    /// was asked of the manager), means the manager is away for a moment: as
    /// [`Route::manager_away`], or a connection dropped on the way where a manager has lived (a
    /// manager, or the session bus's broker, restarting resets the connections it has not
    /// answered).
    fn away_while_connecting(&self, error: &BusError) -> bool {
        self.manager_away(error)
            || (matches!(error, BusError::Broken(_)) && self.manager_has_lived())
    }

    /// The failure to connect along this route, from each way's: the manager away (`comeback`)
    /// where nobody listened on a way and a manager has lived here.
    fn unconnected(&self, failures: &[Unconnected]) -> BusError {
        let why = if failures.is_empty() {
            "no bus address".to_owned()
        } else {
            failures
                .iter()
                .map(|f| f.why.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        };
        if failures.iter().any(|f| f.nobody_listens) && self.manager_has_lived() {
            BusError::Away(format!("could not connect to the user manager: {why}"))
        } else {
            BusError::Connect(why)
        }
    }

    /// The runtime directory (`XDG_RUNTIME_DIR`), if there is one.
    pub(crate) fn runtime_dir(&self) -> Option<&OsStr> {
        self.runtime.as_deref()
    }

    /// Whether any way to the manager is configured at all (R7's cheap negative).
    pub(crate) fn is_configured(&self) -> bool {
        self.private.is_some() || self.session.is_some()
    }
}

/// Why a route's session bus is passed over while its broker's silence is fresh.
const SILENT_A_MOMENT_AGO: &str = "its broker did not answer a moment ago";

/// Opening a connection along a route: the ways in the route's order, and passing one over.
impl Connection {
    /// Connects along `route` and authenticates, by `deadline`; through a broker, greets it
    /// ([`Connection::greeted`]).
    pub(crate) fn open(route: &Route, deadline: Instant) -> Result<Self, BusError> {
        Connection::open_as(route, deadline, false)
    }

    /// [`Connection::open`], but on the manager's private socket the first call goes out with
    /// the authentication, before the manager's OK: one round trip fewer, which is what a burst
    /// of launcher programs waits for in turn. The manager keeps what follows BEGIN (sd-bus's
    /// server reads on from there); [`Connection::authenticated`] then reads its OK. Through a
    /// broker the greeting is answered first, so that a broker that fails it leaves the private
    /// socket to try with nothing sent on to the manager.
    pub(crate) fn open_pipelined(route: &Route, deadline: Instant) -> Result<Self, BusError> {
        Connection::open_as(route, deadline, true)
    }

    /// [`Connection::open`], or [`Connection::open_pipelined`] when `pipelined`. What the runtime
    /// directory says of the broker is read once: a broker found silent a moment ago is passed
    /// over at once, and one that answers now clears what was said of it.
    fn open_as(route: &Route, deadline: Instant, pipelined: bool) -> Result<Self, BusError> {
        let heard = route.broker_heard();
        if let Heard::Silent = heard {
            if let Some(private) = route.private_to_fall_back_to() {
                let mut connection = Connection::open_as(&private, deadline, pipelined)?;
                connection.passed_over = Some(SILENT_A_MOMENT_AGO.to_owned());
                return Ok(connection);
            }
        }
        let (socket, via_broker, started) = Self::connect(route)?;
        let opened = if via_broker {
            Connection::greeted(route, socket, started, deadline, &heard)
        } else if pipelined {
            Connection::pipelined_over(socket, READ_SIZE, started, deadline)
        } else {
            Connection::over(socket, None, READ_SIZE, started, deadline)
        };
        opened.map_err(|e| match e {
            BusError::Broken(why) if route.manager_has_lived() => {
                BusError::Away(format!("could not connect to the user manager: {why}"))
            }
            e => e,
        })
    }

    /// Authenticates over the broker's connected socket `fd` and greets it (`Hello`, and the check
    /// that the manager is on the bus). Where `route` has a private socket to fall back to, the
    /// broker gets half the time left, at most [`BROKER_PATIENCE`], and any failure of the
    /// greeting (the manager not on the bus; a broker still starting, stalled or gone) takes the
    /// private socket with the rest: only the broker was spoken to, so nothing reached the
    /// manager. A broker that did not answer in time is remembered (`broker_silence`).
    fn greeted(
        route: &Route,
        socket: Socket,
        started: Instant,
        deadline: Instant,
        heard: &Heard,
    ) -> Result<Self, BusError> {
        let runtime = route.runtime_dir();
        // A broker that answers clears what was said of its silence.
        let answered = || {
            if let (Some(runtime), Heard::Silent | Heard::SilentLongAgo) = (runtime, heard) {
                broker_silence::note_answered(runtime);
            }
        };
        let Some(private) = route.private_to_fall_back_to() else {
            let connection = Connection::greeting(route, socket, started, deadline, false)?;
            answered();
            return Ok(connection);
        };
        let now = Instant::now();
        let broker_deadline =
            now + (deadline.saturating_duration_since(now) / 2).min(BROKER_PATIENCE);
        match Connection::greeting(route, socket, started, broker_deadline, false) {
            Ok(mut connection) => {
                answered();
                connection.set_deadline(deadline);
                Ok(connection)
            }
            Err(on_bus) => {
                if let (BusError::TimedOut { .. }, Some(runtime)) = (&on_bus, runtime) {
                    broker_silence::note_silent(runtime);
                }
                tracing::debug!(target: crate::diag::TARGET, "session bus: {on_bus}; trying the private socket");
                let mut connection =
                    Connection::open(&private, deadline).map_err(|on_private| {
                        let why = format!("session bus: {on_bus}; then {on_private}");
                        if route.away_while_connecting(&on_bus)
                            || route.away_while_connecting(&on_private)
                        {
                            BusError::Away(format!("could not connect to the user manager: {why}"))
                        } else {
                            BusError::Connect(why)
                        }
                    })?;
                connection.passed_over = Some(on_bus.to_string());
                Ok(connection)
            }
        }
    }

    /// Authenticates over the broker's connected socket and greets it, by `deadline`, and judges
    /// the owner of the manager's name by its unit path: another manager, the system manager or a
    /// program that is no manager is [`BusError::NotTheManager`].
    pub(super) fn greeting(
        route: &Route,
        socket: Socket,
        started: Instant,
        deadline: Instant,
        passes_fds: bool,
    ) -> Result<Self, BusError> {
        let expected = route.expected_manager();
        let greeting = BrokerGreeting {
            asks_unit_path: expected != Expected::Any,
        };
        let mut connection = if passes_fds {
            Connection::over_passing_fds(socket, greeting, started, deadline)?
        } else {
            Connection::over(socket, Some(greeting), READ_SIZE, started, deadline)?
        };
        if let Some(answer) = connection.take_unit_path_answer() {
            which_manager(answer, &expected, manager_listens_in)
                .map_err(BusError::NotTheManager)?;
        }
        Ok(connection)
    }

    /// A connected socket along `route`, whether it is through a bus broker, and when connecting
    /// began.
    pub(super) fn connect(route: &Route) -> Result<(Socket, bool, Instant), BusError> {
        let started = Instant::now();
        let mut why_not = Vec::new();
        if route.session_first {
            if let Some(list) = &route.session {
                match connect_session(list) {
                    Ok(socket) => return Ok((socket, true, started)),
                    Err(no) => {
                        tracing::debug!(target: crate::diag::TARGET, "{}; trying the private socket", no.why);
                        why_not.push(no);
                    }
                }
            }
            if let Some(path) = &route.private {
                match connect_private(path) {
                    Ok(socket) => return Ok((socket, false, started)),
                    Err(no) => why_not.push(no),
                }
            }
            return Err(route.unconnected(&why_not));
        }
        if let Some(path) = &route.private {
            match connect_private(path) {
                Ok(socket) => return Ok((socket, false, started)),
                Err(no) if route.fallback && route.session.is_some() => {
                    tracing::debug!(target: crate::diag::TARGET, "{}; trying the session bus", no.why);
                    why_not.push(no);
                }
                Err(no) => return Err(route.unconnected(&[no])),
            }
        }
        if let Some(list) = &route.session {
            match connect_session(list) {
                Ok(socket) => return Ok((socket, true, started)),
                Err(no) => why_not.push(no),
            }
        }
        Err(route.unconnected(&why_not))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn routes_follow_systemd_run_of_each_era() {
        let both = env(&[
            ("XDG_RUNTIME_DIR", "/run/user/7"),
            ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/x"),
        ]);
        let old = Route::from_env(&both, Fallback::UpTo256);
        assert_eq!(
            old.private.as_deref(),
            Some("/run/user/7/systemd/private".as_ref())
        );
        assert_eq!(old.session.as_deref(), Some(&b"unix:path=/x"[..]));
        assert!(old.fallback);
        assert!(!Route::from_env(&both, Fallback::Since257).fallback);

        let runtime_only = env(&[("XDG_RUNTIME_DIR", "/run/user/7 x")]);
        assert_eq!(
            Route::from_env(&runtime_only, Fallback::UpTo256)
                .session
                .as_deref(),
            Some(&b"unix:path=/run/user/7%20x/bus"[..])
        );
        assert_eq!(
            Route::from_env(&runtime_only, Fallback::Since257).session,
            None
        );

        let none = env(&[("XDG_RUNTIME_DIR", "")]);
        assert!(!Route::from_env(&none, Fallback::UpTo256).is_configured());
    }

    #[test]
    fn the_launcher_programs_route_tries_the_session_bus_then_the_private_socket_alone() {
        let runtime_only = env(&[("XDG_RUNTIME_DIR", "/run/user/7")]);
        let route = Route::from_env(&runtime_only, Fallback::SessionFirst);
        assert!(route.session_first);
        assert_eq!(
            route.session.as_deref(),
            Some(&b"unix:path=/run/user/7/bus"[..])
        );
        let private = route
            .without_session_bus()
            .expect("a private socket to fall back to");
        assert_eq!(private.session, None);
        assert_eq!(
            private.way(false),
            "private socket /run/user/7/systemd/private"
        );
        assert_eq!(private.without_session_bus(), None, "no way back");
        assert_eq!(route.way(true), "session bus unix:path=/run/user/7/bus");

        let session_only = env(&[("DBUS_SESSION_BUS_ADDRESS", "unix:path=/x")]);
        let route = Route::from_env(&session_only, Fallback::SessionFirst);
        assert!(route.is_configured());
        assert_eq!(route.without_session_bus(), None);
    }

    #[test]
    fn a_route_that_cannot_connect_either_way_says_why_for_each() {
        let dir = std::env::temp_dir().join(format!("synaps-no-bus-{}", std::process::id()));
        let stale = env(&[
            ("XDG_RUNTIME_DIR", dir.to_str().unwrap()),
            ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus"),
        ]);
        let route = Route::from_env(&stale, Fallback::SessionFirst);
        let Err(BusError::Connect(why)) = Connection::connect(&route) else {
            panic!("connected to nothing");
        };
        assert!(
            why.starts_with("session bus unix:path=/nonexistent/bus: "),
            "{why}"
        );
        assert!(why.contains("; private socket "), "{why}");
    }
}

//! A minimal D-Bus client for the user manager: the private socket or the session bus, SASL
//! EXTERNAL, method calls and the `JobRemoved` signal, all under one deadline.
//!
//! Written here rather than taken from a crate: zbus 5 and 6 refuse the manager's private socket
//! (it names itself `org.freedesktop.systemd1` as the sender, which they reject as a unique name),
//! and libdbus would bring a C library to a pure-Rust core. Everything a peer sends is parsed by
//! `wire`, which is fuzzed.

mod address;
mod connection;
pub(crate) mod pool;
pub(crate) mod wire;

pub(crate) use connection::{BusError, Connection, Fallback, Route, MANAGER, MANAGER_PATH};

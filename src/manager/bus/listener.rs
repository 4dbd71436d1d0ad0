//! A connection that listens rather than asks: greeted by the broker with no manager asked for, it
//! hears the broker and one peer it names (systemd-oomd's subscription), and can be hung up from
//! another thread.

use std::os::fd::OwnedFd;
use std::time::Instant;

use super::connect::connect_session;
use super::connection::{Connection, READ_SIZE};
use super::error::BusError;
use super::wire::{Call, Kind, Message};

impl Connection {
    /// A connection to the bus at `address` (a D-Bus address list) as a listener: authenticated
    /// and greeted (`Hello`) by `deadline`, with no manager asked for. Only the broker's messages
    /// count until [`Connection::hear_from`] names the one peer whose count too.
    pub(crate) fn listener(address: &[u8], deadline: Instant) -> Result<Self, BusError> {
        let started = Instant::now();
        let socket = connect_session(address).map_err(|no| BusError::Connect(no.why))?;
        let mut connection =
            Connection::unauthenticated(socket, true, READ_SIZE, started, deadline);
        connection.parses_every_signal = true;
        connection.send_authentication()?;
        connection.finish_authentication()?;
        let hello = connection.send_to_broker("Hello", Call::new())?;
        connection.reply(hello)?;
        Ok(connection)
    }

    /// Takes replies and signals from the bus connection `unique_name` (besides the broker's)
    /// from now on, and from no other peer.
    pub(crate) fn hear_from(&mut self, unique_name: Option<String>) {
        self.owner = unique_name;
    }

    /// A call to the bus broker itself, and its answer.
    pub(crate) fn call_broker(&mut self, member: &str, call: Call) -> Result<Message, BusError> {
        let serial = self.send_to_broker(member, call)?;
        self.reply(serial)
    }

    /// The next signal, or answer to a call sent with [`Connection::send`], from the broker or
    /// the peer named by [`Connection::hear_from`]; what any other connection sent (to us alone,
    /// or broadcast) is never returned.
    pub(crate) fn next_heard(&mut self) -> Result<Message, BusError> {
        loop {
            let message = self.read_message("waiting for a signal")?;
            if message.kind != Kind::MethodCall && self.sent_by_a_peer_we_asked(&message) {
                return Ok(message);
            }
        }
    }

    /// A second descriptor of this connection's socket, to hang it up from another thread
    /// (`shutdown`), which ends a wait in [`Connection::next_heard`] there.
    pub(crate) fn hang_up_handle(&self) -> std::io::Result<OwnedFd> {
        self.fd.try_clone()
    }
}

//! The calls a connection makes of the manager: its methods and properties, the routing of its
//! `JobRemoved` signals, and the wait for a job.

use crate::manager::bus::wire::{Call, Message};
use crate::manager::bus::{
    job_removed, Ahead, BusError, Connection, MANAGER, MANAGER_PATH, PROPERTIES, SYSTEMD,
};

impl Connection {
    /// A call to the manager object.
    pub(crate) fn call_manager(&mut self, member: &str, call: Call) -> Result<Message, BusError> {
        // On a pipelined connection the authentication's answer is read first: sd-bus's server
        // takes a call that came in the same read as BEGIN only at the socket's next wake-up, and
        // a short one (a question, unlike a scope's start) fits in that read whole, so it would
        // wait for the caller to hang up (seen through a relay, which hands both on at once).
        self.authenticated()?;
        let serial = self.send_manager(member, call)?;
        self.reply(serial)
    }

    /// Sends a call to the manager object; the answer comes with [`Connection::reply`], in the
    /// order the calls were sent.
    pub(crate) fn send_manager(&mut self, member: &str, call: Call) -> Result<u32, BusError> {
        self.send(call, Some(SYSTEMD), MANAGER_PATH, MANAGER, member)
    }

    /// The object path of the unit the manager says the process `pid` (as the manager counts
    /// pids) is in; None where it is in none of the manager's units.
    pub(crate) fn unit_of_pid(&mut self, pid: u32) -> Result<Option<String>, BusError> {
        match self.call_manager("GetUnitByPID", Call::new().uint32(pid)) {
            Ok(reply) => Ok(reply.first_str().map(str::to_owned)),
            Err(BusError::Refused { name, .. })
                if name == "org.freedesktop.systemd1.NoUnitForPID"
                    || name == "org.freedesktop.systemd1.NoSuchProcess" =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The manager's own property `property` (of its `Manager` interface), asked once the
    /// authentication is answered (as [`Connection::call_manager`] asks).
    pub(crate) fn manager_property(&mut self, property: &str) -> Result<Message, BusError> {
        self.authenticated()?;
        let serial = self.send_get(MANAGER_PATH, MANAGER, property)?;
        self.reply(serial)
    }

    /// Sends `Properties.Get(interface, property)` on `path`; the answer comes with
    /// [`Connection::reply`].
    pub(crate) fn send_get(
        &mut self,
        path: &str,
        interface: &str,
        property: &str,
    ) -> Result<u32, BusError> {
        let call = Call::new().string(interface).string(property);
        self.send(call, Some(SYSTEMD), path, PROPERTIES, "Get")
    }

    /// Asks the broker to route the manager's `JobRemoved` signals to us (needed on the session
    /// bus only; the private socket gets every signal), without waiting: its answer is read
    /// before the next call's.
    pub(crate) fn subscribe_job_removed(&mut self) -> Result<(), BusError> {
        if self.via_broker {
            let rule = format!(
                "type='signal',sender='{SYSTEMD}',path='{MANAGER_PATH}',interface='{MANAGER}',member='JobRemoved'"
            );
            let serial = self.send_to_broker("AddMatch", Call::new().string(&rule))?;
            self.answers_ahead.push((serial, Ahead::Return));
        }
        Ok(())
    }

    /// Waits for the manager's `JobRemoved` for `job` and returns its result (`done`, `failed`…).
    pub(crate) fn wait_for_job(&mut self, job: &str) -> Result<String, BusError> {
        if let Some((_, result)) = self.signals.iter().find(|(removed, _)| removed == job) {
            return Ok(result.clone());
        }
        loop {
            let message = self.read_message("waiting for the scope's job")?;
            if !self.sent_by_a_peer_we_asked(&message) {
                continue;
            }
            if let Some((removed, result)) = job_removed(&message) {
                if removed == job {
                    return Ok(result);
                }
            }
        }
    }
}

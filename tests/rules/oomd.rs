//! A stand-in for systemd-oomd (`common::Standin`, named as one: the real oomd acts in the virtual
//! machine) on a bus of the world's own that stands for the system bus: it kills as oomd does (its
//! mark on the cgroup, `cgroup.kill`, then its `Killed` signal).

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use crate::common::{BareBus, Standin, TempDir};

/// The bus standing for the system bus, and the stand-in oomd on it.
pub struct StandinOomd {
    oomd: Standin,
    bus: BareBus,
    _dir: TempDir,
}

impl StandinOomd {
    pub fn start() -> StandinOomd {
        let dir = TempDir::new("rules-system-bus");
        let bus = BareBus::start(&dir);
        let oomd = Standin::start(&bus.address, None);
        StandinOomd {
            oomd,
            bus,
            _dir: dir,
        }
    }

    /// `DBUS_SYSTEM_BUS_ADDRESS` for every launch and request of the world.
    pub fn address(&self) -> OsString {
        self.bus.address.clone()
    }

    pub fn pid(&self) -> u32 {
        self.oomd.pid()
    }

    /// oomd's kill of the cgroup `dir` (`cgroup` as /proc names it) under the swap rule: its mark,
    /// the kill, its signal, in one turn of the stand-in's loop as of oomd's; false where the
    /// cgroup was gone first (nothing killed, nothing signalled).
    pub fn kill(&mut self, dir: &Path, cgroup: &str) -> bool {
        self.oomd
            .oomd_kill(dir, cgroup, "memory-used", Duration::ZERO)
    }
}

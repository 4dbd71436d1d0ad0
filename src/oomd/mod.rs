//! systemd-oomd as the library knows it: the rules that cover a cgroup, its `Killed` signal, the
//! files it reads and how it judges and picks from them, and the warnings that come of that.

/// The extended attributes systemd-oomd writes on a cgroup it kills (before the kill from 251 on,
/// after it on every version since 247).
pub(crate) const OOMD_MARKS: [&str; 2] = ["user.oomd_ooms", "user.oomd_kill"];

pub(crate) mod inputs;
pub(crate) mod judgement;
pub(crate) mod pick;
pub(crate) mod rules;
pub(crate) mod signal;
pub(crate) mod warning;
pub(crate) mod watch;

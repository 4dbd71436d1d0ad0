//! A scope once it runs: the handle on it, what is watched while it runs (the kernel's OOM kills,
//! the marks on its cgroups, systemd-oomd's rules), and how it ended.

pub(crate) mod ending;
pub mod handle;
pub(crate) mod oom_watch;
pub(crate) mod oomd_watch;

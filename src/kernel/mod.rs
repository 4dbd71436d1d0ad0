//! The kernel's files, read as the kernel writes them: cgroups (paths, identities, the tree below a
//! scope), PSI pressure, and the OOM killer's counts. The bottom of the house: it imports nothing
//! of the library's but its cross-cutting rooms.

pub(crate) mod cgroup;
pub(crate) mod cgroup_tree;
pub(crate) mod oom_count;
pub(crate) mod pressure;

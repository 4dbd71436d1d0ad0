//! A launch: the decision (scoped or direct, and why), the wrapped argv and its launcher program's
//! command line, the launcher program's own scope, the refusals, and the spawn.

pub(crate) mod decide;
pub(crate) mod exec_line;
pub(crate) mod exec_program;
pub(crate) mod launcher;
pub(crate) mod own_scope;
pub(crate) mod refusal;
pub(crate) mod request_thread;
pub(crate) mod spawn;

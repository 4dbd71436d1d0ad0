//! What a request brings and how it is read: the environment and its checks, the scope's kind, the
//! configuration, the program's path, the limits asked for and their systemd syntax, and the
//! unit's name. Pure reading: no manager is asked here.

pub mod config;
pub(crate) mod env;
pub(crate) mod inputs;
pub mod intake;
pub(crate) mod kind;
pub mod limits;
pub(crate) mod resolve;
pub(crate) mod shell;
pub(crate) mod systemd_syntax;
pub(crate) mod unit_name;

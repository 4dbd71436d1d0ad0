//! The C entry point. `main` is defined here instead of Rust's runtime start, because that start
//! sets SIGPIPE to ignored and reopens closed standard fds, and the command must begin with the
//! dispositions and fds its caller gave it. The arguments reach `std::env::args_os` through
//! glibc's initialisers before `main` runs.

use std::os::raw::{c_char, c_int};

/// The process entry point, called by the C runtime.
#[no_mangle]
pub extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    crate::main_status()
}

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

/// The descriptor `raw` that the command line hands this program (`--hold-fd`), taken as its own
/// to read and close; None when no descriptor is open there.
pub(crate) fn take_named_fd(raw: i32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::{BorrowedFd, FromRawFd};
    // SAFETY: `raw` is not negative (the parser refuses that), and it is only borrowed for this
    // one fcntl, which fails with EBADF when nothing is open there.
    let open = rustix::io::fcntl_getfd(unsafe { BorrowedFd::borrow_raw(raw) }).is_ok();
    // SAFETY: the descriptor is open, and the caller gave it to this program alone to read and
    // close (`--hold-fd`); nothing else in this process uses it.
    open.then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) })
}

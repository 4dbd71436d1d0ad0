//! Forked children of the tests that fork the test process itself: a child that runs a closure
//! and leaves with its status, and that status within a limit.

use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

/// Forks a child that runs `child` and leaves with its status (99 if it panicked); its pid.
pub fn fork_running(child: impl FnOnce() -> i32) -> Pid {
    // SAFETY: the child runs only `child` and then _exit()s; what it uses of this process's state
    // is what the test is about (the library's, built to be used after fork), and the allocator,
    // which glibc keeps usable in a child forked from a threaded process.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            let status =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(99);
            // SAFETY: ends the child at once, without running the parent's exit handlers.
            unsafe { nix::libc::_exit(status) }
        }
        ForkResult::Parent { child } => child,
    }
}

/// Waits up to `limit` for `child`'s exit status (128 + the signal that ended it); a child still
/// running then is killed and reported as hung (None).
pub fn status_within(child: Pid, limit: Duration) -> Option<i32> {
    let end = Instant::now() + limit;
    loop {
        match waitpid(child, Some(WaitPidFlag::WNOHANG)).expect("waitpid") {
            WaitStatus::Exited(_, code) => return Some(code),
            WaitStatus::Signaled(_, signal, _) => return Some(128 + signal as i32),
            _ if Instant::now() >= end => {
                let _ = kill(child, Signal::SIGKILL);
                let _ = waitpid(child, None);
                return None;
            }
            _ => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

//! What `run --wait` needs of the C library that no safe crate offers: a signal's disposition read
//! without changing it, SIGCHLD's set, and the child's set-up between fork and exec.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use rustix::process::{getppid, set_parent_process_death_signal, Signal};

/// Whether `signal` is ignored (SIG_IGN) in this process: such a signal is left as it is, so the
/// command inherits it ignored, as it would under `run` without --wait.
pub(crate) fn ignored(signal: i32) -> bool {
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: a null new action only reads the disposition into `old`, which is large enough and
    // zeroed, so it is initialised whether or not the call writes it.
    let read = unsafe { libc::sigaction(signal, std::ptr::null(), old.as_mut_ptr()) };
    // SAFETY: zeroed above, written by the kernel on success.
    read == 0 && unsafe { old.assume_init() }.sa_sigaction == libc::SIG_IGN
}

/// Sets SIGCHLD to its default (where the caller left it ignored, the kernel reaps children at
/// once and no status could come back); says whether it was ignored.
pub(crate) fn default_sigchld() -> bool {
    let was = ignored(libc::SIGCHLD);
    if was {
        // SAFETY: SIG_DFL is no handler: nothing of this process runs on the signal.
        unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
    }
    was
}

/// Makes the child `cmd` spawns receive SIGTERM when the thread that spawns it (`run --wait`'s
/// main thread, the waiter's life) ends, and never run where the waiter ended before that was
/// set. Where the waiter's caller ignored SIGCHLD, the child gets it ignored again.
pub(crate) fn tie_to_waiter(cmd: &mut Command, sigchld_ignored: bool) {
    let waiter = rustix::process::getpid();
    let setup = move || {
        set_parent_process_death_signal(Some(Signal::TERM))?;
        // Set after the fork: a waiter that ended before it sent no signal, and the child now has
        // another parent.
        if getppid() != Some(waiter) {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        if sigchld_ignored {
            // SAFETY: between fork and exec only async-signal-safe calls are made; signal() is
            // one, and SIG_IGN is no handler.
            unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
        }
        Ok(())
    };
    // SAFETY: the closure makes only async-signal-safe system calls (prctl, getppid, signal), takes
    // no lock and allocates nothing on success (an error value is made only where the waiter is
    // gone, and the child then exits without running anything).
    unsafe { cmd.pre_exec(setup) };
}

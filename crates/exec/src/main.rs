//! `synaps-scope-exec`: the launcher program that `wrap` puts in front of a command (A1).
//!
//! ```text
//! synaps-scope-exec --unit=UNIT [--slice=SLICE] --description=TEXT --timeout-ms=N [--required] \
//!     [--property=NAME=VALUE]... [--hold-fd=N] -- PROGRAM ARGV0 [ARGS...]
//! ```
//!
//! The command line is the core's `ExecLine`, the same type `wrap` builds it with.
//!
//! It makes the transient scope UNIT for its own pid over D-Bus (what `systemd-run --user --scope`
//! does), waits for the scope's start job, and then `execve`s PROGRAM with ARGV0 and ARGS byte
//! for byte: same pid, process group, session, environment, fds, stdio, signal mask and
//! dispositions. If the scope cannot be made by the deadline, the command has not run: with
//! `--required` it exits 125 with the reason on stderr; otherwise it says why on stderr and runs
//! the command without a scope (or, when the request reached a manager that had not answered by
//! the deadline, before the scope was confirmed: the manager may still move it there). Each
//! `--property` is a resource limit of the scope (`MemoryMax=2G`), sent typed as the manager takes
//! it; a limit the manager refuses is a scope not made, told with the manager's words. With
//! `--hold-fd=N`, once the scope is made (or not), it writes `1` (or `0`) to descriptor N where it
//! can (a socket) and reads it to its end (its parent closing it, or shutting it down for writing)
//! before the exec, so that a parent watching the scope misses none of the command's life; the
//! descriptor is closed by the exec itself, so a parent reading its end sees the command begin.
#![no_main]
#![deny(unsafe_op_in_unsafe_fn)]

mod ffi;

use std::ffi::{CString, OsString};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use rustix::fs::{open, Mode, OFlags};
use synaps_scope::__exec::{make_own_scope, ExecLine, ScopeRequest, EXEC_USAGE};
use synaps_scope::EXEC_FAILED_STATUS;

/// Opens `/dev/null` on each of fds 0-2 that the caller left closed, so that nothing this program
/// opens (the bus socket, the turn file) lands there and no warning of its own is written into
/// one. Close-on-exec: the command starts with fds 0-2 as its caller gave them, closed ones closed.
fn hold_closed_standard_fds() -> Vec<OwnedFd> {
    let mut held = Vec::new();
    while let Ok(fd) = open("/dev/null", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()) {
        if fd.as_raw_fd() > 2 {
            break;
        }
        held.push(fd);
    }
    held
}

/// The whole program; returns the exit status when the command could not be exec'd.
fn run() -> i32 {
    let started = Instant::now();
    let _standard_fds = hold_closed_standard_fds();
    let mut args = std::env::args_os();
    args.next();
    let args: Vec<OsString> = args.collect();
    if let [only] = args.as_slice() {
        match only.to_str() {
            Some("--help" | "-h") => return print(format_args!("{EXEC_USAGE}")),
            Some("--version" | "-V") => {
                return print(format_args!(
                    "synaps-scope-exec {}",
                    env!("CARGO_PKG_VERSION")
                ))
            }
            _ => {}
        }
    }
    let line = match ExecLine::parse(args) {
        Ok(line) => line,
        Err(e) => {
            say(format_args!("{e}"));
            return EXEC_FAILED_STATUS;
        }
    };
    // A bound too large for the clock means as late as a century from now.
    let deadline = started
        .checked_add(Duration::from_millis(line.timeout_ms))
        .or_else(|| started.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(started);
    let shown = String::from_utf8_lossy(line.program.as_bytes());
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let request = ScopeRequest {
        unit: &line.unit,
        slice: line.slice.as_deref(),
        description: &line.description,
        limits: &line.limits,
        required: line.required,
    };
    let made = make_own_scope(&env, &request, deadline);
    if let Err(not_made) = &made {
        say(format_args!(
            "{}",
            not_made.message(&shown, &line.unit, line.required)
        ));
        if line.required {
            return EXEC_FAILED_STATUS;
        }
    }
    // Held open to the exec, which closes it: the parent sees the command begin.
    let _held = line.hold_fd.and_then(|fd| hold(fd, made.is_ok()));
    let to_c = |s: &OsString| CString::new(s.as_bytes()).expect("argv holds no NUL");
    let program_c = to_c(&line.program);
    let argv_c: Vec<CString> = line.argv.iter().map(to_c).collect();
    let err = nix::unistd::execv(&program_c, &argv_c).unwrap_err();
    say(format_args!("{shown}: {}", std::io::Error::from(err)));
    match err {
        Errno::ENOENT | Errno::ENOTDIR => 127,
        _ => 126,
    }
}

/// Tells the parent on the descriptor `fd` whether the scope was made (`1` or `0`, where the
/// descriptor can be written: a socket) and reads it to its end (the parent's close, or its
/// shutdown for writing); returns it close-on-exec, for the caller to hold to the exec: the command
/// does not inherit it, and the parent, reading its own end, sees the command begin (an end of
/// file) and knows that a signal it sends from then on reaches the command, not this program.
fn hold(fd: i32, made: bool) -> Option<OwnedFd> {
    let Some(fd) = ffi::take_named_fd(fd) else {
        say(format_args!("--hold-fd={fd}: no descriptor is open there"));
        return None;
    };
    let mut held = std::fs::File::from(fd);
    let _ = held.write_all(if made { b"1" } else { b"0" });
    let _ = std::io::copy(&mut held, &mut std::io::sink());
    let held = OwnedFd::from(held);
    let _ = rustix::io::fcntl_setfd(&held, rustix::io::FdFlags::CLOEXEC);
    Some(held)
}

/// `--help` or `--version` on stdout; exit status 0.
fn print(text: std::fmt::Arguments<'_>) -> i32 {
    let _ = writeln!(std::io::stdout(), "{text}");
    0
}

/// One line on stderr, best effort: a closed or broken stderr must not stop the command.
fn say(message: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "synaps-scope-exec: {message}");
}

/// `run`, with a panic turned into the launcher's own failure status rather than an abort.
fn main_status() -> i32 {
    panic::catch_unwind(AssertUnwindSafe(run)).unwrap_or(EXEC_FAILED_STATUS)
}

//! `synaps-scope-exec`: the launcher program that `wrap` puts in front of a command (A1).
//!
//! ```text
//! synaps-scope-exec --unit=UNIT [--slice=SLICE] --description=TEXT --timeout-ms=N [--required] \
//!     -- PROGRAM ARGV0 [ARGS...]
//! ```
//!
//! It makes the transient scope UNIT for its own pid over D-Bus (what `systemd-run --user --scope`
//! does), waits for the scope's start job, and then `execve`s PROGRAM with ARGV0 and ARGS byte
//! for byte: same pid, process group, session, environment, fds, stdio, signal mask and
//! dispositions. If the scope cannot be made by the deadline, the command has not run: with
//! `--required` it exits 125 with the reason on stderr; otherwise it says why on stderr and runs
//! the command without a scope (or, when the request reached a manager that had not answered by
//! the deadline, before the scope was confirmed: the manager may still move it there).
#![no_main]
#![deny(unsafe_op_in_unsafe_fn)]

mod ffi;

use std::ffi::{CString, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

use clap::Parser;
use nix::errno::Errno;
use synaps_scope::__exec::{make_own_scope, ScopeRequest};
use synaps_scope::EXEC_FAILED_STATUS;

/// Makes a systemd user scope for itself, then execs the command in it.
#[derive(Parser, Debug)]
#[command(name = "synaps-scope-exec", version)]
struct Args {
    /// The scope's unit name.
    #[arg(long)]
    unit: String,
    /// The slice, as systemd names it.
    #[arg(long)]
    slice: Option<String>,
    /// The scope's description.
    #[arg(long)]
    description: String,
    /// How long making the scope may take, from the start of this program.
    #[arg(long = "timeout-ms")]
    timeout_ms: u64,
    /// Exit 125 instead of running the command unscoped when no scope can be made.
    #[arg(long)]
    required: bool,
    /// PROGRAM ARGV0 [ARGS...]
    #[arg(last = true, required = true, num_args = 2..)]
    command: Vec<OsString>,
}

/// The whole program; returns the exit status when the command could not be exec'd.
fn run() -> i32 {
    let started = Instant::now();
    let args = match Args::try_parse_from(std::env::args_os()) {
        Ok(args) => args,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return 0;
        }
        Err(e) => {
            let _ = e.print();
            return EXEC_FAILED_STATUS;
        }
    };
    // A bound too large for the clock means as late as a century from now.
    let deadline = started
        .checked_add(Duration::from_millis(args.timeout_ms))
        .or_else(|| started.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(started);
    let (program, argv) = args
        .command
        .split_first()
        .expect("clap requires two values");
    let shown = String::from_utf8_lossy(program.as_bytes());
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let request = ScopeRequest {
        unit: &args.unit,
        slice: args.slice.as_deref(),
        description: &args.description,
    };
    if let Err(not_made) = make_own_scope(&env, &request, deadline) {
        say(format_args!(
            "{}",
            not_made.message(&shown, &args.unit, args.required)
        ));
        if args.required {
            return EXEC_FAILED_STATUS;
        }
    }
    let to_c = |s: &OsString| CString::new(s.as_bytes()).expect("argv holds no NUL");
    let program_c = to_c(program);
    let argv_c: Vec<CString> = argv.iter().map(to_c).collect();
    let err = nix::unistd::execv(&program_c, &argv_c).unwrap_err();
    say(format_args!("{shown}: {}", std::io::Error::from(err)));
    match err {
        Errno::ENOENT | Errno::ENOTDIR => 127,
        _ => 126,
    }
}

/// One line on stderr, best effort: a closed or broken stderr must not stop the command.
fn say(message: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "synaps-scope-exec: {message}");
}

/// `run`, with a panic turned into the launcher's own failure status rather than an abort.
fn main_status() -> i32 {
    panic::catch_unwind(AssertUnwindSafe(run)).unwrap_or(EXEC_FAILED_STATUS)
}

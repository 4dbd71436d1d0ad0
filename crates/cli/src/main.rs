//! `synaps-scope`: run or print a command line in its own systemd scope, or say why it would not
//! be (docs/spec.md).

// Unsafe code only in `ffi`, each block with its reason.
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

#[allow(unsafe_code)]
mod ffi;
mod log;
mod say;
mod wait;

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use say::{say, say_out};
use synaps_scope::doctor::diagnose;
use synaps_scope::intake::{self, BadInput};
use synaps_scope::{
    decide, decide_in_place, flush_warnings, inherited_env, set_env, Classified, Decision,
    DirectReason, ErrorClass, InPlace, InPlaceDecision, Launch, LauncherOptions, Limit, Limits,
    ResolveError, ScopeKind, ScopeLauncher, ScopeNotMade, Wrapper, EXEC_FAILED_STATUS,
};

/// Exit status when `required` mode refuses a launch.
const EXIT_REQUIRED_REFUSED: u8 = 3;
/// Exit status for bad input (clap's, for usage errors, too).
const EXIT_USAGE: u8 = 2;

/// The command line's one map from the core's classes of failure to its exit statuses.
fn exit_status(class: ErrorClass) -> u8 {
    match class {
        ErrorClass::InvalidInput => EXIT_USAGE,
        ErrorClass::Unavailable => EXIT_REQUIRED_REFUSED,
        // As a shell says of a command it cannot find.
        ErrorClass::NoSuchProgram => 127,
        ErrorClass::NoSuchScope
        | ErrorClass::Refused
        | ErrorClass::NotInScope
        | ErrorClass::TimedOut
        | ErrorClass::Manager
        | ErrorClass::NoCgroup2
        | ErrorClass::Io => 1,
    }
}

#[derive(Parser)]
#[command(
    name = "synaps-scope",
    version,
    about = "Run a command in its own systemd user scope, so that systemd-oomd kills only the runaway",
    after_help = "Environment: SYNAPS_PROCESS_SCOPES=on|off|required, SYNAPS_CONFIG=FILE,\n\
                  SYNAPS_SCOPE_LAUNCHER=auto|synaps-scope-exec|systemd-run, SYNAPS_SCOPE_EXEC=PATH,\n\
                  SYNAPS_SCOPE_LOG=a tracing filter such as warn (the default) or debug."
)]
struct Cli {
    #[command(subcommand)]
    command: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Execute PROGRAM in place, in its own systemd user scope when one can be had.
    ///
    /// Else directly, with a warning saying why; with this process's environment and working
    /// directory either way. Exit status: the command's own; 127 not found, 126 not executable,
    /// 3 when `required` mode refuses, 2 usage, 125 when the launcher program could not make the
    /// scope in `required` mode.
    ///
    /// With --wait, as systemd-run --wait: the command runs as a child, this process waits outside
    /// its scope until the scope is empty (the command and whatever it left there), says on stderr in one line how the scope ended (systemd-oomd and its rule, the
    /// kernel's OOM killer, a signal, an exit) with its memory peak and CPU time, and exits with
    /// the command's status (128+N for a signal N: 137 for the kernel's OOM kill). A signal sent
    /// to it by a process (TERM, INT, HUP, QUIT, USR1, USR2, WINCH) is passed to the command; the
    /// terminal's Ctrl-C reaches the command alone; killed outright, it leaves the command SIGTERM.
    Run {
        #[command(flatten)]
        request: Request,
        /// Run the command as a child, wait for it, and say how its scope ended.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        command: CommandName,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "PROGRAM [ARGS]")]
        argv: Vec<OsString>,
    },
    /// Print the command line `run` would execute.
    ///
    /// One argument per line (or NUL-terminated with -0), and the scope's unit name on stderr.
    Wrap {
        #[command(flatten)]
        request: Request,
        #[command(flatten)]
        command: CommandName,
        /// End each argument with NUL instead of a newline.
        #[arg(short = '0')]
        nul_separated: bool,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "PROGRAM [ARGS]")]
        argv: Vec<OsString>,
    },
    /// Report what was found, and why launches would be scoped or direct.
    ///
    /// Both kinds unless --kind. Exit status 0: scoped, 1: direct, 2: usage or bad input (an
    /// environment no process can hold), 3: `required` mode would refuse (as `run` exits then).
    Doctor {
        #[command(flatten)]
        request: Request,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// How the command names itself.
#[derive(Args)]
struct CommandName {
    /// The name PROGRAM sees as its own, argument zero (as `exec -a` sets it), e.g. -bash for a
    /// login shell.
    /// Through systemd-run, which cannot pass one, PROGRAM sees its own path instead.
    #[arg(long, value_name = "NAME", allow_hyphen_values = true)]
    argv0: Option<OsString>,
}

/// What every subcommand asks of the library.
#[derive(Args)]
struct Request {
    /// The kind of scope: its slice comes from tool_scope_slice or daemon_scope_slice.
    #[arg(long, value_parser = parse_kind)]
    kind: Option<ScopeKind>,
    /// The bound on the probe of the user manager, in milliseconds.
    #[arg(long = "probe-timeout-ms", value_name = "N", value_parser = parse_bound)]
    probe_timeout: Option<Duration>,
    /// A resource limit of the scope, as systemd-run takes it: MemoryMax, MemoryHigh,
    /// MemorySwapMax, CPUWeight, CPUQuota, TasksMax or IOWeight (-p MemoryMax=2G -p CPUQuota=200%).
    #[arg(short = 'p', long = "property", value_name = "NAME=VALUE", value_parser = parse_limit)]
    properties: Vec<Limit>,
}

impl Request {
    fn options(&self) -> LauncherOptions {
        let mut options = LauncherOptions::default();
        if let Some(bound) = self.probe_timeout {
            options.probe_timeout = bound;
        }
        options
    }
}

fn parse_bound(text: &str) -> Result<Duration, BadInput> {
    intake::bound_from_millis_text(text, "the bound")
}

fn parse_limit(text: &str) -> Result<Limit, BadInput> {
    text.parse()
}

fn parse_kind(text: &str) -> Result<ScopeKind, BadInput> {
    intake::kind_from_name(text)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    log::init();
    let env = inherited_env();
    let (request, command, argv, then) = match cli.command {
        Action::Doctor { request, json } => {
            let kinds = match request.kind {
                Some(kind) => vec![kind],
                None => vec![ScopeKind::Tool, ScopeKind::Daemon],
            };
            let report = diagnose(&env, &kinds, &request.options());
            if json {
                let json = serde_json::to_string(&report.json()).expect("plain data serializes");
                say_out!("{json}\n");
            } else {
                say_out!("{}", report.to_text());
            }
            return ExitCode::from(report.overall().code());
        }
        Action::Run {
            request,
            command,
            argv,
            wait,
        } => {
            let then = if wait { Then::Wait } else { Then::ExecInPlace };
            (request, command, argv, then)
        }
        Action::Wrap {
            request,
            command,
            nul_separated,
            argv,
        } => (request, command, argv, Then::Print { nul_separated }),
    };
    let limits = match request
        .properties
        .iter()
        .cloned()
        .try_fold(Limits::new(), Limits::with)
    {
        Ok(limits) => limits,
        Err(e) => {
            say!("synaps-scope: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };

    let kind = request.kind.unwrap_or(ScopeKind::Tool);
    // With --argv0, the program is argv[0] and the command sees NAME in its place.
    let program = argv[0].clone();
    let mut command_argv = argv;
    if let Some(argv0) = command.argv0 {
        command_argv[0] = argv0;
    }
    let options = request.options();
    // Taken before the manager is asked (the probe waits for children of its own, which an
    // inherited SIGCHLD ignored would take away): a signal sent meanwhile waits for the command.
    let relay = (then == Then::Wait).then(wait::Relay::new);
    let started = Instant::now();
    // This process ends with the exec (or the print) below, and a slice check still running on
    // its background thread would end with it, its warning unsaid: it gets what is left of the
    // request's bound, so the whole request still waits no longer than the bound.
    let flush = || {
        flush_warnings(options.probe_timeout.saturating_sub(started.elapsed()));
    };
    let decided = match then {
        // `run` with the launcher program: made by this process, as the launcher program would.
        Then::ExecInPlace if limits.is_empty() => {
            match decide_in_place(&env, kind, &options, &program, None) {
                Ok(InPlaceDecision::Entered {
                    launcher,
                    launch,
                    entered,
                }) => {
                    return exec_in_scope(&launcher, &launch, entered, &command_argv, &env, flush)
                }
                Ok(InPlaceDecision::Decided(decision)) => Ok(decision),
                Err(e) => Err(e),
            }
        }
        _ => decide(&env, kind, &options),
    };
    let decided = match decided {
        Ok(Decision::Scoped(launcher)) if !limits.is_empty() => {
            launcher.with_limits(limits).map(Decision::Scoped)
        }
        decided => decided,
    };
    let launcher = match decided {
        Ok(Decision::Scoped(launcher)) => Some(launcher),
        Ok(Decision::Direct(reason)) => {
            // A failed probe has already been warned about by the library; off is silent (R8).
            if !matches!(
                reason,
                DirectReason::Off { .. }
                    | DirectReason::ProbeFailed { .. }
                    | DirectReason::SystemdRunInPidNamespace { .. }
            ) {
                tracing::warn!(
                    target: synaps_scope::diag::TARGET,
                    "launching directly, not in a scope: {reason}"
                );
            }
            None
        }
        Err(e) => {
            tracing::error!(target: synaps_scope::diag::TARGET, "{e}");
            return ExitCode::from(exit_status(e.class()));
        }
    };
    if let Some(relay) = relay {
        return wait::run_and_wait(
            relay,
            launcher.as_ref(),
            &program,
            command_argv,
            &env,
            flush,
        );
    }
    // With limits, the scope is made here as the launcher program would make it.
    if let (Then::ExecInPlace, Some(launcher)) = (then, &launcher) {
        if matches!(launcher.wrapper(), Wrapper::Exec { .. }) {
            if let Some(launch) = launcher.in_place(&program, &env, None) {
                let entered = launcher.enter(&launch);
                return exec_in_scope(launcher, &launch, entered, &command_argv, &env, flush);
            }
        }
    }
    let launch = Launch::new(launcher.as_ref(), &program, command_argv, &env);
    if let Then::Print { nul_separated } = then {
        let status = print_argv(
            &launch.spawnable_argv(),
            launch.unit.as_deref(),
            nul_separated,
        );
        flush();
        return status;
    }
    flush();
    exec(&launch.program, &launch.argv[0], &launch.argv[1..], &env)
}

/// What `run` or `wrap` does once its request is decided.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Then {
    /// `run`: exec the command in place.
    ExecInPlace,
    /// `run --wait`: run it as a child and say how its scope ended.
    Wait,
    /// `wrap`: print the argv, each argument ended by NUL rather than a newline when asked.
    Print { nul_separated: bool },
}

/// `run` with the launcher program as the wrapper, done by this process itself as the launcher
/// program would do it: the scope was made for this process (`entered`), and the command is now
/// exec'd in place. One process and one connection to the manager fewer per launch, which is what
/// a burst of launches costs the manager most.
fn exec_in_scope(
    launcher: &ScopeLauncher,
    launch: &InPlace,
    entered: Result<(), ScopeNotMade>,
    argv: &[OsString],
    env: &[(OsString, OsString)],
    flush: impl Fn(),
) -> ExitCode {
    if let Err(not_made) = entered {
        let shown = launch.program.to_string_lossy();
        let required = launcher.required();
        say!(
            "synaps-scope: {}",
            not_made.message(&shown, &launch.unit, required)
        );
        if required {
            flush();
            return ExitCode::from(EXEC_FAILED_STATUS as u8);
        }
    }
    flush();
    exec(launch.program.as_os_str(), &argv[0], &argv[1..], env)
}

/// Execs `program` in place with `argv0` and `args`; returns only if the exec failed.
fn exec(
    program: &std::ffi::OsStr,
    argv0: &OsString,
    args: &[OsString],
    env: &[(OsString, OsString)],
) -> ExitCode {
    let mut cmd = Command::new(program);
    cmd.arg0(argv0).args(args);
    set_env(&mut cmd, env);
    let error = ResolveError::from_exec(program, cmd.exec());
    say!("synaps-scope: cannot run {error}");
    ExitCode::from(error.shell_status())
}

fn print_argv(argv: &[OsString], unit: Option<&str>, nul_separated: bool) -> ExitCode {
    let terminator = if nul_separated { b'\0' } else { b'\n' };
    let mut out = std::io::stdout().lock();
    for arg in argv {
        if out
            .write_all(arg.as_bytes())
            .and_then(|_| out.write_all(&[terminator]))
            .is_err()
        {
            return ExitCode::FAILURE;
        }
    }
    if out.flush().is_err() {
        return ExitCode::FAILURE;
    }
    match unit {
        Some(unit) => say!("synaps-scope: unit {unit}"),
        None => say!("synaps-scope: no scope (direct launch)"),
    }
    ExitCode::SUCCESS
}

//! `synaps-scope`: run or print a command line in its own systemd scope.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};
use std::time::Duration;

use synaps_scope::diag::{print_to_stderr, CallbackSubscriber};
use synaps_scope::doctor::diagnose;
use synaps_scope::{
    decide, inherited_env, set_env, Decision, DirectReason, LauncherOptions, ScopeKind,
};
use tracing::Level;

const USAGE: &str = "\
usage: synaps-scope run    [--kind tool|daemon] [--probe-timeout-ms N] -- PROGRAM [ARGS...]
       synaps-scope wrap   [--kind tool|daemon] [--probe-timeout-ms N] [-0] -- PROGRAM [ARGS...]
       synaps-scope doctor [--kind tool|daemon] [--probe-timeout-ms N] [--json]

run     executes PROGRAM in place, in a new systemd user scope when one can be had, else directly
        (with a warning saying why), with this process's environment and working directory.
wrap    prints the command line run would execute, one argument per line (-0: NUL-terminated),
        and the scope's unit name on stderr.
doctor  reports what was found and why launches would be scoped or direct (both kinds unless
        --kind); exit 0: scoped, 1: direct, 2: required mode would refuse.

Environment: SYNAPS_PROCESS_SCOPES=on|off|required, SYNAPS_CONFIG=FILE,
             SYNAPS_SCOPE_LOG=error|warn|info|debug|trace (default warn).";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Subcommand {
    Run,
    Wrap,
    Doctor,
}

/// What the command line asked for.
struct Request {
    command: Subcommand,
    kind: Option<ScopeKind>,
    options: LauncherOptions,
    nul_separated: bool,
    json: bool,
    argv: Vec<OsString>,
}

fn parse_args(mut args: impl Iterator<Item = OsString>) -> Result<Request, String> {
    let command = match args.next().as_deref().and_then(|a| a.to_str()) {
        Some("run") => Subcommand::Run,
        Some("wrap") => Subcommand::Wrap,
        Some("doctor") => Subcommand::Doctor,
        Some("-h" | "--help") | None => return Err(String::new()),
        Some(other) => return Err(format!("unknown command {other:?}")),
    };
    let mut request = Request {
        command,
        kind: None,
        options: LauncherOptions::default(),
        nul_separated: false,
        json: false,
        argv: Vec::new(),
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .and_then(|v| v.into_string().ok())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.to_str() {
            Some("--") if command != Subcommand::Doctor => {
                request.argv = args.collect();
                break;
            }
            Some("--kind") => {
                request.kind = Some(value("--kind")?.parse().map_err(|e| format!("{e}"))?)
            }
            Some("--probe-timeout-ms") => {
                let ms = value("--probe-timeout-ms")?;
                let ms: u64 = ms.parse().map_err(|_| {
                    format!("--probe-timeout-ms takes a whole number of milliseconds, not {ms:?}")
                })?;
                request.options.probe_timeout = Duration::from_millis(ms);
            }
            Some("-0") if command == Subcommand::Wrap => request.nul_separated = true,
            Some("--json") if command == Subcommand::Doctor => request.json = true,
            _ => {
                return Err(format!(
                    "unexpected argument {arg:?} (the command goes after --)"
                ))
            }
        }
    }
    if request.argv.is_empty() && command != Subcommand::Doctor {
        return Err("no command given after --".into());
    }
    Ok(request)
}

fn log_level() -> Level {
    std::env::var("SYNAPS_SCOPE_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(Level::WARN)
}

fn main() -> ExitCode {
    let request = match parse_args(std::env::args_os().skip(1)) {
        Ok(request) => request,
        Err(problem) if problem.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(problem) => {
            eprintln!("synaps-scope: {problem}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let env = inherited_env();
    let subscriber = CallbackSubscriber::new(log_level(), |level, _target, line| {
        print_to_stderr(level, line)
    });
    let _ = tracing::subscriber::set_global_default(subscriber);

    if request.command == Subcommand::Doctor {
        let kinds = match request.kind {
            Some(kind) => vec![kind],
            None => vec![ScopeKind::Tool, ScopeKind::Daemon],
        };
        let report = diagnose(&env, &kinds, &request.options);
        if request.json {
            println!("{}", report.to_json());
        } else {
            print!("{}", report.to_text());
        }
        return ExitCode::from(report.exit_code());
    }

    let kind = request.kind.unwrap_or(ScopeKind::Tool);
    let (argv, unit) = match decide(&env, kind, &request.options) {
        Ok(Decision::Scoped(launcher)) => {
            let wrapped = launcher.wrap(&request.argv, &env, None);
            (wrapped.argv, wrapped.unit)
        }
        Ok(Decision::Direct(reason)) => {
            // A failed probe has already been warned about by the library; off is silent (R8).
            if !matches!(
                reason,
                DirectReason::Off { .. } | DirectReason::ProbeFailed { .. }
            ) {
                eprintln!("synaps-scope: warning: launching directly, not in a scope: {reason}");
            }
            (request.argv, None)
        }
        Err(e) => {
            eprintln!("synaps-scope: error: {e}");
            return ExitCode::from(3);
        }
    };

    if request.command == Subcommand::Wrap {
        return print_argv(&argv, unit.as_deref(), request.nul_separated);
    }
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    set_env(&mut cmd, &env);
    let error = cmd.exec();
    eprintln!(
        "synaps-scope: cannot run {}: {error}",
        argv[0].to_string_lossy()
    );
    ExitCode::from(if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    })
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
        Some(unit) => eprintln!("synaps-scope: unit {unit}"),
        None => eprintln!("synaps-scope: no scope (direct launch)"),
    }
    ExitCode::SUCCESS
}

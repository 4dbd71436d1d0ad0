//! The probe (R5, R6): systemd-run with the launch's own flags running `true`, bounded, with
//! the effective environment. Its failure is reported once per slice (R11, module `warn`).

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::bounded::{self, RunFailure};
use crate::env::set_env;
use crate::resolve::resolve_program;

/// Runs `systemd-run <scope_flags> -- true` with the effective environment, cwd `/`, by
/// `deadline`. Ok means a user manager made a scope with exactly these flags.
pub(crate) fn probe(
    systemd_run: &Path,
    scope_flags: &[OsString],
    env: &[(OsString, OsString)],
    deadline: Instant,
) -> Result<(), String> {
    let true_program = resolve_program("true".as_ref(), env, Some(Path::new("/")))
        .map_err(|_| "no `true` program in PATH to probe with".to_owned())?;
    let mut cmd = Command::new(systemd_run);
    cmd.args(scope_flags)
        .arg("--")
        .arg(true_program)
        .current_dir("/");
    set_env(&mut cmd, env);
    let done = bounded::run(cmd, false, deadline).map_err(|failure| match failure {
        RunFailure::Spawn(e) => format!("systemd-run could not be started: {e}"),
        timed_out => format!("systemd-run {timed_out}"),
    })?;
    if done.status.success() {
        return Ok(());
    }
    let said = stderr_summary(&done.stderr);
    Err(if said.is_empty() {
        format!("systemd-run exited with {}", done.status)
    } else {
        format!("{said} ({})", done.status)
    })
}

/// systemd-run's complaint on one line, bounded in length.
pub(crate) fn stderr_summary(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let joined = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    match joined.char_indices().nth(400) {
        Some((cut, _)) => format!("{}…", &joined[..cut]),
        None => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_is_summarised_on_one_bounded_line() {
        assert_eq!(
            stderr_summary(b"\nFailed to start: no\n  second  \n"),
            "Failed to start: no; second"
        );
        assert_eq!(stderr_summary(&[b'x'; 1000]).chars().count(), 401);
    }
}

//! Running a helper process (`systemd-run --version`, the one the library still starts) with a
//! hard deadline (R6): on time-out it is killed and reaped, and the caller is never held past the
//! deadline.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How much of its output is kept; the rest is read and dropped so the child never blocks on a
/// full pipe.
const CAPTURE_LIMIT: usize = 16 * 1024;

/// Why a helper gave no answer.
#[derive(Debug)]
pub(crate) enum RunFailure {
    /// It could not be started.
    Spawn(std::io::Error),
    /// It was still running at the deadline, and was killed and reaped.
    TimedOut(Duration),
}

impl std::fmt::Display for RunFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunFailure::Spawn(e) => write!(f, "could not be started: {e}"),
            RunFailure::TimedOut(after) => write!(f, "timed out after {} ms", after.as_millis()),
        }
    }
}

/// Runs `cmd` (stdin and stderr null) until it exits or `deadline` passes, and returns what it
/// wrote on stdout. The reader runs on a thread so the caller wakes as soon as the pipe closes
/// instead of polling on a timer.
pub(crate) fn run(mut cmd: Command, deadline: Instant) -> Result<Vec<u8>, RunFailure> {
    let started = Instant::now();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().map_err(RunFailure::Spawn)?;

    let (tx, rx) = mpsc::channel();
    let mut stdout = Vec::new();
    if let Some(out) = child.stdout.take() {
        if spawn_reader(out, tx) {
            // A grandchild may hold the pipe open after the child exits: then wait for the child.
            if let Ok(bytes) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                stdout = bytes;
            }
        }
    }
    match reap_by(&mut child, deadline) {
        Some(_) => Ok(stdout),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(RunFailure::TimedOut(started.elapsed()))
        }
    }
}

/// Starts a thread that reads `pipe` to its end, keeping the first [`CAPTURE_LIMIT`] bytes.
/// Returns whether it started (if no thread could be had, the pipe is dropped and the child sees
/// EPIPE rather than the caller waiting on it).
fn spawn_reader<R: Read + Send + 'static>(mut pipe: R, tx: mpsc::Sender<Vec<u8>>) -> bool {
    let spawned = thread::Builder::new()
        .name("synaps-scope-pipe".into())
        .spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let room = CAPTURE_LIMIT.saturating_sub(kept.len());
                        kept.extend_from_slice(&buf[..n.min(room)]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = tx.send(kept);
        });
    spawned.is_ok()
}

/// Reaps `child` if it exits by `deadline`. The child has normally exited already (its pipes
/// closed), so the first check succeeds; the short sleeps only cover a child that closed its
/// pipes early or a grandchild that still holds them.
fn reap_by(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    let mut pause = Duration::from_micros(50);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_stdout_only() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let stdout = run(cmd, Instant::now() + Duration::from_secs(5)).unwrap();
        assert_eq!(stdout, b"out\n");
    }

    #[test]
    fn a_hung_child_is_killed_at_the_deadline() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let start = Instant::now();
        let failure = run(cmd, start + Duration::from_millis(200)).unwrap_err();
        assert!(matches!(failure, RunFailure::TimedOut(_)), "{failure}");
        assert!(
            start.elapsed() < Duration::from_millis(700),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_grandchild_holding_the_pipe_does_not_hold_the_caller() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 3 & exit 0"]);
        let start = Instant::now();
        assert!(run(cmd, start + Duration::from_millis(300)).is_ok());
        assert!(
            start.elapsed() < Duration::from_millis(800),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn output_beyond_the_limit_is_drained_and_dropped() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "head -c 1000000 /dev/zero"]);
        let stdout = run(cmd, Instant::now() + Duration::from_secs(5)).unwrap();
        assert_eq!(stdout.len(), CAPTURE_LIMIT);
    }

    #[test]
    fn a_missing_program_is_a_spawn_failure() {
        let cmd = Command::new("/nonexistent/synaps-scope-test");
        assert!(matches!(
            run(cmd, Instant::now() + Duration::from_secs(1)),
            Err(RunFailure::Spawn(_))
        ));
    }
}

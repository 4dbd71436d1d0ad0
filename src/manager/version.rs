//! The version of a systemd-run (R3): the first line of `systemd-run --version`, asked once per
//! binary and kept for the life of the process, and what that version decides.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use crate::input::env::set_env;
use crate::manager::helper_process;
use crate::per_process::{lock, PerProcess};

/// The oldest systemd whose user manager the whole test suite runs against (Debian 11's 247).
pub const OLDEST_SUPPORTED_SYSTEMD: u32 = 247;

/// The first systemd whose systemd-run knows `--expand-environment`.
pub(crate) const EXPAND_ENVIRONMENT_SINCE: u32 = 254;

/// Whether a systemd-run of `version` gets `--expand-environment=no` (R3): from 254 on; an
/// unknown version counts as older.
pub(crate) fn disables_expansion(version: Option<u32>) -> bool {
    version.is_some_and(|v| v >= EXPAND_ENVIRONMENT_SINCE)
}

/// What is known of one systemd-run binary's version.
enum Slot {
    /// A request is asking it now; others wait for the answer, each no longer than its own bound.
    Asking,
    /// The answer, kept for the life of the process.
    Known(Option<u32>),
}

/// The parsed `systemd-run --version` of each binary path, asked once per process (A2: no
/// request waits on another's question past its own bound; a forked child asks for itself).
#[derive(Default)]
struct VersionCache {
    slots: Mutex<HashMap<PathBuf, Slot>>,
    answered: Condvar,
}

static VERSIONS: PerProcess<VersionCache> = PerProcess::new();

/// The most binaries whose answers are kept: a host whose requests name ever new ones (each
/// request's own PATH) forgets the answers once there are more, and asks again.
const VERSIONS_KEPT: usize = 64;

/// Clears an `Asking` slot that got no answer (a time-out, or a panic), so that a later request
/// asks again, and wakes the requests waiting on it.
struct AskingGuard<'a> {
    cache: &'a VersionCache,
    path: &'a Path,
    answer: Option<Option<u32>>,
}

impl Drop for AskingGuard<'_> {
    fn drop(&mut self) {
        let mut slots = lock(&self.cache.slots);
        if slots.len() >= VERSIONS_KEPT {
            slots.retain(|_, slot| matches!(slot, Slot::Asking));
        }
        match self.answer {
            Some(version) => slots.insert(self.path.to_owned(), Slot::Known(version)),
            None => slots.remove(self.path),
        };
        self.cache.answered.notify_all();
    }
}

/// The major version in the first line of `systemd-run --version` (`systemd 254 (254.5-1)`), or
/// None when it cannot be read (which counts as older than 254).
pub(crate) fn parse_version(output: &[u8]) -> Option<u32> {
    let first = output.split(|&b| b == b'\n').next()?;
    let first = std::str::from_utf8(first).ok()?;
    let mut words = first.split_whitespace();
    if words.next()? != "systemd" {
        return None;
    }
    parse_major(words.next()?)
}

/// The leading decimal number of a version string: `254` of `254.26-1~bpo12+1`, `256` of `256~rc3`.
pub(crate) fn parse_major(version: &str) -> Option<u32> {
    let digits = version.split(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse().ok()
}

/// The version of the systemd-run at `path`, asked once per process; a time-out or spawn failure
/// is not cached, so a later request asks again. A request that finds another asking waits for
/// that answer until its own `deadline` at most.
pub(crate) fn systemd_version(
    path: &Path,
    env: &[(OsString, OsString)],
    deadline: Instant,
) -> Result<Option<u32>, String> {
    let cache = VERSIONS.get();
    let mut slots = lock(&cache.slots);
    loop {
        match slots.get(path) {
            Some(Slot::Known(version)) => return Ok(*version),
            Some(Slot::Asking) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(format!(
                        "`{} --version` was still being asked by another request at this \
                         request's deadline",
                        path.display()
                    ));
                }
                slots = cache
                    .answered
                    .wait_timeout(slots, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            None => break,
        }
    }
    slots.insert(path.to_owned(), Slot::Asking);
    drop(slots);
    let mut guard = AskingGuard {
        cache: &cache,
        path,
        answer: None,
    };
    let mut cmd = Command::new(path);
    cmd.arg("--version").current_dir("/");
    set_env(&mut cmd, env);
    let stdout = helper_process::run(cmd, deadline)
        .map_err(|failure| format!("`{} --version` {failure}", path.display()))?;
    let version = parse_version(&stdout);
    guard.answer = Some(version);
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_from_the_first_line_only() {
        assert_eq!(
            parse_version(b"systemd 252 (252.38-1~deb12u1)\n+PAM +AUDIT"),
            Some(252)
        );
        assert_eq!(
            parse_version(b"systemd 254 (254.26-1~bpo12+1)\n"),
            Some(254)
        );
        assert_eq!(parse_version(b"systemd 256~rc3 (x)"), Some(256));
        assert_eq!(parse_version(b"garbage\nsystemd 254"), None);
        assert_eq!(parse_version(b"systemd"), None);
        assert_eq!(parse_version(b"systemd v254"), None);
        assert_eq!(parse_version(b""), None);
        assert_eq!(parse_version(b"\xff\xfe"), None);
        assert_eq!(parse_version(b"systemd 99999999999999999999"), None);
        // Found by fuzzing: words are split on any whitespace, leading whitespace included.
        assert_eq!(parse_version(b" \tsystemd\xc2\xa0254"), Some(254));
        assert_eq!(parse_version(b"  systemd   254 (x)"), Some(254));
    }

    #[test]
    fn manager_versions_keep_their_leading_number() {
        assert_eq!(parse_major("252.38-1~deb12u1"), Some(252));
        assert_eq!(parse_major("262.1-1"), Some(262));
        assert_eq!(parse_major("256~rc3"), Some(256));
        assert_eq!(parse_major("v254"), None);
        assert_eq!(parse_major(""), None);
    }
}

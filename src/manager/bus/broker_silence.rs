//! A session bus broker that went silent (stopped, stalled), remembered for a few seconds per
//! runtime directory, so that a burst of launches pays for its silence once rather than once per
//! launch: each launcher program is a process of its own and holds its turn with the manager
//! while it waits on the broker, so that every turn of a burst would spend its wait there, one
//! after another. The launch that finds the broker silent leaves a mark in `$XDG_RUNTIME_DIR`;
//! launches that come while the mark is fresh go to the manager's private socket at once, and the
//! first after it try the broker again.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// How long a silence is remembered: long enough for a burst, short enough that a broker that
/// woke up is used again soon.
const REMEMBERED: Duration = Duration::from_secs(5);

/// The mark's name in the runtime directory.
const MARK: &str = "synaps-scope.broker-silent";

fn mark(runtime: &OsStr) -> PathBuf {
    PathBuf::from(runtime).join(MARK)
}

/// What the runtime directory says of the broker.
pub(crate) enum Heard {
    /// Silent within the last [`REMEMBERED`].
    Silent,
    /// Silent once, longer ago: worth trying again, and the mark is cleared once it answers.
    SilentLongAgo,
    /// Nothing known against it.
    Nothing,
}

pub(crate) fn heard(runtime: &OsStr) -> Heard {
    let Ok(meta) = std::fs::metadata(mark(runtime)) else {
        return Heard::Nothing;
    };
    // A mark from the future (a clock set back) counts as fresh until the clock passes it.
    let age = meta
        .modified()
        .map(|at| SystemTime::now().duration_since(at).unwrap_or_default());
    match age {
        Ok(age) if age < REMEMBERED => Heard::Silent,
        _ => Heard::SilentLongAgo,
    }
}

/// Notes that the broker did not answer in time (a new mark, or a fresh time on the old one).
pub(crate) fn note_silent(runtime: &OsStr) {
    let _ = std::fs::write(mark(runtime), b"");
}

/// Notes that the broker answered: its mark, if any, goes.
pub(crate) fn note_answered(runtime: &OsStr) {
    let _ = std::fs::remove_file(mark(runtime));
}

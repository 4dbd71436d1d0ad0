//! Intake: what a caller hands over on any surface (an environment as pairs or `KEY=VALUE`
//! bytes, a bound in milliseconds or seconds, a pid, a kind or shell words by name or number)
//! becomes a checked value here, or a [`BadInput`] that says what is wrong with it. Each surface
//! only decodes its language's types (C strings, Python bytes, Node strings) and calls these, so
//! that a bad value is refused with the same class and words on every surface, and an environment
//! checked here is never checked again ([`CheckedEnv`]).

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use crate::input::env::inherited_env;
use crate::input::kind::{self, ScopeKind};
use crate::input::shell::ShellWords;

/// The largest process id there can be: `pid_t` is a signed 32-bit number.
pub const PID_MAX: u32 = i32::MAX as u32;

/// A value a caller gave that cannot be used: bad input, refused before anything runs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BadInput {
    /// An environment entry no process environment can hold.
    Env {
        /// Its place among the entries given, counting from 0.
        at: usize,
        /// What is wrong with it.
        refused: RefusedEnv,
    },
    /// A bound that cannot be one: zero, negative, not a number, or beyond the clock.
    Bound {
        /// The argument's name.
        what: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A number that no process can have as its id.
    Pid(i64),
    /// A kind that is neither `tool` nor `daemon`.
    Kind(String),
    /// Shell words that are neither positional nor joined.
    ShellWords(String),
    /// A resource limit that no launch may set: a name that is not one of
    /// [`crate::input::limits::Property`], a value that is not one for it, or a property given twice.
    Property {
        /// The property's name (with its value, when the value is what is wrong).
        name: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadInput::Env { at, refused } => write!(
                f,
                "environment entry {at} ({:?}) is refused: {}",
                refused.key, refused.problem
            ),
            BadInput::Bound { what, problem } => write!(f, "{what} {problem}"),
            BadInput::Pid(pid) => {
                write!(
                    f,
                    "pid must be a whole number from 1 to {PID_MAX}, not {pid}"
                )
            }
            BadInput::Kind(given) => kind::unknown_kind(f, given),
            BadInput::ShellWords(given) => write!(
                f,
                "unknown shell words {given} (expected positional or joined)"
            ),
            BadInput::Property { name, problem } => write!(f, "property {name} {problem}"),
        }
    }
}

impl std::error::Error for BadInput {}

/// An environment every process can hold: made only by the checks of this module, so that what
/// takes one never checks it again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckedEnv(Vec<(OsString, OsString)>);

impl CheckedEnv {
    /// Checks `pairs` (Rust, Python): refused at the first entry with an empty key, a key with
    /// `=` (it would read back as another key), or NUL in a key or value (exec cannot pass it).
    pub fn from_pairs(pairs: Vec<(OsString, OsString)>) -> Result<Self, BadInput> {
        check_pairs(&pairs)?;
        Ok(CheckedEnv(pairs))
    }

    /// Splits `KEY=VALUE` entries (C's `envp`, Node) at their first `=`, and checks them as
    /// [`CheckedEnv::from_pairs`] does; an entry without `=` is refused too. Keys and values are
    /// bytes; a value may be empty or hold further `=`.
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = &'a [u8]>) -> Result<Self, BadInput> {
        let pairs = entries
            .into_iter()
            .enumerate()
            .map(|(at, entry)| {
                let Some(split) = entry.iter().position(|&b| b == b'=') else {
                    return Err(refused(at, entry, "it has no '=' (expected KEY=VALUE)"));
                };
                let (key, value) = (&entry[..split], &entry[split + 1..]);
                match problem(key, value) {
                    Some(why) => Err(refused(at, key, why)),
                    None => Ok((
                        OsStr::from_bytes(key).to_owned(),
                        OsStr::from_bytes(value).to_owned(),
                    )),
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(CheckedEnv(pairs))
    }

    /// This process's environment ([`crate::inherited_env`]), checked like any other: a parent can
    /// hand a process entries (`=A=B`) that read back with a key no child can be given.
    pub fn inherited() -> Result<Self, BadInput> {
        Self::from_pairs(inherited_env())
    }

    /// The entries, in order.
    pub fn as_pairs(&self) -> &[(OsString, OsString)] {
        &self.0
    }

    /// The entries, in order, owned.
    pub fn into_pairs(self) -> Vec<(OsString, OsString)> {
        self.0
    }
}

/// An environment entry that no process environment can hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedEnv {
    /// The entry's key.
    pub key: OsString,
    /// What is wrong with it.
    pub problem: &'static str,
}

impl fmt::Display for RefusedEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "environment entry {:?} is refused: {}",
            self.key, self.problem
        )
    }
}

impl std::error::Error for RefusedEnv {}

/// Refuses an environment that no process can hold: an empty key, a key with `=`, a NUL byte in
/// a key or value (the one rule of [`CheckedEnv`]).
pub fn check_env(env: &[(OsString, OsString)]) -> Result<(), RefusedEnv> {
    match first_refused(env) {
        Some((_, refused)) => Err(refused),
        None => Ok(()),
    }
}

/// The check of [`CheckedEnv::from_pairs`], for the API that takes an environment as a slice.
pub(crate) fn check_pairs(pairs: &[(OsString, OsString)]) -> Result<(), BadInput> {
    match first_refused(pairs) {
        Some((at, refused)) => Err(BadInput::Env { at, refused }),
        None => Ok(()),
    }
}

/// The first entry of `pairs` no process environment can hold, its place and why.
pub(crate) fn first_refused(pairs: &[(OsString, OsString)]) -> Option<(usize, RefusedEnv)> {
    pairs.iter().enumerate().find_map(|(at, (key, value))| {
        problem(key.as_bytes(), value.as_bytes()).map(|problem| {
            let refused = RefusedEnv {
                key: key.clone(),
                problem,
            };
            (at, refused)
        })
    })
}

/// What is wrong with an entry no process environment can hold, if anything.
fn problem(key: &[u8], value: &[u8]) -> Option<&'static str> {
    if key.is_empty() {
        Some("its key is empty")
    } else if key.contains(&b'=') {
        Some("its key contains '='")
    } else if key.contains(&0) || value.contains(&0) {
        Some("it contains a NUL byte")
    } else {
        None
    }
}

fn refused(at: usize, key: &[u8], problem: &'static str) -> BadInput {
    BadInput::Env {
        at,
        refused: RefusedEnv {
            key: OsStr::from_bytes(key).to_owned(),
            problem,
        },
    }
}

/// A bound given in milliseconds (C, Node, the command line); `what` names it in the error.
pub fn bound_from_millis(ms: u64, what: &str) -> Result<Duration, BadInput> {
    match ms {
        0 => Err(bad_bound(what, "is 0 ms".to_owned())),
        ms => Ok(Duration::from_millis(ms)),
    }
}

/// A bound given as text in milliseconds (the command line); `what` names it in the error.
pub fn bound_from_millis_text(text: &str, what: &str) -> Result<Duration, BadInput> {
    match text.parse::<u64>() {
        Ok(ms) => bound_from_millis(ms, what),
        Err(_) => Err(bad_bound(
            what,
            format!("must be a whole number of milliseconds from 1, not {text:?}"),
        )),
    }
}

/// A bound given in seconds (Python); `what` names it in the error.
pub fn bound_from_secs(seconds: f64, what: &str) -> Result<Duration, BadInput> {
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(bad_bound(
            what,
            format!("must be a positive number of seconds, not {seconds}"),
        ));
    }
    match Duration::try_from_secs_f64(seconds) {
        Ok(bound) if bound.is_zero() => Err(bad_bound(
            what,
            format!("of {seconds} seconds is shorter than a nanosecond"),
        )),
        Ok(bound) => Ok(bound),
        Err(e) => Err(bad_bound(what, format!("of {seconds} seconds: {e}"))),
    }
}

fn bad_bound(what: &str, problem: String) -> BadInput {
    BadInput::Bound {
        what: what.to_owned(),
        problem,
    }
}

/// `pid` as a process id: a whole number from 1 to [`PID_MAX`] (`pid_t` is signed, and 0 names
/// no process).
pub fn pid(pid: i64) -> Result<u32, BadInput> {
    match u32::try_from(pid) {
        Ok(valid @ 1..=PID_MAX) => Ok(valid),
        _ => Err(BadInput::Pid(pid)),
    }
}

/// A kind by name: `tool` or `daemon` ([`ScopeKind`]'s own `FromStr`).
pub fn kind_from_name(name: &str) -> Result<ScopeKind, BadInput> {
    name.parse()
        .map_err(|_: kind::UnknownKind| BadInput::Kind(format!("{name:?}")))
}

/// A kind by number (the C ABI's `SCOPE_KIND_*`): [`ScopeKind::code`].
pub fn kind_from_code(code: u32) -> Result<ScopeKind, BadInput> {
    ScopeKind::ALL
        .into_iter()
        .find(|kind| kind.code() == code)
        .ok_or_else(|| BadInput::Kind(code.to_string()))
}

/// Shell words by number (the C ABI's `SCOPE_SHELL_WORDS_*`): [`ShellWords::code`].
pub fn shell_words_from_code(code: u32) -> Result<ShellWords, BadInput> {
    ShellWords::ALL
        .into_iter()
        .find(|how| how.code() == code)
        .ok_or_else(|| BadInput::ShellWords(code.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(k: &[u8], v: &[u8]) -> (OsString, OsString) {
        (
            OsStr::from_bytes(k).to_owned(),
            OsStr::from_bytes(v).to_owned(),
        )
    }

    fn problem_of(result: Result<CheckedEnv, BadInput>) -> Option<(usize, &'static str)> {
        match result {
            Err(BadInput::Env { at, refused }) => Some((at, refused.problem)),
            _ => None,
        }
    }

    #[test]
    fn pairs_and_entries_are_refused_for_the_same_reasons() {
        let good = vec![pair(b"PATH", b"/bin"), pair(b"A", b"x=y"), pair(b"E", b"")];
        assert_eq!(
            CheckedEnv::from_pairs(good.clone()).unwrap().as_pairs(),
            &good[..]
        );
        let entries: [&[u8]; 3] = [b"PATH=/bin", b"A=x=y", b"E="];
        assert_eq!(
            CheckedEnv::from_entries(entries).unwrap().into_pairs(),
            good
        );
        for (key, value, why) in [
            (&b""[..], &b"x"[..], "its key is empty"),
            (b"A=B", b"x", "its key contains '='"),
            (b"A\0", b"x", "it contains a NUL byte"),
            (b"A", b"x\0", "it contains a NUL byte"),
        ] {
            let pairs = vec![pair(b"PATH", b"/bin"), pair(key, value)];
            assert_eq!(problem_of(CheckedEnv::from_pairs(pairs)), Some((1, why)));
        }
        for (entry, why) in [
            (&b"=x"[..], "its key is empty"),
            (b"A\0=x", "it contains a NUL byte"),
            (b"NOEQUALS", "it has no '=' (expected KEY=VALUE)"),
            (b"", "it has no '=' (expected KEY=VALUE)"),
        ] {
            let entries: [&[u8]; 2] = [b"PATH=/bin", entry];
            assert_eq!(
                problem_of(CheckedEnv::from_entries(entries)),
                Some((1, why))
            );
        }
        let (_, value) = &CheckedEnv::from_entries([&b"X=\xff\xfe"[..]]).unwrap().0[0];
        assert_eq!(value.as_bytes(), b"\xff\xfe");
    }

    #[test]
    fn a_bound_is_refused_unless_it_is_a_positive_time_the_clock_can_hold() {
        assert_eq!(bound_from_millis(1, "t"), Ok(Duration::from_millis(1)));
        assert_eq!(
            bound_from_millis(0, "t").unwrap_err().to_string(),
            "t is 0 ms"
        );
        assert_eq!(
            bound_from_millis_text("250", "t"),
            Ok(Duration::from_millis(250))
        );
        for refused in ["0", "-1", "1.5", "", "x"] {
            assert!(bound_from_millis_text(refused, "t").is_err(), "{refused}");
        }
        assert_eq!(bound_from_secs(0.25, "t"), Ok(Duration::from_millis(250)));
        for refused in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-12, 1e30] {
            assert!(bound_from_secs(refused, "t").is_err(), "{refused}");
        }
        assert!(
            bound_from_secs(1e19, "t").is_ok(),
            "as long as the clock holds"
        );
    }

    #[test]
    fn a_pid_is_a_whole_number_from_1_to_pid_max() {
        assert_eq!(pid(1), Ok(1));
        assert_eq!(pid(PID_MAX.into()), Ok(PID_MAX));
        for refused in [0, -1, i64::from(PID_MAX) + 1, i64::MAX, i64::MIN] {
            assert_eq!(pid(refused), Err(BadInput::Pid(refused)));
        }
    }

    #[test]
    fn names_and_numbers_are_read_by_the_values_own_table() {
        for kind in ScopeKind::ALL {
            assert_eq!(kind_from_name(kind.as_str()), Ok(kind));
            assert_eq!(kind_from_code(kind.code()), Ok(kind));
        }
        assert_eq!(
            kind_from_name("Tool"),
            Err(BadInput::Kind("\"Tool\"".into()))
        );
        assert_eq!(kind_from_code(2), Err(BadInput::Kind("2".into())));
        for how in ShellWords::ALL {
            assert_eq!(shell_words_from_code(how.code()), Ok(how));
        }
        assert_eq!(
            shell_words_from_code(7),
            Err(BadInput::ShellWords("7".into()))
        );
    }
}

//! The child's environment (R14): a snapshot of the parent's, overrides on top, and the one
//! block that the probe, program resolution and the child all see.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::process::Command;

/// Snapshots the process environment, to be taken before child-specific overrides are applied.
pub fn inherited_env() -> Vec<(OsString, OsString)> {
    std::env::vars_os().collect()
}

/// The effective environment: `inherited` with each of `overrides` set on top (a key that is
/// already present is replaced in place; a new key is appended).
pub fn with_overrides(
    inherited: &[(OsString, OsString)],
    overrides: &[(OsString, OsString)],
) -> Vec<(OsString, OsString)> {
    let mut env = inherited.to_vec();
    for (key, value) in overrides {
        match env.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value.clone(),
            None => env.push((key.clone(), value.clone())),
        }
    }
    env
}

/// Gives `cmd` exactly `env` (clearing everything else), so the child sees what the probe and
/// program resolution saw.
pub fn set_env(cmd: &mut Command, env: &[(OsString, OsString)]) {
    cmd.env_clear();
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
}

/// Why a `KEY=VALUE` environment entry was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvEntryError {
    /// The entry has no `=`.
    NoEquals,
    /// The entry starts with `=`: its key is empty.
    EmptyKey,
}

impl fmt::Display for EnvEntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EnvEntryError::NoEquals => "it has no '=' (expected KEY=VALUE)",
            EnvEntryError::EmptyKey => "its key is empty (expected KEY=VALUE)",
        })
    }
}

impl std::error::Error for EnvEntryError {}

/// Splits one `KEY=VALUE` entry of an `environ`-style block at its first `=`. Keys and values
/// are bytes; the value may be empty or contain further `=`.
pub fn parse_env_entry(entry: &[u8]) -> Result<(OsString, OsString), EnvEntryError> {
    let at = entry
        .iter()
        .position(|&b| b == b'=')
        .ok_or(EnvEntryError::NoEquals)?;
    if at == 0 {
        return Err(EnvEntryError::EmptyKey);
    }
    let (key, value) = (&entry[..at], &entry[at + 1..]);
    Ok((
        OsStr::from_bytes(key).to_owned(),
        OsStr::from_bytes(value).to_owned(),
    ))
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

/// Refuses an environment that no process can hold, as every surface does before anything else
/// (`docs/surfaces.md`): an empty key, a key with `=`, a NUL byte in a key or value.
pub fn check_env(env: &[(OsString, OsString)]) -> Result<(), RefusedEnv> {
    match refused_entry(env) {
        Some((key, problem)) => Err(RefusedEnv {
            key: key.to_owned(),
            problem,
        }),
        None => Ok(()),
    }
}

/// The first entry of `env` that no process environment can hold, and why: an empty key, a key
/// with `=` (it would read back as another key), or NUL in a key or value (exec cannot pass it).
/// Every surface refuses such an environment (`docs/surfaces.md`).
fn refused_entry(env: &[(OsString, OsString)]) -> Option<(&OsStr, &'static str)> {
    env.iter().find_map(|(key, value)| {
        let why = if key.is_empty() {
            "its key is empty"
        } else if key.as_bytes().contains(&b'=') {
            "its key contains '='"
        } else if key.as_bytes().contains(&0) || value.as_bytes().contains(&0) {
            "it contains a NUL byte"
        } else {
            return None;
        };
        Some((key.as_os_str(), why))
    })
}

/// The value of `key` in `env`; the last entry wins, as it does for [`Command::envs`].
pub(crate) fn lookup<'a>(env: &'a [(OsString, OsString)], key: &str) -> Option<&'a OsStr> {
    env.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_os_str())
}

/// Like [`lookup`], treating an empty value as unset.
pub(crate) fn lookup_non_empty<'a>(
    env: &'a [(OsString, OsString)],
    key: &str,
) -> Option<&'a OsStr> {
    lookup(env, key).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_a_process_environment_cannot_hold_are_found() {
        let pair = |k: &[u8], v: &[u8]| {
            (
                OsStr::from_bytes(k).to_owned(),
                OsStr::from_bytes(v).to_owned(),
            )
        };
        assert_eq!(
            refused_entry(&[pair(b"PATH", b"/bin"), pair(b"A", b"x=y")]),
            None
        );
        for (env, why) in [
            (vec![pair(b"", b"x")], "its key is empty"),
            (
                vec![pair(b"PATH", b"/bin"), pair(b"A=B", b"x")],
                "its key contains '='",
            ),
            (vec![pair(b"A\0", b"x")], "it contains a NUL byte"),
            (vec![pair(b"A", b"x\0")], "it contains a NUL byte"),
        ] {
            assert_eq!(refused_entry(&env).map(|(_, w)| w), Some(why), "{env:?}");
        }
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        items.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn overrides_replace_in_place_and_append_new_keys() {
        let env = with_overrides(
            &pairs(&[("A", "1"), ("B", "2")]),
            &pairs(&[("B", "3"), ("C", "4")]),
        );
        assert_eq!(env, pairs(&[("A", "1"), ("B", "3"), ("C", "4")]));
    }

    #[test]
    fn lookup_takes_the_last_entry_and_can_ignore_empty_values() {
        let env = pairs(&[("A", "1"), ("A", "2"), ("E", "")]);
        assert_eq!(lookup(&env, "A"), Some(OsStr::new("2")));
        assert_eq!(lookup(&env, "E"), Some(OsStr::new("")));
        assert_eq!(lookup_non_empty(&env, "E"), None);
        assert_eq!(lookup(&env, "missing"), None);
    }

    #[test]
    fn entries_split_at_the_first_equals_sign() {
        let (k, v) = parse_env_entry(b"A=b=c").unwrap();
        assert_eq!((k.as_bytes(), v.as_bytes()), (&b"A"[..], &b"b=c"[..]));
        let (k, v) = parse_env_entry(b"E=").unwrap();
        assert_eq!((k.as_bytes(), v.as_bytes()), (&b"E"[..], &b""[..]));
        let (_, v) = parse_env_entry(b"X=\xff\xfe").unwrap();
        assert_eq!(v.as_bytes(), b"\xff\xfe");
        assert_eq!(parse_env_entry(b"NOEQUALS"), Err(EnvEntryError::NoEquals));
        assert_eq!(parse_env_entry(b""), Err(EnvEntryError::NoEquals));
        assert_eq!(parse_env_entry(b"=value"), Err(EnvEntryError::EmptyKey));
    }

    #[test]
    fn set_env_clears_the_rest() {
        let mut cmd = Command::new("true");
        cmd.env("STALE", "x");
        set_env(&mut cmd, &pairs(&[("ONLY", "1")]));
        let seen: Vec<_> = cmd.get_envs().collect();
        assert_eq!(seen, vec![(OsStr::new("ONLY"), Some(OsStr::new("1")))]);
    }
}

//! The child's environment (R14): a snapshot of the parent's, overrides on top, and the one
//! block that the probe, program resolution and the child all see.

use std::ffi::{OsStr, OsString};
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
    fn set_env_clears_the_rest() {
        let mut cmd = Command::new("true");
        cmd.env("STALE", "x");
        set_env(&mut cmd, &pairs(&[("ONLY", "1")]));
        let seen: Vec<_> = cmd.get_envs().collect();
        assert_eq!(seen, vec![(OsStr::new("ONLY"), Some(OsStr::new("1")))]);
    }
}

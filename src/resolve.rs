//! Program resolution (R4): find the program as `execvp` in the child would, with the child's
//! PATH and cwd, so that systemd-run never applies its own search rules.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::env::{lookup, refused_entry};

/// glibc's search path for `execvp` when PATH is unset (`confstr(_CS_PATH)`).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// Resolves `program` to an absolute path as `execvp` in a child with environment `env` and
/// working directory `cwd` (None: this process's) would: a name containing `/` is taken relative
/// to `cwd`; otherwise each PATH entry is tried in order (an empty entry means `cwd`). Only an
/// executable regular file counts.
///
/// # Errors
/// `NotFound` when no such executable exists, which is also what spawning it would report;
/// `InvalidInput` for an environment no process can have (see [`crate::launcher_for_effective_env`]).
///
/// ```
/// use std::ffi::{OsStr, OsString};
/// let env = vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
/// let sh = synaps_scope::resolve_program(OsStr::new("sh"), &env, None).unwrap();
/// assert!(sh.is_absolute());
/// ```
pub fn resolve_program(
    program: &OsStr,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
) -> io::Result<PathBuf> {
    if let Some((key, problem)) = refused_entry(env) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("environment entry {key:?} is refused: {problem}"),
        ));
    }
    let cwd = child_cwd(cwd)?;
    let not_found = || {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{}: no such executable", program.to_string_lossy()),
        )
    };
    if program.is_empty() {
        return Err(not_found());
    }
    let found = if program.as_bytes().contains(&b'/') {
        which::which_in(program, None::<&OsStr>, &cwd)
    } else {
        let path = lookup(env, "PATH").unwrap_or(OsStr::new(DEFAULT_PATH));
        let entries: Vec<PathBuf> = std::env::split_paths(path)
            .map(|entry| cwd.join(entry))
            .collect();
        let search = std::env::join_paths(entries).map_err(|_| not_found())?;
        which::which_in(program, Some(search), &cwd)
    };
    found
        .map(|p| p.components().collect())
        .map_err(|_| not_found())
}

/// The child's working directory as an absolute path.
fn child_cwd(cwd: Option<&Path>) -> io::Result<PathBuf> {
    let here = || std::env::current_dir();
    match cwd {
        Some(dir) if dir.is_absolute() => Ok(dir.to_owned()),
        Some(dir) => Ok(here()?.join(dir)),
        None => here(),
    }
}

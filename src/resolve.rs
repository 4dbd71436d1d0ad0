//! Program resolution (R4): find the program as `execvp` in the child would, with the child's
//! PATH and cwd, so that systemd-run never applies its own search rules.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::env::{check_env, lookup};
use crate::memo::Shared;

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
    check_env(env).map_err(|refused| io::Error::new(io::ErrorKind::InvalidInput, refused))?;
    resolve_in(program, lookup(env, "PATH"), cwd)
}

/// [`resolve_program`] with the child's PATH given (None: unset, so the libc default applies).
pub(crate) fn resolve_in(
    program: &OsStr,
    path: Option<&OsStr>,
    cwd: Option<&Path>,
) -> io::Result<PathBuf> {
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
        let path = path.unwrap_or(OsStr::new(DEFAULT_PATH));
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

/// Whether `execve` would certainly refuse `program` as not a format it runs (ENOEXEC): a file
/// that is readable, is neither ELF nor a `#!` script, on a system with no `binfmt_misc` format
/// registered. Such a program is left unwrapped, so that its spawn fails as a direct one does,
/// rather than run through `/bin/sh` by systemd-run's `execvp`, or fail inside the launcher
/// program. Unreadable files, and any doubt, count as runnable.
pub(crate) fn execve_refuses_format(program: &Path) -> bool {
    // Remembered per file version (inode, size, modification time): a stat instead of an open
    // and a read for each wrap of the same program.
    let Ok(meta) = std::fs::metadata(program) else {
        return false;
    };
    let version = format!(
        "{}:{}:{}.{}:{}",
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        program.display()
    );
    if let Some(refuses) = FORMATS.with(|formats| formats.get_mut(&version).copied()) {
        return refuses;
    }
    let refuses = reads_as_no_format(program);
    FORMATS.with(|formats| formats.insert(&version, refuses));
    refuses
}

/// What [`execve_refuses_format`] found for each file version lately.
static FORMATS: Shared<bool> = Shared::new();

fn reads_as_no_format(program: &Path) -> bool {
    let mut head = Vec::with_capacity(4);
    let read = std::fs::File::open(program).and_then(|file| file.take(4).read_to_end(&mut head));
    if read.is_err() {
        return false;
    }
    if head.starts_with(b"#!") || head.starts_with(b"\x7fELF") {
        return false;
    }
    !binfmt_misc_has_formats()
}

/// Whether the kernel may run formats registered with `binfmt_misc` (enabled, with at least one
/// entry besides `register` and `status`).
fn binfmt_misc_has_formats() -> bool {
    let root = Path::new("/proc/sys/fs/binfmt_misc");
    let enabled = std::fs::read_to_string(root.join("status")).is_ok_and(|s| s.trim() == "enabled");
    enabled
        && std::fs::read_dir(root).is_ok_and(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|e| !matches!(e.file_name().as_bytes(), b"register" | b"status"))
        })
}

//! Program resolution (R4): find the program as `execvp` in the child would, with the child's
//! PATH and cwd, so that systemd-run never applies its own search rules.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustix::io::Errno;

use crate::input::env::lookup;
use crate::input::intake::{check_env, RefusedEnv};
use crate::memo::Shared;

/// glibc's search path for `execvp` when PATH is unset (`confstr(_CS_PATH)`).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// Why a program cannot be run: what `execvp` in the child would find, or what `execve` said.
#[derive(Debug)]
#[non_exhaustive]
pub enum ResolveError {
    /// No executable regular file by that name on the child's PATH, or at that path.
    NotFound {
        /// The program as given.
        program: OsString,
    },
    /// The file is there, but `execve` refused to run it (no permission, a format it does not
    /// run).
    NotExecutable {
        /// The program as given.
        program: OsString,
        /// What `execve` said.
        error: io::Error,
    },
    /// The child's working directory does not exist (or this process's own is gone).
    NoSuchDirectory {
        /// The directory.
        cwd: PathBuf,
    },
    /// The environment is one no process can hold.
    InvalidEnvironment(RefusedEnv),
}

impl ResolveError {
    /// What `execve` of `program` said, as the error of running it: a missing file (or a missing
    /// directory on its path) is [`ResolveError::NotFound`], anything else
    /// [`ResolveError::NotExecutable`].
    pub fn from_exec(program: &OsStr, error: io::Error) -> Self {
        let program = program.to_owned();
        match error.raw_os_error().map(Errno::from_raw_os_error) {
            Some(Errno::NOENT | Errno::NOTDIR) => ResolveError::NotFound { program },
            _ => ResolveError::NotExecutable { program, error },
        }
    }

    /// The status a shell exits with for this: 127 when there is nothing to run, 126 when what
    /// is there cannot be run, 2 (bad input) for an environment no process can hold.
    pub fn shell_status(&self) -> u8 {
        match self {
            ResolveError::NotFound { .. } | ResolveError::NoSuchDirectory { .. } => 127,
            ResolveError::NotExecutable { .. } => 126,
            ResolveError::InvalidEnvironment(_) => 2,
        }
    }
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::NotFound { program } => {
                write!(f, "{}: no such executable", program.to_string_lossy())
            }
            ResolveError::NotExecutable { program, error } => {
                write!(f, "{}: cannot be run: {error}", program.to_string_lossy())
            }
            ResolveError::NoSuchDirectory { cwd } => {
                write!(f, "{}: no such working directory", cwd.display())
            }
            ResolveError::InvalidEnvironment(refused) => refused.fmt(f),
        }
    }
}

impl std::error::Error for ResolveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ResolveError::NotExecutable { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// For the 1.0 [`resolve_program`], whose errors are `io::Error`s: the kind a caller of 1.0
/// matched on, and the [`ResolveError`] inside.
impl From<ResolveError> for io::Error {
    fn from(error: ResolveError) -> Self {
        let kind = match error {
            ResolveError::InvalidEnvironment(_) => io::ErrorKind::InvalidInput,
            ResolveError::NotExecutable { ref error, .. } => error.kind(),
            ResolveError::NotFound { .. } | ResolveError::NoSuchDirectory { .. } => {
                io::ErrorKind::NotFound
            }
        };
        io::Error::new(kind, error)
    }
}

/// Resolves `program` to an absolute path as `execvp` in a child with environment `env` and
/// working directory `cwd` (None: this process's) would: a name containing `/` is taken relative
/// to `cwd`; otherwise each PATH entry is tried in order (an empty entry means `cwd`). Only an
/// executable regular file counts.
///
/// # Errors
/// [`ResolveError::NotFound`] when no such executable exists, which is also what spawning it
/// would report; [`ResolveError::NoSuchDirectory`] when `cwd` does not exist;
/// [`ResolveError::InvalidEnvironment`] for an environment no process can have.
///
/// ```
/// use std::ffi::{OsStr, OsString};
/// let env = vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
/// let sh = synaps_scope::find_program(OsStr::new("sh"), &env, None).unwrap();
/// assert!(sh.is_absolute());
/// ```
pub fn find_program(
    program: &OsStr,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
) -> Result<PathBuf, ResolveError> {
    check_env(env).map_err(ResolveError::InvalidEnvironment)?;
    resolve_in_env(program, env, cwd)
}

/// [`find_program`] for an environment already checked: the PATH it names is searched.
pub(crate) fn resolve_in_env(
    program: &OsStr,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
) -> Result<PathBuf, ResolveError> {
    resolve_in(program, lookup(env, "PATH"), cwd)
}

/// [`find_program`], its errors as `io::Error`s (each carries the [`ResolveError`]).
///
/// # Errors
/// As [`find_program`]: `NotFound`, or `InvalidInput` for an environment no process can have.
#[deprecated(
    since = "1.1.0",
    note = "use find_program, whose errors are a ResolveError"
)]
pub fn resolve_program(
    program: &OsStr,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
) -> io::Result<PathBuf> {
    Ok(find_program(program, env, cwd)?)
}

/// [`find_program`] with the child's PATH given (None: unset, so the libc default applies), for
/// an environment already checked.
pub(crate) fn resolve_in(
    program: &OsStr,
    path: Option<&OsStr>,
    cwd: Option<&Path>,
) -> Result<PathBuf, ResolveError> {
    let cwd = child_cwd(cwd)?;
    let not_found = || {
        if cwd.is_dir() {
            ResolveError::NotFound {
                program: program.to_owned(),
            }
        } else {
            ResolveError::NoSuchDirectory { cwd: cwd.clone() }
        }
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
fn child_cwd(cwd: Option<&Path>) -> Result<PathBuf, ResolveError> {
    let here = || {
        std::env::current_dir().map_err(|_| ResolveError::NoSuchDirectory {
            cwd: PathBuf::from("."),
        })
    };
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

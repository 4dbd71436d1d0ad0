//! The launcher program, and where it is installed. Each artifact (the wheel, the npm package, the C
//! tarball, a cargo build) puts `synaps-scope-exec` beside the file that holds this code, or in
//! that file's `../libexec/synaps-scope/`, so a library finds its own copy with no configuration
//! wherever the artifact was unpacked. Which file holds this code is read from `/proc/self/maps`:
//! the mapping that contains one of this module's functions.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::input::inputs::Inputs;
use crate::input::resolve::resolve_in;
use crate::per_process::PerProcess;

/// The name of the project's launcher program.
pub const EXEC_PROGRAM: &str = "synaps-scope-exec";
pub use crate::input::inputs::EXEC_VAR;
/// The exit status of the launcher program when it could not make the scope in `required` mode
/// (or was started wrongly): the command has not run. A command's own status 125 is rare (it is
/// what `env`, `nice` and `timeout` use for their own failures, for the same reason).
pub const EXEC_FAILED_STATUS: i32 = 125;

/// Where packages install the launcher program system-wide.
pub(crate) const SYSTEM_LIBEXEC_DIRS: [&str; 2] = [
    "/usr/local/libexec/synaps-scope",
    "/usr/libexec/synaps-scope",
];

/// The launcher program found, and the rule that found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecProgram {
    /// Its absolute path.
    pub path: PathBuf,
    /// How it was found.
    pub found_by: FoundBy,
}

/// The rules, in the order they are tried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FoundBy {
    /// `SYNAPS_SCOPE_EXEC` names it.
    Variable,
    /// It sits beside the library or program (the path) that holds this code: a wheel, an npm
    /// package, a cargo build.
    BesideOwnFile(PathBuf),
    /// It sits in `../libexec/synaps-scope/` of the library or program that holds this code: the C
    /// tarball, or any `PREFIX/lib` + `PREFIX/libexec` install.
    OwnLibexec(PathBuf),
    /// The effective PATH finds it.
    Path,
    /// It is in a system libexec directory.
    SystemLibexec,
}

impl fmt::Display for FoundBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FoundBy::Variable => write!(f, "named by {EXEC_VAR}"),
            FoundBy::BesideOwnFile(own) => write!(f, "beside {}", own.display()),
            FoundBy::OwnLibexec(own) => {
                write!(f, "in the libexec directory of {}", own.display())
            }
            FoundBy::Path => write!(f, "found in PATH"),
            FoundBy::SystemLibexec => write!(f, "in the system's libexec directory"),
        }
    }
}

/// Finds the launcher program for a request with `inputs`; Err says where it was looked for.
pub(crate) fn locate_exec_program(inputs: &Inputs<'_>) -> Result<ExecProgram, String> {
    if let Some(named) = inputs.exec_program {
        let path = Path::new(named);
        return match resolve_in(named, inputs.path, Some(Path::new("/"))) {
            Ok(found) if path.is_absolute() => Ok(ExecProgram {
                path: found,
                found_by: FoundBy::Variable,
            }),
            Ok(_) => Err(format!("{EXEC_VAR}={named:?} is not an absolute path")),
            Err(e) => Err(format!("{EXEC_VAR}={named:?}: {e}")),
        };
    }
    let is_program = |path: &Path| resolve_in(path.as_os_str(), inputs.path, None).ok();
    let found = |path: PathBuf, found_by: FoundBy| ExecProgram { path, found_by };
    let own = own_file();
    // Beside the file that holds this code, then in its ../libexec/synaps-scope.
    let own_candidates = own.as_deref().and_then(|own| {
        let dir = own.parent()?;
        Some([
            (
                dir.join(EXEC_PROGRAM),
                FoundBy::BesideOwnFile(own.to_owned()),
            ),
            (
                dir.join("../libexec/synaps-scope").join(EXEC_PROGRAM),
                FoundBy::OwnLibexec(own.to_owned()),
            ),
        ])
    });
    own_candidates
        .into_iter()
        .flatten()
        .find_map(|(candidate, found_by)| Some(found(is_program(&candidate)?, found_by)))
        .or_else(|| {
            resolve_in(OsStr::new(EXEC_PROGRAM), inputs.path, Some(Path::new("/")))
                .ok()
                .map(|path| found(path, FoundBy::Path))
        })
        .or_else(|| {
            SYSTEM_LIBEXEC_DIRS
                .iter()
                .find_map(|dir| is_program(&Path::new(dir).join(EXEC_PROGRAM)))
                .map(|path| found(path, FoundBy::SystemLibexec))
        })
        .ok_or_else(|| {
            let own = own.map_or_else(
                || "the file that holds this code (unknown)".to_owned(),
                |own| format!("{}", own.display()),
            );
            format!(
                "it is not beside {own} or in its ../libexec/synaps-scope, in PATH, or in {} \
                 (set {EXEC_VAR} to its path)",
                SYSTEM_LIBEXEC_DIRS.join(" or ")
            )
        })
}

/// The library or program this code was loaded from (the C library, the Python extension, or an
/// executable that links the crate), found once per process (a forked child keeps its parent's
/// answer, and never waits on a parent's thread that was finding it); the running executable where
/// `/proc/self/maps` cannot say. Every surface that names the library's file asks here.
pub fn own_file() -> Option<PathBuf> {
    static OWN: PerProcess<OwnFile> = PerProcess::new();
    OWN.get_inheriting(|parents| OwnFile(parents.0.clone()))
        .0
        .clone()
}

/// What [`own_file`] found, found when first asked for.
struct OwnFile(Option<PathBuf>);

impl Default for OwnFile {
    fn default() -> Self {
        let address = own_file as fn() -> Option<PathBuf> as usize;
        OwnFile(
            std::fs::read_to_string("/proc/self/maps")
                .ok()
                .and_then(|maps| maps.lines().find_map(|line| mapped_file(line, address)))
                .or_else(|| std::env::current_exe().ok()),
        )
    }
}

/// The file of one `/proc/self/maps` line, when its range holds `address`: `start-end perms
/// offset dev inode path`. A deleted file or an anonymous mapping is None.
fn mapped_file(line: &str, address: usize) -> Option<PathBuf> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    if !(start..end).contains(&address) {
        return None;
    }
    let path = fields.nth(4)?.trim_start();
    (path.starts_with('/') && !path.ends_with(" (deleted)")).then(|| PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_file_reads_the_line_that_holds_the_address() {
        let line =
            "7f00a000-7f00b000 r-xp 00001000 fd:01 1234                       /opt/x y/lib.so";
        assert_eq!(
            mapped_file(line, 0x7f00_a800),
            Some(PathBuf::from("/opt/x y/lib.so"))
        );
        assert_eq!(mapped_file(line, 0x7f00_b000), None);
        assert_eq!(mapped_file(line, 0x7f00_9fff), None);
        let anonymous = "7f00a000-7f00b000 rw-p 00000000 00:00 0 ";
        assert_eq!(mapped_file(anonymous, 0x7f00_a800), None);
        let stack = "7ffc0000-7ffd0000 rw-p 00000000 00:00 0                          [stack]";
        assert_eq!(mapped_file(stack, 0x7ffc_0800), None);
        let deleted = "7f00a000-7f00b000 r-xp 00000000 fd:01 9 /tmp/lib.so (deleted)";
        assert_eq!(mapped_file(deleted, 0x7f00_a800), None);
        assert_eq!(mapped_file("garbage", 1), None);
    }

    #[test]
    fn own_file_is_the_test_executable() {
        let exe = std::env::current_exe().unwrap().canonicalize().unwrap();
        assert_eq!(own_file(), Some(exe));
    }
}

//! Cgroup paths, found in one place for handles, their endings, `doctor` and the launcher
//! program: where the cgroup2 hierarchy is mounted, which cgroup a process is in, and a cgroup by
//! both its names (its path in the hierarchy, as /proc/PID/cgroup and the manager give it, and
//! its directory under the mount), each worked out once.

use std::fmt;
use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

/// Why a cgroup path could not be found.
#[derive(Debug)]
pub(crate) enum CgroupError {
    /// No cgroup2 hierarchy is mounted (or the process is in none).
    NoCgroup2,
    /// /proc could not be read.
    Io(io::Error),
}

impl fmt::Display for CgroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CgroupError::NoCgroup2 => f.write_str("no cgroup2 hierarchy is mounted"),
            CgroupError::Io(e) => write!(f, "cannot read /proc: {e}"),
        }
    }
}

impl From<io::Error> for CgroupError {
    fn from(e: io::Error) -> Self {
        CgroupError::Io(e)
    }
}

/// A cgroup by both its names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cgroup {
    /// Its path in the hierarchy, from its root: `/user.slice/…/synaps-tool-….scope`.
    path: String,
    /// Its directory under the cgroup2 mount.
    dir: PathBuf,
}

impl Cgroup {
    /// The cgroup at `path` in the hierarchy.
    pub(crate) fn at(path: &str) -> Result<Self, CgroupError> {
        let dir = mount()?.join(path.trim_start_matches('/'));
        Ok(Cgroup {
            path: path.to_owned(),
            dir,
        })
    }

    /// Its path in the hierarchy.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// Its directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The last name of the cgroup path `path`: a scope's unit name.
pub(crate) fn leaf_name(path: &str) -> Option<&str> {
    Path::new(path).file_name().and_then(|n| n.to_str())
}

/// Whether the cgroup path `inner` is `outer` or below it.
pub(crate) fn holds(outer: &str, inner: &str) -> bool {
    let outer = outer.trim_end_matches('/');
    inner == outer
        || inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The cgroup2 path of `pid` (the `0::` line of /proc/PID/cgroup).
pub(crate) fn of_process(pid: u32) -> Result<String, CgroupError> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_owned)
        .ok_or(CgroupError::NoCgroup2)
}

/// The calling process's own cgroup2 path.
pub(crate) fn own() -> Result<String, CgroupError> {
    of_process(std::process::id())
}

/// Whether this process is in the cgroup of `unit` in any hierarchy /proc/self/cgroup lists (the
/// unified one, or systemd's own named one on a legacy system); None when it cannot be read.
pub(crate) fn own_is_in_unit(unit: &str) -> Option<bool> {
    is_in_unit("self", unit)
}

/// Whether the process `pid` (a number, or `self`) is in the cgroup of `unit`, as
/// [`own_is_in_unit`] tells it.
pub(crate) fn is_in_unit(pid: &str, unit: &str) -> Option<bool> {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    Some(
        text.lines()
            .filter_map(|line| line.splitn(3, ':').nth(2))
            .any(|path| leaf_name(path) == Some(unit)),
    )
}

/// The cgroup directory at `dir`, open, where it is still the cgroup whose inode number is `ino`
/// (which the kernel never gives two cgroups in one boot): a cgroup made later at the same path is
/// not it. Held only while it is used, so that what a process keeps per cgroup is no descriptor.
pub(crate) fn open_same(dir: &Path, ino: u64) -> Option<OwnedFd> {
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    (rustix::fs::fstat(&fd).ok()?.st_ino == ino).then_some(fd)
}

/// The inode number of the cgroup directory at `dir`, where there is one.
pub(crate) fn inode_at(dir: &Path) -> Option<u64> {
    rustix::fs::stat(dir).ok().map(|meta| meta.st_ino)
}

/// Whether `e` says the cgroup was removed: gone before it was opened (ENOENT), or after (ENODEV,
/// which the kernel gives to reads and writes of an open file of a removed cgroup). The manager
/// removes a scope's cgroup as soon as its last process has died, so a removed cgroup is empty.
pub(crate) fn vanished(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(Errno::NODEV.raw_os_error())
}

/// Where the cgroup2 hierarchy is mounted, from /proc/self/mountinfo.
fn mount() -> Result<PathBuf, CgroupError> {
    let text = fs::read_to_string("/proc/self/mountinfo")?;
    text.lines()
        .find_map(mount_point)
        .ok_or(CgroupError::NoCgroup2)
}

/// The mount point of a mountinfo line whose file system type is cgroup2.
fn mount_point(line: &str) -> Option<PathBuf> {
    let (mount, fs) = line.split_once(" - ")?;
    if fs.split(' ').next()? != "cgroup2" {
        return None;
    }
    Some(PathBuf::from(unescape_mountinfo(mount.split(' ').nth(4)?)))
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal escapes.
fn unescape_mountinfo(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest
            .get(at + 1..at + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Whether any of the extended attributes `names` is on the cgroup open as `dir`, whatever its
/// value: a value too long for the buffer (ERANGE) is there all the same.
pub(crate) fn has_any_mark(dir: &std::os::fd::OwnedFd, names: &[&str]) -> bool {
    names.iter().any(|name| {
        let mut value = [0u8; 32];
        match rustix::fs::fgetxattr(dir, *name, &mut value) {
            Ok(n) => n > 0,
            Err(e) => e == rustix::io::Errno::RANGE,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup2_mount_point_with_escapes() {
        let line = "47 46 0:38 / /sys/fs/cgroup rw,relatime - cgroup2 none rw";
        assert_eq!(mount_point(line), Some(PathBuf::from("/sys/fs/cgroup")));
        let hybrid = "30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid shared:5 - cgroup2 cgroup2 rw,nsdelegate";
        assert_eq!(
            mount_point(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let v1 = "31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory";
        assert_eq!(mount_point(v1), None);
        assert_eq!(unescape_mountinfo(r"/a\040b\134c\"), "/a b\\c\\");
    }

    #[test]
    fn a_cgroup_holds_itself_and_what_is_below_it_only() {
        assert!(holds("/a/s.scope", "/a/s.scope"));
        assert!(holds("/a/s.scope/", "/a/s.scope/leaf"));
        assert!(!holds("/a/s.scope", "/a/s.scope2"));
        assert!(!holds("/a/s.scope/leaf", "/a/s.scope"));
        assert_eq!(leaf_name("/a/s.scope"), Some("s.scope"));
    }

    #[test]
    fn this_process_has_a_cgroup_and_its_directory_is_under_the_mount() {
        let own = own().expect("the test runs on cgroup2");
        let cgroup = Cgroup::at(&own).unwrap();
        assert_eq!(cgroup.path(), own);
        assert!(cgroup.dir().join("cgroup.procs").is_file(), "{cgroup:?}");
    }
}

//! The cgroups at and below one, walked with a few descriptors whatever the depth: a tool may nest
//! thousands of cgroups below its scope, and a walk that kept each level's directory open took
//! one descriptor per level (1,100 levels took a daemon from 7 descriptors to 1,112, and under the
//! 1,024 a service gets by default the walk saw nothing). Each directory is opened from its parent
//! (`openat`), so a path longer than the kernel takes is walked too, and its files are read
//! through its descriptor.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;

/// How `walk` has met a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Met {
    /// Entered, its subdirectories not yet listed.
    Entered,
    /// Listed, and found to have no subdirectory.
    Leaf,
}

/// One level of the walk: the directory's inode (to check the way back up) and its subdirectories.
struct Level {
    ino: u64,
    below: Vec<OsString>,
    next: usize,
}

/// Walks the directory `root` and every directory below it on the same file system, depth first,
/// with at most three descriptors open at once: a directory's subdirectories are listed in full
/// and it is closed before the first of them is entered, and the walk climbs back through `..`,
/// checked by device and inode (a cgroup cannot move to another parent; the walk ends rather than
/// go astray). A directory on another file system (a mount in the tree) is never entered. `visit`
/// sees each directory, its descriptor and its path, as [`Met::Entered`] before its
/// subdirectories are listed (so a watch it sets sees those made after), and says whether to go
/// below it; then as [`Met::Leaf`] each one found to have none. A directory gone before it could
/// be opened or listed is passed over; any other failure to open or list one (no permission, no
/// descriptor left) is the walk's answer once it has walked the rest, so that what it could not
/// see is never taken for nothing.
pub(crate) fn walk(
    root: &Path,
    mut visit: impl FnMut(BorrowedFd<'_>, &Path, Met) -> bool,
) -> io::Result<()> {
    let mut here = open_dir(rustix::fs::CWD, root)?;
    let device = rustix::fs::fstat(&here)?.st_dev;
    let mut path = root.to_path_buf();
    let mut levels: Vec<Level> = Vec::new();
    let mut unseen: Option<io::Error> = None;
    loop {
        // One not gone below, or that cannot be listed, is no leaf either.
        let below = match visit(here.as_fd(), &path, Met::Entered).then(|| subdirectories(&here)) {
            Some(Ok(below)) if below.is_empty() => {
                visit(here.as_fd(), &path, Met::Leaf);
                below
            }
            Some(Ok(below)) => below,
            Some(Err(e)) => {
                if !gone(&e) {
                    unseen.get_or_insert(e);
                }
                Vec::new()
            }
            None => Vec::new(),
        };
        let ino = rustix::fs::fstat(&here)?.st_ino;
        levels.push(Level {
            ino,
            below,
            next: 0,
        });
        // Down into the next subdirectory still there, climbing back as levels are done.
        loop {
            let Some(level) = levels.last_mut() else {
                return unseen.map_or(Ok(()), Err);
            };
            if let Some(name) = level.below.get(level.next) {
                level.next += 1;
                match open_dir(&here, name) {
                    Ok(child) => match rustix::fs::fstat(&child) {
                        Ok(meta) if meta.st_dev == device => {
                            here = child;
                            path.push(name);
                            break;
                        }
                        Ok(_) => {}
                        Err(e) => {
                            unseen.get_or_insert(e.into());
                        }
                    },
                    Err(e) if gone(&e) => {}
                    Err(e) => {
                        unseen.get_or_insert(e);
                    }
                }
                continue;
            }
            levels.pop();
            let Some(parent) = levels.last() else {
                return unseen.map_or(Ok(()), Err);
            };
            let up = open_dir(&here, "..")?;
            let meta = rustix::fs::fstat(&up)?;
            if (meta.st_dev, meta.st_ino) != (device, parent.ino) {
                return Err(io::Error::new(
                    io::ErrorKind::Other,
                    format!(
                        "{} is no longer below {}: the walk stops",
                        path.display(),
                        root.display()
                    ),
                ));
            }
            here = up;
            path.pop();
        }
    }
}

/// Whether `e` says a directory went away before it could be opened or listed (or was replaced by
/// what is not one), which the walk passes over.
fn gone(e: &io::Error) -> bool {
    [Errno::NOENT, Errno::NODEV, Errno::NOTDIR, Errno::LOOP]
        .iter()
        .any(|errno| e.raw_os_error() == Some(errno.raw_os_error()))
}

fn open_dir(at: impl AsFd, name: impl rustix::path::Arg) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(at, name, flags, Mode::empty())?)
}

/// The names of the directories in `dir`, read in full (the listing's own descriptor closed).
fn subdirectories(dir: &OwnedFd) -> io::Result<Vec<OsString>> {
    let mut names = Vec::new();
    for entry in Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        // A file system that gives no type (cgroupfs always does) is asked for it.
        let directory = match entry.file_type() {
            FileType::Unknown => {
                rustix::fs::statat(dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|meta| FileType::from_raw_mode(meta.st_mode) == FileType::Directory)
            }
            kind => kind == FileType::Directory,
        };
        if directory {
            names.push(OsString::from_vec(name.to_vec()));
        }
    }
    Ok(names)
}

/// A file of the cgroup open as `dir`, read whole (`memory.current`, `cgroup.procs`, …).
pub(crate) fn read_at(dir: BorrowedFd<'_>, name: &str) -> io::Result<String> {
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let file = rustix::fs::openat(dir, name, flags, Mode::empty())?;
    let mut text = String::new();
    io::Read::read_to_string(&mut std::fs::File::from(file), &mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory tree nested `depth` levels, each level one directory named `d`, built relative
    /// to its parent (its path outgrows what the kernel takes by path).
    fn nested(root: &Path, depth: usize) {
        let mut here = open_dir(rustix::fs::CWD, root).unwrap();
        for _ in 0..depth {
            rustix::fs::mkdirat(&here, "d", Mode::from_raw_mode(0o755)).unwrap();
            here = open_dir(&here, "d").unwrap();
        }
    }

    #[test]
    fn a_tree_deeper_than_a_path_is_walked_in_full() {
        let root = std::env::temp_dir().join(format!("synaps-tree-{}", std::process::id()));
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(root.join("side")).unwrap();
        nested(&root.join("side"), 3);
        nested(&root, 2100);
        let (mut entered, mut leaves) = (0, Vec::new());
        walk(&root, |dir, path, met| {
            if met == Met::Entered {
                entered += 1;
            } else {
                let depth = path.strip_prefix(&root).unwrap().components().count();
                assert!(rustix::fs::fstat(dir).is_ok());
                leaves.push(depth);
            }
            true
        })
        .unwrap();
        assert_eq!(entered, 1 + 2100 + 1 + 3);
        leaves.sort_unstable();
        assert_eq!(leaves, [4, 2100]);
        // rm removes a tree deeper than a path, each directory from its parent.
        let removed = std::process::Command::new("rm")
            .arg("-rf")
            .arg(&root)
            .status();
        assert!(removed.unwrap().success());
    }
}

//! A stand-in for systemd-oomd on a bus of a test's own (`tests/tools/oomd_standin.py`, named as
//! one: the real oomd acts in the virtual machine).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

/// `tests/tools/oomd_standin.py` on the bus at `address`, as oomd or (`--forger`) as a tool.
pub struct Standin {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Standin {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn start(address: &OsString, mode: Option<&str>) -> Standin {
        let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/oomd_standin.py");
        let mut child = Command::new("python3")
            .arg(tool)
            .arg(address)
            .args(mode)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the oomd stand-in");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(
            line.starts_with("ready :"),
            "the stand-in did not start: {line:?}"
        );
        Standin {
            child,
            stdin,
            stdout,
        }
    }

    /// Sends `Killed(cgroup, reason)` and waits until it is out.
    pub fn killed(&mut self, cgroup: &str, reason: &str) {
        writeln!(self.stdin, "kill {cgroup} {reason}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "sent");
    }

    /// oomd's whole kill of the cgroup at `dir` (`cgroup` from the hierarchy's root), in one turn
    /// of its loop as oomd makes it: its mark, the kill, `busy` of other work, its count and its
    /// signal, answering nothing on the bus meanwhile; waits until the signal is out. False where
    /// the cgroup was gone (oomd, finding no cgroup to mark, kills nothing and signals nothing).
    pub fn oomd_kill(&mut self, dir: &Path, cgroup: &str, reason: &str, busy: Duration) -> bool {
        writeln!(
            self.stdin,
            "oomd-kill {} {cgroup} {reason} {}",
            dir.display(),
            busy.as_millis()
        )
        .unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(
            matches!(line.trim(), "sent" | "gone"),
            "the stand-in said {line:?}"
        );
        line.trim() == "sent"
    }
}

impl Drop for Standin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

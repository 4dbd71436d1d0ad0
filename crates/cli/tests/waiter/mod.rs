//! What the `run --wait` tests share: the command line with the run's environment, and a shell at
//! a pseudo-terminal of the test's own for the terminal cases.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use synaps_scope::{inherited_env, launcher_for_env, set_env};

/// The environment of this run, its wrapper checked to be the one the run asked for.
pub fn run_env() -> Vec<(OsString, OsString)> {
    let env = inherited_env();
    let launcher = launcher_for_env(&env).unwrap().expect("the rig's manager");
    crate::common::assert_wrapper_under_test(&launcher);
    env
}

/// The command line with `args` and exactly `env`, its stdin closed, and every signal at its
/// default, as a supervisor starts it (a suite started in the background of a script, or under
/// nohup, inherits some ignored, which the waiter keeps so: the tests that ignore one say so).
pub fn cli(args: &[&str], env: &[(OsString, OsString)]) -> Command {
    let mut cmd = Command::new("env");
    cmd.arg(DEFAULT_SIGNALS)
        .arg(env!("CARGO_BIN_EXE_synaps-scope"))
        .args(args)
        .stdin(Stdio::null());
    set_env(&mut cmd, env);
    cmd
}

/// What `env` (coreutils 8.31 and later) is told so that the program it runs gets every signal at
/// its default.
const DEFAULT_SIGNALS: &str = "--default-signal";

/// A shell at a pseudo-terminal of the test's own, its controlling terminal, and what it wrote.
pub struct Terminal {
    master: File,
    pub seen: Arc<Mutex<Vec<u8>>>,
    shell: Child,
}

impl Terminal {
    pub fn new(env: &[(OsString, OsString)]) -> Terminal {
        use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let slave = OpenOptions::new()
            .read(true)
            .write(true)
            .open(name.to_str().unwrap())
            .unwrap();
        // A session of its own, with the terminal as its controlling one: job control as a
        // login's interactive shell has it, and every signal at its default as a login gets them
        // (a suite started in the background of a script inherits SIGINT and SIGQUIT ignored,
        // which every command would keep).
        let mut cmd = Command::new("env");
        cmd.arg(DEFAULT_SIGNALS)
            .args(["setsid", "-w", "-c", "bash", "--norc", "--noprofile", "-i"])
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave);
        set_env(&mut cmd, env);
        cmd.env("PS1", "$ ").env("TERM", "dumb");
        let shell = cmd.spawn().unwrap();
        let master = File::from(master);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (mut reader, kept) = (master.try_clone().unwrap(), Arc::clone(&seen));
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once the shell and every process on the terminal have closed it.
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                kept.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Terminal {
            master,
            seen,
            shell,
        }
    }

    pub fn type_in(&mut self, text: &str) {
        self.master.write_all(text.as_bytes()).unwrap();
    }

    /// Waits up to 20 s until the terminal showed `text` (after the `from`th byte); returns where
    /// it ended.
    pub fn shows(&self, text: &str, from: usize) -> usize {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let seen = String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned();
            if let Some(at) = seen[from..].find(text) {
                return from + at + text.len();
            }
            assert!(
                Instant::now() < end,
                "the terminal never showed {text:?} after byte {from}; it showed: {seen}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.shell.kill();
        let _ = self.shell.wait();
    }
}

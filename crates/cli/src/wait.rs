//! `run --wait`: the command runs in its scope as a child of this process, which waits outside the
//! scope until the scope is empty (the command and whatever it left there), then says in one line
//! how the scope ended (systemd-oomd and its rule, the kernel's OOM
//! killer, a signal, an exit), with its memory peak and CPU time, and exits with the command's
//! status (128+N for a signal N), as `systemd-run --wait` does.

use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rustix::io::{fcntl_setfd, FdFlags};
use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
use synaps_scope::limits::Property;
use synaps_scope::{
    set_env, Ending, Evidence, HandleError, Launch, OomdWatch, ResolveError, ScopeEnding,
    ScopeHandle, ScopeLauncher, Wrapper, DEFAULT_PROBE_TIMEOUT,
};

/// How often the scope's figures are read while it runs: they are gone once it is. A tool that
/// grows by 8 MB every 20 ms to its `MemoryMax` is read within one step of its peak.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);
/// Each wait for what the command left in its scope (repeated until the scope is empty).
const LEFT_BEHIND_WAIT: Duration = Duration::from_secs(3600);
/// How long the hold on the command waits for the scope to show the child.
const HANDLE_WAIT: Duration = Duration::from_secs(5);

/// Runs `launch` as a child and waits for it; `launcher` is the one it was wrapped by (None: a
/// direct launch). The summary line goes to stderr; the exit status is the command's.
pub(crate) fn run_and_wait(
    launcher: Option<&ScopeLauncher>,
    program: &OsString,
    argv: Vec<OsString>,
    env: &[(OsString, OsString)],
    flush: impl Fn(),
) -> ExitCode {
    let Some(launcher) = launcher else {
        let launch = Launch::new(None, program, argv, env);
        flush();
        let status = match spawn(&launch.program, &launch.argv, env) {
            Ok(mut child) => child.wait(),
            Err(e) => return cannot_run(program, e),
        };
        return match status {
            Ok(status) => {
                eprintln!("synaps-scope: not in a scope; the command {}", said(status));
                exit_code(status)
            }
            Err(e) => cannot_run(program, e),
        };
    };
    // The launcher program says whether it made the scope and holds the command until this end
    // is closed; systemd-run cannot.
    let hold = match launcher.wrapper() {
        Wrapper::Exec { .. } => match held_pair() {
            Ok(pair) => Some(pair),
            Err(e) => {
                eprintln!("synaps-scope: cannot make a socket pair: {e}");
                return ExitCode::from(1);
            }
        },
        _ => None,
    };
    let wrapped = launcher.wrap_holding(
        program,
        &argv,
        env,
        None,
        hold.as_ref().map(|(_, child_end)| child_end.as_raw_fd()),
    );
    let Some(unit) = wrapped.unit.clone() else {
        // Not resolvable: spawned as given, it fails as it would without scopes.
        return run_and_wait(None, program, argv, env, flush);
    };
    flush();
    let mut child = match spawn(&wrapped.argv[0], &wrapped.argv, env) {
        Ok(child) => child,
        Err(e) => return cannot_run(&wrapped.argv[0], e),
    };
    let mut not_made = false;
    let figures = Arc::new(Mutex::new(Figures::default()));
    let handle = match hold {
        Some((ours, child_end)) => {
            drop(child_end);
            match made(ours, launcher) {
                // Not made: the launcher program has said why, and runs the command unscoped.
                (Some(false), _ours) => {
                    not_made = true;
                    None
                }
                (_, ours) => {
                    let handle = handle_of(&unit, &mut child);
                    // Read once while the command is held: one that ends at once leaves an empty
                    // scope the manager removes before the first read after it could come.
                    if let Some(handle) = &handle {
                        lock(&figures).read(handle.cgroup_dir());
                    }
                    drop(ours);
                    handle
                }
            }
        }
        None => handle_of(&unit, &mut child),
    };
    // The command runs now (it was held until `ours` closed): the scope is watched.
    let done = Arc::new(AtomicBool::new(false));
    let sampler = handle.as_ref().map(|handle| {
        let (figures, done) = (Arc::clone(&figures), Arc::clone(&done));
        let dir = handle.cgroup_dir().to_owned();
        thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                lock(&figures).read(&dir);
                thread::sleep(SAMPLE_EVERY);
            }
        })
    });
    let _warnings = handle.as_ref().and_then(|handle| warn_of_oomd(handle, env));
    let status = child.wait();
    // The scope ends with the last of its processes: what the command left behind too. Its
    // figures are read at once (the manager removes an empty scope's cgroup within milliseconds),
    // and again once the last process has gone.
    if let Some(handle) = &handle {
        let read_now = || lock(&figures).read(handle.cgroup_dir());
        read_now();
        while let Err(HandleError::TimedOut { .. }) = handle.wait_empty(LEFT_BEHIND_WAIT) {
            read_now();
        }
        read_now();
    }
    done.store(true, Ordering::Relaxed);
    if let Some(sampler) = sampler {
        let _ = sampler.join();
    }
    let status = match status {
        Ok(status) => status,
        Err(e) => return cannot_run(program, e),
    };
    let figures = lock(&figures).clone();
    let how = match &handle {
        Some(handle) => told(&handle.ending(env, DEFAULT_PROBE_TIMEOUT), launcher),
        None if not_made => "not made, so the command ran without it".to_owned(),
        None => "how cannot be told: the scope could not be watched".to_owned(),
    };
    eprintln!(
        "synaps-scope: {unit}: {how}; the command {}; {figures}",
        said(status)
    );
    exit_code(status)
}

/// A watch that prints a line on stderr when systemd-oomd is on its way to killing the scope;
/// where oomd may act on it unseen (a rule covers it that cannot be followed here), a line that
/// says so. Nothing where oomd does not act on it (no oomd, no rule).
fn warn_of_oomd(handle: &ScopeHandle, env: &[(OsString, OsString)]) -> Option<OomdWatch> {
    let watch = handle.watch_oomd(env, DEFAULT_PROBE_TIMEOUT, |warning| {
        eprintln!("synaps-scope: {warning}");
    });
    match watch {
        Ok(watch) => Some(watch),
        Err(why) => {
            if why.oomd_may_act() {
                eprintln!("synaps-scope: no warning before systemd-oomd acts: {why}");
            }
            None
        }
    }
}

/// How the scope ended, with what that rests on, and the memory limit a kernel OOM kill met.
fn told(ending: &Ending, launcher: &ScopeLauncher) -> String {
    let mut how = ending.how.to_string();
    if let (ScopeEnding::KilledByKernelOom { .. }, Some(max)) =
        (&ending.how, launcher.limits().get(Property::MemoryMax))
    {
        how.push_str(&format!(" under {max}"));
    }
    if ending.evidence != Evidence::Nothing {
        how.push_str(&format!(" (told by {})", ending.evidence));
    }
    how
}

/// A socket pair: this process's end, and the child's, which it inherits.
fn held_pair() -> rustix::io::Result<(OwnedFd, OwnedFd)> {
    let (ours, child_end) = socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    fcntl_setfd(&child_end, FdFlags::empty())?;
    Ok((ours, child_end))
}

/// The launcher program's word on `ours`: whether it made the scope (None: it said nothing, and
/// ended or exec'd), within its own bound and a second more; and `ours`, to close once the scope
/// is watched.
fn made(ours: OwnedFd, launcher: &ScopeLauncher) -> (Option<bool>, OwnedFd) {
    let mut stream = UnixStream::from(ours);
    let _ = stream.set_read_timeout(Some(launcher.bound() + Duration::from_secs(1)));
    let mut word = [0u8];
    let said = match stream.read(&mut word) {
        Ok(1) => Some(word[0] == b'1'),
        _ => None,
    };
    (said, OwnedFd::from(stream))
}

/// A handle on `unit` once the child is in it; None when the child ended first or the scope
/// never showed it.
fn handle_of(unit: &str, child: &mut Child) -> Option<ScopeHandle> {
    let pid = child.id();
    let since = Instant::now();
    loop {
        match ScopeHandle::from_pid(unit, pid) {
            Ok(handle) => return Some(handle),
            Err(_) if since.elapsed() < HANDLE_WAIT => {}
            Err(e) => {
                eprintln!("synaps-scope: cannot watch {unit}: {e}");
                return None;
            }
        }
        if !matches!(child.try_wait(), Ok(None)) {
            return None;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// Spawns `program` with `argv` (its `argv[0]` included) and `env`, in this process's directory.
fn spawn(
    program: &OsString,
    argv: &[OsString],
    env: &[(OsString, OsString)],
) -> std::io::Result<Child> {
    let mut cmd = Command::new(program);
    cmd.arg0(&argv[0]).args(&argv[1..]);
    set_env(&mut cmd, env);
    cmd.spawn()
}

fn cannot_run(program: &OsString, e: std::io::Error) -> ExitCode {
    let error = ResolveError::from_exec(program, e);
    eprintln!("synaps-scope: cannot run {error}");
    ExitCode::from(error.shell_status())
}

/// "exited with status N" or "was killed by signal N (NAME)".
fn said(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal} ({})", signal_name(signal)),
        _ => "ended".to_owned(),
    }
}

/// The command's status as a shell gives it: its exit status, or 128+N for a signal N.
fn exit_code(status: ExitStatus) -> ExitCode {
    let code = status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(255))
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => "another signal",
    }
}

/// The figures, also where a thread that held them panicked (they are only ever read over).
fn lock(figures: &Mutex<Figures>) -> std::sync::MutexGuard<'_, Figures> {
    figures.lock().unwrap_or_else(|p| p.into_inner())
}

/// The scope's figures, as last read.
#[derive(Clone, Default)]
struct Figures {
    /// `memory.peak`, else the most `memory.current` was seen at.
    memory_peak: Option<u64>,
    /// `usage_usec` of `cpu.stat`.
    cpu_usec: Option<u64>,
}

impl Figures {
    /// Reads what can be read of the scope's cgroup `dir`, keeping the last figures where it is
    /// gone.
    fn read(&mut self, dir: &Path) {
        let number = |file: &str| {
            fs::read_to_string(dir.join(file))
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
        };
        let peak = number("memory.peak").or_else(|| number("memory.current"));
        if let Some(peak) = peak {
            self.memory_peak = Some(self.memory_peak.map_or(peak, |seen| seen.max(peak)));
        }
        let usage = fs::read_to_string(dir.join("cpu.stat"))
            .ok()
            .and_then(|stat| {
                stat.lines()
                    .find_map(|line| line.strip_prefix("usage_usec "))
                    .and_then(|n| n.trim().parse().ok())
            });
        if let Some(usage) = usage {
            self.cpu_usec = Some(usage);
        }
    }
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.memory_peak {
            Some(bytes) => write!(f, "memory peak {:.1} MiB", bytes as f64 / 1048576.0)?,
            None => f.write_str("memory peak unknown (no memory controller)")?,
        }
        match self.cpu_usec {
            Some(usec) => write!(f, ", CPU time {:.3} s", usec as f64 / 1e6),
            None => f.write_str(", CPU time unknown"),
        }
    }
}

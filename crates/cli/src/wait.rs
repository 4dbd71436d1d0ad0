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
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rustix::io::{fcntl_setfd, Errno, FdFlags};
use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
use rustix::process::{
    getrlimit, kill_process, pidfd_open, pidfd_send_signal, setrlimit, waitid, Pid, PidfdFlags,
    Resource, Rlimit, Signal, WaitId, WaitIdOptions,
};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::emulate_default_handler;
use signal_hook::low_level::siginfo::Cause;
use synaps_scope::limits::Property;
use synaps_scope::{
    set_env, Ending, Evidence, HandleError, Launch, OomdWatch, ResolveError, ScopeEnding,
    ScopeHandle, ScopeLauncher, Wrapper, DEFAULT_PROBE_TIMEOUT,
};

use crate::ffi;
use crate::say::say;

/// How often the scope's figures are read while it runs: they are gone once it is. A tool that
/// grows by 8 MB every 20 ms to its `MemoryMax` is read within one step of its peak.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);
/// Each wait for what the command left in its scope (repeated until the scope is empty).
/// How long after the command was reaped a terminal's SIGINT or SIGQUIT is still taken for the
/// one that reached it (the whole foreground group gets it at once).
const TERMINALS_MOMENT: Duration = Duration::from_millis(100);
/// Each wait for what the command left in its scope (repeated until the scope is empty): short,
/// so that a terminal's Ctrl-C once the command has ended stops the wait within it.
const LEFT_BEHIND_WAIT: Duration = Duration::from_millis(100);
/// How long the hold on the command waits for the scope to show the child.
const HANDLE_WAIT: Duration = Duration::from_secs(5);

/// The signals a process may send the waiter to reach the command, as it would with no waiter in
/// between (`kill`, a shell's job control, a supervisor): passed on to the command.
const RELAYED: [i32; 7] = [SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH];

/// Runs `launch` as a child and waits for it; `launcher` is the one it was wrapped by (None: a
/// direct launch). The summary line goes to stderr; the exit status is the command's.
pub(crate) fn run_and_wait(
    mut relay: Relay,
    launcher: Option<&ScopeLauncher>,
    program: &OsString,
    argv: Vec<OsString>,
    env: &[(OsString, OsString)],
    flush: impl Fn(),
) -> ExitCode {
    match launcher {
        Some(launcher) => run_scoped(&mut relay, launcher, program, argv, env, flush),
        None => run_direct(&mut relay, program, argv, env, flush),
    }
}

/// The command as a child of this process, in no scope.
fn run_direct(
    relay: &mut Relay,
    program: &OsString,
    argv: Vec<OsString>,
    env: &[(OsString, OsString)],
    flush: impl Fn(),
) -> ExitCode {
    let launch = Launch::new(None, program, argv, env);
    flush();
    if let Some(signal) = relay.before_start() {
        return relay.abort(signal);
    }
    let status = match relay.spawn(&launch.program, &launch.argv, env, None) {
        Ok((mut child, target)) => {
            relay.start_passing(&target);
            target.wait(&mut child)
        }
        Err(e) => return cannot_run(program, e),
    };
    match status {
        Ok(status) => {
            say!("synaps-scope: not in a scope; the command {}", said(status));
            relay.end_as(status)
        }
        Err(e) => cannot_run(program, e),
    }
}

/// The command as a child of this process, in the scope `launcher` wraps it in.
fn run_scoped(
    relay: &mut Relay,
    launcher: &ScopeLauncher,
    program: &OsString,
    argv: Vec<OsString>,
    env: &[(OsString, OsString)],
    flush: impl Fn(),
) -> ExitCode {
    // The launcher program says whether it made the scope and holds the command until this end
    // is closed; systemd-run cannot.
    let hold = match launcher.wrapper() {
        Wrapper::Exec { .. } => match held_pair() {
            Ok(pair) => Some(pair),
            Err(e) => {
                say!("synaps-scope: cannot make a socket pair: {e}");
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
        return run_direct(relay, program, argv, env, flush);
    };
    flush();
    if let Some(signal) = relay.before_start() {
        return relay.abort(signal);
    }
    let wrapper = Path::new(&wrapped.argv[0]);
    let (mut child, target) = match relay.spawn(&wrapped.argv[0], &wrapped.argv, env, Some(wrapper))
    {
        Ok(spawned) => spawned,
        Err(e) => return cannot_run(&wrapped.argv[0], e),
    };
    let mut not_made = false;
    let figures = Arc::new(Mutex::new(Figures::default()));
    let handle = match hold {
        Some((ours, child_end)) => {
            drop(child_end);
            let (said, ours) = made(ours, launcher);
            // Not made: the launcher program has said why, and runs the command unscoped.
            not_made = said == Some(false);
            let handle = (!not_made)
                .then(|| handle_of(&unit, &child, &target))
                .flatten();
            // Read once while the command is held: one that ends at once leaves an empty scope
            // the manager removes before the first read after it could come.
            if let Some(handle) = &handle {
                lock(&figures).read(handle.cgroup_dir());
            }
            // A signal that ended a waiter before its command began ends the launch here: the
            // launcher program, held (it said its word and waits for the release), has run
            // nothing. One that said nothing is not known to be held, and is let go.
            if let Some(signal) = said.and_then(|_| relay.before_start()) {
                let _ = child.kill();
                let _ = child.wait();
                say!(
                    "synaps-scope: {} came before the command began; it was not run",
                    signal_name(signal)
                );
                return relay.abort(signal);
            }
            release(ours, launcher);
            handle
        }
        None => handle_of(&unit, &child, &target),
    };
    relay.start_passing(&target);
    if let Some(handle) = &handle {
        *lock(&target.scope) = Some(handle.cgroup_dir().to_owned());
    }
    // The command runs now (it was held until `ours` closed): the scope is watched, and read
    // again at once when the sampler is let go (its sender dropped), not a step later.
    let (stop_sampling, stopped) = mpsc::channel::<()>();
    let sampler = handle.as_ref().map(|handle| {
        let figures = Arc::clone(&figures);
        let dir = handle.cgroup_dir().to_owned();
        thread::spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = {
                lock(&figures).read(&dir);
                stopped.recv_timeout(SAMPLE_EVERY)
            } {}
        })
    });
    let _warnings = handle.as_ref().and_then(|handle| warn_of_oomd(handle, env));
    let status = target.wait(&mut child);
    // The scope ends with the last of its processes: what the command left behind too. Its
    // figures are read at once (the manager removes an empty scope's cgroup within milliseconds),
    // and again once the last process has gone.
    let mut left_running = None;
    if let Some(handle) = &handle {
        let read_now = || lock(&figures).read(handle.cgroup_dir());
        read_now();
        while let Err(HandleError::TimedOut { remaining, .. }) = handle.wait_empty(LEFT_BEHIND_WAIT)
        {
            read_now();
            if target.interrupted().is_some() {
                left_running = Some(remaining.len());
                break;
            }
        }
        read_now();
    }
    drop(stop_sampling);
    if let Some(sampler) = sampler {
        let _ = sampler.join();
    }
    let status = match status {
        Ok(status) => status,
        Err(e) => return cannot_run(program, e),
    };
    if target.ended_before_the_command(status) {
        let signal = status.signal().unwrap_or(SIGTERM);
        say!(
            "synaps-scope: {unit}: the command did not begin: {} was ended by {} before it",
            wrapper.display(),
            signal_name(signal)
        );
        return relay.abort(signal);
    }
    let figures = lock(&figures).clone();
    let how = match (&handle, left_running) {
        (Some(_), Some(left)) => format!(
            "still running: the wait for it was interrupted with {left} process(es) the command \
             left in it"
        ),
        (Some(handle), None) => told(&handle.ending(env, DEFAULT_PROBE_TIMEOUT), launcher),
        (None, _) if not_made => "not made, so the command ran without it".to_owned(),
        (None, _) => "how cannot be told: the scope could not be watched".to_owned(),
    };
    say!(
        "synaps-scope: {unit}: {how}; the command {}; {figures}",
        said(status)
    );
    // Before this process ends, by exit or by the command's signal: the scope's inotify watches
    // go while the process runs, in microseconds; left to the process's end, the kernel's
    // teardown of them holds the exit back 10 to 15 ms.
    drop(handle);
    match (left_running, target.interrupted()) {
        (Some(_), Some(signal)) => relay.abort(signal),
        _ => relay.end_as(status),
    }
}

/// The signals of [`RELAYED`] this process takes to pass on, and how the child is tied to it.
///
/// Only a signal a process sent (`kill`, `sigqueue`) is passed on: one the kernel sent is the
/// terminal's (Ctrl-C, Ctrl-\, a resized window), sent to the whole foreground process group,
/// so the command has it already, and the waiter lets it go as a shell does. A signal this
/// process's caller left ignored (`nohup`) is not taken: it stays ignored, for the command too,
/// which inherits it so (a handler would be reset to the default across its exec).
///
/// Signals are passed on only once the command has begun: one that would have ended the waiter
/// before (a supervisor's SIGTERM, a Ctrl-C while the manager is asked) ends the launch with the
/// command never run, rather than the launcher program in its place. Once the command has ended,
/// a terminal's SIGINT or SIGQUIT ends the wait for what it left in its scope, as the line says.
pub(crate) struct Relay {
    signals: Option<SignalsInfo<WithOrigin>>,
    /// The signals of [`RELAYED`] that were not ignored when this process started.
    taken: Vec<i32>,
    /// Whether the caller left SIGCHLD ignored: set to its default here, ignored again in the child.
    sigchld_ignored: bool,
    /// Signals a process sent before the command began that do not end a waiter (SIGWINCH),
    /// passed on once it has.
    queued: Vec<i32>,
}

impl Relay {
    pub(crate) fn new() -> Relay {
        let sigchld_ignored = ffi::default_sigchld();
        let taken: Vec<i32> = RELAYED
            .into_iter()
            .filter(|&signal| !ffi::ignored(signal))
            .collect();
        let signals = match SignalsInfo::<WithOrigin>::new(&taken) {
            Ok(signals) => Some(signals),
            Err(e) => {
                say!("synaps-scope: signals sent to this process will not reach the command: {e}");
                None
            }
        };
        Relay {
            signals,
            taken,
            sigchld_ignored,
            queued: Vec::new(),
        }
    }

    /// A signal taken since this process started that would have ended it (all of [`RELAYED`]
    /// but SIGWINCH, from the terminal or a process), if one came: the command is not to begin.
    /// A SIGWINCH a process sent is kept for the command.
    fn before_start(&mut self) -> Option<i32> {
        let signals = self.signals.as_mut()?;
        let mut ending = None;
        for taken in signals.pending() {
            match taken.signal {
                SIGWINCH if matches!(taken.cause, Cause::Sent(_)) => self.queued.push(SIGWINCH),
                SIGWINCH => {}
                signal => ending = ending.or(Some(signal)),
            }
        }
        ending
    }

    /// Ends this process as `signal` would have, where it can (a core dump left out), else with
    /// 128+N.
    fn abort(&self, signal: i32) -> ExitCode {
        if signal == SIGQUIT {
            let no_core = Rlimit {
                current: Some(0),
                maximum: getrlimit(Resource::Core).maximum,
            };
            let _ = setrlimit(Resource::Core, no_core);
        }
        // Returns only where the signal could not end this process.
        let _ = emulate_default_handler(signal);
        ExitCode::from(u8::try_from(128 + signal).unwrap_or(255))
    }

    /// From now on, what is taken goes to `target` (the command has begun): the signals a process
    /// sent, and the terminal's SIGINT and SIGQUIT once the command has ended.
    fn start_passing(&mut self, target: &Arc<Target>) {
        for signal in self.queued.drain(..) {
            target.pass(signal);
        }
        let Some(mut signals) = self.signals.take() else {
            return;
        };
        let target = Arc::clone(target);
        thread::spawn(move || {
            for taken in signals.forever() {
                match (taken.cause, taken.signal) {
                    (Cause::Sent(_), signal) => target.pass(signal),
                    (_, signal @ (SIGINT | SIGQUIT)) if target.ended_a_moment_ago() => {
                        target.interrupt(signal);
                    }
                    _ => {}
                }
            }
        });
    }

    /// Spawns `program` with `argv` (its `argv[0]` included) and `env`, in this process's
    /// directory, from this (the main) thread: the child gets SIGTERM when the thread ends,
    /// however this process ends. What is taken from then on is passed to the child.
    fn spawn(
        &mut self,
        program: &OsString,
        argv: &[OsString],
        env: &[(OsString, OsString)],
        wrapper: Option<&Path>,
    ) -> std::io::Result<(Child, Arc<Target>)> {
        let mut cmd = Command::new(program);
        cmd.arg0(&argv[0]).args(&argv[1..]);
        set_env(&mut cmd, env);
        // With no controlling terminal (a daemon's or a supervisor's child), the command gets a
        // process group of its own: a signal sent to the waiter's group then reaches it once,
        // passed on, not twice. With one (whatever its stdin: `cmd < file`, a pipe), it shares
        // the waiter's, which the terminal's signals and job control are for: in a group of its
        // own it would be a background job, stopped as it reads the terminal.
        if !has_a_controlling_terminal() {
            cmd.process_group(0);
        }
        ffi::tie_to_waiter(&mut cmd, self.sigchld_ignored);
        let child = cmd.spawn()?;
        let target = Arc::new(Target {
            pid: i32::try_from(child.id()).ok().and_then(Pid::from_raw),
            ended: Mutex::new(false),
            scope: Mutex::new(None),
            interrupted: AtomicI32::new(0),
            reaped_at: Mutex::new(None),
            wrapper: wrapper.map(Path::to_path_buf),
            reached_the_wrapper: std::sync::atomic::AtomicBool::new(false),
        });
        Ok((child, target))
    }

    /// This process's end once the command's is told: its status, and where the command died of a
    /// terminal's signal (SIGINT, SIGQUIT), of that signal too (with no core dump), as a shell expects
    /// of a program that did not catch it: a script waiting on this one then stops as it would have
    /// without it. A shell's `$?` is 128+N either way. Not where this process's caller left the
    /// signal ignored.
    fn end_as(&self, status: ExitStatus) -> ExitCode {
        match status.signal() {
            Some(signal @ (SIGINT | SIGQUIT)) if self.taken.contains(&signal) => {
                let no_core = Rlimit {
                    current: Some(0),
                    maximum: getrlimit(Resource::Core).maximum,
                };
                let _ = setrlimit(Resource::Core, no_core);
                // Returns only where the signal could not end this process.
                let _ = emulate_default_handler(signal);
            }
            _ => {}
        }
        exit_code(status)
    }
}

/// Whether this process has a controlling terminal (`/dev/tty` opens).
fn has_a_controlling_terminal() -> bool {
    rustix::fs::open(
        "/dev/tty",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .is_ok()
}

/// Where a signal passed on goes: to the command until it has ended, then to what it left in its
/// scope (which the waiter still waits for).
struct Target {
    pid: Option<Pid>,
    /// Set once the command has ended, before it is reaped: until then its pid is its own, and a
    /// signal sent to it can reach no other process.
    ended: Mutex<bool>,
    /// The scope's cgroup directory, once it is watched.
    scope: Mutex<Option<PathBuf>>,
    /// The terminal's signal that ended the wait for what the command left (0: none).
    interrupted: AtomicI32,
    /// When the command was reaped: a terminal's Ctrl-C that killed it reaches the waiter too, and
    /// may be taken a moment after; only a later one ends the wait for what it left.
    reaped_at: Mutex<Option<Instant>>,
    /// The wrapper's program (the launcher program or systemd-run), and whether a signal passed
    /// on reached it before it had exec'd the command: the command then never began.
    wrapper: Option<PathBuf>,
    reached_the_wrapper: std::sync::atomic::AtomicBool,
}

impl Target {
    /// Waits for the command to end, and reaps it.
    fn wait(&self, child: &mut Child) -> std::io::Result<ExitStatus> {
        if let Some(pid) = self.pid {
            let ended = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT;
            while let Err(Errno::INTR) = waitid(WaitId::Pid(pid), ended) {}
        }
        *lock(&self.ended) = true;
        let status = child.wait();
        *lock(&self.reaped_at) = Some(Instant::now());
        status
    }

    /// Whether the command was reaped more than a moment ago ([`TERMINALS_MOMENT`]).
    fn ended_a_moment_ago(&self) -> bool {
        lock(&self.reaped_at).is_some_and(|at| at.elapsed() > TERMINALS_MOMENT)
    }

    /// Whether the child is still the wrapper's program (it has not exec'd the command yet).
    fn still_the_wrapper(&self) -> bool {
        let (Some(pid), Some(wrapper)) = (self.pid, &self.wrapper) else {
            return false;
        };
        fs::read_link(format!("/proc/{}/exe", pid.as_raw_nonzero()))
            .is_ok_and(|exe| exe == *wrapper || fs::canonicalize(wrapper).is_ok_and(|w| w == exe))
    }

    /// Whether a signal passed on ended the wrapper before the command began.
    fn ended_before_the_command(&self, status: ExitStatus) -> bool {
        self.reached_the_wrapper.load(Ordering::Relaxed) && status.signal().is_some()
    }

    /// Whether the command has ended (it is not reaped here).
    fn has_ended(&self) -> bool {
        let ended = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT | WaitIdOptions::NOHANG;
        self.pid
            .is_none_or(|pid| !matches!(waitid(WaitId::Pid(pid), ended), Ok(None)))
    }

    fn interrupt(&self, signal: i32) {
        self.interrupted.store(signal, Ordering::Relaxed);
    }

    fn interrupted(&self) -> Option<i32> {
        Some(self.interrupted.load(Ordering::Relaxed)).filter(|&signal| signal != 0)
    }

    fn pass(&self, signal: i32) {
        let Some(signal) = Signal::from_named_raw(signal) else {
            return;
        };
        let ended = lock(&self.ended);
        if !*ended {
            if let Some(pid) = self.pid {
                // Still the wrapper (systemd-run has no hold): the signal ends the launch before
                // the command began, as it would have ended the waiter.
                if self.still_the_wrapper() {
                    self.reached_the_wrapper.store(true, Ordering::Relaxed);
                }
                let _ = kill_process(pid, signal);
            }
            return;
        }
        drop(ended);
        let Some(dir) = lock(&self.scope).clone() else {
            return;
        };
        // Each by a pidfd, checked to be in the scope once held: a pid read from the scope may
        // have ended and been given to another process since.
        let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs
            .lines()
            .filter_map(|line| line.trim().parse().ok().and_then(Pid::from_raw))
        {
            let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
                continue;
            };
            let still_there = fs::read_to_string(dir.join("cgroup.procs"))
                .is_ok_and(|now| now.lines().any(|line| line.trim() == pid.to_string()));
            if still_there {
                let _ = pidfd_send_signal(&pidfd, signal);
            }
        }
    }
}

/// A watch that prints a line on stderr when systemd-oomd is on its way to killing the scope;
/// where oomd may act on it unseen (a rule covers it that cannot be followed here), a line that
/// says so. Nothing where oomd does not act on it (no oomd, no rule).
fn warn_of_oomd(handle: &ScopeHandle, env: &[(OsString, OsString)]) -> Option<OomdWatch> {
    let watch = handle.watch_oomd(env, DEFAULT_PROBE_TIMEOUT, |warning| {
        say!("synaps-scope: {warning}");
    });
    match watch {
        Ok(watch) => Some(watch),
        Err(why) => {
            if why.oomd_may_act() {
                say!("synaps-scope: no warning before systemd-oomd acts: {why}");
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
    // A signal taken meanwhile interrupts the read (a socket read with a timeout is never
    // restarted); it is read again.
    let said = loop {
        match stream.read(&mut word) {
            Ok(1) => break Some(word[0] == b'1'),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            _ => break None,
        }
    };
    (said, OwnedFd::from(stream))
}

/// Lets the launcher program go on to the command, and waits (within its bound and a second more)
/// for the exec that closes its end of the hold: from then on, the child is the command, and a
/// signal passed on reaches it rather than the launcher program.
fn release(ours: OwnedFd, launcher: &ScopeLauncher) {
    let _ = rustix::net::shutdown(&ours, rustix::net::Shutdown::Write);
    let mut stream = UnixStream::from(ours);
    let _ = stream.set_read_timeout(Some(launcher.bound() + Duration::from_secs(1)));
    let _ = std::io::copy(&mut stream, &mut std::io::sink());
}

/// A handle on `unit` once the child is in it; None when the child ended first or the scope
/// never showed it.
fn handle_of(unit: &str, child: &Child, target: &Target) -> Option<ScopeHandle> {
    let pid = child.id();
    let since = Instant::now();
    loop {
        match ScopeHandle::from_pid(unit, pid) {
            Ok(handle) => return Some(handle),
            Err(_) if since.elapsed() < HANDLE_WAIT => {}
            Err(e) => {
                say!("synaps-scope: cannot watch {unit}: {e}");
                return None;
            }
        }
        if target.has_ended() {
            return None;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

fn cannot_run(program: &OsString, e: std::io::Error) -> ExitCode {
    let error = ResolveError::from_exec(program, e);
    say!("synaps-scope: cannot run {error}");
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

/// What `mutex` holds, also where a thread that held it panicked (nothing held is left half made).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
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

//! Hosts that fork (`os.fork`, pre-forking servers, `multiprocessing`): a child forked while other
//! threads of its parent are in the middle of requests gets its own first answer within its own
//! bound, as a fresh process would, and a child that never calls the library holds nothing that
//! slows or grows anyone else. The tests take turns (`one_at_a_time`): each counts the process's
//! sockets and forks the whole process, whose other threads must be its own.

mod common;
#[path = "common/forks.rs"]
mod forks;

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{env_without, rig, Manager, SlowManager};
use forks::{fork_running, status_within};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;
use synaps_scope::{decide, launcher_for_env, Decision, LauncherOptions, ScopeKind};

/// Held by each test for as long as it runs.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a child reports with its exit status.
const FINE: i32 = 0;
const TOO_LATE: i32 = 1;
const DIRECT: i32 = 2;
const KEPT_A_CONNECTION: i32 = 3;

/// A child's first request: scoped, within `bound` (and the few milliseconds a request takes to
/// start past its probe).
fn first_request(env: &[(OsString, OsString)], bound: Duration) -> i32 {
    let started = Instant::now();
    let decision = decide(
        env,
        ScopeKind::Tool,
        &LauncherOptions {
            probe_timeout: bound,
        },
    );
    if started.elapsed() > bound + Duration::from_millis(100) {
        return TOO_LATE;
    }
    let why = match decision {
        Ok(Decision::Scoped(_)) => return FINE,
        Ok(Decision::Direct(reason)) => reason.to_string(),
        Err(error) => error.to_string(),
    };
    // Straight to the file: a forked child's test output capture is its own copy, never shown.
    let _ = writeln!(
        std::io::stderr(),
        "a forked child launched directly after {:?}: {why}",
        started.elapsed()
    );
    DIRECT
}

#[test]
fn children_forked_amid_requests_on_other_threads_answer_within_their_own_bound() {
    let Some(rig) = rig() else { return };
    let _alone = one_at_a_time();
    let manager = Manager::start(&rig);
    let env = Arc::new(manager.env());
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (env, stop) = (Arc::clone(&env), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = launcher_for_env(&env);
                }
            })
        })
        .collect();
    // The library's default bound: a child held by its parent's copied state waits out any
    // bound (or hangs), while a sound one answers in milliseconds, however busy the machine.
    let bound = synaps_scope::DEFAULT_PROBE_TIMEOUT;
    let mut outcomes = Vec::new();
    for _ in 0..40 {
        let child = fork_running(|| first_request(&env, bound));
        outcomes.push(status_within(child, bound * 5));
        std::thread::sleep(Duration::from_millis(3));
    }
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
    let hung = outcomes.iter().filter(|o| o.is_none()).count();
    let late = outcomes.iter().filter(|o| **o == Some(TOO_LATE)).count();
    let direct = outcomes.iter().filter(|o| **o == Some(DIRECT)).count();
    assert_eq!(
        (hung, late, direct),
        (0, 0, 0),
        "of 40 children forked amid requests: hung, past their bound, launched directly \
         ({outcomes:?})"
    );
}

/// The sockets open in this process.
fn sockets() -> HashSet<RawFd> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| {
            let entry = e.ok()?;
            let target = std::fs::read_link(entry.path()).ok()?;
            target
                .to_string_lossy()
                .starts_with("socket:")
                .then_some(())?;
            entry.file_name().to_str()?.parse().ok()
        })
        .collect()
}

/// Whether the peer of socket `fd` (if still open here) can still write to it: connected, and
/// not hung up.
fn still_connected(fd: RawFd) -> bool {
    if !sockets().contains(&fd) {
        return false;
    }
    // SAFETY: `fd` is open in this process (checked above) and outlives this call.
    let socket = unsafe { BorrowedFd::borrow_raw(fd) };
    let mut byte = [0u8; 1];
    let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
    !matches!(rustix::net::recv(socket, &mut byte[..], flags), Ok((0, _)))
}

#[test]
fn a_child_that_never_calls_the_library_holds_no_connection_the_manager_writes_to() {
    let Some(rig) = rig() else { return };
    let _alone = one_at_a_time();
    let manager = Manager::start(&rig);
    let env = manager.env();
    let before = sockets();
    assert!(launcher_for_env(&env).unwrap().is_some());
    let kept: Vec<RawFd> = sockets().difference(&before).copied().collect();
    assert_eq!(
        kept.len(),
        1,
        "the probe keeps its connection for the next request"
    );
    // The child only sleeps past the time a connection is kept, then looks at its copy.
    let child = fork_running(move || {
        std::thread::sleep(Duration::from_millis(1500));
        if kept.iter().any(|&fd| still_connected(fd)) {
            KEPT_A_CONNECTION
        } else {
            FINE
        }
    });
    // Meanwhile the parent's requests go on, and the manager's signals with them.
    for _ in 0..20 {
        assert!(launcher_for_env(&env).unwrap().is_some());
    }
    assert_eq!(status_within(child, Duration::from_secs(5)), Some(FINE));
}

#[test]
fn a_child_forked_amid_a_burst_holds_no_turn_of_its_parents() {
    let Some(rig) = rig() else { return };
    let _alone = one_at_a_time();
    let manager = Manager::start(&rig);
    let env = Arc::new(manager.env());
    // Many requests at once on new connections, each taking its turn, while children are forked
    // that only sleep: some are forked while a ticket of the parent's is drawn or held.
    let burst: Vec<_> = (0..24)
        .map(|_| {
            let env = Arc::clone(&env);
            std::thread::spawn(move || {
                for _ in 0..4 {
                    let _ = launcher_for_env(&env);
                    // Past the time a connection is kept, so that the next takes a turn again.
                    std::thread::sleep(Duration::from_millis(600));
                }
            })
        })
        .collect();
    let sleepers: Vec<Pid> = (0..12)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(150));
            fork_running(|| {
                std::thread::sleep(Duration::from_secs(8));
                FINE
            })
        })
        .collect();
    for thread in burst {
        thread.join().unwrap();
    }
    // The sleepers live on. A request of another process (none of the parent's connections are
    // kept by now) takes its turn at once.
    std::thread::sleep(Duration::from_millis(700));
    let took = request_in_new_process(&env);
    for sleeper in sleepers {
        let _ = kill(sleeper, Signal::SIGKILL);
        let _ = waitpid(sleeper, None);
    }
    assert!(
        took < Duration::from_millis(250),
        "a request took {took:?} while children forked amid a burst lived"
    );
}

/// How long a scoped request of a process of its own takes (a fork that asks once).
fn request_in_new_process(env: &[(OsString, OsString)]) -> Duration {
    let started = Instant::now();
    let child = fork_running(|| first_request(env, Duration::from_secs(3)));
    assert_eq!(status_within(child, Duration::from_secs(5)), Some(FINE));
    started.elapsed()
}

/// A host whose request stopped waiting for a turn (one stuck ahead of it), which then forks a
/// child that never calls the library and exits normally (a daemon's double fork), leaves no
/// ticket behind: its ticket was the host's alone, and went with it. Once the stuck turn ends, the
/// next request's turn comes at once, while the child lives on.
#[test]
fn a_child_of_a_host_that_stopped_waiting_for_a_turn_holds_no_ticket_once_the_host_has_exited() {
    let Some(_rig) = rig() else { return };
    let _alone = one_at_a_time();
    // The first authentication through the stand-in is held 3 s: that request's turn is stuck.
    let slow = SlowManager::holding_first_in_front_of_the_rig("AUTH", "3");
    let env = synaps_scope::with_overrides(
        &env_without(
            &synaps_scope::inherited_env(),
            &["DBUS_SESSION_BUS_ADDRESS"],
        ),
        &[("XDG_RUNTIME_DIR".into(), slow.runtime_dir())],
    );
    // The stand-in is a relay in front of the manager: systemd-run, which would lose the launch
    // behind one, is never used there (tests/host_relay.rs), so the launcher program is.
    let env = Arc::new(common::with_wrapper(&env, "synaps-scope-exec"));
    let stuck = {
        let env = Arc::clone(&env);
        std::thread::spawn(move || first_request(&env, Duration::from_secs(5)))
    };
    std::thread::sleep(Duration::from_millis(300));
    let grandchild_pid = common::TempDir::new("grandchild");
    let pid_file = grandchild_pid.path().join("pid");
    let host = {
        let env = Arc::clone(&env);
        let pid_file = pid_file.clone();
        fork_running(move || {
            // Its turn does not come within 300 ms: it talks to the manager without one, and its
            // ticket waits on in a thread of its own.
            let _ = first_request(&env, Duration::from_millis(300));
            let child = fork_running(|| {
                std::thread::sleep(Duration::from_secs(8));
                FINE
            });
            std::fs::write(&pid_file, child.as_raw().to_string()).unwrap();
            FINE
        })
    };
    assert_eq!(status_within(host, Duration::from_secs(3)), Some(FINE));
    let grandchild = Pid::from_raw(std::fs::read_to_string(&pid_file).unwrap().parse().unwrap());
    assert_eq!(
        stuck.join().unwrap(),
        FINE,
        "the stuck request still ends scoped"
    );
    let took = request_in_new_process(&env);
    let _ = kill(grandchild, Signal::SIGKILL);
    assert!(
        took < Duration::from_millis(250),
        "a request took {took:?} while the child of a host that had a ticket lived"
    );
}

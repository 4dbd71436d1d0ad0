//! The probe's kept connections (`src/manager/bus/pool.rs`): a burst of requests reuses one, an idle
//! process holds none open after half a second, and a kept connection to a manager that stopped
//! or died gives the same verdict a new one would, within the request's bound. One test in its
//! own process, so that this process's sockets are its alone to count.

mod common;

use std::time::{Duration, Instant};

use common::{rig, signal, Manager, Signal};
use synaps_scope::{decide, launcher_for_env, Decision, LauncherOptions, ScopeKind};

/// This process's open sockets.
fn sockets() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("socket:"))
        .count()
}

#[test]
fn kept_connections_serve_a_burst_close_when_idle_and_never_hide_a_stopped_or_dead_manager() {
    let Some(rig) = rig() else { return };
    let mut manager = Manager::start(&rig);
    let env = manager.env();
    let before = sockets();
    for _ in 0..20 {
        assert!(launcher_for_env(&env).unwrap().is_some());
    }
    assert_eq!(
        sockets(),
        before + 1,
        "twenty requests in a row share one connection"
    );
    let end = Instant::now() + Duration::from_secs(3);
    while sockets() != before && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        sockets(),
        before,
        "an idle process keeps no connection open"
    );

    // A kept connection to a manager that then stopped: direct at the bound, as a new one.
    assert!(launcher_for_env(&env).unwrap().is_some());
    signal(manager.pid(), Signal::STOP);
    let bound = Duration::from_millis(300);
    let started = Instant::now();
    let decision = decide(
        &env,
        ScopeKind::Tool,
        &LauncherOptions {
            probe_timeout: bound,
        },
    )
    .unwrap();
    let took = started.elapsed();
    signal(manager.pid(), Signal::CONT);
    assert!(matches!(decision, Decision::Direct(_)), "{decision:?}");
    assert!(
        took >= bound && took < bound + Duration::from_millis(100),
        "{took:?}"
    );

    // A kept connection to a manager that died: the request connects anew within its bound and
    // finds the socket refusing, as a new connection would. It may be a manager restarting, so
    // the first request waits for it for the comeback time (1.5 s from when it was first found
    // away); once that has passed, requests go direct at once.
    assert!(launcher_for_env(&env).unwrap().is_some());
    manager.kill();
    for (request, limit) in [
        (1, Duration::from_millis(1600)),
        (2, Duration::from_millis(100)),
    ] {
        let started = Instant::now();
        let decision = decide(&env, ScopeKind::Tool, &LauncherOptions::default()).unwrap();
        assert!(matches!(decision, Decision::Direct(_)), "{decision:?}");
        assert!(
            started.elapsed() < limit,
            "request {request} after the manager died: {:?}",
            started.elapsed()
        );
    }

    // Another manager (another route) is reached at once.
    let manager = Manager::start(&rig);
    assert!(launcher_for_env(&manager.env()).unwrap().is_some());
}

//! State keyed by what callers pass (runtime directories, bus addresses) stays bounded in a
//! long-running host: 100,000 requests, each naming a runtime directory and a session bus of its
//! own, keep memory flat and each request as fast as the first. The directories are one, named
//! 100,000 ways (symlinks and slashes), with a manager socket that refuses: every request goes as
//! far as a real one does (its turn in the turn file, a connection, the fallback), and ends direct.

mod common;

use std::ffi::OsString;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use common::TempDir;
use synaps_scope::{decide, Decision, LauncherOptions, ScopeKind};

/// Resident memory in KiB, from /proc/self/status.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

const NAMES: usize = 100_000;
const LINKS: usize = 1_000;

#[test]
fn a_hundred_thousand_runtime_directories_and_bus_addresses_keep_memory_and_time_flat() {
    let dir = TempDir::new("keyed-state");
    let runtime = dir.path().join("runtime");
    std::fs::create_dir_all(runtime.join("systemd")).unwrap();
    // A socket no one listens on: connections are refused at once.
    drop(UnixListener::bind(runtime.join("systemd/private")).unwrap());
    for link in 0..LINKS {
        std::os::unix::fs::symlink(&runtime, dir.path().join(format!("r{link}"))).unwrap();
    }
    let options = LauncherOptions {
        probe_timeout: Duration::from_millis(500),
    };
    let request = |i: usize| {
        let named = format!(
            "{}/r{}{}",
            dir.path().display(),
            i % LINKS,
            "/".repeat(1 + i / LINKS)
        );
        let env = vec![
            (OsString::from("XDG_RUNTIME_DIR"), OsString::from(named)),
            (
                OsString::from("DBUS_SESSION_BUS_ADDRESS"),
                OsString::from(format!("unix:path=/nonexistent/bus-{i}")),
            ),
            (OsString::from("PATH"), OsString::from("/usr/bin:/bin")),
        ];
        let decision = decide(&env, ScopeKind::Tool, &options).unwrap();
        assert!(matches!(decision, Decision::Direct(_)), "request {i}");
    };
    let timed = |range: std::ops::Range<usize>| {
        let started = Instant::now();
        range.for_each(request);
        started.elapsed()
    };
    // The first 10,000 fill what is kept to its bounds and warm the allocator.
    timed(0..9_000);
    let first = timed(9_000..10_000);
    let before = rss_kib();
    timed(10_000..NAMES - 1_000);
    let last = timed(NAMES - 1_000..NAMES);
    let grown = rss_kib().saturating_sub(before);
    eprintln!(
        "{NAMES} runtime directories and bus addresses: RSS grew {grown} KiB after the first \
         10,000; 1,000 requests took {first:?}, then {last:?} at the end"
    );
    assert!(grown < 2048, "RSS grew {grown} KiB");
    assert!(
        last < first * 2 + Duration::from_millis(50),
        "1,000 requests took {first:?} at first, {last:?} at the end"
    );
}

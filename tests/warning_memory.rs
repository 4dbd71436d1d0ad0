//! Issue 13, item 11: the once-per-name memory of warnings stays bounded in a long-running host.
//! 300,000 requests, each naming a config file of its own that does not exist (a WARN each, since
//! each message is new), grow the process by a bounded amount, not by every name ever seen.

mod common;

use std::ffi::OsString;

use common::env_with;
use synaps_scope::config::Config;

/// Resident memory in KiB, from /proc/self/status.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn three_hundred_thousand_distinct_config_paths_keep_memory_flat() {
    let load = |i: usize| {
        let path = format!("/nonexistent/synaps-memory-test/{i:08}/with/a/long/path/config");
        Config::load(&env_with(&[("SYNAPS_CONFIG", &OsString::from(path))]));
    };
    // The first 10,000 fill the memory to its bound (4,096 names) and warm the allocator.
    for i in 0..10_000 {
        load(i);
    }
    let before = rss_kib();
    for i in 10_000..300_000 {
        load(i);
    }
    let grown = rss_kib().saturating_sub(before);
    eprintln!("300,000 distinct config paths: RSS grew {grown} KiB after the first 10,000");
    assert!(grown < 2048, "RSS grew {grown} KiB");
}

//! A session bus whose broker is stopped (SIGSTOP: it accepts connections and answers nothing)
//! costs a burst of launches one wait, not one per launch (issue 38): the launch that finds it
//! silent leaves a mark in the runtime directory, and the launches after it take the manager's
//! private socket at once. Without that, each launcher program spent half its bound on the broker
//! in its turn with the manager, one after another: with a 1 s bound, 10-12 of 16 at once ran
//! unscoped. The command line is the release build when `SYNAPS_RELEASE_CLI` names one (as in
//! the burst test).

#[path = "../../../tests/common/burst.rs"]
mod burst;
#[path = "../../../tests/common/mod.rs"]
mod common;

use std::ffi::OsString;
use std::process::Command;

use common::{rig, Manager, Signal, TempDir};
use synaps_scope::set_env;

/// `n` runs of the command line at once with `env` (and `extra` arguments to `run`): every
/// command in its scope from its first instruction, each exactly once, nothing said.
fn all_scoped(label: &str, n: usize, env: &[(OsString, OsString)], extra: &[&str]) {
    let dir = TempDir::new(label);
    let log = burst::log_in(dir.path(), label);
    let program = std::env::var_os("SYNAPS_RELEASE_CLI")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_synaps-scope").into());
    let outcome = burst::at_once(n, &log, |i| {
        let mut cmd = Command::new(&program);
        cmd.arg("run")
            .args(extra)
            .arg("--")
            .args(burst::recording_argv(&log, i));
        set_env(&mut cmd, env);
        cmd
    });
    eprintln!("{label}: {}", outcome.summary());
    assert_eq!(
        outcome.not_once(),
        vec![],
        "{label}: each command runs once"
    );
    assert_eq!(
        outcome.scoped,
        n,
        "{label}: every command starts in its scope; what the unscoped said: {:?}",
        outcome.stderr.first()
    );
    assert!(
        outcome.stderr.is_empty(),
        "{label}: {:?}",
        outcome.stderr.first()
    );
}

#[test]
fn a_stopped_broker_costs_a_burst_one_wait_not_one_per_launch() {
    let Some(rig) = rig() else { return };
    let manager = Manager::with_session_bus(&rig);
    let env = common::with_wrapper(&manager.with_its_session_bus_address(), "synaps-scope-exec");
    let broker = manager.session_bus_broker();
    common::signal(broker, Signal::STOP);
    let outcome = std::panic::catch_unwind(|| {
        all_scoped("sixteen-at-1s", 16, &env, &["--probe-timeout-ms", "1000"]);
        all_scoped("two-hundred-fifty-six", 256, &env, &[]);
    });
    common::signal(broker, Signal::CONT);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

//! A burst of launches stays scoped (issue 22): 256 `synaps-scope run` at once on a healthy
//! manager, with the default bound, each command recording where it runs as it starts: every one
//! in its own scope from its first instruction, every one run exactly once. (The comparison with
//! bare `systemd-run --user --scope` at once, and the manager's CPU time per launch, is the
//! burst benchmark: crates/cli/benches/burst.rs.)
//!
//! The command line is the release build when `SYNAPS_RELEASE_CLI` names one (scripts/test.sh
//! names the C tarball's): the bound is wall-clock time and a burst's pace is that of each turn's own code,
//! so the promise is the shipped build's. Beside two CPU hogs on two cores, 256 debug builds at
//! once left 32-133 unscoped past the bound; the release build's were all scoped.

#[path = "../../../tests/common/burst.rs"]
mod burst;
#[path = "../../../tests/common/mod.rs"]
mod common;

use std::process::Command;

use common::{rig, TempDir};
use synaps_scope::{inherited_env, set_env};

#[test]
fn two_hundred_fifty_six_runs_at_once_each_start_in_their_own_scope_once() {
    let Some(_rig) = rig() else { return };
    let env = common::with_wrapper(&inherited_env(), "synaps-scope-exec");
    let dir = TempDir::new("burst-cli");
    let log = burst::log_in(dir.path(), "cli");
    let program = std::env::var_os("SYNAPS_RELEASE_CLI")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_synaps-scope").into());
    eprintln!("the command line: {}", program.to_string_lossy());
    let outcome = burst::at_once(256, &log, |i| {
        let mut cmd = Command::new(&program);
        cmd.args(["run", "--"]).args(burst::recording_argv(&log, i));
        set_env(&mut cmd, &env);
        cmd
    });
    eprintln!("256 x synaps-scope run at once: {}", outcome.summary());
    assert_eq!(outcome.not_once(), vec![], "each command runs exactly once");
    assert_eq!(
        outcome.scoped,
        256,
        "every command starts in its scope; what the unscoped said: {:?}",
        outcome.stderr.first()
    );
    assert!(outcome.stderr.is_empty(), "{:?}", outcome.stderr.first());
}

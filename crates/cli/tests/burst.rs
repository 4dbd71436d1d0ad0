//! A burst of launches stays scoped (issue 22): 256 `synaps-scope run` at once on a healthy
//! manager, with the default bound, each command recording where it runs as it starts: every one
//! in its own scope from its first instruction, every one run exactly once. (The comparison with
//! 256 bare `systemd-run --user --scope` at once, and the manager's CPU time per launch, is the
//! burst benchmark: crates/cli/benches/burst.rs.)

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
    let outcome = burst::at_once(256, &log, |i| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_synaps-scope"));
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

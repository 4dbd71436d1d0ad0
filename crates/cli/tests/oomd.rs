//! The oomd scenario with a stand-in kill (scripts/demo/stand-in-kill.sh, what scripts/oomd-demo.sh
//! shows where no virtual machine can run) against the rig's manager: with scopes, killing the
//! largest cgroup as oomd does takes only the tool; without them it takes the daemon too. The real
//! systemd-oomd plays it in the virtual machine (scripts/test-vm.sh).

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::process::Command;

use common::rig;

#[test]
fn an_oomd_kill_takes_only_the_tool_with_scopes_and_the_daemon_too_without() {
    let Some(_rig) = rig() else { return };
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/demo/stand-in-kill.sh"
    );
    let out = Command::new("bash")
        .arg(script)
        .env("SYNAPS_SCOPE_BIN", env!("CARGO_BIN_EXE_synaps-scope"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (scoped, unscoped) = stdout
        .split_once("== without scopes")
        .expect("both runs reported");
    let line = |text: &str, prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in {text}"))
            .to_owned()
    };
    assert!(line(scoped, "tool ").contains("synaps-tool-"), "{scoped}");
    assert!(
        line(scoped, "stand-in for oomd ").contains("kills synaps-tool-"),
        "{scoped}"
    );
    assert!(line(scoped, "after ").contains("survived"), "{scoped}");
    assert!(
        line(unscoped, "tool ").contains("synaps-daemon-"),
        "the tool shares the daemon's scope: {unscoped}"
    );
    assert!(
        line(unscoped, "stand-in for oomd ").contains("kills synaps-daemon-"),
        "{unscoped}"
    );
    assert!(
        line(unscoped, "after ").contains("died with it"),
        "{unscoped}"
    );
    assert!(
        stdout.contains("== result: with scopes only the runaway tool died"),
        "{stdout}"
    );
}

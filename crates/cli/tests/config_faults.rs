//! The command line with a config file it cannot read: one clear warning, and the defaults apply.

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::process::Command;

use common::{rig, TempDir};

#[test]
fn an_unreadable_config_warns_and_defaults_apply() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("fault-unreadable");
    let config = dir.write("config", "process_scopes = off\n", false);
    std::fs::set_permissions(&config, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    // Root reads any file, so the CLI runs as nobody for this one.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_synaps-scope"))
        .args(["wrap", "--probe-timeout-ms", "500", "--", "true"])
        .env("SYNAPS_CONFIG", &config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "config file {}: cannot be opened: Permission denied",
            config.display()
        )),
        "{stderr}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        "true",
        "off did not apply: the file was not read"
    );
}

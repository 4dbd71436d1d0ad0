//! A probe the manager refuses means a direct launch and exactly one WARN per slice name (R11).

mod common;

use common::{env_with, rig, Capture, TempDir};
use synaps_scope::{decide, launcher_for_env, Decision, DirectReason, LauncherOptions, ScopeKind};

fn slice_env(dir: &TempDir, slice: &str) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let path = dir.write(
        &format!("{slice}.config"),
        &format!("tool_scope_slice = {slice}\n"),
        false,
    );
    env_with(&[("SYNAPS_CONFIG", &path.into_os_string())])
}

#[test]
fn a_refused_slice_gives_direct_launches_and_one_warning_over_ten_requests() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("r11one");
    let env = slice_env(&dir, "foo.service");
    let capture = Capture::default();
    for _ in 0..10 {
        let decision = capture
            .run(|| decide(&env, ScopeKind::Tool, &LauncherOptions::default()))
            .unwrap();
        let Decision::Direct(DirectReason::ProbeFailed { slice, detail }) = decision else {
            panic!("{decision:?}")
        };
        assert_eq!(slice.as_deref(), Some("foo.service"));
        assert!(
            detail.contains("Unit name 'foo.service' is not a slice"),
            "{detail}"
        );
    }
    let warnings = capture.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("slice foo.service") && warnings[0].contains("is not a slice"),
        "{warnings:?}"
    );
}

#[test]
fn two_different_refused_slices_warn_once_each() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("r11two");
    let capture = Capture::default();
    for _ in 0..3 {
        for slice in ["r11first.service", "r11second.socket"] {
            assert_eq!(
                capture
                    .run(|| launcher_for_env(&slice_env(&dir, slice)))
                    .unwrap(),
                None
            );
        }
    }
    let warnings = capture.warnings();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains("r11first.service"), "{warnings:?}");
    assert!(warnings[1].contains("r11second.socket"), "{warnings:?}");
}

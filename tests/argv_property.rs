//! Property (issue 7): hundreds of random argv vectors (random bytes, `${...}`, leading dashes,
//! empty strings) go through a real scoped launch of a program that prints its argv as bytes,
//! and arrive byte-identical.

mod common;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use common::{rig, run_argv};
use proptest::prelude::*;
use synaps_scope::{inherited_env, launcher_for_env};

/// One argument: arbitrary non-NUL bytes, or one of the shapes that trip up wrappers.
fn argument() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::collection::vec(1u8..=255, 0..24),
        1 => "[A-Z_]{1,8}".prop_map(|name| format!("${{{name}}}").into_bytes()),
        1 => "-{1,2}[a-z-]{0,10}".prop_map(String::into_bytes),
        1 => Just(Vec::new()),
        1 => Just(b"--".to_vec()),
        1 => "[ \t\n'\"\\\\$`;&|*?%]{1,6}".prop_map(String::into_bytes),
    ]
}

#[test]
fn random_argv_arrives_byte_identical() {
    let Some(_rig) = rig() else { return };
    let env = inherited_env();
    let launcher = launcher_for_env(&env).unwrap().expect("scoped");
    let config = ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(args in proptest::collection::vec(argument(), 0..8))| {
        let mut argv: Vec<OsString> =
            vec!["sh".into(), "-c".into(), "for a; do printf '%s\\0' \"$a\"; done".into(), "sh".into()];
        argv.extend(args.iter().cloned().map(OsString::from_vec));
        let wrapped = launcher.wrap(&argv, &env, None);
        prop_assert!(wrapped.unit.is_some());
        let out = run_argv(&wrapped.argv, &env).unwrap();
        prop_assert!(out.status.success());
        let mut received: Vec<Vec<u8>> = out.stdout.split(|&b| b == 0).map(<[u8]>::to_vec).collect();
        prop_assert_eq!(received.pop(), Some(Vec::new()), "NUL-terminated output");
        prop_assert_eq!(received, args);
    });
}

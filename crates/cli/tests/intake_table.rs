//! tests/cases/bad_input.json on the Rust surface and the command line: every bad value the core's
//! intake refuses is refused as bad input (`ErrorClass::InvalidInput`) by the Rust API that takes
//! it, and with exit status 2 by the command line where it can be given one. The C, Python and Node
//! surfaces run the same cases (crates/ffi/tests/intake_table.rs,
//! bindings/python/tests/test_intake_table.py, bindings/node/test/intake_table.test.js).

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use synaps_scope::intake::{self, CheckedEnv};
use synaps_scope::{
    launcher_for_effective_env, Classified, ErrorClass, Limit, Limits, ScopeHandle, ScopeKind,
};

fn cases() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/cases/bad_input.json");
    let table: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    table["cases"].as_array().unwrap().clone()
}

fn class_name(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::InvalidInput => "invalid-input",
        ErrorClass::NoSuchProgram => "no-such-program",
        ErrorClass::NoSuchScope => "no-such-scope",
        ErrorClass::Refused => "refused",
        ErrorClass::NotInScope => "not-in-scope",
        ErrorClass::Unavailable => "unavailable",
        ErrorClass::TimedOut => "timed-out",
        ErrorClass::Manager => "manager",
        ErrorClass::NoCgroup2 => "no-cgroup2",
        ErrorClass::Io => "io",
    }
}

fn bytes(text: &str) -> OsString {
    OsString::from_vec(text.as_bytes().to_vec())
}

/// The class of a refusal (a value accepted is a failure of the test).
fn refused<T: std::fmt::Debug, E: Classified>(result: Result<T, E>) -> ErrorClass {
    match result {
        Ok(accepted) => panic!("accepted: {accepted:?}"),
        Err(e) => e.class(),
    }
}

/// The classes the Rust surface gives the case's value, one per entry point that takes it.
fn rust_classes(case: &Value) -> Vec<ErrorClass> {
    if let Some(env) = case["env"].as_array() {
        let pairs: Vec<(OsString, OsString)> = env
            .iter()
            .map(|pair| {
                (
                    bytes(pair[0].as_str().unwrap()),
                    bytes(pair[1].as_str().unwrap()),
                )
            })
            .collect();
        return vec![
            refused(CheckedEnv::from_pairs(pairs.clone())),
            refused(launcher_for_effective_env(&pairs, ScopeKind::Tool)),
            refused(synaps_scope::find_program("sh".as_ref(), &pairs, None)),
        ];
    }
    if let Some(entry) = case["entry"].as_str() {
        let entries = [entry.as_bytes()];
        return vec![refused(CheckedEnv::from_entries(entries))];
    }
    if let Some(ms) = case["bound_ms"].as_u64() {
        return vec![refused(intake::bound_from_millis(ms, "t"))];
    }
    if let Some(seconds) = case["bound_s"].as_f64() {
        return vec![refused(intake::bound_from_secs(seconds, "t"))];
    }
    if let Some(pid) = case["pid"].as_i64() {
        let as_u32 = u32::try_from(pid).unwrap();
        return vec![
            refused(intake::pid(pid)),
            refused(ScopeHandle::of_process(as_u32)),
        ];
    }
    if let Some(name) = case["kind"].as_str() {
        return vec![refused(intake::kind_from_name(name))];
    }
    if let Some(code) = case["kind_code"].as_u64() {
        let code = u32::try_from(code).unwrap();
        return vec![refused(intake::kind_from_code(code))];
    }
    if let Some(code) = case["shell_words_code"].as_u64() {
        let code = u32::try_from(code).unwrap();
        return vec![refused(intake::shell_words_from_code(code))];
    }
    if let Some(limit) = case["limit"].as_array() {
        let (name, value) = (limit[0].as_str().unwrap(), limit[1].as_str().unwrap());
        return vec![
            refused(Limits::from_pairs([(name, value)])),
            refused(Limits::new().set(name, value)),
            refused(format!("{name}={value}").parse::<Limit>()),
        ];
    }
    panic!("a case no surface knows: {case}");
}

#[test]
fn every_bad_value_is_bad_input_on_the_rust_surface() {
    let cases = cases();
    assert!(cases.len() >= 28, "the table holds every case");
    for case in &cases {
        let classes = rust_classes(case);
        assert!(!classes.is_empty());
        for class in classes {
            assert_eq!(class_name(class), case["class"], "{}", case["name"]);
        }
    }
}

#[test]
fn every_bad_value_the_command_line_takes_exits_2_with_the_core_s_words() {
    let mut run = 0;
    for case in cases() {
        let (option, value) = if let Some(ms) = case["bound_ms"].as_u64() {
            ("--probe-timeout-ms", ms.to_string())
        } else if let Some(kind) = case["kind"].as_str() {
            ("--kind", kind.to_owned())
        } else if let Some(limit) = case["limit"].as_array() {
            let (name, value) = (limit[0].as_str().unwrap(), limit[1].as_str().unwrap());
            ("--property", format!("{name}={value}"))
        } else {
            continue;
        };
        let out = Command::new(env!("CARGO_BIN_EXE_synaps-scope"))
            .args(["wrap", option, &value, "--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}: {out:?}", case["name"]);
        let core_words = if option == "--kind" {
            intake::kind_from_name(&value).unwrap_err().to_string()
        } else if option == "--property" {
            value.parse::<Limit>().unwrap_err().to_string()
        } else {
            intake::bound_from_millis_text(&value, "the bound")
                .unwrap_err()
                .to_string()
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&core_words), "{}: {stderr}", case["name"]);
        run += 1;
    }
    assert!(
        run >= 15,
        "the command line takes bounds, kinds and limits: {run} cases run"
    );
}

//! tests/cases/bad_input.json through the C ABI's exports: every bad value a C caller can hand
//! over is refused with the case's result code, its out-parameter untouched, and the core's words
//! in `scope_last_error`. The other surfaces run the same cases (crates/cli/tests/intake_table.rs,
//! bindings/python/tests/test_intake_table.py, bindings/node/test/intake_table.test.js).

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::ffi::{c_char, CStr, CString};
use std::path::Path;
use std::ptr;

use serde_json::Value;
use synaps_scope_ffi::abi::{SCOPE_KIND_TOOL, SCOPE_SHELL_WORDS_POSITIONAL};
use synaps_scope_ffi::argv::{scope_argv, scope_argv_free, scope_wrap_shell};
use synaps_scope_ffi::doctor::scope_diagnose;
use synaps_scope_ffi::error::{scope_last_error, scope_result, scope_result_name};
use synaps_scope_ffi::handle::{scope_handle, scope_handle_of_process};
use synaps_scope_ffi::launcher::{
    scope_kind_from_name, scope_launcher, scope_launcher_for_env_timeout, scope_launcher_free,
};
use synaps_scope_ffi::limits::{scope_limits, scope_limits_new, scope_property};
use synaps_scope_ffi::log::scope_flush_warnings;

fn cases() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/cases/bad_input.json");
    let table: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    table["cases"].as_array().unwrap().clone()
}

fn last_error() -> String {
    // SAFETY: scope_last_error never returns NULL, and the string lives until the next failure.
    unsafe { CStr::from_ptr(scope_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn name(result: scope_result) -> String {
    // SAFETY: scope_result_name returns a static string.
    unsafe { CStr::from_ptr(scope_result_name(result as u32)) }
        .to_string_lossy()
        .into_owned()
}

/// A launcher request with `envp` (NULL-terminated), `kind` and `ms`; the launcher is freed.
fn request(envp: &[*const c_char], kind: u32, ms: u32) -> scope_result {
    let sentinel = ptr::NonNull::<scope_launcher>::dangling().as_ptr();
    let mut out = sentinel;
    let envp = if envp.is_empty() {
        ptr::null()
    } else {
        envp.as_ptr()
    };
    // SAFETY: envp is NULL or NULL-terminated C strings that outlive the call; out is writable.
    let result = unsafe { scope_launcher_for_env_timeout(envp, kind, ms, &mut out) };
    if result == scope_result::Ok {
        // SAFETY: a launcher (or NULL) the call just made.
        unsafe { scope_launcher_free(out) };
    } else {
        assert_eq!(out, sentinel, "out written on failure");
    }
    result
}

/// What the C surface gives each value a C caller can express, with the call that refused it.
fn c_results(case: &Value) -> Option<Vec<(scope_result, &'static str)>> {
    if let Some(env) = case["env"].as_array() {
        let (key, value) = (env[0][0].as_str().unwrap(), env[0][1].as_str().unwrap());
        // A C string ends at its first NUL, and a KEY=VALUE entry cannot carry a key with '=':
        // of these, only the empty key can be written in an envp.
        if !key.is_empty() || value.contains('\0') {
            return None;
        }
        let entry = CString::new(format!("{key}={value}")).unwrap();
        return Some(vec![(
            request(&[entry.as_ptr(), ptr::null()], SCOPE_KIND_TOOL, 3000),
            "scope_launcher_for_env_timeout",
        )]);
    }
    if let Some(entry) = case["entry"].as_str() {
        let entry = CString::new(entry).unwrap();
        let mut report = ptr::null_mut();
        let mut verdict = 99;
        let envp = [entry.as_ptr(), ptr::null()];
        // SAFETY: envp is NULL-terminated C strings; the outs are writable.
        let diagnosed = unsafe { scope_diagnose(envp.as_ptr(), 3000, &mut report, &mut verdict) };
        assert!(report.is_null() && verdict == 99, "outs written on failure");
        return Some(vec![
            (
                request(&envp, SCOPE_KIND_TOOL, 3000),
                "scope_launcher_for_env_timeout",
            ),
            (diagnosed, "scope_diagnose"),
        ]);
    }
    if let Some(ms) = case["bound_ms"].as_u64() {
        let ms = u32::try_from(ms).unwrap();
        return Some(vec![
            (
                request(&[], SCOPE_KIND_TOOL, ms),
                "scope_launcher_for_env_timeout",
            ),
            (scope_flush_warnings(ms), "scope_flush_warnings"),
        ]);
    }
    if let Some(pid) = case["pid"].as_u64() {
        let mut out = ptr::NonNull::<scope_handle>::dangling().as_ptr();
        // SAFETY: out is writable.
        let result = unsafe { scope_handle_of_process(u32::try_from(pid).unwrap(), &mut out) };
        return Some(vec![(result, "scope_handle_of_process")]);
    }
    if let Some(kind) = case["kind"].as_str() {
        let kind = CString::new(kind).unwrap();
        let mut out = 99;
        // SAFETY: kind is a C string; out is writable.
        let result = unsafe { scope_kind_from_name(kind.as_ptr(), &mut out) };
        assert_eq!(out, 99, "out written on failure");
        return Some(vec![(result, "scope_kind_from_name")]);
    }
    if let Some(code) = case["kind_code"].as_u64() {
        let code = u32::try_from(code).unwrap();
        return Some(vec![(
            request(&[], code, 3000),
            "scope_launcher_for_env_timeout",
        )]);
    }
    if let Some(code) = case["shell_words_code"].as_u64() {
        // A launcher from the rig's manager, so that the words are what is refused.
        let mut launcher = ptr::null_mut();
        // SAFETY: NULL envp (this process's); out is writable.
        let made = unsafe { scope_launcher_for_env_timeout(ptr::null(), 0, 3000, &mut launcher) };
        assert!(
            made == scope_result::Ok && !launcher.is_null(),
            "{}",
            last_error()
        );
        let words = [c"true".as_ptr(), ptr::null()];
        let mut out = ptr::NonNull::<scope_argv>::dangling().as_ptr();
        let how = u32::try_from(code).unwrap();
        assert_ne!(how, SCOPE_SHELL_WORDS_POSITIONAL);
        // SAFETY: a live launcher, NULL-terminated words, NULL envp and cwd, a writable out.
        let result = unsafe {
            scope_wrap_shell(
                launcher,
                ptr::null(),
                words.as_ptr(),
                how,
                ptr::null(),
                ptr::null(),
                &mut out,
            )
        };
        if result == scope_result::Ok {
            // SAFETY: the argv the call made.
            unsafe { scope_argv_free(out) };
        }
        // SAFETY: the launcher made above.
        unsafe { scope_launcher_free(launcher) };
        return Some(vec![(result, "scope_wrap_shell")]);
    }
    if let Some(limit) = case["limit"].as_array() {
        let name = CString::new(limit[0].as_str().unwrap()).unwrap();
        let value = CString::new(limit[1].as_str().unwrap()).unwrap();
        let properties = [scope_property {
            name: name.as_ptr(),
            value: value.as_ptr(),
        }];
        let mut out = ptr::NonNull::<scope_limits>::dangling().as_ptr();
        let before = out;
        // SAFETY: one property of C strings; out is writable.
        let result = unsafe { scope_limits_new(properties.as_ptr(), 1, &mut out) };
        assert_eq!(out, before, "out written on failure");
        return Some(vec![(result, "scope_limits_new")]);
    }
    if case["bound_s"].is_number() {
        return None;
    }
    panic!("a case no surface knows: {case}");
}

#[test]
fn every_bad_value_a_c_caller_can_hand_over_gets_its_result_code() {
    let Some(_rig) = common::rig() else { return };
    let mut run = 0;
    for case in cases() {
        let Some(results) = c_results(&case) else {
            continue;
        };
        let want = case["c_result"]
            .as_str()
            .expect("a case C can express names its code");
        for (result, call) in results {
            assert_eq!(
                name(result),
                name(match want {
                    "INVALID_KIND" => scope_result::InvalidKind,
                    "INVALID_ARGUMENT" => scope_result::InvalidArgument,
                    other => panic!("unknown code {other}"),
                }),
                "{} through {call}: {}",
                case["name"],
                last_error()
            );
            assert!(!last_error().is_empty(), "{}: no message", case["name"]);
            run += 1;
        }
    }
    assert!(run >= 24, "{run} refusals checked");
}

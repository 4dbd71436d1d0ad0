//! The C ABI's argv/envp intake: arbitrary NUL-terminated argv and envp arrays (entries with no
//! '=', empty keys, non-UTF-8 bytes, empty arrays) never crash; every call returns a documented
//! result code, and out-parameters are written only on success.
#![no_main]

use std::ffi::{c_char, CString};
use std::ptr;

use libfuzzer_sys::fuzz_target;
use synaps_scope::ffi::launcher::scope_resolve_program;
use synaps_scope::ffi::{scope_result, scope_string_free};

/// The input's NUL-free pieces, split at `separator`, as C strings.
fn entries(bytes: &[u8], separator: u8) -> Vec<CString> {
    bytes
        .split(|&b| b == separator)
        .take(64)
        .map(|piece| {
            CString::new(
                piece
                    .iter()
                    .copied()
                    .filter(|&b| b != 0)
                    .collect::<Vec<u8>>(),
            )
            .unwrap()
        })
        .collect()
}

fn pointers(strings: &[CString]) -> Vec<*const c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(ptr::null()))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let (argv_part, env_part) = match data.iter().position(|&b| b == 0xff) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let argv = entries(argv_part, b'\n');
    let env = entries(env_part, b'\n');
    let argv_ptrs = pointers(&argv);
    let env_ptrs = pointers(&env);
    let program = argv_ptrs[0];
    let sentinel = 0x1 as *mut c_char;
    let mut out = sentinel;
    // SAFETY: both arrays are NULL-terminated arrays of live NUL-terminated strings; `out` is writable.
    let result =
        unsafe { scope_resolve_program(program, env_ptrs.as_ptr(), ptr::null(), &mut out) };
    match result {
        scope_result::Ok => {
            assert!(!out.is_null() && out != sentinel);
            // SAFETY: a string the library returned, freed once.
            unsafe { scope_string_free(out) };
        }
        scope_result::NotFound | scope_result::InvalidArgument | scope_result::NullParameter => {
            assert_eq!(out, sentinel, "out written on failure");
        }
        other => panic!("undocumented result {other:?}"),
    }
});

//! The config file parser never panics, and what it returns is consistent with its input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &[u8]| {
    let (entries, malformed) = synaps_scope::__fuzz::parse_config(text);
    let lines = text.split(|&b| b == b'\n').count();
    for (key, value, line) in &entries {
        assert!(!key.is_empty() && *line >= 1 && *line <= lines);
        assert!(!key.contains('=') && !value.contains('\n'));
    }
    assert!(malformed.iter().all(|&line| line >= 1 && line <= lines));
    assert!(entries.len() + malformed.len() <= lines);
});

//! The `systemd-run --version` parser never panics, and only reads the first line.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|output: &[u8]| {
    let version = synaps_scope::__fuzz::parse_version(output);
    let first_line = output.split(|&b| b == b'\n').next().unwrap_or_default();
    assert_eq!(version, synaps_scope::__fuzz::parse_version(first_line));
    if version.is_some() {
        let first_word = std::str::from_utf8(first_line)
            .ok()
            .and_then(|l| l.split_whitespace().next());
        assert_eq!(first_word, Some("systemd"));
    }
});

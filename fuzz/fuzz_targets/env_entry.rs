//! `KEY=VALUE` parsing never panics; an accepted entry splits at its first '=' and round-trips.
#![no_main]

use std::os::unix::ffi::OsStrExt;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|entry: &[u8]| {
    if let Ok((key, value)) = synaps_scope::parse_env_entry(entry) {
        assert!(!key.is_empty() && !key.as_bytes().contains(&b'='));
        let mut joined = key.as_bytes().to_vec();
        joined.push(b'=');
        joined.extend_from_slice(value.as_bytes());
        assert_eq!(joined, entry);
    }
});

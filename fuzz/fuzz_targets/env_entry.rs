//! The intake of `KEY=VALUE` entries never panics; an accepted entry splits at its first '=',
//! holds a key no process would refuse, and round-trips.
#![no_main]

use std::os::unix::ffi::OsStrExt;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|entry: &[u8]| {
    if let Ok(env) = synaps_scope::intake::CheckedEnv::from_entries([entry]) {
        let (key, value) = &env.as_pairs()[0];
        assert!(!key.is_empty() && !key.as_bytes().contains(&b'=') && !entry.contains(&0));
        let mut joined = key.as_bytes().to_vec();
        joined.push(b'=');
        joined.extend_from_slice(value.as_bytes());
        assert_eq!(joined, entry);
    }
});

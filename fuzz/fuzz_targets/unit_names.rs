//! Slice names mangle as systemd-run mangles them without panicking, into names that mangle to
//! themselves; descriptions of any program path are one line of text with no control character.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(name) = std::str::from_utf8(bytes) {
        if let Ok(slice) = synaps_scope::__fuzz::mangle_slice(name) {
            assert!(slice.ends_with(".slice") && slice.len() < 256, "{slice:?}");
            assert_eq!(
                synaps_scope::__fuzz::mangle_slice(&slice).as_ref(),
                Ok(&slice)
            );
        }
    }
    let description = synaps_scope::__fuzz::description(bytes);
    assert!(
        !description.chars().any(char::is_control),
        "{description:?}"
    );
});

//! The D-Bus message parser never panics on anything a peer may send, as a reader meets it: the
//! length from the fixed header first, then the whole message.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    synaps_scope::__fuzz::parse_bus_message(bytes);
});

//! A launch's limits (`NAME=VALUE`, as `-p` takes them) never panic the parser, and whatever it
//! accepts is one argument of plain characters, spaces at most between them (A5: nothing a value
//! holds can reach systemd-run or the manager as anything but that value, nor start a log line of
//! its own), that reads back as itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use synaps_scope::Limit;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    if let Ok(limit) = text.parse::<Limit>() {
        let shown = limit.to_string();
        assert_eq!(shown, text);
        assert_eq!(shown.parse::<Limit>().ok(), Some(limit.clone()));
        assert!(
            !limit
                .value()
                .chars()
                .any(|c| (c.is_whitespace() && c != ' ')
                    || c.is_control()
                    || c == '='
                    || c == '\\'),
            "{shown:?}"
        );
    }
});

//! Unit names (R2): `synaps-<kind>-<32 random hex>.scope`, new for every wrap, and the parse that
//! tells the library's own scopes from any other unit (R15); slice names mangled as systemd-run
//! mangles them; descriptions safe for any bytes (A5).

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::input::kind::ScopeKind;

/// `synaps-<kind>-<32 hex>.scope`: 128 bits from a per-process random key over a counter, so
/// names never repeat within a process and collide across processes with negligible odds.
pub(crate) fn unit_name(kind: ScopeKind) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let keys = std::collections::hash_map::RandomState::new();
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut first = keys.build_hasher();
    first.write_u64(count);
    first.write_u32(std::process::id());
    let high = first.finish();
    let mut second = keys.build_hasher();
    second.write_u64(high);
    second.write_u64(count);
    format!("synaps-{kind}-{high:016x}{:016x}.scope", second.finish())
}

/// The kind of a unit name this library makes (`synaps-<kind>-<32 lowercase hex>.scope`), or None
/// for any other name: the mark that lets scope handles refuse cgroups that are not ours (R15).
pub(crate) fn parse_unit_name(name: &str) -> Option<ScopeKind> {
    let rest = name.strip_prefix("synaps-")?.strip_suffix(".scope")?;
    let (kind, hex) = rest.split_once('-')?;
    let is_hex = hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    is_hex.then(|| kind.parse().ok()).flatten()
}

/// The longest unit name systemd accepts, in bytes, exclusive (`UNIT_NAME_MAX`).
const UNIT_NAME_MAX: usize = 256;
/// The unit types, i.e. the suffixes a unit name may end in.
const UNIT_TYPES: [&str; 11] = [
    "service",
    "socket",
    "target",
    "device",
    "mount",
    "automount",
    "swap",
    "timer",
    "path",
    "slice",
    "scope",
];

fn is_valid_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b":-_.\\".contains(&b)
}

/// What `unit_name_is_valid` of systemd says: `plain_only` asks for a name without `@`.
fn is_valid_unit_name(name: &str, plain_only: bool) -> bool {
    if name.is_empty() || name.len() >= UNIT_NAME_MAX {
        return false;
    }
    let Some(dot) = name.rfind('.').filter(|&d| d > 0) else {
        return false;
    };
    if !UNIT_TYPES.contains(&&name[dot + 1..]) {
        return false;
    }
    let prefix = &name.as_bytes()[..dot];
    if !prefix.iter().all(|&b| b == b'@' || is_valid_char(b)) {
        return false;
    }
    match prefix.iter().position(|&b| b == b'@') {
        None => true,
        Some(0) => false,
        // An instance (`a@b`) or a template (`a@`): valid names, but never a slice of ours.
        Some(_) => !plain_only,
    }
}

/// The slice name systemd-run makes of `--slice=NAME` (`unit_name_mangle_with_suffix(NAME,
/// ".slice")`), checked as the manager checks a scope's `Slice=`. Err says what systemd-run or
/// the manager would say.
pub(crate) fn mangle_slice(name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err("Failed to mangle an empty slice name".to_owned());
    }
    let mangled = if is_valid_unit_name(name, false) {
        name.to_owned()
    } else if name.starts_with('/') && !name.split('/').any(|c| c == "..") {
        // systemd-run names an absolute path after the mount or device unit of that path.
        return Err(format!(
            "Unit name for path '{name}' is a mount or device unit, not a slice"
        ));
    } else {
        let mut out = String::with_capacity(name.len() + 6);
        for b in name.bytes() {
            match b {
                b'/' => out.push('-'),
                b if b == b'@' || is_valid_char(b) => out.push(char::from(b)),
                b => out.push_str(&format!("\\x{b:02x}")),
            }
        }
        if !is_valid_unit_name(&out, false) {
            out.push_str(".slice");
        }
        if !is_valid_unit_name(&out, false) {
            return Err(format!("Failed to mangle name '{name}': Invalid argument"));
        }
        out
    };
    if !is_valid_unit_name(&mangled, true) {
        return Err(format!("Invalid unit name '{mangled}'"));
    }
    if !mangled.ends_with(".slice") {
        return Err(format!("Unit name '{mangled}' is not a slice"));
    }
    Ok(mangled)
}

/// The scope's Description: `synaps <kind>: <program>`, with every byte of the path that is not
/// printable UTF-8 (control characters, invalid UTF-8) and every backslash written as `\xNN`,
/// so that no program path can add a line (a setting) to the transient unit file (A5) or make the
/// D-Bus message invalid.
pub(crate) fn description(kind: ScopeKind, program: &[u8]) -> String {
    let mut text = format!("synaps {kind}: ");
    let escape = |text: &mut String, bytes: &[u8]| {
        for b in bytes {
            text.push_str(&format!("\\x{b:02x}"));
        }
    };
    let mut rest = program;
    while !rest.is_empty() {
        let (valid, invalid) = match std::str::from_utf8(rest) {
            Ok(all) => (all, 0),
            Err(e) => {
                let valid = std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default();
                (valid, e.error_len().unwrap_or(rest.len() - e.valid_up_to()))
            }
        };
        for c in valid.chars() {
            if c.is_control() || c == '\\' {
                escape(&mut text, c.encode_utf8(&mut [0; 4]).as_bytes());
            } else {
                text.push(c);
            }
        }
        escape(&mut text, &rest[valid.len()..valid.len() + invalid]);
        rest = &rest[valid.len() + invalid..];
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_mangle_as_systemd_run_mangles_them() {
        for (name, expected) in [
            ("app.slice", Ok("app.slice")),
            ("my-tools", Ok("my-tools.slice")),
            ("my tools", Ok("my\\x20tools.slice")),
            ("a/b", Ok("a-b.slice")),
            ("émoji", Ok("\\xc3\\xa9moji.slice")),
            ("foo.service", Err("Unit name 'foo.service' is not a slice")),
            ("a@b.slice", Err("Invalid unit name 'a@b.slice'")),
            (
                "/home/x",
                Err("Unit name for path '/home/x' is a mount or device unit, not a slice"),
            ),
            ("", Err("Failed to mangle an empty slice name")),
        ] {
            assert_eq!(
                mangle_slice(name),
                expected.map(str::to_owned).map_err(str::to_owned),
                "{name:?}"
            );
        }
        assert!(mangle_slice(&"x".repeat(250)).is_err());
        assert_eq!(
            mangle_slice(&"x".repeat(249)),
            Ok("x".repeat(249) + ".slice")
        );
    }

    #[test]
    fn descriptions_are_one_line_of_valid_text_for_any_bytes() {
        assert_eq!(
            description(ScopeKind::Tool, b"/usr/bin/sh"),
            "synaps tool: /usr/bin/sh"
        );
        assert_eq!(
            description(ScopeKind::Daemon, b"/tmp/a\nMemoryMax=1\xff\\%n"),
            "synaps daemon: /tmp/a\\x0aMemoryMax=1\\xff\\x5c%n"
        );
    }

    #[test]
    fn unit_names_have_the_r2_shape_and_never_repeat() {
        let names: std::collections::HashSet<String> =
            (0..10_000).map(|_| unit_name(ScopeKind::Daemon)).collect();
        assert_eq!(names.len(), 10_000);
        for name in &names {
            assert_eq!(parse_unit_name(name), Some(ScopeKind::Daemon), "{name}");
        }
        assert_eq!(
            parse_unit_name(&unit_name(ScopeKind::Tool)),
            Some(ScopeKind::Tool)
        );
    }

    #[test]
    fn only_the_library_s_own_unit_names_parse() {
        let hex = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            parse_unit_name(&format!("synaps-tool-{hex}.scope")),
            Some(ScopeKind::Tool)
        );
        for other in [
            format!("synaps-shell-{hex}.scope"),
            format!("synaps-tool-{}.scope", hex.to_uppercase()),
            format!("synaps-tool-{hex}0.scope"),
            format!("synaps-tool-{hex}.service"),
            format!("run-{hex}.scope"),
            "app.slice".to_owned(),
            "synaps-tool-.scope".to_owned(),
            String::new(),
        ] {
            assert_eq!(parse_unit_name(&other), None, "{other}");
        }
    }
}

//! Unit names (R2): `synaps-<kind>-<32 random hex>.scope`, new for every wrap, and the parse that
//! tells the library's own scopes from any other unit (R15).

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::kind::ScopeKind;

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

#[cfg(test)]
mod tests {
    use super::*;

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

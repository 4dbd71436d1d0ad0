//! The front door stays true to the house: README.md names no release but the workspace's own
//! (`[workspace.package] version` in Cargo.toml), fits in 300 lines, and every page it links to is
//! there. No manager needed.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn workspace_version() -> String {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let package = manifest
        .split("[workspace.package]")
        .nth(1)
        .expect("Cargo.toml has [workspace.package]");
    let line = package
        .lines()
        .find(|line| line.trim_start().starts_with("version"))
        .expect("[workspace.package] names the version");
    line.split('"').nth(1).expect("a quoted version").to_owned()
}

/// Every `N.N.N` in `text` (a release of this project: the systemd, Python and Node versions the
/// pages name have fewer parts).
fn releases(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (at, line) in text.lines().enumerate() {
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let starts = bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_digit());
            if starts {
                let end = bytes[i..]
                    .iter()
                    .position(|b| !(b.is_ascii_digit() || *b == b'.'))
                    .map_or(bytes.len(), |n| i + n);
                let word = line[i..end].trim_end_matches('.');
                if word.split('.').count() == 3 && word.split('.').all(|p| !p.is_empty()) {
                    found.push((at + 1, word.to_owned()));
                }
                i = end;
            } else {
                i += 1;
            }
        }
    }
    found
}

#[test]
fn the_readme_names_no_release_but_the_workspaces() {
    let version = workspace_version();
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let named = releases(&readme);
    assert!(
        named.iter().any(|(_, v)| *v == version),
        "README.md never names the workspace's version {version} (its install lines do)"
    );
    let other: Vec<_> = named.iter().filter(|(_, v)| *v != version).collect();
    assert!(
        other.is_empty(),
        "README.md names releases other than the workspace's {version}: {other:?} (line, version)"
    );
}

#[test]
fn the_reading_finds_a_release_anywhere_in_a_line() {
    let text = "pip install synaps_scope-1.4.0-cp39-abi3.whl\nsystemd 262, Python 3.9, glibc 2.17.\n(1.5.2).";
    let found: Vec<String> = releases(text).into_iter().map(|(_, v)| v).collect();
    assert_eq!(found, ["1.4.0", "1.5.2"]);
}

#[test]
fn the_readme_fits_in_300_lines_and_its_links_lead_somewhere() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines; the rest belongs in docs/"
    );
    let mut missing = Vec::new();
    for link in readme.split("](").skip(1) {
        let target = link.split(')').next().unwrap_or("");
        let path = target.split('#').next().unwrap_or("");
        if path.is_empty() || path.contains("://") {
            continue;
        }
        if !root().join(path).exists() {
            missing.push(target.to_owned());
        }
    }
    assert!(
        missing.is_empty(),
        "README.md links to nothing: {missing:?}"
    );
}

//! One version number for every artifact: the workspace's, which every crate inherits (and so the
//! wheel, through maturin, and the C library's soname and pkg-config file, through cargo-c), the
//! npm package's, the changelog's newest entry, and `scope_version()`. scripts/test-dist.sh checks
//! the built artifacts themselves (wheel, npm package, soname, `.pc`, CMake package).

use std::ffi::CStr;
use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repository().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The value of `key = "..."` in the `[section]` of a Cargo.toml.
fn toml_value(text: &str, section: &str, key: &str) -> Option<String> {
    let start = text.find(&format!("\n[{section}]\n"))?;
    text[start + section.len() + 3..]
        .lines()
        .take_while(|line| !line.starts_with('['))
        .find_map(|line| line.strip_prefix(&format!("{key} = \"")))
        .map(|rest| rest.trim_end_matches('"').to_owned())
}

fn workspace_version() -> String {
    toml_value(&read("Cargo.toml"), "workspace.package", "version")
        .expect("[workspace.package] version")
}

#[test]
fn every_crate_takes_the_workspace_version() {
    let version = workspace_version();
    assert_eq!(env!("CARGO_PKG_VERSION"), version);
    for manifest in [
        "Cargo.toml",
        "crates/ffi/Cargo.toml",
        "crates/cli/Cargo.toml",
        "crates/exec/Cargo.toml",
        "bindings/python/Cargo.toml",
    ] {
        let text = read(manifest);
        assert!(
            text.contains("\nversion.workspace = true\n"),
            "{manifest} does not take the workspace version"
        );
        if let Some(dependency) = text.lines().find(|l| l.starts_with("synaps-scope = {")) {
            assert!(
                dependency.contains(&format!("version = \"={version}\"")),
                "{manifest}: {dependency}"
            );
        }
    }
    // cargo-c derives the soname (libsynaps_scope.so.MAJOR) and the .pc version from the package
    // version when the manifest names none.
    let ffi = read("crates/ffi/Cargo.toml");
    for section in [
        "package.metadata.capi.library",
        "package.metadata.capi.pkg_config",
    ] {
        assert_eq!(
            toml_value(&ffi, section, "version"),
            None,
            "{section} names its own version"
        );
    }
}

#[test]
fn scope_version_the_npm_package_and_the_changelog_agree() {
    let version = workspace_version();
    // SAFETY: scope_version returns a static NUL-terminated string.
    let library = unsafe { CStr::from_ptr(synaps_scope_ffi::scope_version()) };
    assert_eq!(library.to_str().unwrap(), version);
    for file in [
        "bindings/node/package.json",
        "bindings/node/package-lock.json",
    ] {
        let text = read(file);
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("\"version\":"))
            .unwrap_or_else(|| panic!("{file} has no version"));
        assert_eq!(
            line.trim(),
            format!("\"version\": \"{version}\","),
            "{file}"
        );
    }
    let changelog = read("CHANGELOG.md");
    // What is not released yet is gathered under `## Unreleased`, above the newest release.
    let newest = changelog
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .find(|entry| *entry != "Unreleased")
        .expect("CHANGELOG.md has an entry");
    assert_eq!(newest, version, "the changelog's newest entry");
}

#[test]
fn the_major_version_is_the_c_abi_version() {
    let version = workspace_version();
    let major: u32 = version.split('.').next().unwrap().parse().unwrap();
    assert_eq!(major, synaps_scope_ffi::SCOPE_ABI_VERSION);
    assert_eq!(major, synaps_scope_ffi::scope_abi_version());
}

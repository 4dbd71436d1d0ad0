//! Every suite has a place: docs/testing.md's table "Where each suite runs" (read through
//! `scripts/placement.sh`, as `scripts/test.sh` reads it) has a row for each test file of the
//! repository, names only files that exist, and uses only the placements it defines. A new test
//! file without a row would run nowhere, so it fails here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const PLACEMENTS: [&str; 5] = ["once", "every-version", "launches", "bindings", "bench"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The lines `scripts/placement.sh ARGS` prints, as the suite's plan reads them.
fn placement(args: &[&str]) -> Vec<String> {
    let out = Command::new(root().join("scripts/placement.sh"))
        .args(args)
        .output()
        .expect("scripts/placement.sh runs");
    assert!(
        out.status.success(),
        "placement.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The table's rows: (suite, placement).
fn rows() -> Vec<(String, String)> {
    placement(&["list"])
        .iter()
        .map(|line| {
            let (suite, placement) = line.split_once(' ').expect("SUITE PLACEMENT");
            (suite.to_owned(), placement.to_owned())
        })
        .collect()
}

/// Files in `dir` (relative to the root) whose names satisfy `wanted`, as root-relative paths.
fn files(dir: &str, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root().join(dir)) else {
        return Vec::new();
    };
    entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            wanted(&name).then(|| format!("{dir}/{name}"))
        })
        .collect()
}

/// Whether any Rust file under `dir` holds a test.
fn has_unit_tests(dir: &Path) -> bool {
    std::fs::read_dir(dir).into_iter().flatten().any(|entry| {
        let path = entry.unwrap().path();
        if path.is_dir() {
            has_unit_tests(&path)
        } else {
            path.extension().is_some_and(|ext| ext == "rs")
                && std::fs::read_to_string(&path).is_ok_and(|text| text.contains("#[test]"))
        }
    })
}

/// Every test file and unit-tested source tree of the repository.
fn test_files() -> BTreeSet<String> {
    let rust = |name: &str| name.ends_with(".rs");
    let mut found = BTreeSet::new();
    let crate_dirs: Vec<String> = std::iter::once(".".to_owned())
        .chain(
            std::fs::read_dir(root().join("crates"))
                .unwrap()
                .map(|entry| format!("crates/{}", entry.unwrap().file_name().to_str().unwrap())),
        )
        .chain(std::iter::once("bindings/python".to_owned()))
        .collect();
    for dir in &crate_dirs {
        let prefix = dir
            .strip_prefix("./")
            .unwrap_or(dir)
            .trim_start_matches('.');
        let join = |sub: &str| {
            if prefix.is_empty() {
                sub.to_owned()
            } else {
                format!("{prefix}/{sub}")
            }
        };
        found.extend(files(&join("tests"), rust));
        found.extend(files(&join("benches"), rust));
        if has_unit_tests(&root().join(join("src"))) {
            found.insert(format!("{}/", join("src")));
        }
    }
    found.extend(files("bindings/python/tests", |name| {
        name.starts_with("test_") && name.ends_with(".py")
    }));
    found.extend(files("bindings/node/test", |name| {
        name.ends_with(".test.js")
    }));
    found
}

#[test]
fn every_test_file_has_a_place_and_every_row_a_file() {
    let rows = rows();
    let placed: BTreeSet<String> = rows.iter().map(|(suite, _)| suite.clone()).collect();
    assert_eq!(placed.len(), rows.len(), "a suite has one row: {rows:?}");
    for (suite, placement) in &rows {
        assert!(
            PLACEMENTS.contains(&placement.as_str()),
            "{suite}: placement {placement:?} is none of {PLACEMENTS:?}"
        );
        assert!(
            root().join(suite).exists(),
            "{suite} has a row in docs/testing.md but is not in the repository"
        );
        if let Some(tree) = suite.strip_suffix("src/") {
            assert!(
                has_unit_tests(&root().join(tree).join("src")),
                "{suite} has a row in docs/testing.md but no unit test to run"
            );
        }
    }
    let unplaced: Vec<_> = test_files().difference(&placed).cloned().collect();
    assert!(
        unplaced.is_empty(),
        "test files with no row in docs/testing.md's \"Where each suite runs\", so run nowhere: {unplaced:?}"
    );
}

#[test]
fn the_plan_runs_every_suite_somewhere_and_once_suites_once() {
    let select =
        |version: &str, wrapper: &str| placement(&["select", version, wrapper, "247", "262"]);
    let versions = ["247", "252", "254", "257", "262"];
    let wrappers = ["synaps-scope-exec", "systemd-run"];
    let runs: Vec<(String, String, Vec<String>)> = versions
        .iter()
        .flat_map(|v| wrappers.iter().map(move |w| (v.to_string(), w.to_string())))
        .map(|(v, w)| {
            let suites = select(&v, &w);
            (v, w, suites)
        })
        .collect();
    for (suite, placement) in rows() {
        let slots: Vec<(&str, &str)> = runs
            .iter()
            .filter(|(_, _, suites)| suites.contains(&suite))
            .map(|(v, w, _)| (v.as_str(), w.as_str()))
            .collect();
        let expected: Vec<(&str, &str)> = match placement.as_str() {
            "once" => vec![("262", "synaps-scope-exec")],
            "every-version" => versions.iter().map(|v| (*v, "synaps-scope-exec")).collect(),
            "launches" => versions
                .iter()
                .flat_map(|v| {
                    let mut slots = vec![(*v, "synaps-scope-exec")];
                    if *v == "247" || *v == "262" {
                        slots.push((*v, "systemd-run"));
                    }
                    slots
                })
                .collect(),
            "bindings" => ["247", "262"]
                .iter()
                .flat_map(|v| wrappers.iter().map(move |w| (*v, *w)))
                .collect(),
            "bench" => vec![],
            other => panic!("{suite}: {other}"),
        };
        assert_eq!(
            slots, expected,
            "{suite} ({placement}) runs where its placement says"
        );
    }
}

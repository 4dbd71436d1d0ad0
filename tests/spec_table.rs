//! docs/spec.md's table of where each rule lives names real modules and real tests, and every
//! rule and amendment of the contract has a row.

use std::collections::BTreeSet;
use std::path::Path;

/// The rows of the table: (rule, modules, tests), each cell's backquoted names.
fn rows(spec: &str) -> Vec<(String, Vec<String>, Vec<String>)> {
    let table = spec
        .split("## Where each rule lives")
        .nth(1)
        .expect("docs/spec.md has a section \"Where each rule lives\"");
    table
        .lines()
        .skip_while(|line| !line.starts_with("| Rule"))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 3, "a row of three cells: {line}");
            let names = |cell: &str| -> Vec<String> {
                cell.split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_owned)
                    .collect()
            };
            (cells[0].to_owned(), names(cells[1]), names(cells[2]))
        })
        .collect()
}

#[test]
fn every_rule_has_a_row_naming_modules_and_tests_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spec = std::fs::read_to_string(root.join("docs/spec.md")).unwrap();
    let rows = rows(&spec);
    let rules: BTreeSet<String> = rows.iter().map(|(rule, _, _)| rule.clone()).collect();
    let stated: BTreeSet<String> = spec
        .split("**")
        .skip(1)
        .step_by(2)
        .filter_map(|bold| bold.split_whitespace().next())
        .filter(|tag| {
            tag.len() >= 2
                && matches!(tag.as_bytes()[0], b'R' | b'A')
                && tag[1..].bytes().all(|b| b.is_ascii_digit())
        })
        .map(str::to_owned)
        .collect();
    assert!(
        stated.len() >= 22,
        "R1-R17 and A1-A5 are stated: {stated:?}"
    );
    assert_eq!(rules, stated, "one row per rule stated in docs/spec.md");
    for (rule, modules, tests) in &rows {
        assert!(
            !modules.is_empty() && !tests.is_empty(),
            "{rule}: a module and a test"
        );
        for module in modules {
            assert!(root.join(module).is_file(), "{rule}: no module {module}");
        }
        for test in tests {
            let (file, function) = test
                .split_once("::")
                .unwrap_or_else(|| panic!("{rule}: {test} is not file::function"));
            let text = std::fs::read_to_string(root.join(file))
                .unwrap_or_else(|e| panic!("{rule}: no test file {file}: {e}"));
            assert!(
                text.contains(&format!("fn {function}(")),
                "{rule}: {file} has no test {function}"
            );
        }
    }
}

//! The core's modules import one another without a circle: each concept stands on the ones below
//! it. Read from the sources (`use crate::…` and `crate::…` paths outside comments and tests,
//! with the crate root's re-exports followed to their module).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every `crate::NAME` in `code`, NAME as written.
fn crate_paths(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (at, _) in line.match_indices("crate::") {
            let rest = &line[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let group = group.split('}').next().unwrap_or("");
                names.extend(
                    group
                        .split(',')
                        .map(|p| p.trim().split("::").next().unwrap_or("").to_owned()),
                );
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.push(name);
            }
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

/// The crate root's re-exports: item name to the module it comes from.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for statement in lib.split(';') {
        let Some(rest) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.trim();
            let name = item.rsplit(" as ").next().unwrap_or(item).trim();
            if !name.is_empty() {
                map.insert(name.to_owned(), module.trim().to_owned());
            }
        }
    }
    map
}

fn sources(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn no_two_modules_of_the_core_import_each_other_even_by_a_detour() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let roots = reexports(&lib);
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files.iter().filter(|f| f.file_name().unwrap() != "lib.rs") {
        let relative = file.strip_prefix(&src).unwrap();
        let module = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = module.trim_end_matches(".rs").to_owned();
        let text = std::fs::read_to_string(file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let deps = graph.entry(module.clone()).or_default();
        for name in crate_paths(code) {
            let target = roots.get(&name).cloned().unwrap_or(name);
            if target != module {
                deps.insert(target);
            }
        }
    }
    assert!(
        graph.len() > 20,
        "the core's modules were read: {:?}",
        graph.keys()
    );
    // Depth-first search for a back edge.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if let Some(at) = path.iter().position(|n| n == node) {
            panic!("a circle of imports: {} -> {node}", path[at..].join(" -> "));
        }
        if !done.insert(node.to_owned()) {
            return;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if graph.contains_key(next) {
                visit(next, graph, path, done);
            }
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(node, &graph, &mut Vec::new(), &mut done);
    }
}

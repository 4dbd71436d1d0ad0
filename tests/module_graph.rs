//! No crate of the workspace has a circle of imports: each concept stands on the ones below it.
//! Read from the sources of every workspace member (`crate::…`, `super::…` and a module's own
//! `child::…` paths in every item of every file but comments and test modules), with re-exports
//! followed to the module that
//! defines the item. Two views must both be free of circles: the crate's top-level modules (a
//! directory module counts as one concept), and every file module, where a module may still use
//! the items of its own ancestors (a directory's `mod.rs` is its children's facade).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::TempDir;

/// A module's path inside its crate: `["bus", "pool"]`; the crate root is `[]`.
type Module = Vec<String>;

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

fn module_of(src: &Path, file: &Path) -> Module {
    let mut parts: Module = file
        .strip_prefix(src)
        .unwrap()
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned()
        })
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of a file, whole but for its comments and its `#[cfg(test)] mod … { … }` blocks:
/// every other item counts, wherever it stands (after a test module too).
fn code_of(text: &str) -> String {
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut kept = String::with_capacity(code.len());
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        kept.push_str(&rest[..at]);
        let after = rest[at + "#[cfg(test)]".len()..].trim_start();
        match inline_module_body(after) {
            Some(body) => rest = &after[body..],
            None => {
                kept.push_str("#[cfg(test)]");
                rest = &rest[at + "#[cfg(test)]".len()..];
            }
        }
    }
    kept.push_str(rest);
    kept
}

/// Where an inline module that opens `text` (`mod name {`) ends, its braces matched (braces in
/// string and character literals skipped); None when `text` opens no inline module.
fn inline_module_body(text: &str) -> Option<usize> {
    let header = text.strip_prefix("mod ")?;
    let open = header.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    if !header[open..].trim_start().starts_with('{') {
        return None;
    }
    let start = text.len() - header.len() + open + header[open..].find('{')?;
    let bytes = text.as_bytes();
    let (mut depth, mut at) = (0usize, start);
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                at += 1;
                while at < bytes.len() && bytes[at] != b'"' {
                    at += if bytes[at] == b'\\' { 2 } else { 1 };
                }
            }
            b'\'' if bytes.get(at + 2) == Some(&b'\'') => at += 2,
            b'\'' if bytes.get(at + 1) == Some(&b'\\') => {
                at += text[at..].find("'")? + 1;
                at += text[at..].find('\'')?;
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(at + 1);
                }
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// The file modules declared `#[cfg(test)] mod name;` in `code`: test code in a file of its own.
fn test_modules(code: &str) -> Vec<String> {
    code.split("#[cfg(test)]")
        .skip(1)
        .filter_map(|after| {
            let name = after.trim_start().strip_prefix("mod ")?;
            let name: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            after
                .trim_start()
                .strip_prefix(&format!("mod {name}"))?
                .trim_start()
                .starts_with(';')
                .then_some(name)
        })
        .collect()
}

/// Every path in `code` that starts with one of `heads` (`crate`, `super`, a child module's name),
/// as its segments; a `{a, b::c}` group gives one path per member.
fn paths_from(code: &str, heads: &BTreeSet<String>) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    for head in heads {
        let needle = format!("{head}::");
        for (at, _) in code.match_indices(&needle) {
            let before = at.checked_sub(1).map(|i| bytes[i] as char);
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[at + needle.len()..];
            let mut prefix = vec![head.clone()];
            let mut rest = rest;
            loop {
                if let Some(group) = rest.strip_prefix('{') {
                    let group = group.split('}').next().unwrap_or("");
                    for member in group.split(',') {
                        let mut path = prefix.clone();
                        path.extend(
                            member
                                .split("::")
                                .map(|s| s.split(" as ").next().unwrap_or("").trim().to_owned())
                                .filter(|s| !s.is_empty()),
                        );
                        paths.push(path);
                    }
                    break;
                }
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name.is_empty() {
                    paths.push(prefix);
                    break;
                }
                prefix.push(name.clone());
                rest = &rest[name.len()..];
                match rest.strip_prefix("::") {
                    Some(more) => rest = more,
                    None => {
                        paths.push(prefix);
                        break;
                    }
                }
            }
        }
    }
    paths
}

/// One crate read: its file modules, each one's code, and each module's re-exports (item name to
/// the path it comes from, as written).
struct Crate {
    name: String,
    code: BTreeMap<Module, String>,
    reexports: BTreeMap<Module, BTreeMap<String, Vec<String>>>,
}

impl Crate {
    fn read(name: &str, src: &Path) -> Crate {
        let mut files = Vec::new();
        sources(src, &mut files);
        let mut code = BTreeMap::new();
        let mut tests = Vec::new();
        for file in &files {
            let module = module_of(src, file);
            let text = std::fs::read_to_string(file).unwrap();
            for name in test_modules(&text) {
                let mut test = module.clone();
                test.push(name);
                tests.push(test);
            }
            code.insert(module, code_of(&text));
        }
        for test in &tests {
            code.remove(test);
        }
        let mut krate = Crate {
            name: name.to_owned(),
            code,
            reexports: BTreeMap::new(),
        };
        let modules: Vec<Module> = krate.code.keys().cloned().collect();
        for module in modules {
            let mut map = BTreeMap::new();
            for statement in krate.code[&module].split(';') {
                let statement = statement.trim();
                let Some(rest) = statement
                    .strip_prefix("pub use ")
                    .or_else(|| statement.strip_prefix("pub(crate) use "))
                else {
                    continue;
                };
                for path in paths_from(rest, &krate.heads(&module)) {
                    if let Some(item) = path.last() {
                        let alias = rest
                            .split(&format!("{item} as "))
                            .nth(1)
                            .map(|a| {
                                a.chars()
                                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                                    .collect()
                            })
                            .unwrap_or_else(|| item.clone());
                        map.insert(alias, path);
                    }
                }
            }
            krate.reexports.insert(module, map);
        }
        krate
    }

    /// The heads a path may start with in `module`: `crate`, `super`, `self` and its children.
    fn heads(&self, module: &Module) -> BTreeSet<String> {
        let mut heads: BTreeSet<String> = ["crate", "super", "self"].map(String::from).into();
        for other in self.code.keys() {
            if other.len() == module.len() + 1 && other.starts_with(module) {
                heads.insert(other.last().unwrap().clone());
            }
        }
        heads
    }

    /// The module that defines what `path` (written in `module`) names, following re-exports.
    fn target(&self, module: &Module, path: &[String], depth: usize) -> Option<Module> {
        let mut at: Module = match path.first()?.as_str() {
            "crate" => Vec::new(),
            "super" => module[..module.len().checked_sub(1)?].to_vec(),
            "self" => module.clone(),
            child => {
                let mut at = module.clone();
                at.push(child.to_owned());
                at
            }
        };
        let mut rest = &path[1..];
        while let Some(next) = rest.first() {
            if next == "super" {
                at.pop();
                rest = &rest[1..];
                continue;
            }
            let mut deeper = at.clone();
            deeper.push(next.clone());
            if self.code.contains_key(&deeper) {
                at = deeper;
                rest = &rest[1..];
                continue;
            }
            if depth < 8 {
                if let Some(source) = self.reexports.get(&at).and_then(|m| m.get(next)) {
                    if source.first().map(String::as_str) != Some("synaps_scope") {
                        return self.target(&at, source, depth + 1).or(Some(at));
                    }
                }
            }
            break;
        }
        Some(at)
    }

    /// Every file module's imports of other modules of the crate, but of its own ancestors.
    fn edges(&self) -> BTreeMap<Module, BTreeSet<Module>> {
        let mut graph = BTreeMap::new();
        for (module, code) in &self.code {
            let deps: &mut BTreeSet<Module> = graph.entry(module.clone()).or_default();
            for path in paths_from(code, &self.heads(module)) {
                if let Some(target) = self.target(module, &path, 0) {
                    if target != *module && !module.starts_with(&target) {
                        deps.insert(target);
                    }
                }
            }
        }
        graph
    }
}

fn find_circle<N: Ord + Clone + std::fmt::Debug>(
    graph: &BTreeMap<N, BTreeSet<N>>,
) -> Option<Vec<N>> {
    fn visit<N: Ord + Clone>(
        node: &N,
        graph: &BTreeMap<N, BTreeSet<N>>,
        path: &mut Vec<N>,
        done: &mut BTreeSet<N>,
    ) -> Option<Vec<N>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.clone());
            return Some(circle);
        }
        if !done.insert(node.clone()) {
            return None;
        }
        path.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

fn show(module: &Module) -> String {
    if module.is_empty() {
        "crate".into()
    } else {
        module.join("::")
    }
}

/// Every member of the workspace, read from its manifest: name and `src` directory.
fn workspace_crates() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = manifest
        .split("members = [")
        .nth(1)
        .and_then(|m| m.split(']').next())
        .expect("Cargo.toml lists the workspace's members");
    members
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|member| (member.to_owned(), root.join(member).join("src")))
        .collect()
}

#[test]
fn no_crate_of_the_workspace_has_a_circle_of_imports_even_by_a_detour() {
    let crates = workspace_crates();
    assert_eq!(
        crates.len(),
        5,
        "the core, the C ABI, the command line, the launcher program and the Python module: {crates:?}"
    );
    for (name, src) in &crates {
        let krate = Crate::read(name, src);
        let files = krate.edges();
        assert!(
            files.values().any(|deps| !deps.is_empty()) || krate.code.len() < 3,
            "{}: no imports were read from {} modules",
            krate.name,
            krate.code.len()
        );
        if let Some(circle) = find_circle(&files) {
            let names: Vec<String> = circle.iter().map(show).collect();
            panic!("{name}: a circle of imports: {}", names.join(" -> "));
        }
        let mut concepts: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, deps) in &files {
            let Some(top) = module.first() else { continue };
            let entry = concepts.entry(top.clone()).or_default();
            entry.extend(
                deps.iter()
                    .filter_map(|d| d.first())
                    .filter(|d| *d != top)
                    .cloned(),
            );
        }
        if let Some(circle) = find_circle(&concepts) {
            panic!(
                "{name}: a circle of imports between its concepts: {}",
                circle.join(" -> ")
            );
        }
    }
}

#[test]
fn the_reading_sees_a_circle_where_there_is_one() {
    let dir = TempDir::new("module-graph");
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::b::thing;\n").unwrap();
    std::fs::write(src.join("b.rs"), "pub use crate::c::thing;\n").unwrap();
    std::fs::write(src.join("c.rs"), "use crate::{a::other, d};\n").unwrap();
    let krate = Crate::read("sample", src);
    let circle = find_circle(&krate.edges()).expect("a -> b (re-exporting c) -> c -> a");
    assert_eq!(
        circle.iter().map(show).collect::<Vec<_>>(),
        ["a", "c", "a"],
        "b's re-export is followed to c"
    );
    std::fs::create_dir(src.join("d")).unwrap();
    std::fs::write(src.join("c.rs"), "use crate::d::Facade;\n").unwrap();
    std::fs::write(
        src.join("d/mod.rs"),
        "mod e;\npub struct Facade;\nuse e::go;\n",
    )
    .unwrap();
    std::fs::write(src.join("d/e.rs"), "use super::Facade;\nuse crate::a::x;\n").unwrap();
    let krate = Crate::read("sample", src);
    let circle = find_circle(&krate.edges()).expect("a -> c -> d -> d::e -> a");
    assert_eq!(
        circle.iter().map(show).collect::<Vec<_>>(),
        ["a", "c", "d", "d::e", "a"]
    );

    // The whole file is read: an import after a test module counts (before, the reading stopped
    // at the first `#[cfg(test)]`), and the test module's own imports, inline or in a file of its
    // own, do not.
    std::fs::remove_dir_all(src.join("d")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::b::thing;\n").unwrap();
    std::fs::write(src.join("b.rs"), "pub fn thing() {}\n").unwrap();
    let late = "pub fn other() {}\n#[cfg(test)]\nmod tests {\n    use crate::a::x;\n    \
                const BRACE: char = '}';\n    fn f() { let _ = \"}\"; }\n}\n\
                #[cfg(test)]\nmod more;\nuse crate::c::late;\n";
    std::fs::write(src.join("b.rs"), late).unwrap();
    std::fs::create_dir(src.join("b")).unwrap();
    std::fs::write(src.join("b/more.rs"), "use crate::a::y;\n").unwrap();
    std::fs::write(src.join("c.rs"), "use crate::a::z;\n").unwrap();
    let krate = Crate::read("sample", src);
    let circle = find_circle(&krate.edges()).expect("a -> b -> c -> a, past b's tests");
    assert_eq!(
        circle.iter().map(show).collect::<Vec<_>>(),
        ["a", "b", "c", "a"]
    );
    std::fs::write(src.join("c.rs"), "pub fn late() {}\n").unwrap();
    let krate = Crate::read("sample", src);
    assert_eq!(
        find_circle(&krate.edges()),
        None,
        "b's tests (inline and b/more.rs) use a, which is no circle"
    );
}

//! Reading a crate's module graph from its sources (for `tests/module_graph.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate: `["bus", "pool"]`; the crate root is `[]`.
pub type Module = Vec<String>;

pub fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

pub fn module_of(src: &Path, file: &Path) -> Module {
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
pub fn code_of(text: &str) -> String {
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
pub fn inline_module_body(text: &str) -> Option<usize> {
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
pub fn test_modules(code: &str) -> Vec<String> {
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
pub fn paths_from(code: &str, heads: &BTreeSet<String>) -> Vec<Vec<String>> {
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
pub struct Crate {
    pub name: String,
    pub code: BTreeMap<Module, String>,
    reexports: BTreeMap<Module, BTreeMap<String, Vec<String>>>,
}

impl Crate {
    pub fn read(name: &str, src: &Path) -> Crate {
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
    pub fn heads(&self, module: &Module) -> BTreeSet<String> {
        let mut heads: BTreeSet<String> = ["crate", "super", "self"].map(String::from).into();
        for other in self.code.keys() {
            if other.len() == module.len() + 1 && other.starts_with(module) {
                heads.insert(other.last().unwrap().clone());
            }
        }
        heads
    }

    /// The module that defines what `path` (written in `module`) names, following re-exports.
    pub fn target(&self, module: &Module, path: &[String], depth: usize) -> Option<Module> {
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
    pub fn edges(&self) -> BTreeMap<Module, BTreeSet<Module>> {
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

pub fn find_circle<N: Ord + Clone + std::fmt::Debug>(
    graph: &BTreeMap<N, BTreeSet<N>>,
) -> Option<Vec<N>> {
    pub fn visit<N: Ord + Clone>(
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

pub fn show(module: &Module) -> String {
    if module.is_empty() {
        "crate".into()
    } else {
        module.join("::")
    }
}

/// Every member of the workspace, read from its manifest: name and `src` directory.
pub fn workspace_crates() -> Vec<(String, PathBuf)> {
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

//! No crate of the workspace has a circle of imports: each concept stands on the ones below it.
//! Read from the sources of every workspace member (`crate::…`, `super::…` and a module's own
//! `child::…` paths in every item of every file but comments and test modules), with re-exports
//! followed to the module that
//! defines the item. Two views must both be free of circles: the crate's top-level modules (a
//! directory module counts as one concept), and every file module, where a module may still use
//! the items of its own ancestors (a directory's `mod.rs` is its children's facade).
//!
//! The core's rooms stand in layers ([`LAYERS`]): no room imports a room of a layer above its own,
//! so a newcomer reads the house from the bottom (the kernel's files) up, and every room of `src/`
//! has its place there.

mod common;
#[path = "module_graph/reading.rs"]
mod reading;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::TempDir;
use reading::{find_circle, show, workspace_crates, Crate};

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

/// The core's top-level rooms, bottom first: the cross-cutting rooms, the kernel's files, what a
/// request brings, the user manager (its bus and turns), systemd-oomd, then a launch and a running
/// scope side by side, and the rooms that face the caller across all of them.
const LAYERS: &[&[&str]] = &[
    &["bounds", "diag", "memo", "per_process", "warn"],
    &["kernel"],
    &["input"],
    &["manager"],
    &["oomd"],
    &["launch", "scope"],
    &["deprecated", "doctor", "error_class"],
];

fn layer_of(room: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&room))
}

#[test]
fn no_room_of_the_core_imports_a_room_above_its_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let core = Crate::read("synaps-scope", &root.join("src"));
    let mut above = Vec::new();
    for (module, deps) in core.edges() {
        let Some(room) = module.first() else { continue };
        let layer = layer_of(room).unwrap_or_else(|| {
            panic!("src/{room} has no place in LAYERS (tests/module_graph.rs): give it one")
        });
        for dep in deps.iter().filter_map(|d| d.first()) {
            let dep_layer = layer_of(dep).expect("every room has a layer");
            if dep_layer > layer {
                above.push(format!("{} imports {}", show(&module), dep));
            }
        }
    }
    assert!(
        above.is_empty(),
        "rooms importing a room above their own: {above:#?}"
    );
}

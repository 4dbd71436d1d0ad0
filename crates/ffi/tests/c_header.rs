//! The committed C header is exactly what cbindgen generates from this crate, compiles as strict
//! C99 and C++17, and README.md shows the C example that is compiled. No manager needed.

#[allow(dead_code)] // The C ABI tests' harness: this file needs its compiler and paths only.
#[path = "c_abi/harness.rs"]
mod harness;

use std::path::Path;

use harness::{compile, repository, STRICT};

#[test]
fn the_committed_header_is_what_cbindgen_generates() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen parses the crate");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let header = crate_dir.join("../../include/synaps_scope.h");
    if std::env::var_os("SYNAPS_UPDATE_HEADER").is_some() {
        std::fs::create_dir_all(header.parent().unwrap()).unwrap();
        std::fs::write(&header, &generated).unwrap();
    }
    let committed = std::fs::read(&header).unwrap_or_default();
    assert!(
        committed == generated,
        "include/synaps_scope.h is stale: regenerate it with `SYNAPS_UPDATE_HEADER=1 cargo test -p synaps-scope-ffi --test c_header`\n\
         --- generated ---\n{}",
        String::from_utf8_lossy(&generated)
    );
}

#[test]
fn the_header_compiles_as_strict_c99_and_cxx() {
    let include = format!("-I{}", repository().join("include").display());
    let source = Path::new(env!("CARGO_TARGET_TMPDIR")).join("header_check.c");
    std::fs::write(
        &source,
        "#include \"synaps_scope.h\"\nint main(void) { return scope_abi_version() == SCOPE_ABI_VERSION ? 0 : 1; }\n",
    )
    .unwrap();
    let source = source.to_str().unwrap();
    let mut c = vec!["-std=c99", "-fsyntax-only", include.as_str(), source];
    c.extend(STRICT);
    compile("gcc", &c);
    let mut cxx = vec![
        "-std=c++17",
        "-fsyntax-only",
        "-x",
        "c++",
        include.as_str(),
        source,
    ];
    cxx.extend(STRICT);
    compile("g++", &cxx);
}

#[test]
fn the_readme_shows_the_example_that_is_compiled() {
    let root = repository();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/c/spawn.c")).unwrap();
    assert!(
        readme.contains(&example),
        "README.md's C example differs from examples/c/spawn.c"
    );
}

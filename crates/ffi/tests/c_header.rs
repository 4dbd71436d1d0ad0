//! The committed C header is exactly what cbindgen generates from this crate.

use std::path::Path;

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

//! Program resolution follows execvp in the child (R4): the child's PATH in order, empty entries
//! as the child's cwd, names with a slash against the child's cwd, executables only.

mod common;

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use common::TempDir;
use synaps_scope::{find_program, ResolveError};

fn path_env(entries: &[PathBuf]) -> Vec<(OsString, OsString)> {
    vec![("PATH".into(), std::env::join_paths(entries).unwrap())]
}

#[test]
fn path_entries_are_searched_in_order_and_only_executables_count() {
    let dir = TempDir::new("resolve-order");
    for sub in ["a", "b", "c"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
    }
    dir.write("a/prog", "not executable", false);
    std::fs::create_dir(dir.path().join("b/prog")).unwrap();
    let expected = dir.write("c/prog", "#!/bin/sh\n", true);
    let env = path_env(&["a", "b", "c"].map(|s| dir.path().join(s)));
    assert_eq!(
        find_program(OsStr::new("prog"), &env, None).unwrap(),
        expected
    );

    let first = dir.write("a/prog", "#!/bin/sh\n", true);
    assert_eq!(find_program(OsStr::new("prog"), &env, None).unwrap(), first);
}

#[test]
fn relative_names_and_empty_path_entries_use_the_childs_cwd() {
    let dir = TempDir::new("resolve-cwd");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let prog = dir.write("sub/tool", "#!/bin/sh\n", true);
    let no_path = path_env(&[PathBuf::from("/nonexistent")]);
    assert_eq!(
        find_program(
            OsStr::new("./tool"),
            &no_path,
            Some(&dir.path().join("sub"))
        )
        .unwrap(),
        prog
    );
    assert_eq!(
        find_program(OsStr::new("sub/tool"), &no_path, Some(dir.path())).unwrap(),
        prog
    );
    assert_eq!(
        find_program(prog.as_os_str(), &no_path, Some(std::path::Path::new("/"))).unwrap(),
        prog
    );

    let empty_entry = vec![(
        OsString::from("PATH"),
        OsString::from("/nonexistent::/also-not"),
    )];
    assert_eq!(
        find_program(
            OsStr::new("tool"),
            &empty_entry,
            Some(&dir.path().join("sub"))
        )
        .unwrap(),
        prog
    );
    let relative_entry = vec![(OsString::from("PATH"), OsString::from("sub"))];
    assert_eq!(
        find_program(OsStr::new("tool"), &relative_entry, Some(dir.path())).unwrap(),
        prog
    );
}

#[test]
fn missing_programs_are_not_found() {
    let env = path_env(&[PathBuf::from("/usr/bin"), PathBuf::from("/bin")]);
    for name in [
        "synaps-no-such-program",
        "",
        "./synaps-no-such-program",
        "/nonexistent/prog",
    ] {
        let error =
            find_program(OsStr::new(name), &env, Some(std::path::Path::new("/"))).unwrap_err();
        assert!(
            matches!(error, ResolveError::NotFound { .. }),
            "{name:?}: {error}"
        );
    }
}

#[test]
fn an_unset_path_searches_the_libc_default() {
    let sh = find_program(OsStr::new("sh"), &[], None).unwrap();
    assert!(
        sh == std::path::Path::new("/bin/sh") || sh == std::path::Path::new("/usr/bin/sh"),
        "{sh:?}"
    );
}

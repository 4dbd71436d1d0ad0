//! How tests/c_abi.rs runs C: the library built afresh, tests/c/abi/*.c compiled against the
//! committed header under the sanitizers, and each scenario run in its own process, within a
//! minute, with no sanitizer report.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{OnceLock, RwLock};
use std::time::{Duration, Instant};

pub(crate) const STRICT: [&str; 5] = ["-Wall", "-Wextra", "-Werror", "-pedantic", "-g"];

/// The repository's root (this crate is `crates/ffi`).
pub(crate) fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory holding the cdylib, built afresh first: `cargo test` builds the library only
/// as the rlib its tests link, so the `.so` a C program loads could be older than the code under
/// test (the test binary runs from the profile's `deps`).
pub(crate) fn library_dir() -> PathBuf {
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_owned();
    let profile_dir = deps.parent().unwrap().to_owned();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .args(["build", "-q", "-p", "synaps-scope-ffi", "--lib"])
        .current_dir(repository());
    if profile_dir.ends_with("release") {
        build.arg("--release");
    }
    assert!(
        build.status().expect("cargo runs").success(),
        "cargo build -p synaps-scope-ffi --lib"
    );
    [deps, profile_dir]
        .into_iter()
        .find(|dir| dir.join("libsynaps_scope_ffi.so").exists())
        .expect("libsynaps_scope_ffi.so was built with the tests (crate-type cdylib)")
}

pub(crate) fn compile(compiler: &str, args: &[&str]) {
    let out = Command::new(compiler)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{compiler}: {e}"));
    assert!(
        out.status.success(),
        "{compiler} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Scenarios run under UBSan alone. AddressSanitizer's allocator (GCC 12's libsanitizer) takes no
/// lock across `fork()`: a child forked while another thread of its parent is in `malloc` hangs
/// in ASan's own allocator (`SizeClassAllocator64::GetFromAllocator`, seen here in 1 of 40 forks),
/// before the library is reached at all.
pub(crate) const FORKING_SCENARIOS: &[&str] = &["fork", "fork_host_ticket"];

/// The scenarios' binary: under ASan and UBSan, or, for [`FORKING_SCENARIOS`], UBSan alone.
pub(crate) fn test_binary(scenario: &str) -> &'static Path {
    static UNDER_ASAN: OnceLock<PathBuf> = OnceLock::new();
    static UNDER_UBSAN: OnceLock<PathBuf> = OnceLock::new();
    if FORKING_SCENARIOS.contains(&scenario) {
        UNDER_UBSAN.get_or_init(|| build_test_binary("abi_test_ubsan", "undefined"))
    } else {
        UNDER_ASAN.get_or_init(|| build_test_binary("abi_test", "address,undefined"))
    }
}

/// Compiles tests/c/abi/*.c into `name`, with `-fsanitize=SANITIZERS`.
pub(crate) fn build_test_binary(name: &str, sanitizers: &str) -> PathBuf {
    let root = repository();
    let lib = library_dir();
    let binary = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let include = format!("-I{}", root.join("include").display());
    let sources_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/abi");
    let mut sources: Vec<String> = std::fs::read_dir(&sources_dir)
        .expect("tests/c/abi")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "c"))
        .map(|path| path.to_str().unwrap().to_owned())
        .collect();
    sources.sort();
    let (lib_arg, rpath) = (
        format!("-L{}", lib.display()),
        format!("-Wl,-rpath,{}", lib.display()),
    );
    let sanitize = format!("-fsanitize={sanitizers}");
    let mut args: Vec<&str> = vec!["-std=c11"];
    args.extend(STRICT);
    args.extend([
        sanitize.as_str(),
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
    ]);
    args.push(include.as_str());
    args.extend(sources.iter().map(String::as_str));
    args.extend(["-o", binary.to_str().unwrap()]);
    args.extend([
        lib_arg.as_str(),
        rpath.as_str(),
        "-lsynaps_scope_ffi",
        "-lpthread",
    ]);
    compile("gcc", &args);
    binary
}

/// Runs one scenario; it must exit 0 within a minute with no sanitizer report. Its output goes
/// to files, not pipes, so a child it leaves behind cannot hold this test.
pub(crate) fn scenario(name: &str) -> String {
    scenario_with_env(name, &synaps_scope::inherited_env())
}

/// [`scenario`] with the environment `env`.
pub(crate) fn scenario_with_env(
    name: &str,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> String {
    scenario_launched(name, env, None)
}

/// The machine, shared by the scenarios that run at once (the harness runs tests in parallel),
/// and had alone by the burst: 256 threads and as many launches under AddressSanitizer take both
/// cores, and a scenario that times its requests against their bound must not run beside them.
pub(crate) static MACHINE: RwLock<()> = RwLock::new(());

/// [`scenario_with_env`], launched through `launcher` when one is given (in a scope of its own).
pub(crate) fn scenario_launched(
    name: &str,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    launcher: Option<&synaps_scope::ScopeLauncher>,
) -> String {
    let _shared = MACHINE.read().unwrap_or_else(|p| p.into_inner());
    run_scenario(name, env, launcher)
}

/// Runs the scenario `name` (see [`scenario_launched`]), whoever else runs.
pub(crate) fn run_scenario(
    name: &str,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    launcher: Option<&synaps_scope::ScopeLauncher>,
) -> String {
    run_scenario_under(&[], name, env, launcher)
}

/// [`run_scenario`], its binary started by the command `prefix` (`unshare --pid …`).
pub(crate) fn run_scenario_under(
    prefix: &[&str],
    name: &str,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    launcher: Option<&synaps_scope::ScopeLauncher>,
) -> String {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let (stdout, stderr) = (
        dir.join(format!("{name}.out")),
        dir.join(format!("{name}.err")),
    );
    let argv: Vec<std::ffi::OsString> = prefix
        .iter()
        .map(|word| (*word).into())
        .chain([test_binary(name).as_os_str().to_owned(), name.into()])
        .collect();
    let argv = match launcher {
        Some(launcher) => launcher.wrap(&argv, env, None).argv,
        None => argv,
    };
    let mut child = Command::new(&argv[0]);
    synaps_scope::set_env(&mut child, env);
    let mut child = child
        .args(&argv[1..])
        .env(
            "ASAN_OPTIONS",
            "detect_leaks=1:halt_on_error=1:abort_on_error=0",
        )
        .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
        .stdout(File::create(&stdout).unwrap())
        .stderr(File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stderr = std::fs::read_to_string(&stderr).unwrap_or_default();
    let status = status.unwrap_or_else(|| panic!("scenario {name} hung for 60 s:\n{stderr}"));
    assert!(
        status.success(),
        "scenario {name} failed ({status}):\n{stderr}"
    );
    for report in ["AddressSanitizer", "LeakSanitizer", "runtime error:"] {
        assert!(
            !stderr.contains(report),
            "scenario {name}: sanitizer report:\n{stderr}"
        );
    }
    stderr
}

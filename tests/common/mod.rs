//! Test support: the real user manager the rig started, managers of a test's own, WARN capture,
//! temporary directories and a few process helpers. No mocks of systemd live here.
#![allow(dead_code)] // Each test binary uses a different part of this module.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod managers;
mod processes;
mod standin;

// Each test binary uses a different part of these, as of the rest of this module.
#[allow(unused_imports)]
pub use managers::*;
#[allow(unused_imports)]
pub use processes::*;
#[allow(unused_imports)]
pub use standin::*;

use synaps_scope::diag::CallbackSubscriber;
use synaps_scope::{inherited_env, set_env, with_overrides};
use tracing::Level;

/// The private systemd user manager that scripts/systemd-rig.sh started for this run.
pub struct Rig {
    /// The manager's (and systemd-run's) major version.
    pub version: u32,
    /// An executable that runs `systemd --user` of that version.
    pub manager: PathBuf,
    /// A cgroup2 directory where tests may start managers of their own.
    pub cgroup_base: PathBuf,
}

/// The rig, or a loud failure saying how to get one. `SYNAPS_SKIP_MANAGER_TESTS=1` skips (None)
/// with a line on stderr instead, for a run that asked for exactly that.
pub fn rig() -> Option<Rig> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    match (
        var("SYNAPS_RIG_SYSTEMD_VERSION"),
        var("SYNAPS_RIG_MANAGER"),
        var("SYNAPS_RIG_CGROUP"),
    ) {
        (Some(version), Some(manager), Some(cgroup)) => Some(Rig {
            version: version
                .parse()
                .expect("SYNAPS_RIG_SYSTEMD_VERSION is a number"),
            manager: manager.into(),
            cgroup_base: cgroup.into(),
        }),
        _ if var("SYNAPS_SKIP_MANAGER_TESTS").as_deref() == Some("1") => {
            eprintln!("SKIPPED (SYNAPS_SKIP_MANAGER_TESTS=1): this test needs a real systemd user manager");
            None
        }
        _ => panic!(
            "this test needs a real systemd user manager and none was started: run it through \
             `scripts/systemd-rig.sh [--systemd 247|252|254|257|262] -- cargo test` as root (the README's test \
             command does), or set SYNAPS_SKIP_MANAGER_TESTS=1 to skip such tests on purpose"
        ),
    }
}

/// This process's environment with `overrides` on top.
pub fn env_with(overrides: &[(&str, &OsString)]) -> Vec<(OsString, OsString)> {
    let overrides: Vec<(OsString, OsString)> = overrides
        .iter()
        .map(|(k, v)| (OsString::from(k), (*v).clone()))
        .collect();
    with_overrides(&inherited_env(), &overrides)
}

/// This process's PATH with `dir` searched first.
pub fn path_with_first(dir: &Path) -> OsString {
    std::env::join_paths(
        std::iter::once(dir.to_owned())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap()
}

/// `env` without `keys`.
pub fn env_without(env: &[(OsString, OsString)], keys: &[&str]) -> Vec<(OsString, OsString)> {
    env.iter()
        .filter(|(k, _)| !keys.iter().any(|key| k == key))
        .cloned()
        .collect()
}

/// The lines the library logged while a [`Capture`] was the thread's subscriber.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<(Level, String)>>>);

impl Capture {
    /// A dispatcher recording every event of target `synaps_scope`, at every level.
    pub fn dispatch(&self) -> tracing::Dispatch {
        // With exactly one dispatcher ever registered, tracing-core computes a new callsite's
        // interest from the *registering* thread's default alone: a WARN first reached on a thread
        // without a capture would be cached as "never" for every thread. A second, permanent
        // dispatcher makes it ask every live one.
        static KEEP_INTEREST_GLOBAL: std::sync::OnceLock<tracing::Dispatch> =
            std::sync::OnceLock::new();
        KEEP_INTEREST_GLOBAL.get_or_init(|| {
            tracing::Dispatch::new(CallbackSubscriber::new(Level::TRACE, |_, _, _| {}))
        });
        let lines = Arc::clone(&self.0);
        tracing::Dispatch::new(CallbackSubscriber::new(
            Level::TRACE,
            move |level, target, line| {
                if target == "synaps_scope" {
                    lines.lock().unwrap().push((*level, line.to_owned()));
                }
            },
        ))
    }

    /// Runs `f` with this capture as the current thread's subscriber.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        tracing::dispatcher::with_default(&self.dispatch(), f)
    }

    /// The WARN lines so far.
    pub fn warnings(&self) -> Vec<String> {
        self.at(Level::WARN)
    }

    /// The lines at `level` so far.
    pub fn at(&self, level: Level) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(l, _)| *l == level)
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// Waits up to `limit` (zero: looks once) for a line containing `needle`; true when one came.
    pub fn wait_for(&self, needle: &str, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        loop {
            if self
                .0
                .lock()
                .unwrap()
                .iter()
                .any(|(_, s)| s.contains(needle))
            {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("synaps-test-{label}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `name` in this directory, executable when `executable`, and returns its path.
    pub fn write(&self, name: &str, contents: &str, executable: bool) -> PathBuf {
        let path = self.0.join(name);
        if executable {
            let file_name = path.file_name().unwrap().to_string_lossy();
            let draft = path.with_file_name(format!(".{file_name}.draft"));
            fs::write(&draft, contents).unwrap();
            install_executable(&draft, &path);
            fs::remove_file(&draft).unwrap();
        } else {
            fs::write(&path, contents).unwrap();
        }
        path
    }
}

/// Copies `from` to `to`, mode 0755, through `install(1)`: a file this process wrote itself could
/// not be run while a child that another test thread is forking still holds the writing
/// descriptor (exec fails with ETXTBSY until that child execs), so no program a test runs is ever
/// open for writing here.
pub fn install_executable(from: &Path, to: &Path) {
    let status = Command::new("install")
        .arg("-m")
        .arg("0755")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "install {} {}: {status}",
        from.display(),
        to.display()
    );
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Spawns `argv` with exactly `env`, stdout captured, and waits for it.
pub fn run_argv(
    argv: &[OsString],
    env: &[(OsString, OsString)],
) -> std::io::Result<std::process::Output> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null());
    set_env(&mut cmd, env);
    cmd.output()
}

/// The launcher program built from this workspace (`SYNAPS_SCOPE_EXEC`, else
/// `target/debug/synaps-scope-exec`, built on first use).
pub fn exec_program() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("SYNAPS_SCOPE_EXEC").filter(|p| !p.is_empty()) {
                return PathBuf::from(path);
            }
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            let root = root
                .ancestors()
                .find(|d| d.join("Cargo.lock").exists())
                .unwrap();
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "-q", "-p", "synaps-scope-exec"])
                .current_dir(root)
                .status()
                .expect("cargo runs");
            assert!(status.success(), "cargo build -p synaps-scope-exec failed");
            root.join("target/debug/synaps-scope-exec")
        })
        .clone()
}

/// `env` with the wrapper chosen: `synaps-scope-exec` (this workspace's) or `systemd-run`.
pub fn with_wrapper(env: &[(OsString, OsString)], wrapper: &str) -> Vec<(OsString, OsString)> {
    with_overrides(
        env,
        &[
            ("SYNAPS_SCOPE_LAUNCHER".into(), wrapper.into()),
            ("SYNAPS_SCOPE_EXEC".into(), exec_program().into_os_string()),
        ],
    )
}

/// The wrapper this test run was asked to use (`SYNAPS_SCOPE_LAUNCHER`; scripts/test.sh runs
/// everything once with each), checked against the one a launcher actually uses.
pub fn assert_wrapper_under_test(launcher: &synaps_scope::ScopeLauncher) {
    if let Some(asked) = std::env::var("SYNAPS_SCOPE_LAUNCHER")
        .ok()
        .filter(|v| v != "auto")
    {
        assert_eq!(launcher.wrapper().name(), asked, "the wrapper under test");
    }
}

/// Whether the kernel may run `binfmt_misc` formats here (then a file that is neither ELF nor `#!`
/// may still be runnable, and the library wraps it).
pub fn binfmt_misc_has_formats() -> bool {
    let root = Path::new("/proc/sys/fs/binfmt_misc");
    fs::read_to_string(root.join("status")).is_ok_and(|s| s.trim() == "enabled")
        && fs::read_dir(root).is_ok_and(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|e| e.file_name() != "register" && e.file_name() != "status")
        })
}

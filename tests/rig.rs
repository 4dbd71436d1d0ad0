//! The test rig itself (scripts/systemd-rig.sh): it runs the version it names, every program the
//! tests start loads with the host's own loader and libraries (no LD_LIBRARY_PATH anywhere), and a
//! command that leaves the manager stopped cannot hang it.

mod common;

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{cgroup_of, env_without, rig, run_argv, systemctl_value};
use synaps_scope::{inherited_env, launcher_for_env};

fn rig_cache() -> PathBuf {
    std::env::var_os("SYNAPS_RIG_CACHE")
        .expect("the rig exports SYNAPS_RIG_CACHE")
        .into()
}

/// The files a process mapped whose name contains `needle`.
fn mapped(maps: &str, needle: &str) -> Vec<String> {
    let mut files: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|f| f.contains(needle))
        .map(str::to_owned)
        .collect();
    files.dedup();
    files
}

#[test]
fn the_rig_runs_the_version_it_names() {
    let Some(rig) = rig() else { return };
    let version = systemctl_value(None, "Version");
    let major: String = version.chars().take_while(char::is_ascii_digit).collect();
    assert_eq!(major, rig.version.to_string(), "the manager says {version}");
    let client = Command::new("systemd-run")
        .arg("--version")
        .output()
        .unwrap();
    let first = String::from_utf8_lossy(&client.stdout);
    assert!(
        first.starts_with(&format!("systemd {} (", rig.version)),
        "{first}"
    );
    assert!(rig.manager.exists(), "{}", rig.manager.display());
    assert!(
        cgroup_of(std::process::id()).ends_with("/command"),
        "the command runs in the rig's own cgroup"
    );
}

#[test]
fn no_program_the_tests_start_sees_ld_library_path_or_loads_the_rig_s_libraries() {
    let Some(rig) = rig() else { return };
    let cache = rig_cache();
    // The rig starts its command with no LD_LIBRARY_PATH; cargo then sets one of its own for test
    // binaries (its target directory and the toolchain's libraries), and nothing else may be in it.
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or(target, PathBuf::from);
    // Named as given or by its real path (a target directory may be a link).
    let real_target = target.canonicalize().unwrap_or_else(|_| target.clone());
    let toolchains = std::env::var_os("RUSTUP_HOME").map(PathBuf::from);
    for entry in std::env::split_paths(&std::env::var_os("LD_LIBRARY_PATH").unwrap_or_default()) {
        assert!(
            entry.starts_with(&target)
                || entry.starts_with(&real_target)
                || toolchains.as_ref().is_some_and(|t| entry.starts_with(t)),
            "LD_LIBRARY_PATH of the test process has {}, which is not cargo's",
            entry.display()
        );
    }
    let manager_pid = std::env::var("SYNAPS_RIG_MANAGER_PID").unwrap();
    let manager_env = fs::read(format!("/proc/{manager_pid}/environ")).unwrap();
    assert!(
        !manager_env
            .split(|&b| b == 0)
            .any(|e| e.starts_with(b"LD_LIBRARY_PATH=")),
        "the manager's environment"
    );

    // A scoped child (exec'd in place by the version's systemd-run) reports its environment and
    // the loader and C library it was loaded with; cargo's variable is not passed on to it.
    let env = env_without(&inherited_env(), &["LD_LIBRARY_PATH"]);
    let launcher = launcher_for_env(&env).unwrap().expect("scoped");
    let argv: Vec<OsString> = ["sh", "-c", "env; echo ---; cat /proc/$$/maps"]
        .into_iter()
        .map(OsString::from)
        .collect();
    let wrapped = launcher.wrap(&argv, &env, None);
    let out = run_argv(&wrapped.argv, &env).unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let (child_env, maps) = text.split_once("---\n").unwrap();
    assert!(
        !child_env.lines().any(|l| l.starts_with("LD_LIBRARY_PATH=")),
        "{child_env}"
    );
    for needle in ["ld-linux", "libc.so"] {
        let files = mapped(maps, needle);
        assert!(!files.is_empty(), "no {needle} mapped: {maps}");
        for file in files {
            assert!(
                !Path::new(&file).starts_with(&cache) && file.starts_with("/usr/lib/"),
                "systemd {}: the child loaded {file}, not the host's",
                rig.version
            );
        }
    }
}

#[test]
fn a_command_that_leaves_the_manager_stopped_cannot_hang_the_rig() {
    let Some(rig) = rig() else { return };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/systemd-rig.sh");
    // The nested rig's command stops its manager, leaves a process behind that would hold the
    // output open, and exits 7. It exits only once the manager is stopped: SIGSTOP takes effect
    // when the manager is next scheduled, which on a loaded machine can be after the command ended
    // (seen once in CI on 262: the rig then found it running and ended it without a word).
    let command = "p=$SYNAPS_RIG_MANAGER_PID; echo $p; kill -STOP $p; \
                   for _ in $(seq 500); do \
                   [ \"$(awk '{print $3}' /proc/$p/stat)\" = T ] && break; sleep 0.01; done; \
                   sleep 600 & exit 7";
    let started = Instant::now();
    let out = Command::new(&script)
        .args([
            "--systemd",
            &rig.version.to_string(),
            "--",
            "sh",
            "-c",
            command,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    assert!(
        took < Duration::from_secs(15),
        "the rig took {took:?} to end: {stderr}"
    );
    assert!(
        stderr.contains("left the manager stopped; resuming it to end it"),
        "{stderr}"
    );
    let pid = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(!pid.is_empty());
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the stopped manager {pid} is gone"
    );
}

//! A turn is held until its holder lets it go (issue 48), whatever else its process opens or
//! closes and however a request of its own spells the runtime directory. A process's record lock
//! on its ticket goes when the process closes any descriptor of the tickets file, which a host may
//! do without knowing it; the ticket's guard, an open file description lock of its own, does not.
//! Each case: a host's request holds its turn (its first authentication held 600 ms by a
//! stand-in in front of the rig's manager), the host then does one of the three things, and a
//! launcher program started meanwhile must wait for the held turn before it talks to the manager.

mod common;

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{env_without, rig, SlowManager, TempDir};
use synaps_scope::{decide, set_env, with_overrides, LauncherOptions, ScopeKind};

/// The launcher program's scope.
const UNIT: &str = "synaps-tool-0000000000000000000000000000d0d0.scope";

/// How long the stand-in holds the first authentication, and so the first request's turn.
const HELD: Duration = Duration::from_millis(600);

/// The environment of a request to the stand-in whose runtime directory is spelt `runtime`.
fn env_in(runtime: &OsString) -> Vec<(OsString, OsString)> {
    let env = env_without(
        &synaps_scope::inherited_env(),
        &["DBUS_SESSION_BUS_ADDRESS"],
    );
    common::with_wrapper(
        &with_overrides(&env, &[("XDG_RUNTIME_DIR".into(), runtime.clone())]),
        "synaps-scope-exec",
    )
}

/// A request of the host's own, with `bound`.
fn request(env: &[(OsString, OsString)], bound: Duration) {
    let _ = decide(
        env,
        ScopeKind::Tool,
        &LauncherOptions {
            probe_timeout: bound,
        },
    );
}

/// While a request of this process holds its turn, `meanwhile` runs; then a launcher program
/// (another process) is started: when did it end, counted from when the turn was taken?
fn launcher_ends_after(case: &str, meanwhile: impl FnOnce(&OsString)) -> Duration {
    let slow =
        SlowManager::holding_first_in_front_of_the_rig("AUTH", &HELD.as_secs_f64().to_string());
    let runtime = slow.runtime_dir();
    let env = env_in(&runtime);
    let began = Instant::now();
    let holder = {
        let env = env.clone();
        std::thread::spawn(move || request(&env, Duration::from_secs(3)))
    };
    std::thread::sleep(Duration::from_millis(100));
    meanwhile(&runtime);
    let mut cmd = Command::new(common::exec_program());
    cmd.args([
        &format!("--unit={UNIT}"),
        "--description=turn held",
        "--timeout-ms=3000",
        "--required",
        "--",
        "/bin/cat",
        "cat",
        "/proc/self/cgroup",
    ]);
    set_env(&mut cmd, &env);
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    let ended = began.elapsed();
    holder.join().unwrap();
    assert!(out.status.success(), "{case}: {out:?}");
    // Through the stand-in (a relay in front of the private socket) the launcher is named by its
    // pid, and lands in its scope.
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("/{UNIT}")),
        "{case}: not in its scope: {out:?}"
    );
    eprintln!("{case}: the launcher program ended {ended:?} after the turn was taken");
    ended
}

/// Opens and closes every file in `dir`, as a host's own code may (an indexer, a clean-up).
fn open_and_close_everything_in(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            drop(std::fs::File::open(&path).unwrap());
        }
    }
}

#[test]
fn a_held_turn_is_waited_for_when_nothing_else_happens() {
    let Some(_rig) = rig() else { return };
    let control = launcher_ends_after("control", |_| {});
    assert!(control >= HELD, "control: {control:?}");
}

#[test]
fn a_held_turn_is_waited_for_when_its_host_opens_and_closes_every_file_of_the_directory() {
    let Some(_rig) = rig() else { return };
    let case = "the host opens and closes every file of the directory";
    let ended = launcher_ends_after(case, |runtime| {
        open_and_close_everything_in(Path::new(runtime));
    });
    assert!(ended >= HELD, "{case}: {ended:?}");
}

#[test]
fn a_held_turn_is_waited_for_when_its_host_spells_the_directory_with_a_slash_more() {
    let Some(_rig) = rig() else { return };
    let case = "a request that spells the directory with a slash more";
    let ended = launcher_ends_after(case, |runtime| {
        let mut spelt = runtime.clone();
        spelt.push("/");
        request(&env_in(&spelt), Duration::from_millis(150));
    });
    assert!(ended >= HELD, "{case}: {ended:?}");
}

#[test]
fn a_held_turn_is_waited_for_when_its_host_reaches_the_directory_through_a_symlink() {
    let Some(_rig) = rig() else { return };
    let case = "a request through a symlink to the directory";
    let link_dir = TempDir::new("runtime-link");
    let link = link_dir.path().join("runtime");
    let ended = launcher_ends_after(case, |runtime| {
        std::os::unix::fs::symlink(runtime, &link).unwrap();
        request(
            &env_in(&link.clone().into_os_string()),
            Duration::from_millis(150),
        );
    });
    assert!(ended >= HELD, "{case}: {ended:?}");
}

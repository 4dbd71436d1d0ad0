//! Scope handles (R15) against a real manager: a scope kill reaches descendants that left the
//! process group; cgroups that are not this library's scopes are refused; usage reads of
//! controllers the kernel does not offer are unknown, not errors.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{cgroup_of, rig, spawn_scoped, wait_for, TempDir};
use synaps_scope::{
    inherited_env, launcher_for_env, set_env, HandleError, KillMethod, ScopeHandle,
};

/// Whether `pid` is a live (not zombie) process.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|s| !s.lines().any(|l| l.starts_with("State:\tZ")))
        .unwrap_or(false)
}

fn scope_kill_reaches_an_escaped_descendant(method: KillMethod) {
    let dir = TempDir::new("escape");
    let pidfile = dir.path().join("escaped.pid");
    let script = format!(
        "( setsid sh -c 'echo $$ > {}; exec sleep 1000' & ); exec sleep 1000",
        pidfile.display()
    );
    let (mut child, unit) = spawn_scoped(&["sh", "-c", &script]);
    wait_for("the escaped pid", || {
        std::fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n'))
    });
    let escaped: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{escaped}/stat")).unwrap();
    let pgid: u32 = stat
        .rsplit(") ")
        .next()
        .unwrap()
        .split(' ')
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(pgid, child.id(), "the descendant left the process group");

    let status = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status()
        .unwrap();
    assert!(status.success(), "killpg of the original group");
    child.wait().unwrap();
    assert!(
        alive(escaped),
        "a process-group kill misses the escaped descendant"
    );

    let handle =
        ScopeHandle::from_manager(&unit, &inherited_env(), Duration::from_secs(3)).unwrap();
    assert_eq!(
        ScopeHandle::from_pid(&unit, escaped).unwrap(),
        handle,
        "found by pid as by the manager"
    );
    assert_eq!(handle.pids().unwrap(), vec![escaped]);
    let killed = handle.kill_with(method, Duration::from_secs(5)).unwrap();
    assert_eq!(killed, vec![escaped]);
    wait_for("the escaped process to die", || !alive(escaped));
    assert_eq!(handle.pids().unwrap(), Vec::<u32>::new());
    handle.wait_empty(Duration::from_millis(100)).unwrap();
}

#[test]
fn cgroup_kill_reaches_descendants_that_left_the_process_group() {
    let Some(_rig) = rig() else { return };
    scope_kill_reaches_an_escaped_descendant(KillMethod::CgroupKill);
}

#[test]
fn the_signal_fallback_reaches_them_too() {
    let Some(_rig) = rig() else { return };
    scope_kill_reaches_an_escaped_descendant(KillMethod::Signals);
}

#[test]
fn a_direct_launch_and_foreign_cgroups_are_refused() {
    let Some(_rig) = rig() else { return };
    let mut direct = Command::new("sleep").arg("1000").spawn().unwrap();
    let refused = ScopeHandle::of_process(direct.id()).unwrap_err();
    assert!(matches!(refused, HandleError::NotOurs { .. }), "{refused}");
    assert!(matches!(
        ScopeHandle::of_process(std::process::id()),
        Err(HandleError::NotOurs { .. })
    ));

    let env = inherited_env();
    let launcher = launcher_for_env(&env).unwrap().unwrap();
    let never_launched = launcher.wrap(&["sleep".into()], &env, None).unit.unwrap();
    let refused = ScopeHandle::from_pid(&never_launched, direct.id()).unwrap_err();
    assert!(
        matches!(refused, HandleError::NotInScope { .. }),
        "{refused}"
    );
    let missing =
        ScopeHandle::from_manager(&never_launched, &env, Duration::from_secs(3)).unwrap_err();
    assert!(matches!(missing, HandleError::NotFound { .. }), "{missing}");
    for foreign in ["app.slice", "init.scope", "user@0.service"] {
        let refused = ScopeHandle::from_manager(foreign, &env, Duration::from_secs(3)).unwrap_err();
        assert!(
            matches!(refused, HandleError::NotOurs { .. }),
            "{foreign}: {refused}"
        );
    }
    assert!(alive(direct.id()), "nothing touched the direct child");
    direct.kill().unwrap();
    direct.wait().unwrap();
}

/// Another user's scope sits in the subtree delegated to that user, so its cgroup directory is
/// that user's (the booted-session test, scripts/test-session.sh, meets a real one: bob's). Here a
/// scope's directory is handed to uid 1000 the way delegation hands it, and the handle refuses it
/// by every route while nothing in it is touched; given back, the same scope is accepted.
#[test]
fn another_users_scope_is_refused_with_a_clear_error() {
    let Some(_rig) = rig() else { return };
    let env = inherited_env();
    let (mut child, unit) = spawn_scoped(&["sleep", "1000"]);
    let pid = child.id();
    let handle = ScopeHandle::from_pid(&unit, pid).unwrap();
    let dir = handle.cgroup_dir().to_owned();
    let chown = |uid: u32| {
        rustix::fs::chown(&dir, Some(rustix::fs::Uid::from_raw(uid)), None)
            .expect("chown the scope's cgroup")
    };
    chown(1000);
    let ask = |route: &str| match route {
        "from_pid" => ScopeHandle::from_pid(&unit, pid),
        "of_process" => ScopeHandle::of_process(pid),
        _ => ScopeHandle::from_manager(&unit, &env, Duration::from_secs(3)),
    };
    let routes = ["from_pid", "of_process", "from_manager"];
    for route in routes {
        let refused = ask(route).unwrap_err();
        assert!(
            matches!(
                refused,
                HandleError::OtherUsers {
                    owner: 1000,
                    me: 0,
                    ..
                }
            ),
            "{route}: {refused}"
        );
        let text = refused.to_string();
        assert!(
            text.contains(&format!(
                "{unit} belongs to uid 1000, not to this user (uid 0); refusing it"
            )),
            "{route}: {text}"
        );
    }
    assert!(
        alive(child.id()),
        "the refused scope's process was not touched"
    );
    chown(0);
    for route in routes {
        assert!(
            ask(route).is_ok(),
            "{route}: the scope given back is accepted"
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn usage_of_an_absent_controller_reads_as_unknown() {
    let Some(_rig) = rig() else { return };
    let (mut child, unit) = spawn_scoped(&["sleep", "1000"]);
    let handle = ScopeHandle::of_process(child.id()).unwrap();
    assert_eq!(handle.unit(), unit);
    assert_eq!(handle.pids().unwrap(), vec![child.id()]);
    let stats = handle.stats();
    let offered = |file: &str| handle.cgroup_dir().join(file).exists();
    assert_eq!(stats.memory_current.is_some(), offered("memory.current"));
    assert_eq!(stats.memory_peak.is_some(), offered("memory.peak"));
    assert_eq!(stats.pids_current.is_some(), offered("pids.current"));
    let controllers = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").unwrap();
    if !controllers.split_whitespace().any(|c| c == "memory") {
        assert_eq!(
            stats.memory_current, None,
            "this machine's cgroup2 tree has no memory controller"
        );
    }
    handle.kill(Duration::from_secs(5)).unwrap();
    child.wait().unwrap();
    wait_for("the emptied scope to be collected (--collect)", || {
        matches!(
            ScopeHandle::from_manager(&unit, &inherited_env(), Duration::from_secs(3)),
            Err(HandleError::NotFound { .. })
        )
    });
}

/// A scope's pressure: each resource's figures from its own files, CPU pressure rising while more
/// processes spin in it than there are CPUs, and nothing for a scope that is gone.
#[test]
fn a_scopes_pressure_is_its_own_and_rises_under_contention() {
    let Some(_rig) = rig() else { return };
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spinners = (cpus * 2).to_string();
    let script = "i=0; while [ $i -lt $1 ]; do (while :; do :; done) & i=$((i + 1)); done; wait";
    let (mut child, _unit) = spawn_scoped(&["sh", "-c", script, "sh", &spinners]);
    let handle = ScopeHandle::of_process(child.id()).unwrap();
    let started = handle.pressure();
    for (resource, file) in [
        (started.memory, "memory.pressure"),
        (started.cpu, "cpu.pressure"),
        (started.io, "io.pressure"),
    ] {
        assert_eq!(
            resource.is_some(),
            handle.cgroup_dir().join(file).exists(),
            "{file}: {resource:?}"
        );
    }
    let cpu = started.cpu.expect("PSI: this machine's kernel has it");
    wait_for("the spinners to wait for CPU", || {
        handle
            .pressure()
            .cpu
            .is_some_and(|now| now.some.total_usec > cpu.some.total_usec + 100_000)
    });
    handle.kill(Duration::from_secs(5)).unwrap();
    child.wait().unwrap();
    wait_for("the scope's files to be gone", || {
        handle.pressure() == synaps_scope::ScopePressure::default()
    });
}

/// Issue 13, item 12: a handle stays bound to the scope it was made for. Once that scope is gone
/// and another starts under the same unit name (a new cgroup at the same path), the old handle
/// lists nothing and kills nothing; the new scope is found and killed through a new handle.
#[test]
fn a_stale_handle_never_touches_a_new_scope_of_the_same_name() {
    let Some(_rig) = rig() else { return };
    let (mut first, unit) = spawn_scoped(&["sleep", "1000"]);
    let stale = ScopeHandle::from_pid(&unit, first.id()).unwrap();
    assert_eq!(
        stale.kill(Duration::from_secs(5)).unwrap(),
        vec![first.id()]
    );
    first.wait().unwrap();

    // The same name again, as soon as the manager has let go of the first scope.
    let started = Instant::now();
    let mut second = loop {
        let mut cmd = Command::new("systemd-run");
        cmd.args(["--user", "--scope", "--quiet", "--collect", "--unit", &unit])
            .args(["--", "sleep", "1000"]);
        set_env(&mut cmd, &inherited_env());
        let mut child = cmd.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        if child.try_wait().unwrap().is_none() && cgroup_of(child.id()).ends_with(&unit) {
            break child;
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{unit} never started again"
        );
    };
    assert_eq!(
        stale.pids().unwrap(),
        Vec::<u32>::new(),
        "the old handle sees nothing"
    );
    assert_eq!(stale.stats().pids_current, None);
    assert_eq!(
        stale.kill(Duration::from_secs(1)).unwrap(),
        Vec::<u32>::new()
    );
    assert!(alive(second.id()), "the old handle killed the new scope");

    let fresh = ScopeHandle::from_pid(&unit, second.id()).unwrap();
    assert_ne!(fresh, stale);
    assert_eq!(
        fresh.kill(Duration::from_secs(5)).unwrap(),
        vec![second.id()]
    );
    second.wait().unwrap();
}

/// A scope's cgroup is removed by the manager as soon as its last process dies, also between a
/// read's open and its read (the kernel then says ENODEV). Listing and killing a scope that
/// vanishes so, while it is being read, finds it empty: never an error. Reads are hammered from
/// a second thread while the scope is killed, many times over, to meet that window.
#[test]
fn a_scope_removed_while_it_is_read_is_empty_not_an_error() {
    let Some(_rig) = rig() else { return };
    for round in 0..25 {
        let (mut child, unit) = spawn_scoped(&["sleep", "1000"]);
        let handle = ScopeHandle::from_pid(&unit, child.id()).unwrap();
        let reader = handle.clone();
        let hammer = std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(10);
            let mut reads = 0u32;
            while reader.cgroup_dir().exists() && Instant::now() < end {
                if let Err(e) = reader.pids() {
                    return Err(format!("pids() after {reads} reads: {e}"));
                }
                reads += 1;
            }
            Ok(reads)
        });
        let killed = handle.kill(Duration::from_secs(5));
        child.wait().unwrap();
        let reads = hammer.join().unwrap();
        assert_eq!(
            killed.map_err(|e| e.to_string()),
            Ok(vec![child.id()]),
            "round {round}: kill"
        );
        assert!(reads.is_ok(), "round {round}: {}", reads.unwrap_err());
        assert!(handle.pids().unwrap().is_empty(), "round {round}");
    }
}

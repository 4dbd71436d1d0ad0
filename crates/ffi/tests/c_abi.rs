//! The C ABI from C: tests/c/abi/*.c are compiled against the committed header with
//! -Wall -Wextra -Werror -pedantic under AddressSanitizer (leak checks on) and UBSan, and each of
//! its scenarios runs in its own process against the rig's real user manager.

#[path = "../../../tests/common/mod.rs"]
mod common;
#[path = "c_abi/harness.rs"]
mod harness;

use harness::{
    library_dir, repository, run_scenario, run_scenario_under, scenario, scenario_launched,
    scenario_with_env, MACHINE,
};

use std::path::Path;

use common::rig;

#[test]
fn scope_doctor_names_the_launcher_program_beside_the_library_that_was_loaded() {
    let Some(_rig) = rig() else { return };
    // A copy of the library with the launcher program beside it, as the npm package ships them,
    // loaded ahead of the build's own through LD_LIBRARY_PATH (the test binary's rpath is a
    // RUNPATH, which LD_LIBRARY_PATH precedes).
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bundled");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The loader names the library by its real path (a target directory may be a link).
    let dir = dir.canonicalize().unwrap();
    let library = dir.join("libsynaps_scope_ffi.so");
    std::fs::copy(library_dir().join("libsynaps_scope_ffi.so"), &library).unwrap();
    let exec = dir.join("synaps-scope-exec");
    common::install_executable(&common::exec_program(), &exec);
    let mut env: Vec<_> = synaps_scope::inherited_env()
        .into_iter()
        .filter(|(key, _)| !key.to_string_lossy().starts_with("SYNAPS_SCOPE_"))
        .collect();
    env.push(("LD_LIBRARY_PATH".into(), dir.clone().into()));
    let report = scenario_with_env("doctor", &env);
    let line = format!(
        "  synaps-scope-exec: {} (beside {})",
        exec.display(),
        library.display()
    );
    assert!(
        report.lines().any(|l| l == line),
        "{line:?} not in:\n{report}"
    );
    assert!(
        report.contains(&format!(
            "launcher:      synaps-scope-exec {}",
            exec.display()
        )),
        "{report}"
    );
    // The verdict as a value: scoped, as the rig's manager answers (the scenario checked the
    // report's last line says the same).
    assert!(report.contains("\nverdict value: 0\n"), "{report}");
    // The way to the manager (the rig's session bus once the manager is on it, else the private
    // socket) and the order tried.
    let runtime = std::env::var("XDG_RUNTIME_DIR").unwrap();
    let private = format!("reached by:    private socket {runtime}/systemd/private");
    // Right after the rig starts, its manager may not own its name on the bus yet.
    let not_yet = format!(
        "{private} (the session bus passed over: Could not get owner of name 'org.freedesktop.systemd1'"
    );
    let ways = [
        private,
        format!("reached by:    session bus unix:path={runtime}/bus"),
    ];
    assert!(
        report.lines().any(|l| ways.iter().any(|w| w == l)) || report.contains(&not_yet),
        "{report}"
    );
    assert!(
        report.contains("\n  in the order the launcher program's: the session bus first"),
        "{report}"
    );
}

#[test]
fn the_abi_version_in_the_header_is_the_library_s() {
    let Some(_rig) = rig() else { return };
    scenario("abi_version");
}

#[test]
fn a_posix_spawned_child_lands_in_its_unit_with_its_pid() {
    let Some(_rig) = rig() else { return };
    scenario("scoped_spawn");
}

#[test]
fn a_login_shell_gets_its_dash_argv0_through_scope_wrap_program() {
    let Some(_rig) = rig() else { return };
    scenario("login_shell");
}

#[test]
fn sixty_four_requests_against_a_stopped_manager_each_answer_within_their_bound_threads_and_async()
{
    let Some(rig) = rig() else { return };
    let manager = common::Manager::start(&rig);
    common::signal(manager.pid(), common::Signal::STOP);
    let outcome =
        std::panic::catch_unwind(|| scenario_with_env("stopped_manager_requests", &manager.env()));
    common::signal(manager.pid(), common::Signal::CONT);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn non_utf8_arguments_pass_byte_exact() {
    let Some(_rig) = rig() else { return };
    scenario("nonutf8_argv");
}

/// From a pid namespace the manager is outside of (a sandbox's `unshare --pid`): the launcher
/// program is scoped where a pidfd names its process (257 on), else NULL with the reason;
/// systemd-run, which cannot reach the manager from there and would run nothing, is not used:
/// NULL, and `required` says why.
#[test]
fn from_a_pid_namespace_the_launcher_program_is_scoped_and_systemd_run_is_not_used() {
    let Some(_rig) = rig() else { return };
    let unshare = ["unshare", "--pid", "--fork", "--mount-proc", "--"];
    let _shared = MACHINE.read().unwrap_or_else(|p| p.into_inner());
    for (wrapper, name) in [
        ("synaps-scope-exec", "from_a_pid_namespace"),
        ("systemd-run", "direct_in_pid_namespace"),
    ] {
        let env = common::with_wrapper(&synaps_scope::inherited_env(), wrapper);
        let stderr = run_scenario_under(&unshare, name, &env, None);
        if wrapper == "systemd-run" {
            assert!(
                stderr.contains("warning") && stderr.contains("pid namespace"),
                "the direct launch is warned about on the default sink: {stderr}"
            );
        }
    }
}

/// From a pid namespace the broker is outside of, with the session bus alone (no private
/// socket): a pidfd names the launcher program's process to a manager that takes one (257 on);
/// before 257 there is no launcher, and `required` says why.
#[test]
fn from_a_pid_namespace_with_the_session_bus_alone_a_pidfd_names_the_launch_or_it_is_direct() {
    let Some(rig) = rig() else { return };
    let manager = common::Manager::with_session_bus(&rig);
    let env = common::with_wrapper(&manager.session_bus_only(), "synaps-scope-exec");
    let unshare = ["unshare", "--pid", "--fork", "--mount-proc", "--"];
    let _shared = MACHINE.read().unwrap_or_else(|p| p.into_inner());
    run_scenario_under(&unshare, "from_a_pid_namespace", &env, None);
}

/// systemd-run behind a relay in front of the manager's private socket (bytes only, and
/// descriptors too): it would make the scope, then fail to find it as the sender's unit and never
/// run the command; there is no launcher, and `required` says why.
#[test]
fn systemd_run_behind_a_relay_is_not_used() {
    let Some(_rig) = rig() else { return };
    let private = Path::new(&std::env::var_os("XDG_RUNTIME_DIR").unwrap()).join("systemd/private");
    let _shared = MACHINE.read().unwrap_or_else(|p| p.into_inner());
    for relay in [
        common::Relay::to(&private),
        common::Relay::passing_fds_to(&private),
    ] {
        let runtime = common::TempDir::new("c-relayed-runtime");
        std::fs::create_dir(runtime.path().join("systemd")).unwrap();
        std::os::unix::fs::symlink(&relay.socket, runtime.path().join("systemd/private")).unwrap();
        let env = common::env_with(&[("XDG_RUNTIME_DIR", &runtime.path().as_os_str().to_owned())]);
        let env = common::env_without(&env, &["DBUS_SESSION_BUS_ADDRESS"]);
        run_scenario_under(
            &[],
            "systemd_run_behind_a_relay",
            &common::with_wrapper(&env, "systemd-run"),
            None,
        );
    }
}

#[test]
fn limits_are_checked_kept_by_the_launcher_read_back_and_said_when_not_enforced() {
    let Some(_rig) = rig() else { return };
    scenario("limits");
}

#[test]
fn no_manager_means_a_null_launcher() {
    let Some(_rig) = rig() else { return };
    scenario("direct_no_manager");
}

#[test]
fn a_refused_slice_warns_once_through_the_callback() {
    let Some(_rig) = rig() else { return };
    scenario("refused_slice");
}

/// The environment of a slice-check scenario: `slice` for tool launches, reaching the manager
/// through `slow`, a relay in front of it, with the launcher program (systemd-run, which would lose
/// the launch behind a relay, is never used there).
fn slow_slice_check_env(
    dir: &common::TempDir,
    slice: &str,
    slow: &common::SlowManager,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let config = dir.write("config", &format!("tool_scope_slice = {slice}\n"), false);
    let env = common::env_with(&[
        ("SYNAPS_CONFIG", &config.into_os_string()),
        ("XDG_RUNTIME_DIR", &slow.runtime_dir()),
    ]);
    common::with_wrapper(&env, "synaps-scope-exec")
}

#[test]
fn a_slice_check_the_busy_manager_did_not_answer_warns_once_through_the_callback() {
    let Some(_rig) = rig() else { return };
    let dir = common::TempDir::new("cabibusy");
    // The manager answers the first slice check 5 s late.
    let slow = common::SlowManager::slice_checks_in_front_of_the_rig("5", true);
    scenario_with_env(
        "busy_slice_check",
        &slow_slice_check_env(&dir, "cabibusy.slice", &slow),
    );
}

/// The R12 warning reaches the C callback exactly once while other threads launch, in each of 20
/// fresh processes (tracing decides a callsite's interest once per process).
#[test]
fn a_slice_warning_reaches_the_callback_once_while_other_threads_launch() {
    let Some(_rig) = rig() else { return };
    let dir = common::TempDir::new("cabiconcurrent");
    for run in 0..20 {
        let slice = format!("cabiconcurrent{run}.slice");
        let config = dir.write(
            &format!("{run}.config"),
            &format!("tool_scope_slice = {slice}\n"),
            false,
        );
        scenario_with_env(
            "concurrent_slice_warning",
            &common::env_with(&[
                ("SYNAPS_CONFIG", &config.into_os_string()),
                ("SYNAPS_TEST_SLICE", &slice.into()),
            ]),
        );
    }
}

#[test]
fn scope_flush_warnings_reports_a_slice_check_without_an_answer() {
    let Some(_rig) = rig() else { return };
    let dir = common::TempDir::new("cabiflush");
    // The manager answers every slice check 5 s late.
    let slow = common::SlowManager::slice_checks_in_front_of_the_rig("5", false);
    scenario_with_env(
        "flush_warnings",
        &slow_slice_check_env(&dir, "cabiflush.slice", &slow),
    );
}

#[test]
fn a_handles_kill_is_told_after_the_scope_is_collected() {
    let Some(_rig) = rig() else { return };
    scenario("ending");
}

/// Answers taken from a queue, with nothing called back: 300 requests at once, each answered once;
/// a handle from the manager that kills what a tool left after its exit; log lines; a host that
/// closed its end costs no descriptor and no memory; a watch that cannot warn says why in its
/// answer (against a stand-in oomd); a forked child is refused the queue.
#[test]
fn requests_answer_to_a_queue_the_caller_takes_from() {
    let Some(_rig) = rig() else { return };
    let env = oomd_bus_env();
    scenario_with_env("queue", &env);
}

/// The leaf and framing cases from C, against a stand-in oomd on a bus standing for the system bus
/// (`tests/tools/oomd_bus.py`), with the waits answered on the request's own thread; and a kill
/// heard after a subscription slow to set up.
#[test]
fn oomds_signal_tells_its_kill_to_the_scope_it_hit_alone() {
    let Some(_rig) = rig() else { return };
    let env = oomd_bus_env();
    scenario_with_env("ending_oomd_signal", &env);
    scenario_with_env("oomd_slow_set_up", &env);
}

/// The warning before systemd-oomd acts, where it cannot be given: against a stand-in oomd on a
/// bus standing for the system bus (no manager there to say which rules cover the scope), and
/// with no system bus at all; each says why, as a result, a kind and a message.
#[test]
fn a_watch_that_cannot_warn_says_why_and_writes_nothing() {
    let Some(_rig) = rig() else { return };
    let env = oomd_bus_env();
    scenario_with_env("oomd_watch", &env);
}

#[test]
fn children_forked_amid_requests_and_log_calls_answer_within_their_own_bound() {
    let Some(_rig) = rig() else { return };
    scenario("fork");
}

/// A host that stopped waiting for a turn stuck ahead of it, then forked a child that outlives it,
/// leaves no ticket behind (C `fork_host_ticket`): the stuck turn is a request whose first
/// authentication the stand-in holds 3 s.
#[test]
fn a_child_of_a_host_that_stopped_waiting_for_a_turn_holds_no_ticket_once_the_host_has_exited() {
    let Some(_rig) = rig() else { return };
    let slow = common::SlowManager::holding_first_in_front_of_the_rig("AUTH", "3");
    let env = synaps_scope::with_overrides(
        &common::env_without(
            &synaps_scope::inherited_env(),
            &["DBUS_SESSION_BUS_ADDRESS"],
        ),
        &[("XDG_RUNTIME_DIR".into(), slow.runtime_dir())],
    );
    // The stand-in is a relay: the launcher program (systemd-run is never used behind one).
    scenario_with_env(
        "fork_host_ticket",
        &common::with_wrapper(&env, "synaps-scope-exec"),
    );
}

/// A turn held by a request of the host (C `held_turn`), its first authentication held 600 ms by
/// the stand-in, while the host closes every file of the runtime directory or spells it
/// otherwise: another process's request waits for the held turn. Each case with a stand-in of its
/// own, whose first authentication is the holder's.
#[test]
fn a_held_turn_is_waited_for_whatever_the_host_closes_or_how_it_spells_the_directory() {
    let Some(_rig) = rig() else { return };
    for case in ["0", "1", "2", "3"] {
        let slow = common::SlowManager::holding_first_in_front_of_the_rig("AUTH", "0.6");
        let env = synaps_scope::with_overrides(
            &common::env_without(
                &synaps_scope::inherited_env(),
                &["DBUS_SESSION_BUS_ADDRESS"],
            ),
            &[
                ("XDG_RUNTIME_DIR".into(), slow.runtime_dir()),
                ("SYNAPS_TEST_TURN_CASE".into(), case.into()),
            ],
        );
        // The stand-in is a relay: the launcher program (systemd-run is never used behind one).
        scenario_with_env(
            "held_turn",
            &common::with_wrapper(&env, "synaps-scope-exec"),
        );
    }
}

#[test]
fn a_scope_that_holds_the_caller_is_never_handed_out() {
    let Some(_rig) = rig() else { return };
    let env = synaps_scope::inherited_env();
    let Ok(synaps_scope::Decision::Scoped(launcher)) = synaps_scope::decide(
        &env,
        synaps_scope::ScopeKind::Daemon,
        &synaps_scope::LauncherOptions::default(),
    ) else {
        panic!("the rig's manager scopes launches");
    };
    scenario_launched("holds_caller", &env, Some(&launcher));
}

#[test]
fn a_replaced_log_callback_never_runs_after_the_call_returns() {
    let Some(_rig) = rig() else { return };
    scenario("log_callback_replaced");
}

#[test]
fn without_a_callback_warnings_go_to_stderr() {
    let Some(_rig) = rig() else { return };
    let stderr = scenario("default_log_stderr");
    assert!(
        stderr.contains(
            "synaps-scope: warning: process scopes unavailable for slice cabistderr.service"
        ),
        "{stderr}"
    );
}

#[test]
fn a_child_that_switches_user_runs_directly_with_one_warning_or_is_refused_when_required() {
    let Some(_rig) = rig() else { return };
    scenario("user_switch");
}

#[test]
fn a_wrapped_argv_spawned_twice_leaves_the_first_tool_running() {
    let Some(_rig) = rig() else { return };
    scenario("taken_name");
}

#[test]
fn required_mode_has_its_own_result_code() {
    let Some(_rig) = rig() else { return };
    scenario("required");
}

#[test]
fn the_scope_kill_reaches_an_escaped_descendant() {
    let Some(_rig) = rig() else { return };
    scenario("scope_kill");
}

/// Another user's scope (its cgroup owned by that user, as delegation makes it) is refused, named.
#[test]
fn another_users_scope_is_refused_with_a_clear_error() {
    let Some(_rig) = rig() else { return };
    scenario("other_users_scope");
}

/// A scope whose cgroup is removed while another thread reads it reads as empty, never an error.
#[test]
fn a_scope_removed_while_it_is_read_is_empty_not_an_error() {
    let Some(_rig) = rig() else { return };
    scenario("removed_while_read");
}

#[test]
fn bad_input_gets_its_result_code_and_message_and_no_crash() {
    let Some(_rig) = rig() else { return };
    scenario("bad_input");
}

#[test]
fn thirty_two_threads_share_one_launcher() {
    let Some(_rig) = rig() else { return };
    scenario("threads");
}

#[test]
fn two_hundred_fifty_six_c_threads_launching_at_once_each_start_in_their_own_scope_once() {
    let Some(_rig) = rig() else { return };
    let env = common::with_wrapper(&synaps_scope::inherited_env(), "synaps-scope-exec");
    let _alone = MACHINE.write().unwrap_or_else(|p| p.into_inner());
    let out = run_scenario("burst", &env, None);
    assert!(out.contains("all scoped, each once"), "{out}");
}

/// A stopped session bus broker costs a burst of library launches from C threads one wait, not
/// one per launch: 256 at once, each through the launcher program, all in their scopes.
#[test]
fn a_stopped_broker_costs_a_burst_of_c_threads_one_wait() {
    let Some(rig) = rig() else { return };
    let manager = common::Manager::with_session_bus(&rig);
    let env = common::with_wrapper(&manager.with_its_session_bus_address(), "synaps-scope-exec");
    let broker = manager.session_bus_broker();
    let _alone = MACHINE.write().unwrap_or_else(|p| p.into_inner());
    common::signal(broker, common::Signal::STOP);
    let out = std::panic::catch_unwind(|| run_scenario("burst", &env, None));
    common::signal(broker, common::Signal::CONT);
    let out = out.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    assert!(out.contains("all scoped, each once"), "{out}");
}

/// One manager for one environment, through the C ABI: where the session bus's
/// `org.freedesktop.systemd1` is a program that is no systemd manager, `scope_doctor` says the bus
/// was passed over and why, and a launch and `scope_handle_from_manager` reach the manager of
/// `XDG_RUNTIME_DIR` by its private socket.
#[test]
fn a_session_bus_whose_manager_name_a_program_squats_is_passed_over() {
    let Some(_rig) = rig() else { return };
    let dir = common::TempDir::new("squatted-bus");
    let bus = common::BareBus::start(&dir);
    let _squatter = common::Squatter::start(&bus.address);
    let env = synaps_scope::with_overrides(
        &common::with_wrapper(&synaps_scope::inherited_env(), "synaps-scope-exec"),
        &[("DBUS_SESSION_BUS_ADDRESS".into(), bus.address.clone())],
    );
    let report = scenario_with_env("doctor", &env);
    assert!(
        report.contains("reached by:    private socket ")
            && report.contains("does not answer as a systemd manager"),
        "{report}"
    );
    scenario_with_env("scope_kill", &env);
}

/// This process's environment naming the stand-in oomd's bus (`tests/tools/oomd_bus.py`), which the
/// scenarios start as the system bus.
fn oomd_bus_env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let script = repository().join("tests/tools/oomd_bus.py");
    synaps_scope::with_overrides(
        &synaps_scope::inherited_env(),
        &[("SYNAPS_OOMD_BUS".into(), script.into_os_string())],
    )
}

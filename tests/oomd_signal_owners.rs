//! systemd-oomd's `Killed` signal followed from owner to owner of `org.freedesktop.oom1`: an
//! oomd restarted, replaced while the subscription is set up, started after the handle; a bus with
//! no oomd, two system buses each with its own; and the subscription's life with the handles'.
//! Against a real user manager and a real `dbus-daemon` standing for the system bus, with stand-in
//! oomds on it (`tests/tools/oomd_standin.py`; the real oomd acts in the virtual machine).
//!
//! The subscription is one per process, so the tests take turns (`TURN`), each with a bus of its
//! own and no handle left from the one before.

mod common;
#[path = "oomd_signal/support.rs"]
mod support;

use std::time::{Duration, Instant};

use common::{cgroup_of, collected, env_with, spawn_scoped, wait_for, SlowManager, Standin};
use synaps_scope::{Evidence, OomdRule, ScopeHandle};

use support::*;

/// oomd restarted while a handle lived: the new owner of the name is heard.
#[test]
fn a_restarted_oomd_is_heard() {
    let Some(setup) = setup(None) else {
        return;
    };
    let (system, first) = (&setup.system, setup.oomd);
    let (child, handle, cgroup) = scoped(&["sleep", "100"], &system.env);
    drop(first);
    let mut second = Standin::start(&system.bus.address, None);
    mark_and_kill(handle.cgroup_dir());
    second.killed(&cgroup, "memory-pressure");
    collected(child, &handle);
    assert_eq!(
        handle.ending(&system.env, ASK).evidence,
        Evidence::OomdSignal
    );
}

/// What the subscription costs: one connection and one thread while any handle lives, both gone
/// once the last is dropped.
#[test]
fn the_subscription_lives_as_long_as_the_handles() {
    let Some(setup) = setup(None) else {
        return;
    };
    let system = &setup.system;
    let before = oomd_signal_threads();
    let (first, a, _) = scoped(&["sleep", "100"], &system.env);
    let (second, b, _) = scoped(&["sleep", "100"], &system.env);
    assert_eq!(
        oomd_signal_threads(),
        before + 1,
        "one thread for both handles"
    );
    a.kill(ASK).unwrap();
    b.kill(ASK).unwrap();
    collected(first, &a);
    collected(second, &b);
    drop(a);
    assert_eq!(
        oomd_signal_threads(),
        before + 1,
        "kept while a handle lives"
    );
    drop(b);
    wait_for("the subscription's thread to end", || {
        oomd_signal_threads() == before
    });
}

/// One subscription per system bus: handles made with two buses each hear their own oomd.
#[test]
fn handles_on_two_system_buses_each_hear_their_own_oomd() {
    let Some(setup) = setup(None) else {
        return;
    };
    let (first, mut first_oomd) = (&setup.system, setup.oomd);
    let second = SystemBus::start();
    let mut second_oomd = Standin::start(&second.bus.address, None);
    let (x_child, x, x_cgroup) = scoped(&["sleep", "100"], &first.env);
    let (y_child, y, y_cgroup) = scoped(&["sleep", "100"], &second.env);
    mark_and_kill(x.cgroup_dir());
    first_oomd.killed(&x_cgroup, "memory-used");
    mark_and_kill(y.cgroup_dir());
    second_oomd.killed(&y_cgroup, "memory-pressure");
    collected(x_child, &x);
    collected(y_child, &y);
    assert_eq!(x.ending(&first.env, ASK), oomds(OomdRule::Swap));
    assert_eq!(y.ending(&second.env, ASK), oomds(OomdRule::MemoryPressure));
}

/// oomd replaced while the subscription is set up: the owner gives the name to the next oomd
/// (queued for it) as it answers the subscription's introspection, so the change of owner comes
/// amid the set-up's answers. The new owner is followed, and its kill heard.
#[test]
fn an_oomd_replaced_during_the_set_up_is_followed() {
    let Some(setup) = setup(Some("--hand-over")) else {
        return;
    };
    let (system, first) = (&setup.system, setup.oomd);
    let mut second = Standin::start(&system.bus.address, Some("--queue"));
    let (child, handle, cgroup) = scoped(&["sleep", "100"], &system.env);
    mark_and_kill(handle.cgroup_dir());
    second.killed(&cgroup, "memory-pressure");
    collected(child, &handle);
    assert_eq!(
        handle.ending(&system.env, ASK),
        oomds(OomdRule::MemoryPressure)
    );
    drop(first);
}

/// No oomd on the bus when the handle is made; one starts later (as D-Bus activation starts it,
/// or an administrator): its kill is heard, and its rule named.
#[test]
fn an_oomd_that_starts_after_the_handle_is_heard() {
    let Some((_turn, system)) = setup_without_oomd() else {
        return;
    };
    let (child, handle, cgroup) = scoped(&["sleep", "100"], &system.env);
    let mut oomd = Standin::start(&system.bus.address, None);
    mark_and_kill(handle.cgroup_dir());
    oomd.killed(&cgroup, "memory-used");
    collected(child, &handle);
    assert_eq!(handle.ending(&system.env, ASK), oomds(OomdRule::Swap));
}

/// A bus with no oomd on it: a mark on the scope is not taken for no kill (the silence of a bus
/// without oomd says nothing), and the answer says what it rests on: a mark any process of the
/// user could have written.
#[test]
fn a_handle_whose_bus_has_no_oomd_says_so_in_its_evidence() {
    let Some((_turn, system)) = setup_without_oomd() else {
        return;
    };
    let (child, handle, _) = scoped(&["sleep", "100"], &system.env);
    mark_and_kill(handle.cgroup_dir());
    collected(child, &handle);
    let ending = handle.ending(&system.env, ASK);
    assert_eq!(ending.how.as_str(), "oomd");
    assert_eq!(ending.evidence, Evidence::OomdMark);
    assert!(ending.evidence.forgeable());
}

/// A system bus slow to answer the set-up (oomd's introspection held 1 s, as a machine amid the
/// thrash oomd acts on was seen to answer past the quarter second a handle waits): the handle is
/// made without waiting for it, and oomd's kill, once the set-up is done, is heard all the same.
#[test]
fn a_kill_after_a_slow_set_up_is_heard() {
    let Some(mut setup) = setup(None) else {
        return;
    };
    let (_slow, env) = holding_oomds_introspection(&setup.system, "1");
    let (child, unit) = spawn_scoped(&["sleep", "100"]);
    let asked = Instant::now();
    let handle = ScopeHandle::from_manager(&unit, &env, ASK).unwrap();
    let waited = asked.elapsed();
    assert!(
        waited < Duration::from_millis(900),
        "the handle waited {waited:?} for the slow bus"
    );
    // The set-up done (its held question answered 1 s after it was asked), oomd kills.
    std::thread::sleep(Duration::from_secs(3));
    let cgroup = cgroup_of(child.id());
    mark_and_kill(handle.cgroup_dir());
    setup.oomd.killed(&cgroup, "memory-used");
    collected(child, &handle);
    assert_eq!(handle.ending(&env, ASK), oomds(OomdRule::Swap));
}

/// A system bus that hangs in the set-up (oomd's introspection held 5 s), and handles made and
/// dropped one after another meanwhile: one set-up under way (one thread), which each finds, and
/// only those made in its first quarter second wait for it.
#[test]
fn a_hung_set_up_is_one_whatever_the_handles_made_meanwhile() {
    let Some(setup) = setup(None) else {
        return;
    };
    let (_slow, env) = holding_oomds_introspection(&setup.system, "5");
    let (mut child, unit) = spawn_scoped(&["sleep", "100"]);
    let before = oomd_signal_threads();
    drop(ScopeHandle::from_manager(&unit, &env, ASK).unwrap());
    let asked = Instant::now();
    for _ in 0..20 {
        drop(ScopeHandle::from_manager(&unit, &env, ASK).unwrap());
    }
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(2), "20 handles took {took:?}");
    assert!(oomd_signal_threads() <= before + 1, "one set-up under way");
    let _ = child.kill();
    let _ = child.wait();
}

/// A stand-in in front of `system` that holds the first question on oomd's introspection for
/// `seconds`, and the environment that names it as the system bus.
fn holding_oomds_introspection(
    system: &SystemBus,
    seconds: &str,
) -> (SlowManager, Vec<(std::ffi::OsString, std::ffi::OsString)>) {
    let slow = SlowManager::holding_first_in_front_of_a_bus(
        &system.bus.address,
        "org.freedesktop.DBus.Introspectable",
        seconds,
    );
    let env = env_with(&[("DBUS_SYSTEM_BUS_ADDRESS", &slow.address())]);
    (slow, env)
}

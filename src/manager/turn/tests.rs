//! The turns, across threads and processes: order, bounds, stopped and dead holders, nesting.

use std::ffi::OsString;
use std::sync::Mutex;
use std::time::Duration;

use super::file::{
    count_turn, draw, open_lock, read_field, Drawn, Header, Ticket, LOCK_NAME, NEXT_AT,
};
use super::local::{local_for, LOCALS, LOCALS_KEPT, LOOK_EVERY, STALL};
use super::*;
use crate::per_process::lock;

/// The runtime directory whose turn file the tests share.
fn route_in(dir: &std::path::Path) -> Option<OsString> {
    Some(dir.as_os_str().to_owned())
}

/// A turn taken as another process would take it: through a side of the lock of its own.
fn take_as(local: &Arc<Local>, deadline: Instant) -> Result<Turn, NoTurn> {
    enter();
    take_in(local, deadline)
}

/// A ticket drawn and held by the test itself, as a process that is not this library's
/// request would (one stopped mid-turn, or about to die).
fn foreign_ticket(path: &OsString) -> (Ticket, bool) {
    match draw(path, Instant::now() + Duration::from_secs(1)) {
        Ok(Some(Drawn::Now(ticket))) => (ticket, true),
        Ok(Some(Drawn::Behind(ticket, _))) => (ticket, false),
        _ => panic!("no ticket drawn"),
    }
}

/// Waits until `count` tickets have been drawn from the lock file at `path`.
fn until_drawn(path: &OsString, count: u64) {
    let file = open_lock(path).unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while read_field(&file, NEXT_AT) < count {
        assert!(
            Instant::now() < until,
            "tickets drawn: {}",
            read_field(&file, NEXT_AT)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn scratch(label: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("synaps-turn-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn one_turn_at_a_time_and_the_next_follows_at_once() {
    let dir = scratch("order");
    let route = route_in(&dir);
    let far = Instant::now() + Duration::from_secs(10);
    let first = take(route.as_deref(), far).unwrap();
    assert!(first.is_held());
    let waiters: Vec<_> = (0..8)
        .map(|_| {
            let route = route.clone();
            std::thread::spawn(move || {
                let turn =
                    take(route.as_deref(), Instant::now() + Duration::from_secs(10)).unwrap();
                let got = Instant::now();
                std::thread::sleep(Duration::from_millis(5));
                (turn.is_held(), got)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let released = Instant::now();
    drop(first);
    let mut got: Vec<Instant> = waiters
        .into_iter()
        .map(|w| {
            let (held, got) = w.join().unwrap();
            assert!(held, "every waiter got a turn of its own");
            got
        })
        .collect();
    got.sort();
    assert!(got[0] >= released, "none before the release");
    for pair in got.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_millis(5),
            "one at a time"
        );
    }
    assert!(
        got[7] - released < Duration::from_millis(200),
        "{:?} for eight 5 ms turns",
        got[7] - released
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_turn_stuck_in_another_process_delays_a_request_by_the_stall_only() {
    let dir = scratch("stall");
    let route = route_in(&dir);
    let path = dir.join(LOCK_NAME).into_os_string();
    // Another process's ticket, its turn come and never ended while this lasts.
    let (stuck, now) = foreign_ticket(&path);
    assert!(now);
    let started = Instant::now();
    let turn = take(route.as_deref(), started + Duration::from_secs(3)).unwrap();
    let waited = started.elapsed();
    assert!(!turn.is_held(), "talks without a turn");
    assert!(
        waited >= STALL && waited < STALL + LOOK_EVERY * 3,
        "{waited:?}"
    );
    drop(turn);
    // A short bound ends the wait sooner, leaving a tenth of it for the conversation.
    let started = Instant::now();
    let turn = take(route.as_deref(), started + Duration::from_millis(400)).unwrap();
    assert!(!turn.is_held());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(360) && waited < Duration::from_millis(400),
        "{waited:?}"
    );
    drop(turn);
    // Once the holder is gone, turns are had again.
    drop(stuck);
    let again = take(route.as_deref(), Instant::now() + Duration::from_secs(2)).unwrap();
    assert!(again.is_held());
    std::fs::remove_dir_all(dir).unwrap();
}

/// The CPU time this thread has used so far.
fn thread_cpu() -> Duration {
    let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    let on_cpu = schedstat.split_whitespace().next().unwrap();
    Duration::from_nanos(on_cpu.parse().unwrap())
}

#[test]
fn a_header_held_by_a_stopped_process_delays_a_request_by_the_stall_only_at_no_cost() {
    let dir = scratch("header");
    let route = route_in(&dir);
    let path = dir.join(LOCK_NAME).into_os_string();
    // Another process's lock on the header, as one stopped in the middle of a draw holds it.
    let file = open_lock(&path).unwrap();
    let held = Header::wait(&file).unwrap();
    let cpu = thread_cpu();
    let started = Instant::now();
    let turn = take(route.as_deref(), started + Duration::from_secs(3)).unwrap();
    let waited = started.elapsed();
    let burnt = thread_cpu() - cpu;
    assert!(!turn.is_held(), "talks without a turn");
    assert!(
        waited >= STALL && waited < STALL + LOOK_EVERY * 3,
        "{waited:?}"
    );
    assert!(burnt < Duration::from_millis(25), "{burnt:?} of CPU");
    drop(turn);
    drop(held);
    let again = take(route.as_deref(), Instant::now() + Duration::from_secs(2)).unwrap();
    assert!(again.is_held());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_sides_of_the_locks_a_process_keeps_are_bounded_in_number_and_time() {
    let timed = |from: usize| {
        let started = Instant::now();
        for i in from..from + 1000 {
            drop(local_for(OsString::from(format!(
                "/nowhere/{i}/{LOCK_NAME}"
            ))));
        }
        started.elapsed()
    };
    let first = timed(0);
    for from in (1000..100_000).step_by(1000) {
        timed(from);
    }
    let last = timed(100_000);
    // Other tests of this process may hold a few sides of their own meanwhile.
    assert!(lock(&LOCALS.get()).len() <= LOCALS_KEPT * 2);
    assert!(
        last < first * 3 + Duration::from_millis(5),
        "{first:?}, then {last:?}"
    );
}

/// While a turn is held through `first`, 16 requests ask one after another, each through the
/// side of the lock `side(i)` gives it, and each only once `asked(i)` has seen the one before
/// it wait; the order in which their turns came.
fn order_of_turns(
    first: &Arc<Local>,
    side: impl Fn(usize) -> Arc<Local>,
    asked: impl Fn(usize),
) -> Vec<usize> {
    let far = || Instant::now() + Duration::from_secs(10);
    let held = take_as(first, far()).unwrap();
    assert!(held.is_held());
    let order = Arc::new(Mutex::new(Vec::new()));
    let waiters: Vec<_> = (0..16)
        .map(|i| {
            let local = side(i);
            let order = Arc::clone(&order);
            let waiter = std::thread::spawn(move || {
                let turn = take_as(&local, far()).unwrap();
                assert!(turn.is_held(), "request {i} got a turn of its own");
                order.lock().unwrap().push(i);
                std::thread::sleep(Duration::from_millis(2));
            });
            asked(i);
            waiter
        })
        .collect();
    drop(held);
    for waiter in waiters {
        waiter.join().unwrap();
    }
    let order = order.lock().unwrap().clone();
    order
}

#[test]
fn turns_come_in_the_order_they_were_asked_for_across_processes() {
    let dir = scratch("fifo");
    let path = dir.join(LOCK_NAME).into_os_string();
    let order = order_of_turns(
        &Local::new(path.clone()),
        |_| Local::new(path.clone()),
        // The first turn's ticket, then one more for each request that asked.
        |i| until_drawn(&path, i as u64 + 2),
    );
    assert_eq!(order, (0..16).collect::<Vec<_>>());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn requests_of_one_process_are_served_in_the_order_they_came() {
    let dir = scratch("local-fifo");
    let local = Local::new(dir.join(LOCK_NAME).into_os_string());
    let order = order_of_turns(
        &local,
        |_| Arc::clone(&local),
        |i| {
            while local.state().waiting.len() < i + 1 {
                std::thread::sleep(Duration::from_millis(1));
            }
        },
    );
    assert_eq!(order, (0..16).collect::<Vec<_>>());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_ticket_whose_holder_died_or_stopped_waiting_holds_no_one_back() {
    let dir = scratch("ended");
    let path = dir.join(LOCK_NAME).into_os_string();
    let far = || Instant::now() + Duration::from_secs(10);
    let first = take_as(&Local::new(path.clone()), far()).unwrap();
    // Behind it: a process that dies while it waits ...
    let (dies, now) = foreign_ticket(&path);
    assert!(!now);
    // ... a request that stops waiting (its bound is short, and no turn goes round) ...
    let gives_up = Local::new(path.clone());
    let short = std::thread::spawn(move || {
        let turn = take_as(&gives_up, Instant::now() + Duration::from_millis(300)).unwrap();
        assert!(!turn.is_held());
    });
    until_drawn(&path, 3);
    // ... and one that waits.
    let waits = Local::new(path.clone());
    let patient = std::thread::spawn(move || {
        let turn = take_as(&waits, far()).unwrap();
        (turn.is_held(), Instant::now())
    });
    until_drawn(&path, 4);
    short.join().unwrap();
    drop(dies);
    std::thread::sleep(Duration::from_millis(50));
    let released = Instant::now();
    drop(first);
    let (held, got) = patient.join().unwrap();
    assert!(held);
    assert!(
        got - released < Duration::from_millis(50),
        "{:?} after the turn ahead ended",
        got - released
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn never_two_turns_at_once_among_many_processes() {
    let dir = scratch("exclusive");
    let path = dir.join(LOCK_NAME).into_os_string();
    let in_turn = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let turns = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let processes: Vec<_> = (0..16).map(|_| Local::new(path.clone())).collect();
    let threads: Vec<_> = (0..64)
        .map(|i| {
            let local = Arc::clone(&processes[i % processes.len()]);
            let in_turn = Arc::clone(&in_turn);
            let turns = Arc::clone(&turns);
            std::thread::spawn(move || {
                for _ in 0..8 {
                    let turn = take_as(&local, Instant::now() + Duration::from_secs(20)).unwrap();
                    assert!(turn.is_held());
                    assert!(!in_turn.swap(true, std::sync::atomic::Ordering::SeqCst));
                    std::thread::sleep(Duration::from_micros(200));
                    in_turn.store(false, std::sync::atomic::Ordering::SeqCst);
                    turns.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(turns.load(std::sync::atomic::Ordering::SeqCst), 64 * 8);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_request_waits_past_the_stall_while_the_turns_go_round() {
    let dir = scratch("moving");
    let route = route_in(&dir);
    let path = dir.join(LOCK_NAME).into_os_string();
    let holder = take(route.as_deref(), Instant::now() + Duration::from_secs(10)).unwrap();
    assert!(holder.is_held());
    let route2 = route.clone();
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        let turn = take(route2.as_deref(), started + Duration::from_secs(5)).unwrap();
        (turn.is_held(), started.elapsed())
    });
    // While the lock stays taken, turns are counted every 25 ms for twice the stall, as a
    // queue of other processes' turns would count them.
    let lock = open_lock(&path).unwrap();
    let until = Instant::now() + STALL * 2;
    while Instant::now() < until {
        count_turn(&lock);
        std::thread::sleep(Duration::from_millis(25));
    }
    drop(holder);
    let (held, waited) = waiter.join().unwrap();
    assert!(held, "waited for its turn, not past the turns");
    assert!(waited >= STALL * 2, "{waited:?}");

    // Turns that go round without this request's until a tenth of its bound is left: it
    // ends as a request the manager did not answer in time, rather than crowd in.
    let holder = take(route.as_deref(), Instant::now() + Duration::from_secs(10)).unwrap();
    let route3 = route.clone();
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        let outcome =
            take(route3.as_deref(), started + Duration::from_millis(800)).map(|t| t.is_held());
        (outcome.map_err(|no| no.waited), started.elapsed())
    });
    let until = Instant::now() + Duration::from_millis(900);
    while Instant::now() < until {
        count_turn(&lock);
        std::thread::sleep(Duration::from_millis(25));
    }
    drop(holder);
    let (outcome, took) = waiter.join().unwrap();
    let waited = outcome.expect_err("no turn");
    assert!(
        waited >= Duration::from_millis(720) && took < Duration::from_millis(800),
        "{waited:?} {took:?}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_thread_in_a_turn_takes_no_second_one() {
    let dir = scratch("nested");
    let route = route_in(&dir);
    let started = Instant::now();
    let outer = take(route.as_deref(), started + Duration::from_secs(4)).unwrap();
    assert!(outer.is_held());
    let inner = take(route.as_deref(), started + Duration::from_secs(4)).unwrap();
    assert!(!inner.is_held());
    drop(inner);
    drop(outer);
    assert!(started.elapsed() < Duration::from_millis(100));
    // A turn kept from one conversation for the next is the same turn, still held.
    let ((), kept) = keeping(|| {
        let probe = take(route.as_deref(), Instant::now() + Duration::from_secs(1)).unwrap();
        assert!(probe.is_held());
    });
    let kept = kept.expect("the probe's turn, kept");
    assert!(kept.is_held());
    assert!(
        !take(route.as_deref(), Instant::now() + Duration::from_secs(1))
            .unwrap()
            .is_held()
    );
    drop(kept);
    assert!(
        take(route.as_deref(), Instant::now() + Duration::from_secs(1))
            .unwrap()
            .is_held()
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn without_a_runtime_directory_or_a_usable_one_there_is_no_turn_and_no_wait() {
    let started = Instant::now();
    assert!(!take(None, started + Duration::from_secs(5))
        .unwrap()
        .is_held());
    let missing = route_in(std::path::Path::new("/nonexistent/synaps"));
    assert!(!take(missing.as_deref(), started + Duration::from_secs(5))
        .unwrap()
        .is_held());
    assert!(started.elapsed() < Duration::from_millis(50));
}

#[test]
fn one_turn_file_is_one_side_of_the_lock_however_its_directory_is_spelt() {
    let dir = scratch("spelt");
    let link = dir.with_extension("link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    let plain = dir.join(LOCK_NAME).into_os_string();
    let mut slash = dir.clone().into_os_string();
    slash.push("//");
    slash.push(LOCK_NAME);
    let linked = link.join(LOCK_NAME).into_os_string();
    let first = local_for(plain);
    assert!(Arc::ptr_eq(&first, &local_for(slash)));
    assert!(Arc::ptr_eq(&first, &local_for(linked)));
    // A directory made again where one was removed is another, whatever inode it gets.
    std::fs::remove_file(&link).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let again = scratch("spelt-again");
    let other = local_for(again.join(LOCK_NAME).into_os_string());
    assert!(!Arc::ptr_eq(&first, &other));
    std::fs::remove_dir_all(again).unwrap();
}

//! The C and Python libraries install their log sink as the process's global `tracing` subscriber
//! (`diag::install_global_once`). A child forked while a thread of its parent is inside that
//! install must neither wait for it nor make a `Dispatch` of its own (a new `Dispatch` takes
//! tracing-core's lock of dispatchers, which the parent's thread may hold at the fork and which
//! the child would then wait on for ever); a child forked after it inherits the sink. Its own
//! test binary: the global subscriber it sets is the process's for good.

#[path = "common/forks.rs"]
mod forks;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use forks::{fork_running, status_within};
use synaps_scope::diag::{install_global_once, CallbackSubscriber};
use tracing::Level;

/// What a child reports with its exit status.
const RETURNED_WITHOUT_A_DISPATCH: i32 = 0;
const MADE_A_DISPATCH: i32 = 1;
const HEARD_ITS_EVENT: i32 = 2;
const LOST_ITS_EVENT: i32 = 3;

/// Events that reached the installed sink, in whichever process.
static HEARD: AtomicBool = AtomicBool::new(false);

fn sink() -> CallbackSubscriber<impl Fn(&Level, &str, &str) + Send + Sync + 'static> {
    CallbackSubscriber::new(Level::INFO, |_, _, line| {
        if line == "heard" {
            HEARD.store(true, Ordering::SeqCst);
        }
    })
}

#[test]
fn a_child_forked_amid_the_install_neither_waits_nor_makes_a_dispatch_and_one_forked_after_inherits_it(
) {
    // A thread starts the install and is held inside it, before its `Dispatch` is made.
    let (inside, held) = mpsc::channel();
    let release = Arc::new(AtomicBool::new(false));
    let installer = std::thread::spawn({
        let release = Arc::clone(&release);
        move || {
            install_global_once(
                || {},
                || {
                    inside.send(()).unwrap();
                    while !release.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    sink()
                },
            )
        }
    });
    held.recv().unwrap();

    let amid = fork_running(|| {
        let started = Instant::now();
        let mut made = false;
        install_global_once(
            || {},
            || {
                made = true;
                sink()
            },
        );
        if made {
            MADE_A_DISPATCH
        } else if started.elapsed() > Duration::from_millis(500) {
            99
        } else {
            RETURNED_WITHOUT_A_DISPATCH
        }
    });
    assert_eq!(
        status_within(amid, Duration::from_secs(5)),
        Some(RETURNED_WITHOUT_A_DISPATCH),
        "a child forked amid its parent's install returns at once without a Dispatch of its own"
    );

    // Another thread of the installing process waits for the install, and its events reach the sink.
    let waiter = std::thread::spawn(|| {
        install_global_once(
            || {},
            || -> CallbackSubscriber<fn(&Level, &str, &str)> {
                panic!("the install is under way: a second one is never made")
            },
        );
        tracing::info!(target: synaps_scope::diag::TARGET, "heard");
        HEARD.load(Ordering::SeqCst)
    });
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !waiter.is_finished(),
        "a thread of the installing process waits for the install"
    );
    release.store(true, Ordering::SeqCst);
    installer.join().unwrap();
    assert!(
        waiter.join().unwrap(),
        "its event reached the sink once installed"
    );

    HEARD.store(false, Ordering::SeqCst);
    let after = fork_running(|| {
        install_global_once(
            || {},
            || -> CallbackSubscriber<fn(&Level, &str, &str)> {
                panic!("a child forked after the install inherits it")
            },
        );
        tracing::info!(target: synaps_scope::diag::TARGET, "heard");
        if HEARD.load(Ordering::SeqCst) {
            HEARD_ITS_EVENT
        } else {
            LOST_ITS_EVENT
        }
    });
    assert_eq!(
        status_within(after, Duration::from_secs(5)),
        Some(HEARD_ITS_EVENT),
        "a child forked after the install logs to the inherited sink without installing anew"
    );
}

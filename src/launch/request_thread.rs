//! A request answered on a thread of its own (A2: each request its own bound, no pool, no queue),
//! for the surfaces whose callers must not block on it: C's `scope_launcher_for_env_async`,
//! Python's asyncio and Node's Promises. The answer always comes, exactly once: a panic in the
//! request (a bug) is caught on its thread and handed to the caller as such, so a caller that
//! waits on it never waits for good.

use std::ffi::OsString;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread;

use crate::input::intake::CheckedEnv;
use crate::input::kind::ScopeKind;
use crate::launch::decide::{decide, decide_checked, Decision, LauncherOptions, ScopeError};

/// What a request answered on its own thread comes to: the decision, or the payload of the panic
/// that ended the request.
pub type Answer = thread::Result<Result<Decision, ScopeError>>;

/// Runs [`decide`] for `env` and `kind` on a thread of its own and returns at once; `answer` runs
/// on that thread, exactly once, when the request is over.
///
/// # Errors
/// When no thread could be started; `answer` then never runs.
pub fn decide_on_own_thread(
    env: Vec<(OsString, OsString)>,
    kind: ScopeKind,
    options: LauncherOptions,
    answer: impl FnOnce(Answer) + Send + 'static,
) -> io::Result<()> {
    answered_on_own_thread(move || decide(&env, kind, &options), answer)
}

/// [`decide_on_own_thread`] for an environment already checked.
pub(crate) fn decide_checked_on_own_thread(
    env: CheckedEnv,
    kind: ScopeKind,
    options: LauncherOptions,
    answer: impl FnOnce(Answer) + Send + 'static,
) -> io::Result<()> {
    answered_on_own_thread(
        move || decide_checked(env.as_pairs(), kind, &options),
        answer,
    )
}

fn answered_on_own_thread<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
    answer: impl FnOnce(thread::Result<T>) + Send + 'static,
) -> io::Result<()> {
    thread::Builder::new()
        .name("synaps-scope probe".into())
        .spawn(move || answer(catch_unwind(AssertUnwindSafe(work))))
        .map(drop)
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_answer_comes_exactly_once_even_when_the_request_panics() {
        let (sender, receiver) = mpsc::channel();
        answered_on_own_thread(
            || -> u32 { panic!("a request that panics, as a bug would") },
            move |answer| sender.send(answer.is_err()).unwrap(),
        )
        .unwrap();
        assert!(
            receiver.recv_timeout(Duration::from_secs(5)).unwrap(),
            "told of the panic"
        );
        assert!(
            receiver.recv_timeout(Duration::from_millis(200)).is_err(),
            "told once"
        );
    }

    #[test]
    fn a_request_is_answered_on_a_thread_of_its_own() {
        let (sender, receiver) = mpsc::channel();
        let caller = thread::current().id();
        let env = vec![(
            OsString::from("SYNAPS_PROCESS_SCOPES"),
            OsString::from("off"),
        )];
        decide_on_own_thread(
            env,
            ScopeKind::Tool,
            LauncherOptions::default(),
            move |answer| {
                let direct = matches!(answer, Ok(Ok(Decision::Direct(_))));
                sender.send((direct, thread::current().id())).unwrap();
            },
        )
        .unwrap();
        let (direct, on) = receiver.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(direct, "scopes off: a direct launch");
        assert_ne!(on, caller);
    }
}

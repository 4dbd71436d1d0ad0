//! Blocking calls that Ctrl-C reaches. On Python's main thread, where its signal handlers run, a
//! blocking call runs on a thread of its own while the caller's thread, the GIL released, waits
//! for its answer in steps of [`SIGNAL_POLL`] and runs the handlers between them
//! (`PyErr_CheckSignals`), as the standard library's waits do; a handler's exception
//! (KeyboardInterrupt) is raised at once, and the call goes on to its own bound on its thread, its
//! answer dropped. On any other thread no handler can run, so the call runs there, the GIL
//! released, as it did before; so it does where no thread can be had (a runaway that took the
//! user's last one must still be killable).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{sync_channel, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// How long a blocking call waits between two looks for a signal: Ctrl-C is raised within this
/// (and the time Python takes to run its handler).
pub(crate) const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Whether the calling thread is Python's main thread, the one its signal handlers run on.
pub(crate) fn on_main_thread(py: Python<'_>) -> bool {
    let same = |threading: Bound<'_, PyModule>| -> PyResult<bool> {
        let main = threading.call_method0("main_thread")?.getattr("ident")?;
        main.eq(threading.call_method0("get_ident")?)
    };
    py.import("threading").and_then(same).unwrap_or(false)
}

/// Runs `call` and returns its answer, raising a signal handler's exception as soon as the
/// handler runs (see the module's documentation).
pub(crate) fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    call: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    if !on_main_thread(py) {
        return Ok(py.detach(call));
    }
    // Shared with the thread, so that the call is still here to run where no thread starts.
    let call = Arc::new(Mutex::new(Some(call)));
    let take = |call: &Mutex<Option<_>>| call.lock().unwrap_or_else(PoisonError::into_inner).take();
    let (answer, answered) = sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("synaps-scope call".into())
        .spawn({
            let call = Arc::clone(&call);
            move || {
                if let Some(call) = take(&call) {
                    // A receiver gone (the caller was interrupted) drops the answer.
                    let _ = answer.send(catch_unwind(AssertUnwindSafe(call)));
                }
            }
        });
    if spawned.is_err() {
        if let Some(call) = take(&call) {
            return Ok(py.detach(call));
        }
    }
    let mut answered = answered;
    loop {
        // The receiver goes into the wait and comes back with its outcome: it is not Sync.
        let (outcome, receiver) = py.detach(move || {
            let outcome = answered.recv_timeout(SIGNAL_POLL);
            (outcome, answered)
        });
        answered = receiver;
        match outcome {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err(
                    "synaps-scope: the call ended without an answer (a bug in the library)",
                ))
            }
            Err(RecvTimeoutError::Timeout) => py.check_signals()?,
        }
    }
}

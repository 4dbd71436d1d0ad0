//! Blocking calls that Ctrl-C reaches: the call runs on a thread of its own while the caller's
//! thread, the GIL released, waits for its answer in steps of [`SIGNAL_POLL`] and runs Python's
//! signal handlers between them (`PyErr_CheckSignals`), as the standard library's waits do. A
//! handler's exception (KeyboardInterrupt) is raised at once; the call goes on to its own bound on
//! its thread, and its answer is dropped.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{sync_channel, RecvTimeoutError};
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyRuntimeError};
use pyo3::prelude::*;

/// How long a blocking call waits between two looks for a signal: Ctrl-C is raised within this
/// (and the time Python takes to run its handler).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Runs `call` on a thread of its own and returns its answer, raising a signal handler's
/// exception as soon as the handler runs.
pub(crate) fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    call: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    let (answer, answered) = sync_channel(1);
    std::thread::Builder::new()
        .name("synaps-scope call".into())
        .spawn(move || {
            // A receiver gone (the caller was interrupted) drops the answer.
            let _ = answer.send(catch_unwind(AssertUnwindSafe(call)));
        })
        .map_err(|e| PyOSError::new_err(format!("synaps-scope: no thread for the call: {e}")))?;
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

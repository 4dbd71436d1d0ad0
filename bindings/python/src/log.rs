//! Diagnostics for Python: the library's log lines go to `logging.getLogger("synaps_scope")`.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use synaps_scope::diag::CallbackSubscriber;
use tracing::Level;

use crate::args::timeout_from;
use crate::interrupt::interruptible;

/// For a program about to exit: waits at most `timeout` seconds (the GIL released) for the
/// background slice checks still running, so that their warnings reach `logging`, then reports
/// each check that got no answer. True when every check had finished.
#[pyfunction]
pub(crate) fn flush_warnings(py: Python<'_>, timeout: f64) -> PyResult<bool> {
    let bound = timeout_from(timeout, "timeout")?;
    interruptible(py, move || synaps_scope::flush_warnings(bound))
}

/// Python's logging levels for tracing's.
fn logging_level(level: &Level) -> u32 {
    match *level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        _ => 10,
    }
}

static LOGGER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Hands one line to `logging.getLogger("synaps_scope")`. From any thread: it attaches to the
/// interpreter for the call (never while holding a library lock), and drops the line if the
/// interpreter is shutting down.
pub(crate) fn forward_to_logging(level: &Level, line: &str) {
    let _ = Python::try_attach(|py| -> PyResult<()> {
        let logger = LOGGER.get_or_try_init(py, || {
            py.import("logging")?
                .call_method1("getLogger", ("synaps_scope",))
                .map(Bound::unbind)
        })?;
        logger
            .bind(py)
            .call_method1("log", (logging_level(level), "%s", line))?;
        Ok(())
    });
}

/// Routes the library's log lines to Python's `logging`, once per process (a forked child
/// inherits it; a host that embeds Python and already set a global subscriber keeps it). Run at
/// import, which `os.fork()` never interrupts (it holds the import lock), so no fork handler is
/// needed here.
pub(crate) fn install() {
    synaps_scope::diag::install_global_once(
        || {},
        || {
            CallbackSubscriber::new(Level::DEBUG, |level, _target, line| {
                forward_to_logging(level, line)
            })
        },
    );
}

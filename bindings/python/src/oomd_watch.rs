//! `OomdWatch` for Python: warnings before systemd-oomd acts on a scope, handed to a Python
//! callable on the library's one watching thread (which attaches to the interpreter for the call).

use std::sync::Mutex;

use pyo3::prelude::*;
use synaps_scope::{CannotWarn, OomdWarning, OomdWatch};

use crate::args::{env_from, timeout_from};
use crate::handle::PyScopeHandle;
use crate::interrupt::interruptible;

pyo3::import_exception!(synaps_scope._errors, CannotWarnError);

/// A warning as it crosses: (unit, rule, monitored unit, figure, limit, held for (s), duration
/// (s), sureness, the core's sentence).
type WarningTuple = (
    String,
    &'static str,
    String,
    f64,
    f64,
    f64,
    f64,
    &'static str,
    String,
);
/// Why a scope cannot be warned about: (unit, kind, message).
type CannotTuple = (String, &'static str, String);

fn warning_tuple(warning: &OomdWarning) -> WarningTuple {
    (
        warning.unit.clone(),
        warning.rule.as_str(),
        warning.monitored.clone(),
        warning.figure,
        warning.limit,
        warning.held_for.as_secs_f64(),
        warning.duration.as_secs_f64(),
        warning.sure.as_str(),
        warning.to_string(),
    )
}

fn cannot_tuple(why: &CannotWarn) -> CannotTuple {
    (why.unit.clone(), why.kind.as_str(), why.message.clone())
}

/// A watch on scopes for systemd-oomd's rules; closed (no call after `close` returns) on
/// `close()` or when collected.
#[pyclass(frozen, name = "OomdWatch", module = "synaps_scope._native")]
pub(crate) struct PyOomdWatch {
    inner: Mutex<Option<OomdWatch>>,
    watched: Vec<String>,
    cannot: Vec<CannotTuple>,
}

#[pymethods]
impl PyOomdWatch {
    /// Watches the scopes of `handles`; `callback` is called with each warning's tuple (the
    /// managers asked with the GIL released). Raises CannotWarnError where none can be warned.
    #[new]
    fn new(
        py: Python<'_>,
        handles: Vec<PyRef<'_, PyScopeHandle>>,
        env: Vec<(Vec<u8>, Vec<u8>)>,
        timeout: f64,
        callback: Py<PyAny>,
    ) -> PyResult<Self> {
        let env = env_from(env)?;
        let timeout = timeout_from(timeout, "timeout")?;
        let handles: Vec<_> = handles
            .iter()
            .map(|handle| handle.inner().clone())
            .collect();
        let on_warning = move |warning: &OomdWarning| {
            let tuple = warning_tuple(warning);
            let _ = Python::try_attach(|py| {
                if let Err(e) = callback.call1(py, (tuple,)) {
                    e.write_unraisable(py, None);
                }
            });
        };
        let watch = interruptible(py, move || {
            OomdWatch::new(&handles, env.as_pairs(), timeout, on_warning)
        })?
        .map_err(|why| {
            CannotWarnError::new_err((why.to_string(), why.unit.clone(), why.kind.as_str()))
        })?;
        Ok(PyOomdWatch {
            watched: watch.watched().to_vec(),
            cannot: watch.cannot_warn().iter().map(cannot_tuple).collect(),
            inner: Mutex::new(Some(watch)),
        })
    }

    /// The units of the scopes this watch can warn about.
    #[getter]
    fn watched(&self) -> Vec<String> {
        self.watched.clone()
    }

    /// The scopes it cannot warn about: (unit, kind, message) each.
    #[getter]
    fn cannot_warn(&self) -> Vec<CannotTuple> {
        self.cannot.clone()
    }

    /// Stops the watch: no call is made after this returns (made from inside a call, none after
    /// that call). The GIL is released while a call in flight on the watching thread finishes.
    fn close(&self, py: Python<'_>) {
        let watch = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        // On this thread, never another's: the core tells a close made from inside the watch's
        // own call by the thread it comes from, and lets it return at once.
        py.detach(move || drop(watch));
    }
}

impl Drop for PyOomdWatch {
    fn drop(&mut self) {
        let watch = self
            .inner
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if watch.is_some() {
            // A call in flight waits for the GIL: it is let go while the watch ends.
            Python::attach(|py| py.detach(move || drop(watch)));
        }
    }
}

//! `ScopeHandle` for Python: a running scope of this library, its processes, usage and ending.

use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use synaps_scope::{HandleError, OomdRule, ScopeEnding, ScopeHandle};

/// What `ScopeHandle.ending` hands to Python: kind, oomd rule, kernel OOM kills, evidence,
/// whether the evidence is forgeable, and the sentence.
type EndingTuple = (
    &'static str,
    Option<&'static str>,
    u64,
    &'static str,
    bool,
    String,
);

/// A pressure line: (avg10, avg60, avg300, total microseconds).
type LineTuple = (f64, f64, f64, u64);
/// One resource's pressure: (some, full where counted).
type PressureTuple = (LineTuple, Option<LineTuple>);

use crate::args::{env_from, pid_from, timeout_from};
use crate::error::py_error;
use crate::interrupt::{interruptible, on_main_thread, SIGNAL_POLL};

/// A running scope of this library, found by unit name.
#[pyclass(frozen, name = "ScopeHandle", module = "synaps_scope._native")]
pub(crate) struct PyScopeHandle {
    inner: ScopeHandle,
}

impl PyScopeHandle {
    /// The core's handle.
    pub(crate) fn inner(&self) -> &ScopeHandle {
        &self.inner
    }
}

#[pymethods]
impl PyScopeHandle {
    #[staticmethod]
    fn from_pid(unit: &str, pid: i64) -> PyResult<Self> {
        let pid = pid_from(pid)?;
        ScopeHandle::from_pid(unit, pid)
            .map(|inner| Self { inner })
            .map_err(|e| py_error(&e))
    }

    #[staticmethod]
    fn of_process(pid: i64) -> PyResult<Self> {
        let pid = pid_from(pid)?;
        ScopeHandle::of_process(pid)
            .map(|inner| Self { inner })
            .map_err(|e| py_error(&e))
    }

    #[staticmethod]
    fn from_manager(
        py: Python<'_>,
        unit: &str,
        env: Vec<(Vec<u8>, Vec<u8>)>,
        timeout: f64,
    ) -> PyResult<Self> {
        let env = env_from(env)?;
        let timeout = timeout_from(timeout, "timeout")?;
        let unit = unit.to_owned();
        interruptible(py, move || {
            ScopeHandle::from_manager(&unit, env.as_pairs(), timeout)
        })?
        .map(|inner| Self { inner })
        .map_err(|e| py_error(&e))
    }

    #[getter]
    fn unit(&self) -> &str {
        self.inner.unit()
    }

    #[getter]
    fn cgroup<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.cgroup_dir().as_os_str().as_bytes())
    }

    fn pids(&self) -> PyResult<Vec<u32>> {
        self.inner.pids().map_err(|e| py_error(&e))
    }

    /// (memory_current, memory_peak, pids_current), None where the controller is absent.
    fn stats(&self) -> (Option<u64>, Option<u64>, Option<u64>) {
        let stats = self.inner.stats();
        (stats.memory_current, stats.memory_peak, stats.pids_current)
    }

    /// Per resource (memory, cpu, io): None, or (some, full or None), each line
    /// (avg10, avg60, avg300, total microseconds).
    fn pressure(&self) -> [Option<PressureTuple>; 3] {
        let pressure = self.inner.pressure();
        let line = |l: synaps_scope::PressureLine| (l.avg10, l.avg60, l.avg300, l.total_usec);
        let of = |p: Option<synaps_scope::Pressure>| p.map(|p| (line(p.some), p.full.map(line)));
        [of(pressure.memory), of(pressure.cpu), of(pressure.io)]
    }

    fn kill(&self, py: Python<'_>, timeout: f64) -> PyResult<Vec<u32>> {
        let timeout = timeout_from(timeout, "timeout")?;
        let handle = self.inner.clone();
        interruptible(py, move || handle.kill(timeout))?.map_err(|e| py_error(&e))
    }

    /// (kind, oomd rule or None, kernel OOM kills, evidence, whether it is forgeable, the core's
    /// sentence): how the scope ended and on what that rests (GIL released: the wait for oomd's
    /// signal, and an oomd kill's rule asked of the managers).
    fn ending(
        &self,
        py: Python<'_>,
        env: Vec<(Vec<u8>, Vec<u8>)>,
        timeout: f64,
    ) -> PyResult<EndingTuple> {
        let env = env_from(env)?;
        let timeout = timeout_from(timeout, "timeout")?;
        let handle = self.inner.clone();
        let ending = interruptible(py, move || handle.ending(env.as_pairs(), timeout))?;
        let (rule, kills) = match ending.how {
            ScopeEnding::KilledByOomd { rule } => (rule.map(OomdRule::as_str), 0),
            ScopeEnding::KilledByKernelOom { kills } => (None, kills),
            ScopeEnding::Running
            | ScopeEnding::KilledByHandle
            | ScopeEnding::EndedOnItsOwn
            | ScopeEnding::Unknown => (None, 0),
        };
        Ok((
            ending.how.as_str(),
            rule,
            kills,
            ending.evidence.as_str(),
            ending.evidence.forgeable(),
            ending.to_string(),
        ))
    }

    fn wait_empty(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        let timeout = timeout_from(timeout, "timeout")?;
        if !on_main_thread(py) {
            return py
                .detach(|| self.inner.wait_empty(timeout))
                .map_err(|e| py_error(&e));
        }
        // In steps, on this thread: a wait of any length costs no thread, and Ctrl-C comes
        // between two steps. A bound past the clock's end is no bound: waited in steps, for good.
        let deadline = Instant::now().checked_add(timeout);
        let left = || deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
        loop {
            let step = left().map_or(SIGNAL_POLL, |left| left.min(SIGNAL_POLL));
            match py.detach(|| self.inner.wait_empty(step)) {
                Err(HandleError::TimedOut { .. }) if left() != Some(Duration::ZERO) => {
                    py.check_signals()?
                }
                // What was waited in all, not the last step.
                Err(HandleError::TimedOut { remaining, .. }) => {
                    let whole = HandleError::TimedOut {
                        waited: timeout,
                        remaining,
                    };
                    return Err(py_error(&whole));
                }
                outcome => return outcome.map_err(|e| py_error(&e)),
            }
        }
    }
}

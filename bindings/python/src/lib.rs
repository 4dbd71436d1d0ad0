//! `synaps_scope._native`: the core crate for Python. Arguments and environments cross as bytes
//! (the Python layer applies os.fsencode/os.fsdecode), the probe runs with the GIL released, and
//! the library's diagnostics go to `logging.getLogger("synaps_scope")`.
//!
//! One module per concept, as the C ABI crate lays its own out (`crates/ffi/src`): `launcher`,
//! `argv`, `handle`, `oomd_watch`, `resolve`, `doctor`, `log`, `error` (the one map of the core's errors to
//! exceptions), `interrupt` (blocking calls that Ctrl-C reaches) and `args`.

mod args;
mod argv;
mod doctor;
mod error;
mod handle;
mod interrupt;
mod launcher;
mod log;
mod oomd_watch;
mod resolve;

use pyo3::prelude::*;
use synaps_scope::{DEFAULT_KILL_TIMEOUT, DEFAULT_PROBE_TIMEOUT};

use argv::Wrapped;
use handle::PyScopeHandle;
use launcher::{
    begin_launcher_for_env, check_limits, launcher_for_env, PendingLauncher, ScopeLauncher,
};
use log::flush_warnings;
use oomd_watch::PyOomdWatch;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    log::install();
    m.add_class::<ScopeLauncher>()?;
    m.add_class::<Wrapped>()?;
    m.add_class::<PyScopeHandle>()?;
    m.add_class::<PendingLauncher>()?;
    m.add_class::<PyOomdWatch>()?;
    m.add_function(wrap_pyfunction!(launcher_for_env, m)?)?;
    m.add_function(wrap_pyfunction!(begin_launcher_for_env, m)?)?;
    m.add_function(wrap_pyfunction!(resolve::resolve, m)?)?;
    m.add_function(wrap_pyfunction!(flush_warnings, m)?)?;
    m.add_function(wrap_pyfunction!(check_limits, m)?)?;
    m.add_function(wrap_pyfunction!(doctor::diagnose, m)?)?;
    m.add_function(wrap_pyfunction!(doctor::verdicts, m)?)?;
    m.add("DEFAULT_PROBE_TIMEOUT", DEFAULT_PROBE_TIMEOUT.as_secs_f64())?;
    m.add("DEFAULT_KILL_TIMEOUT", DEFAULT_KILL_TIMEOUT.as_secs_f64())?;
    m.add("EXEC_FAILED_STATUS", synaps_scope::EXEC_FAILED_STATUS)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

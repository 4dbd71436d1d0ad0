//! The report `synaps-scope doctor` prints, for Python.

use pyo3::prelude::*;
use synaps_scope::{LauncherOptions, ScopeKind};

use crate::args::{env_from, timeout_from};

/// The report `synaps-scope doctor` prints, for both kinds, after the same checks a request runs
/// (the GIL released while they run).
#[pyfunction]
pub(crate) fn doctor(
    py: Python<'_>,
    env: Vec<(Vec<u8>, Vec<u8>)>,
    timeout: f64,
) -> PyResult<String> {
    let env = env_from(env)?;
    let options = LauncherOptions {
        probe_timeout: timeout_from(timeout, "timeout")?,
    };
    Ok(py.detach(|| {
        synaps_scope::doctor::diagnose(&env, &[ScopeKind::Tool, ScopeKind::Daemon], &options)
            .to_text()
    }))
}

//! The report `synaps-scope doctor` prints and its verdict, for Python.

use pyo3::prelude::*;
use synaps_scope::__surfaces::diagnose as diagnose_checked;
use synaps_scope::doctor::Verdict;
use synaps_scope::{LauncherOptions, ScopeKind};

use crate::args::{env_from, timeout_from};
use crate::interrupt::interruptible;

/// The report `synaps-scope doctor` prints, for both kinds, after the same checks a request runs
/// (the GIL released while they run), and its verdict's number.
#[pyfunction]
pub(crate) fn diagnose(
    py: Python<'_>,
    env: Vec<(Vec<u8>, Vec<u8>)>,
    timeout: f64,
) -> PyResult<(String, u8)> {
    let env = env_from(env)?;
    let options = LauncherOptions {
        probe_timeout: timeout_from(timeout, "timeout")?,
    };
    interruptible(py, move || {
        let report = diagnose_checked(&env, &[ScopeKind::Tool, ScopeKind::Daemon], &options);
        (report.to_text(), report.overall().code())
    })
}

/// Every verdict as the core has it: its number, name and words.
#[pyfunction]
pub(crate) fn verdicts() -> Vec<(u8, &'static str, &'static str)> {
    Verdict::ALL
        .into_iter()
        .map(|v| (v.code(), v.name(), v.words()))
        .collect()
}

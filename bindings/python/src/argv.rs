//! A wrapped command line, as bytes, with its scope's unit.

use std::os::unix::ffi::OsStrExt;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A command line ready to spawn (bytes) and the scope's unit name (None when left unwrapped).
#[pyclass(frozen, module = "synaps_scope._native")]
pub(crate) struct Wrapped {
    #[pyo3(get)]
    argv: Vec<Py<PyBytes>>,
    #[pyo3(get)]
    unit: Option<String>,
}

impl Wrapped {
    pub(crate) fn new(py: Python<'_>, wrapped: synaps_scope::Wrapped) -> Self {
        Wrapped {
            argv: wrapped
                .argv
                .iter()
                .map(|a| PyBytes::new(py, a.as_bytes()).unbind())
                .collect(),
            unit: wrapped.unit,
        }
    }
}

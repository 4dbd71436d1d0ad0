//! Program resolution for Python, as execvp in the child would find the program.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use synaps_scope::__surfaces::find_program;

use crate::args::{cwd_from, env_from};
use crate::error::py_error;

#[pyfunction]
#[pyo3(signature = (program, env, cwd=None))]
pub(crate) fn resolve<'py>(
    py: Python<'py>,
    program: Vec<u8>,
    env: Vec<(Vec<u8>, Vec<u8>)>,
    cwd: Option<Vec<u8>>,
) -> PyResult<Bound<'py, PyBytes>> {
    if program.contains(&0) {
        return Err(PyValueError::new_err("program cannot contain NUL bytes"));
    }
    let env = env_from(env)?;
    let cwd = cwd_from(cwd)?;
    let program = OsString::from_vec(program);
    let path = find_program(&program, &env, cwd.as_deref()).map_err(|e| py_error(&e))?;
    Ok(PyBytes::new(py, path.as_os_str().as_bytes()))
}

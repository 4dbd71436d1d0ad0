//! Arguments as Python hands them over: bytes and numbers, handed to the core's intake, which
//! checks them as on every surface.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use synaps_scope::intake::{self, CheckedEnv};
use synaps_scope::{LauncherOptions, ScopeKind};

use crate::error::py_error;

/// A working directory: bytes with no NUL, as every path a C call takes.
pub(crate) fn cwd_from(cwd: Option<Vec<u8>>) -> PyResult<Option<PathBuf>> {
    match cwd {
        Some(cwd) if cwd.contains(&0) => Err(PyValueError::new_err("cwd cannot contain NUL bytes")),
        cwd => Ok(cwd.map(|c| PathBuf::from(OsString::from_vec(c)))),
    }
}

pub(crate) fn env_from(env: Vec<(Vec<u8>, Vec<u8>)>) -> PyResult<CheckedEnv> {
    let pairs = env
        .into_iter()
        .map(|(key, value)| (OsString::from_vec(key), OsString::from_vec(value)))
        .collect();
    CheckedEnv::from_pairs(pairs).map_err(|e| py_error(&e))
}

pub(crate) fn kind_from(kind: &str) -> PyResult<ScopeKind> {
    intake::kind_from_name(kind).map_err(|e| py_error(&e))
}

pub(crate) fn timeout_from(seconds: f64, what: &str) -> PyResult<Duration> {
    intake::bound_from_secs(seconds, what).map_err(|e| py_error(&e))
}

pub(crate) fn pid_from(pid: i64) -> PyResult<u32> {
    intake::pid(pid).map_err(|e| py_error(&e))
}

/// A request's inputs, checked while the caller still holds the GIL.
pub(crate) fn request_from(
    env: Vec<(Vec<u8>, Vec<u8>)>,
    kind: &str,
    probe_timeout: f64,
) -> PyResult<(CheckedEnv, ScopeKind, LauncherOptions)> {
    let options = LauncherOptions {
        probe_timeout: timeout_from(probe_timeout, "probe_timeout")?,
    };
    Ok((env_from(env)?, kind_from(kind)?, options))
}

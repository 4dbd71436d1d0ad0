//! Arguments as Python hands them over: bytes, checked as every surface checks them.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use synaps_scope::{bound_from_secs, check_env, LauncherOptions, ScopeKind};

use crate::error::py_error;

pub(crate) type Env = Vec<(OsString, OsString)>;

/// A working directory, refused (as on every surface) when it contains NUL.
pub(crate) fn cwd_from(cwd: Option<Vec<u8>>) -> PyResult<Option<PathBuf>> {
    match cwd {
        Some(cwd) if cwd.contains(&0) => Err(PyValueError::new_err("cwd cannot contain NUL bytes")),
        cwd => Ok(cwd.map(|c| PathBuf::from(OsString::from_vec(c)))),
    }
}

pub(crate) fn env_from(env: Vec<(Vec<u8>, Vec<u8>)>) -> PyResult<Env> {
    let env: Env = env
        .into_iter()
        .map(|(key, value)| (OsString::from_vec(key), OsString::from_vec(value)))
        .collect();
    check_env(&env).map_err(|e| py_error(&e))?;
    Ok(env)
}

pub(crate) fn kind_from(kind: &str) -> PyResult<ScopeKind> {
    kind.parse().map_err(|e| py_error(&e))
}

pub(crate) fn timeout_from(seconds: f64, what: &str) -> PyResult<Duration> {
    bound_from_secs(seconds, what).map_err(|e| py_error(&e))
}

/// A request's inputs, checked while the caller still holds the GIL.
pub(crate) fn request_from(
    env: Vec<(Vec<u8>, Vec<u8>)>,
    kind: &str,
    probe_timeout: f64,
) -> PyResult<(Env, ScopeKind, LauncherOptions)> {
    let options = LauncherOptions {
        probe_timeout: timeout_from(probe_timeout, "probe_timeout")?,
    };
    Ok((env_from(env)?, kind_from(kind)?, options))
}

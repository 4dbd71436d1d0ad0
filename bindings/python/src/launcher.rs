//! `ScopeLauncher` for Python: the requests that make one (the GIL released, or answered on a
//! thread of the request's own for asyncio) and what it wraps.

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use synaps_scope::__surfaces::{decide, decide_on_own_thread};
use synaps_scope::{direct_for_user_switch, shell_argv, Decision, ShellWords};

use crate::args::{cwd_from, env_from, request_from};
use crate::argv::Wrapped;
use crate::error::{py_error, ScopeError};
use crate::interrupt::interruptible;

/// Turns `program args…` into an argv that runs it in a new scope.
#[pyclass(frozen, module = "synaps_scope._native")]
pub(crate) struct ScopeLauncher {
    inner: synaps_scope::ScopeLauncher,
}

#[pymethods]
impl ScopeLauncher {
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind().as_str()
    }

    #[getter]
    fn slice(&self) -> Option<&str> {
        self.inner.slice()
    }

    #[getter]
    fn systemd_version(&self) -> Option<u32> {
        self.inner.systemd_version()
    }

    #[getter]
    fn systemd_run<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.inner
            .systemd_run()
            .map(|path| PyBytes::new(py, path.as_os_str().as_bytes()))
    }

    #[getter]
    fn required(&self) -> bool {
        self.inner.required()
    }

    #[getter]
    fn wrapper(&self) -> &'static str {
        self.inner.wrapper().name()
    }

    #[getter]
    fn wrapper_program<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.wrapper().program().as_os_str().as_bytes())
    }

    #[pyo3(signature = (argv, env, cwd=None, program=None))]
    fn wrap(
        &self,
        py: Python<'_>,
        argv: Vec<Vec<u8>>,
        env: Vec<(Vec<u8>, Vec<u8>)>,
        cwd: Option<Vec<u8>>,
        program: Option<Vec<u8>>,
    ) -> PyResult<Wrapped> {
        self.wrapped(
            py,
            argv,
            env,
            cwd,
            program,
            |launcher, argv, env, cwd, program| match program {
                Some(program) => launcher.wrap_program(&program, argv, env, cwd),
                None => launcher.wrap(argv, env, cwd),
            },
        )
    }

    /// A shell command in a new scope: `shell` (None: /bin/sh) runs `-c` with `words` as
    /// `subprocess` hands them to it (the first is the command, the others `$0`, `$1`…).
    #[pyo3(signature = (words, env, cwd=None, shell=None))]
    fn wrap_shell(
        &self,
        py: Python<'_>,
        words: Vec<Vec<u8>>,
        env: Vec<(Vec<u8>, Vec<u8>)>,
        cwd: Option<Vec<u8>>,
        shell: Option<Vec<u8>>,
    ) -> PyResult<Wrapped> {
        self.wrapped(
            py,
            words,
            env,
            cwd,
            shell,
            |launcher, words, env, cwd, shell| {
                let argv = shell_argv(shell.as_deref(), words, ShellWords::Positional);
                launcher.wrap(&argv, env, cwd)
            },
        )
    }

    /// This launcher with `limits` (name, value) for each launch's scope; raises ValueError for
    /// a bad one, ScopeRequiredError in `required` mode for one that will not be enforced.
    fn with_limits(&self, limits: Vec<(String, String)>) -> PyResult<ScopeLauncher> {
        let limits = limits_from(limits)?;
        let inner = self.inner.with_limits(limits).map_err(|e| py_error(&e))?;
        Ok(ScopeLauncher { inner })
    }

    /// The limits each launch gives its scope, (name, value) in the order given.
    #[getter]
    fn limits(&self) -> Vec<(&'static str, String)> {
        self.inner
            .limits()
            .iter()
            .map(|l| (l.property().name(), l.value().to_owned()))
            .collect()
    }

    /// The limits that will not be enforced: (name, why, still passed to the manager).
    #[getter]
    fn unenforced(&self) -> Vec<(&'static str, String, bool)> {
        self.inner
            .unenforced()
            .iter()
            .map(|u| (u.property.name(), u.why.clone(), u.passed))
            .collect()
    }

    /// For a child that switches user (`switches`: the options that do, for the message): it
    /// runs directly, said once per process; raises ScopeRequiredError in `required` mode.
    fn user_switch(&self, switches: &str) -> PyResult<()> {
        direct_for_user_switch(&self.inner, switches)
            .map(drop)
            .map_err(|e| py_error(&e))
    }

    fn __repr__(&self) -> String {
        format!(
            "ScopeLauncher(kind={:?}, slice={:?}, wrapper={:?})",
            self.inner.kind().as_str(),
            self.inner.slice(),
            self.inner.wrapper().name()
        )
    }
}

/// Checks limits (name, value) as every surface does; ValueError for a bad one.
#[pyfunction]
pub(crate) fn check_limits(limits: Vec<(String, String)>) -> PyResult<()> {
    limits_from(limits).map(drop)
}

fn limits_from(limits: Vec<(String, String)>) -> PyResult<synaps_scope::Limits> {
    synaps_scope::Limits::from_pairs(limits).map_err(|e| py_error(&e))
}

impl ScopeLauncher {
    /// What every wrap does around its own step `wrap`: the arguments (and `extra`, a program or a
    /// shell) refused if they hold NUL, the environment and working directory read, the result
    /// handed to Python.
    fn wrapped(
        &self,
        py: Python<'_>,
        argv: Vec<Vec<u8>>,
        env: Vec<(Vec<u8>, Vec<u8>)>,
        cwd: Option<Vec<u8>>,
        extra: Option<Vec<u8>>,
        wrap: impl FnOnce(
            &synaps_scope::ScopeLauncher,
            &[OsString],
            &[(OsString, OsString)],
            Option<&Path>,
            Option<OsString>,
        ) -> synaps_scope::Wrapped,
    ) -> PyResult<Wrapped> {
        if argv.iter().chain(&extra).any(|a| a.contains(&0)) {
            return Err(PyValueError::new_err("arguments cannot contain NUL bytes"));
        }
        let env = env_from(env)?;
        let argv: Vec<OsString> = argv.into_iter().map(OsString::from_vec).collect();
        let cwd = cwd_from(cwd)?;
        let extra = extra.map(OsString::from_vec);
        Ok(Wrapped::new(
            py,
            wrap(&self.inner, &argv, env.as_pairs(), cwd.as_deref(), extra),
        ))
    }
}

/// A decision's outcome as the Python layer takes it: a launcher, None for a direct launch, or
/// the exception.
fn launcher_from(
    outcome: Result<Decision, synaps_scope::ScopeError>,
) -> PyResult<Option<ScopeLauncher>> {
    match outcome {
        Ok(Decision::Scoped(inner)) => Ok(Some(ScopeLauncher { inner })),
        Ok(Decision::Direct(_)) => Ok(None),
        Err(e) => Err(py_error(&e)),
    }
}

/// The fresh, bounded probe, with the GIL released while it runs.
#[pyfunction]
#[pyo3(signature = (env, kind, probe_timeout))]
pub(crate) fn launcher_for_env(
    py: Python<'_>,
    env: Vec<(Vec<u8>, Vec<u8>)>,
    kind: &str,
    probe_timeout: f64,
) -> PyResult<Option<ScopeLauncher>> {
    let (env, kind, options) = request_from(env, kind, probe_timeout)?;
    launcher_from(interruptible(py, move || decide(&env, kind, &options))?)
}

type Outcome = Arc<Mutex<Option<Result<Decision, synaps_scope::ScopeError>>>>;

/// A probe under way on a thread that never takes the GIL. The thread says it is done by
/// closing its end of a socket pair, which makes `fileno()` readable for an event loop to watch;
/// the loop's own thread then takes the answer with `result()`. Many probes answering at once
/// thus cost the loop one read each, never a convoy of threads queueing for the GIL in front of
/// it.
#[pyclass(frozen, module = "synaps_scope._native")]
pub(crate) struct PendingLauncher {
    ready: UnixStream,
    outcome: Outcome,
}

#[pymethods]
impl PendingLauncher {
    /// The descriptor that becomes readable when the answer is in.
    fn fileno(&self) -> i32 {
        self.ready.as_raw_fd()
    }

    /// The answer, once `fileno()` is readable: a launcher, None, or the exception.
    fn result(&self) -> PyResult<Option<ScopeLauncher>> {
        let taken = self
            .outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match taken {
            Some(outcome) => launcher_from(outcome),
            None => Err(ScopeError::new_err(
                "the probe's answer was taken already, or its thread ended without one",
            )),
        }
    }
}

/// Starts the probe of `launcher_for_env` on a thread of its own and returns at once.
#[pyfunction]
#[pyo3(signature = (env, kind, probe_timeout))]
pub(crate) fn begin_launcher_for_env(
    env: Vec<(Vec<u8>, Vec<u8>)>,
    kind: &str,
    probe_timeout: f64,
) -> PyResult<PendingLauncher> {
    let (env, kind, options) = request_from(env, kind, probe_timeout)?;
    // Out of descriptors or threads (thousands of requests at once), the request fails as the
    // library's own failures do: a ScopeError saying why, like every other way it cannot answer.
    let cannot_start =
        |e: std::io::Error| ScopeError::new_err(format!("cannot start the request: {e}"));
    let (ready, done) = UnixStream::pair().map_err(cannot_start)?;
    let outcome = Outcome::default();
    let slot = Arc::clone(&outcome);
    // A request that panicked (a bug) leaves no outcome: `result()` then says so.
    decide_on_own_thread(env, kind, options, move |answer| {
        if let Ok(answer) = answer {
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(answer);
        }
        drop(done);
    })
    .map_err(cannot_start)?;
    Ok(PendingLauncher { ready, outcome })
}

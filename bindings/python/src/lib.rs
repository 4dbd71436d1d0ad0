//! `synaps_scope._native`: the core crate for Python. Arguments and environments cross as bytes
//! (the Python layer applies os.fsencode/os.fsdecode), the probe runs with the GIL released, and
//! the library's diagnostics go to `logging.getLogger("synaps_scope")`.

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pyo3::exceptions::{PyFileNotFoundError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyBytes;
use synaps_scope::diag::CallbackSubscriber;
use synaps_scope::{
    bound_from_secs, check_env, checked_pid, decide, decide_on_own_thread, direct_for_user_switch,
    resolve_program, shell_argv, Classified, Decision, ErrorClass, LauncherOptions, OomdRule,
    ScopeEnding, ScopeHandle, ScopeKind, ShellWords, DEFAULT_KILL_TIMEOUT, DEFAULT_PROBE_TIMEOUT,
};
use tracing::Level;

type Env = Vec<(OsString, OsString)>;

// The exception classes live in Python (synaps_scope/_errors.py) so that each can also derive
// from the matching built-in (TimeoutError, LookupError, PermissionError).
pyo3::import_exception!(synaps_scope._errors, ScopeError);
pyo3::import_exception!(synaps_scope._errors, ScopeRequiredError);
pyo3::import_exception!(synaps_scope._errors, NotOurScopeError);
pyo3::import_exception!(synaps_scope._errors, NotInScopeError);
pyo3::import_exception!(synaps_scope._errors, ScopeNotFoundError);
pyo3::import_exception!(synaps_scope._errors, ScopeTimeoutError);

/// A working directory, refused (as on every surface) when it contains NUL.
fn cwd_from(cwd: Option<Vec<u8>>) -> PyResult<Option<PathBuf>> {
    match cwd {
        Some(cwd) if cwd.contains(&0) => Err(PyValueError::new_err("cwd cannot contain NUL bytes")),
        cwd => Ok(cwd.map(|c| PathBuf::from(OsString::from_vec(c)))),
    }
}

fn env_from(env: Vec<(Vec<u8>, Vec<u8>)>) -> PyResult<Env> {
    let env: Env = env
        .into_iter()
        .map(|(key, value)| (OsString::from_vec(key), OsString::from_vec(value)))
        .collect();
    check_env(&env).map_err(|e| py_error(&e))?;
    Ok(env)
}

fn kind_from(kind: &str) -> PyResult<ScopeKind> {
    kind.parse().map_err(|e| py_error(&e))
}

fn timeout_from(seconds: f64, what: &str) -> PyResult<Duration> {
    bound_from_secs(seconds, what).map_err(|e| py_error(&e))
}

/// Turns `program args…` into an argv that runs it in a new scope.
#[pyclass(frozen, module = "synaps_scope._native")]
struct ScopeLauncher {
    inner: synaps_scope::ScopeLauncher,
}

/// A command line ready to spawn (bytes) and the scope's unit name (None when left unwrapped).
#[pyclass(frozen, module = "synaps_scope._native")]
struct Wrapped {
    #[pyo3(get)]
    argv: Vec<Py<PyBytes>>,
    #[pyo3(get)]
    unit: Option<String>,
}

impl Wrapped {
    fn new(py: Python<'_>, wrapped: synaps_scope::Wrapped) -> Self {
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
        if argv.iter().chain(&program).any(|a| a.contains(&0)) {
            return Err(PyValueError::new_err("arguments cannot contain NUL bytes"));
        }
        let env = env_from(env)?;
        let argv: Vec<OsString> = argv.into_iter().map(OsString::from_vec).collect();
        let cwd = cwd_from(cwd)?;
        let wrapped = match program {
            Some(program) => {
                let program = OsString::from_vec(program);
                self.inner
                    .wrap_program(&program, &argv, &env, cwd.as_deref())
            }
            None => self.inner.wrap(&argv, &env, cwd.as_deref()),
        };
        Ok(Wrapped::new(py, wrapped))
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
        if words.iter().chain(&shell).any(|a| a.contains(&0)) {
            return Err(PyValueError::new_err("arguments cannot contain NUL bytes"));
        }
        let env = env_from(env)?;
        let words: Vec<OsString> = words.into_iter().map(OsString::from_vec).collect();
        let shell = shell.map(OsString::from_vec);
        let argv = shell_argv(shell.as_deref(), &words, ShellWords::Positional);
        let cwd = cwd_from(cwd)?;
        Ok(Wrapped::new(
            py,
            self.inner.wrap(&argv, &env, cwd.as_deref()),
        ))
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

/// A request's inputs, checked while the caller still holds the GIL.
fn request_from(
    env: Vec<(Vec<u8>, Vec<u8>)>,
    kind: &str,
    probe_timeout: f64,
) -> PyResult<(Env, ScopeKind, LauncherOptions)> {
    let options = LauncherOptions {
        probe_timeout: timeout_from(probe_timeout, "probe_timeout")?,
    };
    Ok((env_from(env)?, kind_from(kind)?, options))
}

/// The fresh, bounded probe, with the GIL released while it runs.
#[pyfunction]
#[pyo3(signature = (env, kind, probe_timeout))]
fn launcher_for_env(
    py: Python<'_>,
    env: Vec<(Vec<u8>, Vec<u8>)>,
    kind: &str,
    probe_timeout: f64,
) -> PyResult<Option<ScopeLauncher>> {
    let (env, kind, options) = request_from(env, kind, probe_timeout)?;
    launcher_from(py.detach(|| decide(&env, kind, &options)))
}

type Outcome = Arc<Mutex<Option<Result<Decision, synaps_scope::ScopeError>>>>;

/// A probe under way on a thread that never takes the GIL. The thread says it is done by
/// closing its end of a socket pair, which makes `fileno()` readable for an event loop to watch;
/// the loop's own thread then takes the answer with `result()`. Many probes answering at once
/// thus cost the loop one read each, never a convoy of threads queueing for the GIL in front of
/// it.
#[pyclass(frozen, module = "synaps_scope._native")]
struct PendingLauncher {
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
fn begin_launcher_for_env(
    env: Vec<(Vec<u8>, Vec<u8>)>,
    kind: &str,
    probe_timeout: f64,
) -> PyResult<PendingLauncher> {
    let (env, kind, options) = request_from(env, kind, probe_timeout)?;
    let (ready, done) = UnixStream::pair()?;
    let outcome = Outcome::default();
    let slot = Arc::clone(&outcome);
    // A request that panicked (a bug) leaves no outcome: `result()` then says so.
    decide_on_own_thread(env, kind, options, move |answer| {
        if let Ok(answer) = answer {
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(answer);
        }
        drop(done);
    })?;
    Ok(PendingLauncher { ready, outcome })
}

/// For a program about to exit: waits at most `timeout` seconds (the GIL released) for the
/// background slice checks still running, so that their warnings reach `logging`, then reports
/// each check that got no answer. True when every check had finished.
#[pyfunction]
fn flush_warnings(py: Python<'_>, timeout: f64) -> PyResult<bool> {
    let bound = timeout_from(timeout, "timeout")?;
    Ok(py.detach(|| synaps_scope::flush_warnings(bound)))
}

/// The report `synaps-scope doctor` prints, for both kinds, after the same checks a request runs
/// (the GIL released while they run).
#[pyfunction]
fn doctor(py: Python<'_>, env: Vec<(Vec<u8>, Vec<u8>)>, timeout: f64) -> PyResult<String> {
    let env = env_from(env)?;
    let options = LauncherOptions {
        probe_timeout: timeout_from(timeout, "timeout")?,
    };
    Ok(py.detach(|| {
        synaps_scope::doctor::diagnose(&env, &[ScopeKind::Tool, ScopeKind::Daemon], &options)
            .to_text()
    }))
}

#[pyfunction]
#[pyo3(signature = (program, env, cwd=None))]
fn resolve<'py>(
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
    let path = resolve_program(&program, &env, cwd.as_deref()).map_err(|e| py_error(&e))?;
    Ok(PyBytes::new(py, path.as_os_str().as_bytes()))
}

/// `errno` of a FileNotFoundError, as execvp would set it.
const ENOENT: i32 = 2;

/// The one map from the core's classes of failure to Python's exceptions (each of ours also
/// derives from the built-in a caller would catch: `synaps_scope/_errors.py`).
fn py_error(error: &(impl Classified + ?Sized)) -> PyErr {
    let message = error.to_string();
    match error.class() {
        ErrorClass::InvalidInput => PyValueError::new_err(message),
        ErrorClass::NoSuchProgram => PyFileNotFoundError::new_err((ENOENT, message)),
        ErrorClass::NoSuchScope => ScopeNotFoundError::new_err(message),
        ErrorClass::Refused => NotOurScopeError::new_err(message),
        ErrorClass::NotInScope => NotInScopeError::new_err(message),
        ErrorClass::Unavailable => ScopeRequiredError::new_err(message),
        ErrorClass::TimedOut => ScopeTimeoutError::new_err(message),
        ErrorClass::Manager | ErrorClass::NoCgroup2 | ErrorClass::Io => {
            ScopeError::new_err(message)
        }
    }
}

/// A running scope of this library, found by unit name.
#[pyclass(frozen, name = "ScopeHandle", module = "synaps_scope._native")]
struct PyScopeHandle {
    inner: ScopeHandle,
}

#[pymethods]
impl PyScopeHandle {
    #[staticmethod]
    fn from_pid(unit: &str, pid: i64) -> PyResult<Self> {
        let pid = checked_pid(pid).map_err(|e| py_error(&e))?;
        ScopeHandle::from_pid(unit, pid)
            .map(|inner| Self { inner })
            .map_err(|e| py_error(&e))
    }

    #[staticmethod]
    fn of_process(pid: i64) -> PyResult<Self> {
        let pid = checked_pid(pid).map_err(|e| py_error(&e))?;
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
        py.detach(|| ScopeHandle::from_manager(&unit, &env, timeout))
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

    fn kill(&self, py: Python<'_>, timeout: f64) -> PyResult<Vec<u32>> {
        let timeout = timeout_from(timeout, "timeout")?;
        py.detach(|| self.inner.kill(timeout))
            .map_err(|e| py_error(&e))
    }

    /// (kind, oomd rule or None, kernel OOM kills, the core's sentence): how the scope ended (GIL
    /// released: an oomd kill's rule is asked of the managers).
    fn ending(
        &self,
        py: Python<'_>,
        env: Vec<(Vec<u8>, Vec<u8>)>,
        timeout: f64,
    ) -> PyResult<(&'static str, Option<&'static str>, u64, String)> {
        let env = env_from(env)?;
        let timeout = timeout_from(timeout, "timeout")?;
        let ending = py.detach(|| self.inner.ending(&env, timeout));
        let (rule, kills) = match ending {
            ScopeEnding::KilledByOomd { rule } => (rule.map(OomdRule::as_str), 0),
            ScopeEnding::KilledByKernelOom { kills } => (None, kills),
            ScopeEnding::Running
            | ScopeEnding::KilledByHandle
            | ScopeEnding::EndedOnItsOwn
            | ScopeEnding::Unknown => (None, 0),
        };
        Ok((ending.as_str(), rule, kills, ending.to_string()))
    }

    fn wait_empty(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        let timeout = timeout_from(timeout, "timeout")?;
        py.detach(|| self.inner.wait_empty(timeout))
            .map_err(|e| py_error(&e))
    }
}

/// Python's logging levels for tracing's.
fn logging_level(level: &Level) -> u32 {
    match *level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        _ => 10,
    }
}

static LOGGER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Hands one line to `logging.getLogger("synaps_scope")`. From any thread: it attaches to the
/// interpreter for the call (never while holding a library lock), and drops the line if the
/// interpreter is shutting down.
fn forward_to_logging(level: &Level, line: &str) {
    let _ = Python::try_attach(|py| -> PyResult<()> {
        let logger = LOGGER.get_or_try_init(py, || {
            py.import("logging")?
                .call_method1("getLogger", ("synaps_scope",))
                .map(Bound::unbind)
        })?;
        logger
            .bind(py)
            .call_method1("log", (logging_level(level), "%s", line))?;
        Ok(())
    });
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let subscriber = CallbackSubscriber::new(Level::DEBUG, |level, _target, line| {
        forward_to_logging(level, line)
    });
    // A host that embeds Python and already set a global subscriber keeps it.
    let _ = tracing::subscriber::set_global_default(subscriber);
    m.add_class::<ScopeLauncher>()?;
    m.add_class::<Wrapped>()?;
    m.add_class::<PyScopeHandle>()?;
    m.add_class::<PendingLauncher>()?;
    m.add_function(wrap_pyfunction!(launcher_for_env, m)?)?;
    m.add_function(wrap_pyfunction!(begin_launcher_for_env, m)?)?;
    m.add_function(wrap_pyfunction!(resolve, m)?)?;
    m.add_function(wrap_pyfunction!(flush_warnings, m)?)?;
    m.add_function(wrap_pyfunction!(doctor, m)?)?;
    m.add("DEFAULT_PROBE_TIMEOUT", DEFAULT_PROBE_TIMEOUT.as_secs_f64())?;
    m.add("DEFAULT_KILL_TIMEOUT", DEFAULT_KILL_TIMEOUT.as_secs_f64())?;
    m.add("EXEC_FAILED_STATUS", synaps_scope::EXEC_FAILED_STATUS)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

//! Diagnostics across the C ABI (R16): the library's `tracing` events go to a callback the host
//! sets, or, by default, WARN and ERROR lines to stderr.

use std::cell::Cell;
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use synaps_scope::__ffi::{lock, lock_if_free, Mine, PerProcess};

use tracing::Level;

use crate::args::timeout_arg;
use crate::error::{c_text, result_of, scope_result, Failure};
use synaps_scope::diag::CallbackSubscriber;

/// Severity of a log line; lower is more severe.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum scope_log_level {
    /// Errors.
    Error = 1,
    /// Warnings: a direct launch because a probe failed, a slice without limits, a bad config.
    Warn = 2,
    /// Information.
    Info = 3,
    /// Debugging detail.
    Debug = 4,
    /// Tracing detail.
    Trace = 5,
}

/// Receives one log line: `message` holds `len` bytes and a terminating NUL, and is valid only
/// during the call. Called from whichever thread logs, including the library's background slice
/// check, so it must be thread-safe.
pub type scope_log_callback = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        level: scope_log_level,
        message: *const c_char,
        len: usize,
    ),
>;

/// The host's callback, and the calls of it still running, so that replacing it can wait for
/// them (the host may free `userdata` as soon as [`scope_set_log_callback`] returns).
#[derive(Default)]
struct Sink {
    callback: scope_log_callback,
    /// The host's pointer, only handed back to it.
    userdata: usize,
    /// Bumped by each replacement.
    generation: u64,
    /// Calls of the current callback still running, on every thread.
    running: usize,
    /// Calls still running of callbacks since replaced, which a replacement waits for.
    running_replaced: usize,
    /// Where the host takes its lines from a queue instead (`callback` None): what hands a line
    /// to it.
    taker: Option<LineTaker>,
}

/// Hands one log line to a host's queue (`scope_set_log_queue`).
pub(crate) type LineTaker = Arc<dyn Fn(scope_log_level, &str) + Send + Sync>;

/// This process's sink, and the signal that a call of the callback ended. A forked child keeps its
/// parent's callback, but none of the calls then running on the parent's other threads (they
/// never end in the child, and a replacement there must not wait for them); where one of those
/// threads held the lock at the fork, the child starts from the default sink (stderr) instead.
#[derive(Default)]
struct Logging {
    sink: Mutex<Sink>,
    call_ended: Condvar,
}

static LOGGING: PerProcess<Logging> = PerProcess::new();

fn logging() -> Arc<Mine<Logging>> {
    LOGGING.get_inheriting(|parents| {
        let sink = lock_if_free(&parents.sink).map_or_else(Sink::default, |sink| Sink {
            callback: sink.callback,
            userdata: sink.userdata,
            generation: sink.generation,
            running: 0,
            running_replaced: 0,
            // The parent's queue is its host's, whose thread is not in the child: lines go to
            // stderr there.
            taker: None,
        });
        Logging {
            sink: Mutex::new(sink),
            call_ended: Condvar::new(),
        }
    })
}

thread_local! {
    /// Calls of the callback running on this thread (a callback that logs, or that replaces
    /// itself): a replacement made from inside a callback does not wait for its own thread.
    static RUNNING_HERE: Cell<usize> = const { Cell::new(0) };
}

static MAX_LEVEL: AtomicU32 = AtomicU32::new(scope_log_level::Warn as u32);

fn level_number(level: &Level) -> u32 {
    match *level {
        Level::ERROR => scope_log_level::Error as u32,
        Level::WARN => scope_log_level::Warn as u32,
        Level::INFO => scope_log_level::Info as u32,
        Level::DEBUG => scope_log_level::Debug as u32,
        _ => scope_log_level::Trace as u32,
    }
}

fn level_enum(number: u32) -> scope_log_level {
    match number {
        1 => scope_log_level::Error,
        2 => scope_log_level::Warn,
        3 => scope_log_level::Info,
        4 => scope_log_level::Debug,
        _ => scope_log_level::Trace,
    }
}

fn deliver(level: &Level, line: &str) {
    let number = level_number(level);
    if number > MAX_LEVEL.load(Ordering::Relaxed) {
        return;
    }
    // Copied out and counted, so that no lock is held during the call (a callback marshalled to
    // another thread must not deadlock with that thread), yet a replacement waits for it to end.
    let logging = logging();
    let (callback, userdata, generation, taker) = {
        let mut sink = lock(&logging.sink);
        if sink.callback.is_some() {
            sink.running += 1;
        }
        (
            sink.callback,
            sink.userdata,
            sink.generation,
            sink.taker.clone(),
        )
    };
    if let Some(taker) = taker {
        return taker(level_enum(number), line);
    }
    match callback {
        Some(callback) => {
            let message = c_text(line);
            let len = message.as_bytes().len();
            RUNNING_HERE.with(|here| here.set(here.get() + 1));
            // Ends the count even if the callback unwinds (a Rust host's panic).
            let _ended = CallEnded(generation);
            // SAFETY: the host registered this callback for exactly this call, and cannot have
            // freed `userdata`: a replacement waits until this call has returned. The message lives
            // for the duration of the call, as documented.
            unsafe {
                callback(
                    userdata as *mut c_void,
                    level_enum(number),
                    message.as_ptr(),
                    len,
                )
            };
        }
        None => print_to_stderr(level, line),
    }
}

/// Marks the end of one call of the callback of this generation.
struct CallEnded(u64);

impl Drop for CallEnded {
    fn drop(&mut self) {
        RUNNING_HERE.with(|here| here.set(here.get() - 1));
        let logging = logging();
        let mut sink = lock(&logging.sink);
        if sink.generation == self.0 {
            sink.running -= 1;
        } else {
            sink.running_replaced -= 1;
        }
        drop(sink);
        logging.call_ended.notify_all();
    }
}

/// Makes the library's events reach [`deliver`], once per process (a forked child inherits it),
/// before any export runs; a host that already set a global subscriber keeps it.
pub(crate) fn ensure_installed() {
    synaps_scope::diag::install_global_once(wait_for_install_before_every_fork, || {
        CallbackSubscriber::new(Level::TRACE, |level, _target, line| deliver(level, line))
    });
}

/// Registers [`synaps_scope::diag::wait_for_install`] to run before every `fork()` of the
/// process, so that no child is forked while a thread is inside the install (where it could hold
/// tracing-core's lock of dispatchers, which the child would then never see released).
fn wait_for_install_before_every_fork() {
    extern "C" fn before_fork() {
        synaps_scope::diag::wait_for_install();
    }
    // SAFETY: `before_fork` takes no lock (it yields while an atomic says an install is under
    // way, which ends in microseconds and never waits on a fork) and cannot unwind. glibc's
    // `pthread_atfork` (linked from libc_nonshared.a) registers it with this library's
    // `__dso_handle`, so a `dlclose` of the library removes it with the code.
    let _ = unsafe { libc::pthread_atfork(Some(before_fork), None, None) };
}

/// Sends the library's log lines to `callback` (with `userdata`), or, when `callback` is NULL,
/// back to the default: lines on stderr. May be called at any time, from any thread. When it
/// returns, the callback it replaced is not running on any other thread and will never be called
/// again, so its `userdata` may be freed. Called from inside the callback, it waits for every
/// other thread's call but its own.
///
/// # Safety
/// `callback`, when not NULL, is safe to call from any thread with `userdata` until it is
/// replaced.
#[no_mangle]
pub unsafe extern "C" fn scope_set_log_callback(
    callback: scope_log_callback,
    userdata: *mut c_void,
) {
    ensure_installed();
    let _ = result_of(|| {
        replace_sink(callback, userdata, None);
        Ok(())
    });
}

/// Puts a new sink in place, and waits until no call of the callback it replaced is running on
/// another thread.
pub(crate) fn replace_sink(
    callback: scope_log_callback,
    userdata: *mut c_void,
    taker: Option<LineTaker>,
) {
    let logging = logging();
    let mut sink = lock(&logging.sink);
    sink.callback = callback;
    sink.userdata = userdata as usize;
    let replaced_taker = std::mem::replace(&mut sink.taker, taker);
    sink.generation += 1;
    sink.running_replaced += std::mem::take(&mut sink.running);
    // Calls that start from now on are of the new callback and are not waited for; of the
    // replaced ones, those on this thread (inside which this call is made) cannot end first.
    let here = RUNNING_HERE.with(Cell::get);
    while sink.running_replaced > here {
        sink = logging
            .call_ended
            .wait(sink)
            .unwrap_or_else(|p| p.into_inner());
    }
    drop(sink);
    drop(replaced_taker);
}

/// Sets the most detailed level delivered (default `SCOPE_LOG_LEVEL_WARN`); a number outside
/// 1 to 5 is `SCOPE_RESULT_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn scope_set_log_level(level: u32) -> scope_result {
    result_of(|| match level {
        1..=5 => {
            MAX_LEVEL.store(level, Ordering::Relaxed);
            Ok(())
        }
        other => Err(Failure::new(
            scope_result::InvalidArgument,
            format!("log level {other} is not 1 to 5"),
        )),
    })
}

/// For a program about to exit: waits at most `timeout_ms` for the library's background slice
/// checks (R12) still running, so that their warnings reach the log callback, then reports at WARN
/// each check that got no answer and was not reported yet. `SCOPE_RESULT_OK` when every check had
/// finished, `SCOPE_RESULT_TIMED_OUT` when some had not by the deadline; a `timeout_ms` of 0 is
/// `SCOPE_RESULT_INVALID_ARGUMENT`, as every bound's is (1.0 took it as "do not wait").
#[no_mangle]
pub extern "C" fn scope_flush_warnings(timeout_ms: u32) -> scope_result {
    ensure_installed();
    result_of(|| {
        if synaps_scope::flush_warnings(timeout_arg(timeout_ms, "timeout_ms")?) {
            Ok(())
        } else {
            Err(Failure::new(
                scope_result::TimedOut,
                format!("slice checks were still running after {timeout_ms} ms"),
            ))
        }
    })
}

/// Writes one log line to stderr as `synaps-scope: <level>: <line>`, as the command line does:
/// the sink of hosts that set no callback.
fn print_to_stderr(level: &Level, line: &str) {
    let label = match *level {
        Level::WARN => "warning".to_owned(),
        other => other.as_str().to_ascii_lowercase(),
    };
    eprintln!("synaps-scope: {label}: {line}");
}

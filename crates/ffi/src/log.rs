//! Diagnostics across the C ABI (R16): the library's `tracing` events go to a callback the host
//! sets, or, by default, WARN and ERROR lines to stderr.

use std::ffi::{c_char, c_void, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{OnceLock, RwLock};
use std::time::Duration;

use tracing::Level;

use super::{guard, scope_result, Failure};
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

struct Sink {
    callback: scope_log_callback,
    /// The host's pointer, only handed back to it.
    userdata: usize,
}

static SINK: RwLock<Sink> = RwLock::new(Sink {
    callback: None,
    userdata: 0,
});
static MAX_LEVEL: AtomicU32 = AtomicU32::new(scope_log_level::Warn as u32);
static INSTALLED: OnceLock<()> = OnceLock::new();

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
    // Copied out so that no lock is held during the call: a callback marshalled to another thread
    // (Node's main thread) while that thread sets a new callback must not deadlock.
    let (callback, userdata) = {
        let sink = SINK.read().unwrap_or_else(|p| p.into_inner());
        (sink.callback, sink.userdata)
    };
    match callback {
        Some(callback) => {
            let message = CString::new(line.replace('\0', "\\0")).unwrap_or_default();
            let len = message.as_bytes().len();
            // SAFETY: the host registered this callback for exactly this call; the message lives
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

/// Makes the library's events reach [`deliver`], once per process, before any export runs.
pub(crate) fn ensure_installed() {
    INSTALLED.get_or_init(|| {
        let subscriber =
            CallbackSubscriber::new(Level::TRACE, |level, _target, line| deliver(level, line));
        // A host that already set a global subscriber keeps it.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

/// Sends the library's log lines to `callback` (with `userdata`), or, when `callback` is NULL,
/// back to the default: lines on stderr. May be called at any time, from any thread.
///
/// # Safety
/// `callback`, when not NULL, is safe to call from any thread with `userdata` until it is
/// replaced.
#[no_mangle]
pub unsafe extern "C" fn scope_set_log_callback(
    callback: scope_log_callback,
    userdata: *mut c_void,
) {
    let _ = guard(|| {
        let mut sink = SINK.write().unwrap_or_else(|p| p.into_inner());
        *sink = Sink {
            callback,
            userdata: userdata as usize,
        };
        Ok(())
    });
}

/// Sets the most detailed level delivered (default `SCOPE_LOG_LEVEL_WARN`); a number outside
/// 1 to 5 is `SCOPE_RESULT_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn scope_set_log_level(level: u32) -> scope_result {
    guard(|| match level {
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
/// finished, `SCOPE_RESULT_TIMED_OUT` when some had not by the deadline.
#[no_mangle]
pub extern "C" fn scope_flush_warnings(timeout_ms: u32) -> scope_result {
    guard(|| {
        if synaps_scope::flush_warnings(Duration::from_millis(timeout_ms.into())) {
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

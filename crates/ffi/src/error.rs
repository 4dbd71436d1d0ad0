//! Results and errors: [`scope_result`], whose numbers never change meaning and whose
//! descriptions come from the enum itself; the failure an export returns; and the calling
//! thread's last error message, which every failure (a caught panic too) sets.

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};

use synaps_scope::intake::BadInput;
use synaps_scope::{Classified, ErrorClass};

use crate::panic::{caught, guard_value, PANIC_MESSAGE};

/// The outcome of a fallible call. The numbers never change meaning; new codes get new numbers.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum scope_result {
    /// Success: the out-parameters were written.
    Ok = 0,
    /// A required pointer argument was NULL.
    NullParameter = 1,
    /// An argument is malformed: an envp entry without `=` or with an empty key, a zero timeout, a
    /// number that is no pid (0, or above 2147483647), unknown shell words, a log level outside 1
    /// to 5.
    InvalidArgument = 2,
    /// A string that must be UTF-8 (a unit name) is not.
    InvalidUtf8 = 3,
    /// The kind is neither `SCOPE_KIND_TOOL` nor `SCOPE_KIND_DAEMON`.
    InvalidKind = 4,
    /// `process_scopes = required`, and scopes are unavailable.
    RequiredUnavailable = 5,
    /// No program that can be run by that name, or no such working directory (resolve), or no
    /// such running scope (handles).
    NotFound = 6,
    /// The unit or cgroup is not a `synaps-*.scope` made by this library, it holds the calling
    /// process, or it belongs to another user; refused.
    NotOurs = 7,
    /// The process is not in the scope named.
    NotInScope = 8,
    /// The deadline passed first: processes were still in the scope, or slice checks were still
    /// running (`scope_flush_warnings`).
    TimedOut = 9,
    /// The user manager could not answer.
    Manager = 10,
    /// No cgroup2 hierarchy is mounted.
    NoCgroup2 = 11,
    /// The system refused an operation: reading or writing a cgroup, or starting the thread of
    /// an `_async` request.
    Io = 12,
    /// The library panicked; this is a bug. Nothing was written.
    Panic = 13,
    /// None of the scopes given can be warned about before systemd-oomd acts (the message says
    /// why; `scope_oomd_last_cannot_warn` gives the kind).
    CannotWarn = 14,
}

impl scope_result {
    /// Every result, in the order of its number.
    const ALL: [scope_result; 15] = [
        scope_result::Ok,
        scope_result::NullParameter,
        scope_result::InvalidArgument,
        scope_result::InvalidUtf8,
        scope_result::InvalidKind,
        scope_result::RequiredUnavailable,
        scope_result::NotFound,
        scope_result::NotOurs,
        scope_result::NotInScope,
        scope_result::TimedOut,
        scope_result::Manager,
        scope_result::NoCgroup2,
        scope_result::Io,
        scope_result::Panic,
        scope_result::CannotWarn,
    ];

    /// The result numbered `number`, if there is one.
    pub fn from_number(number: u32) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|result| *result as u32 == number)
    }

    /// What the result means, for a person.
    pub fn description(self) -> &'static CStr {
        match self {
            scope_result::Ok => c"ok",
            scope_result::NullParameter => c"a required pointer argument was NULL",
            scope_result::InvalidArgument => c"invalid argument",
            scope_result::InvalidUtf8 => c"a string that must be UTF-8 is not",
            scope_result::InvalidKind => c"invalid scope kind",
            scope_result::RequiredUnavailable => c"process scopes are required but unavailable",
            scope_result::NotFound => c"not found",
            scope_result::NotOurs => c"not a synaps-*.scope made by synaps-scope",
            scope_result::NotInScope => c"the process is not in that scope",
            scope_result::TimedOut => c"timed out",
            scope_result::Manager => c"the user manager could not answer",
            scope_result::NoCgroup2 => c"no cgroup2 hierarchy is mounted",
            scope_result::Io => c"the system refused an operation (cgroup access, a thread)",
            scope_result::Panic => c"synaps-scope panicked",
            scope_result::CannotWarn => {
                c"no scope given can be warned about before systemd-oomd acts"
            }
        }
    }
}

/// The one map from the core's classes of failure to result codes; the codes this crate adds of
/// its own are for the C arguments themselves (NULL, not UTF-8, an unknown kind).
impl From<ErrorClass> for scope_result {
    fn from(class: ErrorClass) -> Self {
        match class {
            ErrorClass::InvalidInput => scope_result::InvalidArgument,
            ErrorClass::NoSuchProgram | ErrorClass::NoSuchScope => scope_result::NotFound,
            ErrorClass::Refused => scope_result::NotOurs,
            ErrorClass::NotInScope => scope_result::NotInScope,
            ErrorClass::Unavailable => scope_result::RequiredUnavailable,
            ErrorClass::TimedOut => scope_result::TimedOut,
            ErrorClass::Manager => scope_result::Manager,
            ErrorClass::NoCgroup2 => scope_result::NoCgroup2,
            ErrorClass::Io => scope_result::Io,
        }
    }
}

/// A failed call: its code and the message [`scope_last_error`] will return.
pub(crate) struct Failure(pub(crate) scope_result, pub(crate) String);

impl Failure {
    pub(crate) fn new(code: scope_result, message: impl Into<String>) -> Self {
        Failure(code, message.into())
    }

    /// An error of the core: the code of its class, and its own message.
    pub(crate) fn of(error: &(impl Classified + ?Sized)) -> Self {
        Failure::new(error.class().into(), error.to_string())
    }

    /// Bad input the core's intake refused: `INVALID_KIND` for a kind (its own code since 1.0),
    /// else the code of its class, as for any error of the core.
    pub(crate) fn bad_input(error: &BadInput) -> Self {
        match error {
            BadInput::Kind(_) => Failure::new(scope_result::InvalidKind, error.to_string()),
            _ => Failure::of(error),
        }
    }

    /// The same failure, its message headed by the C argument it is about.
    pub(crate) fn naming(self, argument: &str) -> Self {
        Failure(self.0, format!("{argument}: {}", self.1))
    }

    pub(crate) fn null(what: &str) -> Self {
        Failure::new(scope_result::NullParameter, format!("{what} is NULL"))
    }
}

impl Failure {
    /// What a panic caught at the boundary is reported as.
    pub(crate) fn panicked() -> Self {
        Failure::new(scope_result::Panic, PANIC_MESSAGE)
    }
}

/// Runs `body` behind the panic boundary and turns its outcome into a [`scope_result`], recording
/// the message of a failure as this thread's last error.
pub(crate) fn result_of(body: impl FnOnce() -> Result<(), Failure>) -> scope_result {
    match caught(body).unwrap_or_else(|| Err(Failure::panicked())) {
        Ok(()) => scope_result::Ok,
        Err(Failure(code, message)) => {
            set_last_error(message);
            code
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: String) {
    LAST_ERROR.with(|last| *last.borrow_mut() = c_text(&message));
}

/// `text` as a C string, a NUL in it written `\0`: what the library hands C of its own words.
pub(crate) fn c_text(text: &str) -> CString {
    CString::new(text.replace('\0', "\\0")).unwrap_or_default()
}

/// The message of the last failed call on this thread (empty if none), valid until the next
/// failed call on this thread. Never NULL.
#[no_mangle]
pub extern "C" fn scope_last_error() -> *const c_char {
    guard_value(c"".as_ptr(), || {
        LAST_ERROR.with(|last| last.borrow().as_ptr())
    })
}

/// A static description of `result` (never NULL; "unknown result" for numbers not listed).
#[no_mangle]
pub extern "C" fn scope_result_name(result: u32) -> *const c_char {
    scope_result::from_number(result)
        .map_or(c"unknown result", scope_result::description)
        .as_ptr()
}

/// For the `_r` variants of blocking calls: copies this thread's last error into `buf` (at most
/// `len` bytes including the NUL, truncated at a character boundary) when `result` is a failure,
/// so a caller that ran the call on a worker thread can report it from another thread. Returns
/// `result`.
///
/// # Safety
/// `buf` is NULL or writable for `len` bytes.
pub(crate) unsafe fn copy_error(
    result: scope_result,
    buf: *mut c_char,
    len: usize,
) -> scope_result {
    if result == scope_result::Ok || buf.is_null() || len == 0 {
        return result;
    }
    LAST_ERROR.with(|last| {
        let message = last.borrow();
        let text = message.to_str().unwrap_or("");
        let mut end = text.len().min(len - 1);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        // SAFETY: `buf` is writable for `len` bytes per the caller, and end + 1 <= len.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), buf, end);
            *buf.add(end) = 0;
        }
    });
    result
}

//! The warning before systemd-oomd acts, across the C ABI: a watch on one or more scopes that calls
//! the caller's function with each warning, on the library's one watching thread, until it is
//! freed.

use std::cell::Cell;
use std::ffi::{c_char, c_void, CString};
use std::ptr;
use std::sync::{Arc, Mutex};

use synaps_scope::{CannotWarn, CannotWarnKind, OomdRule, OomdWarning, OomdWatch, Sureness};

use crate::args::{env_arg, out_arg, timeout_arg};
use crate::boxed::{borrow, free, hand_out, read_or, write_out};
use crate::error::{c_text, scope_result, Failure};
use crate::export::guard;
use crate::handle::{scope_handle, scope_oomd_rule};
use crate::own_thread::answered_on_own_thread;

/// How sure a warning is. The numbers never change meaning.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum scope_sureness {
    /// The rule's figure is past its limit (pressure) or within 10 points of it or 10 s (swap), and the
    /// scope ranks first among oomd's candidates.
    Possible = 1,
    /// The pressure has held for half the rule's duration with reclaim going on, or swap is
    /// within 3 points of its limit.
    Likely = 2,
}

/// Why a scope cannot be warned about. The numbers never change meaning.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum scope_cannot_warn_kind {
    /// The calling thread's last call failed otherwise, or did not fail.
    None = 0,
    /// systemd-oomd is not running, or the system bus cannot be reached.
    NoOomd = 1,
    /// No rule of oomd's covers the scope.
    NoRule = 2,
    /// The kernel has no pressure stall information.
    NoPsi = 3,
    /// A file oomd reads cannot be read here.
    Unreadable = 4,
    /// The machine has no swap: the swap rule cannot fire.
    NoSwap = 5,
    /// The scope has no memory controller.
    NoMemoryController = 6,
    /// The scope is gone.
    ScopeGone = 7,
    /// A manager could not say which rules cover the scope.
    CannotAsk = 8,
}

impl From<CannotWarnKind> for scope_cannot_warn_kind {
    fn from(kind: CannotWarnKind) -> Self {
        match kind {
            CannotWarnKind::NoOomd => scope_cannot_warn_kind::NoOomd,
            CannotWarnKind::NoRule => scope_cannot_warn_kind::NoRule,
            CannotWarnKind::NoPsi => scope_cannot_warn_kind::NoPsi,
            CannotWarnKind::Unreadable => scope_cannot_warn_kind::Unreadable,
            CannotWarnKind::NoSwap => scope_cannot_warn_kind::NoSwap,
            CannotWarnKind::NoMemoryController => scope_cannot_warn_kind::NoMemoryController,
            CannotWarnKind::ScopeGone => scope_cannot_warn_kind::ScopeGone,
            CannotWarnKind::CannotAsk => scope_cannot_warn_kind::CannotAsk,
        }
    }
}

/// A warning that systemd-oomd is on its way to kill a scope; its strings are valid during the
/// call that hands it over only.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct scope_oomd_warning {
    /// The scope's unit.
    pub unit: *const c_char,
    /// The rule on its way to firing.
    pub rule: scope_oomd_rule,
    /// The unit the rule is set on.
    pub monitored: *const c_char,
    /// In percent: the monitored unit's memory pressure (`full avg10`), or the share of swap used.
    pub figure: f64,
    /// In percent: the figure at which oomd acts.
    pub limit: f64,
    /// How long the pressure has been over its limit, in microseconds (0 under the swap rule).
    pub held_for_usec: u64,
    /// How long it must hold before oomd acts, in microseconds (0 under the swap rule).
    pub duration_usec: u64,
    /// How sure the warning is.
    pub sure: scope_sureness,
    /// The whole warning in one line.
    pub message: *const c_char,
}

/// A scope a watch cannot warn about; its strings live as long as the watch.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct scope_cannot_warn {
    /// The scope's unit.
    pub unit: *const c_char,
    /// Why, as a kind.
    pub kind: scope_cannot_warn_kind,
    /// Why, in words.
    pub message: *const c_char,
}

/// Receives each warning of a watch, on the library's one watching thread (never the caller's):
/// keep it short, and hand work to a thread of your own.
pub type scope_oomd_warned =
    Option<unsafe extern "C" fn(userdata: *mut c_void, warning: *const scope_oomd_warning)>;

/// A watch on scopes for systemd-oomd's rules (opaque).
pub struct scope_oomd_watch {
    /// The watch; taken out (stopped) early where the queue it warns through lost its host.
    pub(crate) inner: Arc<WatchSlot>,
    watched: Vec<CString>,
    cannot: Vec<(CString, scope_cannot_warn_kind, CString)>,
}

/// A warning as C takes it: the struct, and the strings it points into.
pub(crate) struct OwnedWarning {
    crossing: scope_oomd_warning,
    _unit: CString,
    _monitored: CString,
    _message: CString,
}

// SAFETY: the struct's pointers point into the strings it owns, whose heap buffers move with it
// and are only read through it; every other part is Send.
unsafe impl Send for OwnedWarning {}

impl OwnedWarning {
    pub(crate) fn of(warning: &OomdWarning) -> Self {
        let (unit, monitored, message) = (
            c_text(&warning.unit),
            c_text(&warning.monitored),
            c_text(&warning.to_string()),
        );
        let crossing = scope_oomd_warning {
            // The strings' heap buffers do not move when the CStrings do.
            unit: unit.as_ptr(),
            rule: match warning.rule {
                OomdRule::Swap => scope_oomd_rule::Swap,
                OomdRule::MemoryPressure => scope_oomd_rule::MemoryPressure,
            },
            monitored: monitored.as_ptr(),
            figure: warning.figure,
            limit: warning.limit,
            held_for_usec: u64::try_from(warning.held_for.as_micros()).unwrap_or(u64::MAX),
            duration_usec: u64::try_from(warning.duration.as_micros()).unwrap_or(u64::MAX),
            sure: match warning.sure {
                Sureness::Possible => scope_sureness::Possible,
                Sureness::Likely => scope_sureness::Likely,
            },
            message: message.as_ptr(),
        };
        OwnedWarning {
            crossing,
            _unit: unit,
            _monitored: monitored,
            _message: message,
        }
    }

    /// The struct, valid as long as this.
    pub(crate) fn crossing(&self) -> *const scope_oomd_warning {
        &self.crossing
    }
}

/// Where a watch's warnings go: the host's callback, or its queue with the request's token.
pub(crate) enum Warned {
    Callback {
        warned: unsafe extern "C" fn(*mut c_void, *const scope_oomd_warning),
        userdata: *mut c_void,
    },
    /// Hands each warning to the host's queue.
    Taker(Arc<dyn Fn(&OomdWarning) + Send + Sync>),
}

// SAFETY: the caller of `scope_oomd_watch_new` promised that `warned` may be called from any
// thread with `userdata` until the watch is freed; a queue is shared by design.
unsafe impl Send for Warned {}
// SAFETY: as for Send; the library calls it from one thread at a time.
unsafe impl Sync for Warned {}

impl Warned {
    fn callback(warned: scope_oomd_warned, userdata: *mut c_void) -> Result<Self, Failure> {
        let warned = warned.ok_or_else(|| Failure::null("warned"))?;
        Ok(Warned::Callback { warned, userdata })
    }

    fn call(&self, warning: &OomdWarning) {
        match self {
            Warned::Callback { warned, userdata } => {
                let owned = OwnedWarning::of(warning);
                // SAFETY: the caller promised `warned` may be called from any thread with
                // `userdata`; the warning and its strings outlive the call.
                unsafe { warned(*userdata, owned.crossing()) };
            }
            Warned::Taker(take) => take(warning),
        }
    }
}

thread_local! {
    static LAST_CANNOT_WARN: Cell<scope_cannot_warn_kind> =
        const { Cell::new(scope_cannot_warn_kind::None) };
}

/// Watches the scopes of the `count` handles at `handles` for systemd-oomd's rules, asking the
/// managers and the system bus (`envp`'s, NULL for this process's) within `timeout_ms` which rules
/// cover each; `warned` is called with each warning and `userdata`, on the library's one watching
/// thread, until the watch is freed. The handles may be freed as soon as this returns. Scopes it
/// cannot warn about are listed by [`scope_oomd_watch_cannot`]; where none can be,
/// `SCOPE_RESULT_CANNOT_WARN`, the message says why of the first, and
/// [`scope_oomd_last_cannot_warn`] gives the kind.
///
/// # Safety
/// `handles` is NULL or points to `count` pointers, each NULL or a live handle; `envp` is NULL or
/// a NULL-terminated array of C strings; `warned` is safe to call from another thread with
/// `userdata` until the watch is freed; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_oomd_watch_new(
    handles: *const *const scope_handle,
    count: usize,
    envp: *const *const c_char,
    timeout_ms: u32,
    warned: scope_oomd_warned,
    userdata: *mut c_void,
    out: *mut *mut scope_oomd_watch,
) -> scope_result {
    LAST_CANNOT_WARN.with(|last| last.set(scope_cannot_warn_kind::None));
    guard(|| {
        out_arg(out, "out")?;
        let warned = Warned::callback(warned, userdata)?;
        // SAFETY: forwarded from the caller.
        let request = unsafe { Request::take(handles, count, envp, timeout_ms, warned) }?;
        let made = request.make()?;
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { hand_out(made, out) };
        Ok(())
    })
}

/// Receives the outcome of [`scope_oomd_watch_new_async`], exactly once, on the request's own
/// thread: `result` as `scope_oomd_watch_new` returns it; on success `watch` is the caller's (free
/// it with [`scope_oomd_watch_free`]); with `SCOPE_RESULT_CANNOT_WARN`, `kind` says why; on
/// failure `error` is the message (valid during the call only).
pub type scope_oomd_watch_ready = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        result: scope_result,
        watch: *mut scope_oomd_watch,
        kind: scope_cannot_warn_kind,
        error: *const c_char,
    ),
>;

/// [`scope_oomd_watch_new`] on a thread of its own, which calls `ready` when the watch is made
/// (the managers are asked within `timeout_ms`). Returns `SCOPE_RESULT_OK` once the request has
/// started (then `ready` runs exactly once), or the error for bad arguments (then `ready` never
/// runs). The handles may be freed as soon as this returns.
///
/// # Safety
/// As [`scope_oomd_watch_new`]; `ready` is safe to call from another thread with `userdata`,
/// which must stay valid until it has been called and, once a watch is made, until it is freed.
#[no_mangle]
pub unsafe extern "C" fn scope_oomd_watch_new_async(
    handles: *const *const scope_handle,
    count: usize,
    envp: *const *const c_char,
    timeout_ms: u32,
    warned: scope_oomd_warned,
    ready: scope_oomd_watch_ready,
    userdata: *mut c_void,
) -> scope_result {
    guard(|| {
        let ready = ready.ok_or_else(|| Failure::null("ready"))?;
        let warned = Warned::callback(warned, userdata)?;
        // SAFETY: forwarded from the caller.
        let request = unsafe { Request::take(handles, count, envp, timeout_ms, warned) }?;
        answered_on_own_thread(
            userdata,
            move || request.make(),
            move |userdata, result, made, error| {
                let watch = made.map_or(ptr::null_mut(), |watch| Box::into_raw(Box::new(watch)));
                // The request's own thread: `make` set the kind there, where it could not warn.
                let kind = LAST_CANNOT_WARN.with(Cell::get);
                // SAFETY: the caller promised `ready` may be called from this thread with its
                // userdata; the watch is handed over, `error` outlives the call.
                unsafe { ready(userdata, result, watch, kind, error) };
            },
        )
    })
}

/// A watch that its queue's host going away may stop before the host frees it.
pub(crate) type WatchSlot = Mutex<Option<OomdWatch>>;

/// A watch's request, its arguments taken from C.
pub(crate) struct Request {
    scopes: Vec<synaps_scope::ScopeHandle>,
    env: synaps_scope::intake::CheckedEnv,
    timeout: std::time::Duration,
    warned: Warned,
}

impl Request {
    /// # Safety
    /// As [`scope_oomd_watch_new`]'s arguments.
    pub(crate) unsafe fn take(
        handles: *const *const scope_handle,
        count: usize,
        envp: *const *const c_char,
        timeout_ms: u32,
        warned: Warned,
    ) -> Result<Request, Failure> {
        if handles.is_null() {
            return Err(Failure::null("handles"));
        }
        // SAFETY: `count` pointers at `handles`, per the caller.
        let pointers = unsafe { std::slice::from_raw_parts(handles, count) };
        let mut scopes = Vec::with_capacity(count);
        for (at, pointer) in pointers.iter().enumerate() {
            // SAFETY: NULL or live per the caller.
            let handle = unsafe { borrow(*pointer, &format!("handles[{at}]")) }?;
            scopes.push(handle.inner().clone());
        }
        Ok(Request {
            scopes,
            // SAFETY: forwarded from the caller.
            env: unsafe { env_arg(envp) }?,
            timeout: timeout_arg(timeout_ms, "timeout_ms")?,
            warned,
        })
    }

    /// The watch; where it cannot warn, the failure, with the kind left as this thread's
    /// [`scope_oomd_last_cannot_warn`].
    pub(crate) fn make(self) -> Result<scope_oomd_watch, Failure> {
        let warned = self.warned;
        let watch = OomdWatch::new(
            &self.scopes,
            self.env.as_pairs(),
            self.timeout,
            move |warning| warned.call(warning),
        )
        .map_err(|why| {
            LAST_CANNOT_WARN.with(|last| last.set(why.kind.into()));
            Failure::new(scope_result::CannotWarn, why.to_string())
        })?;
        let cannot = |why: &CannotWarn| (c_text(&why.unit), why.kind.into(), c_text(&why.message));
        Ok(scope_oomd_watch {
            watched: watch.watched().iter().map(|unit| c_text(unit)).collect(),
            cannot: watch.cannot_warn().iter().map(cannot).collect(),
            inner: Arc::new(Mutex::new(Some(watch))),
        })
    }
}

/// Why the calling thread's last [`scope_oomd_watch_new`] returned `SCOPE_RESULT_CANNOT_WARN`
/// (`SCOPE_CANNOT_WARN_KIND_NONE` where it did not).
#[no_mangle]
pub extern "C" fn scope_oomd_last_cannot_warn() -> scope_cannot_warn_kind {
    LAST_CANNOT_WARN.with(Cell::get)
}

/// How many scopes `watch` warns about (0 for NULL).
///
/// # Safety
/// `watch` is NULL or a live watch.
#[no_mangle]
pub unsafe extern "C" fn scope_oomd_watch_watched_count(watch: *const scope_oomd_watch) -> usize {
    // SAFETY: NULL or live per the caller.
    unsafe { read_or(watch, 0, |watch| watch.watched.len()) }
}

/// The unit of the `index`th scope `watch` warns about, valid as long as the watch; NULL for a
/// NULL watch or an index past the count.
///
/// # Safety
/// `watch` is NULL or a live watch.
#[no_mangle]
pub unsafe extern "C" fn scope_oomd_watch_watched(
    watch: *const scope_oomd_watch,
    index: usize,
) -> *const c_char {
    // SAFETY: NULL or live per the caller.
    unsafe {
        read_or(watch, ptr::null(), |watch| {
            watch
                .watched
                .get(index)
                .map_or(ptr::null(), |unit| unit.as_ptr())
        })
    }
}

/// How many of the scopes given `watch` cannot warn about (0 for NULL).
///
/// # Safety
/// `watch` is NULL or a live watch.
#[no_mangle]
pub unsafe extern "C" fn scope_oomd_watch_cannot_count(watch: *const scope_oomd_watch) -> usize {
    // SAFETY: NULL or live per the caller.
    unsafe { read_or(watch, 0, |watch| watch.cannot.len()) }
}

/// The `index`th scope `watch` cannot warn about, and why, into `*out` (its strings valid as long
/// as the watch); `SCOPE_RESULT_NOT_FOUND` for an index past the count.
///
/// # Safety
/// `watch` is NULL or a live watch; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_oomd_watch_cannot(
    watch: *const scope_oomd_watch,
    index: usize,
    out: *mut scope_cannot_warn,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: NULL or live per the caller.
        let watch = unsafe { borrow(watch, "watch") }?;
        let (unit, kind, message) = watch.cannot.get(index).ok_or_else(|| {
            Failure::new(
                scope_result::NotFound,
                format!("index {index}: the watch lists {}", watch.cannot.len()),
            )
        })?;
        let why = scope_cannot_warn {
            unit: unit.as_ptr(),
            kind: *kind,
            message: message.as_ptr(),
        };
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { write_out(out, why) };
        Ok(())
    })
}

/// Frees a watch (NULL is accepted and ignored): `warned` is not called after this returns; freed
/// from inside `warned`, not after that call returns.
///
/// # Safety
/// `watch` is NULL or a watch from this library, not yet freed, that no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn scope_oomd_watch_free(watch: *mut scope_oomd_watch) {
    // SAFETY: NULL or a watch not yet freed and not in use, per the caller.
    unsafe { free(watch) }
}

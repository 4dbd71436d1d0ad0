//! Diagnostics (R16): the library reports through `tracing` with target `synaps_scope`.
//! [`CallbackSubscriber`] turns those events into plain lines for hosts that have no
//! subscriber of their own (the CLI, and later the C, Python and Node surfaces).

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

/// The `tracing` target of every event the library emits.
pub const TARGET: &str = "synaps_scope";

/// The dispatcher a thread the library starts for a request must report to: the requesting
/// thread's own when that thread set one for itself (`with_default`, `set_default`); None when it
/// uses the process's global one (or none), which the new thread reaches by itself. The global one
/// is not entered as a scoped one on the new thread: that takes every thread of the process off
/// tracing's fast path while it runs, and a caller inside a dispatch (a log callback calling back
/// into the library) is handed no dispatcher at all, which must not silence the new thread.
/// (tracing tells the kinds apart only in `Debug`; its tests below pin that.)
pub(crate) fn dispatch_for_another_thread() -> Option<tracing::Dispatch> {
    let current = tracing::dispatcher::get_default(|d| d.clone());
    let global = format!("{current:?}").starts_with("Dispatch::Global");
    (!global).then_some(current)
}

/// Runs `f` reporting to `dispatch` when given, else to the thread's default.
pub(crate) fn with_dispatch<T>(dispatch: Option<&tracing::Dispatch>, f: impl FnOnce() -> T) -> T {
    match dispatch {
        Some(dispatch) => tracing::dispatcher::with_default(dispatch, f),
        None => f(),
    }
}

/// Where the process-wide install of a host surface's subscriber stands ([`install_global_once`]):
/// [`NOT_INSTALLED`], [`INSTALLED`], or, while a thread installs it, that thread's process id, so
/// that a forked child finding the install under way knows it is its parent's, not its own.
static INSTALL_STATE: AtomicU64 = AtomicU64::new(NOT_INSTALLED);
const NOT_INSTALLED: u64 = 0;
const INSTALLED: u64 = u64::MAX;

/// Makes `make()` the process's global `tracing` subscriber, once per process and inherited by
/// forked children: a surface's library (C, Python) routes the library's events to its host's
/// sink this way. A host that already set a global subscriber keeps it, and no `Dispatch` is
/// made then: every new `Dispatch` takes tracing-core's process-wide lock of dispatchers, which a
/// child forked while a thread of its parent held it (with a second dispatcher, each callsite's
/// first registration takes it too) would wait on for ever. So a forked child never makes one: it
/// finds the install done (it inherited the parent's global subscriber), or, forked while a
/// thread of its parent was inside this function, leaves its events without a subscriber rather
/// than wait on a lock whose holder it does not have. `before_install` runs first, once, in the
/// installing thread; the C library registers [`wait_for_install`] there to run before every
/// `fork()`, so that a child can only be forked amid the install before that registration.
/// Other threads of the installing process wait for the install (microseconds).
pub fn install_global_once<S>(before_install: impl FnOnce(), make: impl FnOnce() -> S)
where
    S: Subscriber + Send + Sync + 'static,
{
    if INSTALL_STATE.load(Ordering::Acquire) == INSTALLED {
        return;
    }
    let pid = u64::from(std::process::id());
    match INSTALL_STATE.compare_exchange(NOT_INSTALLED, pid, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            // Ends the install even if `make` panics: the threads waiting for it must not spin on.
            let _ended = InstallEnded;
            before_install();
            if !tracing::dispatcher::has_been_set() {
                let _ = tracing::subscriber::set_global_default(make());
            }
        }
        Err(_) => wait_for_install(),
    }
}

struct InstallEnded;

impl Drop for InstallEnded {
    fn drop(&mut self) {
        INSTALL_STATE.store(INSTALLED, Ordering::Release);
    }
}

/// Waits while a thread of this process is inside [`install_global_once`]; returns at once in a
/// child forked while its parent's thread was (that install never ends here).
pub fn wait_for_install() {
    let pid = u64::from(std::process::id());
    while INSTALL_STATE.load(Ordering::Acquire) == pid {
        std::thread::yield_now();
    }
}

/// A `tracing` subscriber that formats each event at or above `max_level` into one line (the
/// message, then `key=value` for any other field) and hands it to a callback.
pub struct CallbackSubscriber<F> {
    max_level: Level,
    callback: F,
    next_span: AtomicU64,
}

impl<F> CallbackSubscriber<F>
where
    F: Fn(&Level, &str, &str) + Send + Sync + 'static,
{
    /// `callback(level, target, line)` is called for every enabled event, on the emitting thread.
    pub fn new(max_level: Level, callback: F) -> Self {
        CallbackSubscriber {
            max_level,
            callback,
            next_span: AtomicU64::new(1),
        }
    }
}

impl<F> Subscriber for CallbackSubscriber<F>
where
    F: Fn(&Level, &str, &str) + Send + Sync + 'static,
{
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if self.enabled(metadata) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= self.max_level
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(self.max_level.into())
    }

    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed))
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut line = LineVisitor::default();
        event.record(&mut line);
        (self.callback)(
            event.metadata().level(),
            event.metadata().target(),
            &line.finish(),
        );
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

#[derive(Default)]
struct LineVisitor {
    message: String,
    fields: String,
}

impl LineVisitor {
    fn finish(self) -> String {
        match (self.message.is_empty(), self.fields.is_empty()) {
            (_, true) => self.message,
            (true, false) => self.fields,
            (false, false) => format!("{} ({})", self.message, self.fields),
        }
    }
}

impl Visit for LineVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_debug(field, &format_args!("{value}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            if !self.fields.is_empty() {
                self.fields.push(' ');
            }
            let _ = write!(self.fields, "{}={value:?}", field.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn only_a_scoped_dispatcher_is_carried_to_another_thread() {
        assert!(dispatch_for_another_thread().is_none(), "no dispatcher set");
        let scoped = tracing::Dispatch::new(CallbackSubscriber::new(Level::INFO, |_, _, _| {}));
        let carried = tracing::dispatcher::with_default(&scoped, dispatch_for_another_thread)
            .expect("a scoped dispatcher is carried");
        assert!(
            format!("{carried:?}").starts_with("Dispatch::Scoped"),
            "{carried:?}"
        );
    }

    #[test]
    fn events_become_lines_with_their_fields() {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let subscriber = CallbackSubscriber::new(Level::INFO, move |level, target, line| {
            sink.lock()
                .unwrap()
                .push(format!("{level} {target} {line}"));
        });
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: TARGET, slice = "a.slice", "no limits");
            tracing::debug!(target: TARGET, "filtered out");
        });
        assert_eq!(
            *lines.lock().unwrap(),
            vec!["WARN synaps_scope no limits (slice=a.slice)"]
        );
    }
}

//! Answers the host takes from a queue on its own thread (`scope_queue`), for hosts the library
//! must never call from its threads: a Node worker may be terminated at any moment, and an FFI
//! layer's cross-thread callbacks are bounded by its own limits (koffi's 256 in flight, past which
//! it throws on the library's thread and the process dies). A request made with a queue and a
//! token pushes its answer there and writes a byte to the queue's socket; the host polls the
//! other end (Node: a `net.Socket` on the event loop) and takes the answers. Nothing calls into
//! the host, so a host that went away (its end closed, as Node closes a terminated worker's
//! handles) costs nothing: answers for it are freed as they come, the watches made through it
//! stop, and its queue's descriptor is closed by the first answer, or by the process's next
//! request or queue made.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr;
use std::sync::{Arc, Mutex, Weak};

use synaps_scope::__ffi::{lock, PerProcess};
use synaps_scope::OomdWarning;

use crate::args::out_arg;
use crate::boxed::{borrow, free, hand_out, read_or, write_out};
use crate::error::{c_text, result_of, scope_result, Failure};
use crate::export::guard;
use crate::handle::{scope_ending, scope_handle};
use crate::launcher::scope_launcher;
use crate::log::{replace_sink, scope_log_level, LineTaker};
use crate::oomd_watch::{
    scope_cannot_warn_kind, scope_oomd_warning, scope_oomd_watch, OwnedWarning, WatchSlot,
};
use crate::panic::caught;

/// Warnings and log lines a queue holds for its host at most; past that, the newest are dropped
/// and counted, and a line saying how many is queued once there is room (a host whose loop is
/// stuck does not make the library grow).
const MAX_WAITING_EVENTS: usize = 4096;

/// What an answer is the answer to. The numbers never change meaning.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum scope_answer_kind {
    /// No answer (a NULL one).
    None = 0,
    /// Of `scope_launcher_for_env_queued`: take the launcher with `scope_answer_take_launcher`.
    Launcher = 1,
    /// Of `scope_handle_from_manager_queued`: take it with `scope_answer_take_handle`.
    Handle = 2,
    /// Of `scope_handle_ending_queued`: `scope_answer_ending`.
    Ending = 3,
    /// Of `scope_handle_kill_queued`: `scope_answer_pids`.
    Pids = 4,
    /// Of `scope_handle_wait_empty_queued`: the result alone.
    Done = 5,
    /// Of `scope_oomd_watch_new_queued`: take the watch with `scope_answer_take_oomd_watch`.
    OomdWatch = 6,
    /// A warning of a watch made with `scope_oomd_watch_new_queued`, with that request's token:
    /// `scope_answer_oomd_warning`. None comes after the watch is freed.
    OomdWarning = 7,
    /// A log line, with the token given to `scope_set_log_queue` (or 0: the queue's own line saying
    /// how many warnings and lines it dropped): `scope_answer_log_line`.
    Log = 8,
}

/// The answer to one request, or one event: taken from a queue with [`scope_queue_take`], freed
/// with [`scope_answer_free`] (with whatever was not taken out of it).
pub struct scope_answer {
    token: u64,
    kind: scope_answer_kind,
    result: scope_result,
    error: Option<CString>,
    payload: Payload,
}

/// What an answer carries; `None` inside a `Taken` once the host took it.
pub(crate) enum Payload {
    Nothing,
    /// The launcher, or `None` for "launch directly".
    Launcher(Taken<Option<Box<scope_launcher>>>),
    Handle(Taken<Box<scope_handle>>),
    Ending(scope_ending),
    Pids(Vec<u32>),
    OomdWatch(Taken<Box<scope_oomd_watch>>, scope_cannot_warn_kind),
    OomdWarning(Box<OwnedWarning>),
    Log(scope_log_level, CString),
}

/// A payload the host takes out of its answer, at most once.
pub(crate) type Taken<T> = Option<T>;

impl scope_answer {
    /// The answer of request `token` of `kind`: its payload on success, its failure otherwise
    /// (with the failure's payload, `Nothing` but for a watch's kind of cannot-warn).
    pub(crate) fn of(
        token: u64,
        kind: scope_answer_kind,
        outcome: Result<Payload, Failure>,
    ) -> Self {
        match outcome {
            Ok(payload) => scope_answer {
                token,
                kind,
                result: scope_result::Ok,
                error: None,
                payload,
            },
            Err(Failure(result, message)) => scope_answer {
                token,
                kind,
                result,
                error: Some(c_text(&message)),
                payload: Payload::Nothing,
            },
        }
    }

    /// The failure of a watch request that cannot warn, with why as a kind.
    pub(crate) fn cannot_warn(token: u64, failure: Failure, why: scope_cannot_warn_kind) -> Self {
        let mut answer = Self::of(token, scope_answer_kind::OomdWatch, Err(failure));
        answer.payload = Payload::OomdWatch(None, why);
        answer
    }

    pub(crate) fn warning(token: u64, warning: &OomdWarning) -> Self {
        let payload = Payload::OomdWarning(Box::new(OwnedWarning::of(warning)));
        Self::of(token, scope_answer_kind::OomdWarning, Ok(payload))
    }

    pub(crate) fn log_line(token: u64, level: scope_log_level, line: &str) -> Self {
        let payload = Payload::Log(level, c_text(line));
        Self::of(token, scope_answer_kind::Log, Ok(payload))
    }

    /// Warnings and log lines: events the queue bounds, unlike answers to requests (bounded by
    /// the requests the host made).
    fn is_event(&self) -> bool {
        matches!(
            self.kind,
            scope_answer_kind::OomdWarning | scope_answer_kind::Log
        )
    }
}

/// A queue of answers for one host thread. Freed with [`scope_queue_free`].
pub struct scope_queue {
    shared: Arc<Queue>,
}

/// The queue itself, shared with the requests that answer to it.
pub(crate) struct Queue {
    /// The process that made it: a forked child's copy is handed nothing and gives nothing (the
    /// parent's threads, which would answer, are not in the child).
    owner: u32,
    state: Mutex<State>,
}

struct State {
    answers: VecDeque<scope_answer>,
    /// The end the library writes its wake-up bytes to; `None` once the host's end is closed or
    /// the queue freed: answers then are dropped as they come.
    writer: Option<OwnedFd>,
    /// Events among `answers`.
    events: usize,
    /// Events dropped since the last line saying so.
    dropped: u64,
    /// The watches made through this queue, stopped when its host goes (nothing would take their
    /// warnings): pruned of those freed as the list doubles.
    watches: Vec<Weak<WatchSlot>>,
    /// The length of `watches` after its last pruning.
    pruned_at: usize,
}

/// What a queue whose host went away lets go of: its answers, and the watches it stops.
struct Forsaken {
    answers: VecDeque<scope_answer>,
    watches: Vec<Weak<WatchSlot>>,
}

impl Forsaken {
    fn none() -> Self {
        Forsaken {
            answers: VecDeque::new(),
            watches: Vec::new(),
        }
    }

    /// Drops what was let go of: on a thread that holds no lock of the library's.
    fn release(self) {
        drop(self.answers);
        for watch in self.watches {
            if let Some(slot) = watch.upgrade() {
                let watch = lock(&slot).take();
                drop(watch);
            }
        }
    }

    /// [`Self::release`] on a thread of its own: `push` may run inside a log call made under a
    /// lock that dropping a watch takes. Where no thread can be started, it is leaked instead.
    fn release_elsewhere(self) {
        if self.answers.is_empty() && self.watches.is_empty() {
            return;
        }
        let kept = Arc::new(Mutex::new(Some(self)));
        let handed = Arc::clone(&kept);
        let started = std::thread::Builder::new()
            .name("synaps-scope queue reaper".into())
            .spawn(move || {
                let forsaken = lock(&handed).take();
                if let Some(forsaken) = forsaken {
                    forsaken.release();
                }
            });
        if started.is_err() {
            std::mem::forget(lock(&kept).take());
        }
    }
}

/// This process's open queues, so that each new one closes those whose host went away.
static OPEN: PerProcess<Mutex<Vec<Weak<Queue>>>> = PerProcess::new();

impl Queue {
    /// Hands `answer` to the host: queued, and the host's end made readable. Where the host is
    /// gone it is dropped, and with it whatever it held (a launcher, a watch).
    pub(crate) fn push(&self, answer: scope_answer) {
        let mut state = lock(&self.state);
        if state.writer.is_none() {
            drop(state);
            // The pushers that hold a lock (log lines, warnings) push answers that hold nothing.
            return drop(answer);
        }
        if answer.is_event() {
            if state.events >= MAX_WAITING_EVENTS {
                state.dropped += 1;
                drop(state);
                return drop(answer);
            }
            state.events += 1;
        }
        state.answers.push_back(answer);
        let gone = state.writer.as_ref().is_some_and(|writer| !wake(writer));
        let forsaken = if gone {
            state.forsake()
        } else {
            Forsaken::none()
        };
        drop(state);
        forsaken.release_elsewhere();
    }

    /// Stops `watch` when this queue's host goes away (at once where it is gone already).
    pub(crate) fn stop_when_gone(&self, watch: &Arc<WatchSlot>) {
        let mut state = lock(&self.state);
        if state.writer.is_none() {
            drop(state);
            let stopped = lock(watch).take();
            return drop(stopped);
        }
        if state.watches.len() >= 2 * state.pruned_at.max(8) {
            state.watches.retain(|watch| watch.strong_count() > 0);
            state.pruned_at = state.watches.len();
        }
        state.watches.push(Arc::downgrade(watch));
    }

    /// The next answer, if one waits.
    fn take(&self) -> Option<scope_answer> {
        let mut state = lock(&self.state);
        let answer = state.answers.pop_front()?;
        if answer.is_event() {
            state.events -= 1;
            if state.dropped > 0 && state.events < MAX_WAITING_EVENTS {
                let line = format!(
                    "{} warnings or log lines were dropped: the host did not take them in time",
                    std::mem::take(&mut state.dropped)
                );
                state.events += 1;
                let said = scope_answer::log_line(0, scope_log_level::Warn, &line);
                state.answers.push_back(said);
            }
        }
        Some(answer)
    }

    /// Closes the queue where its host's end was closed, and hands back what it let go of.
    fn closed_if_host_gone(&self) -> Gone {
        let mut state = lock(&self.state);
        match state.writer.as_ref() {
            None => Gone::Was,
            Some(writer) if host_gone(writer) => Gone::Now(state.forsake()),
            Some(_) => Gone::No,
        }
    }

    /// Closes the queue for good: no byte written, no answer kept, its watches stopped.
    fn close(&self) {
        let forsaken = lock(&self.state).forsake();
        forsaken.release();
    }
}

impl State {
    /// Closes the writing end and hands back what nobody will take, for the caller to release
    /// once it let go of the lock.
    fn forsake(&mut self) -> Forsaken {
        self.writer = None;
        self.events = 0;
        Forsaken {
            answers: std::mem::take(&mut self.answers),
            watches: std::mem::take(&mut self.watches),
        }
    }
}

/// Writes one wake-up byte; false when the host's end is closed. A full socket (the host has
/// bytes it has not read yet) is no failure: it will read and take.
fn wake(writer: &OwnedFd) -> bool {
    // SAFETY: a valid descriptor of ours and a one-byte buffer; MSG_NOSIGNAL keeps a closed peer
    // from raising SIGPIPE, MSG_DONTWAIT the thread from waiting.
    let sent = unsafe {
        libc::send(
            writer.as_raw_fd(),
            b"!".as_ptr().cast(),
            1,
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    sent == 1
        || !matches!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EPIPE | libc::ECONNRESET | libc::ENOTCONN)
        )
}

/// Whether the host's end of `writer`'s socket pair is closed (the socket hangs up).
fn host_gone(writer: &OwnedFd) -> bool {
    let mut poll = libc::pollfd {
        fd: writer.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd; a zero timeout never waits.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready == 1 && poll.revents & (libc::POLLHUP | libc::POLLERR) != 0
}

/// The queue a request answers to, refused in a forked child of the process that made it.
///
/// # Safety
/// `queue` is NULL or a live queue.
pub(crate) unsafe fn queue_arg(queue: *const scope_queue) -> Result<Arc<Queue>, Failure> {
    // SAFETY: NULL or live per the caller.
    let queue = unsafe { borrow(queue, "queue") }?;
    mine(&queue.shared)?;
    sweep(None);
    Ok(Arc::clone(&queue.shared))
}

/// Closes the queues of this process whose host went away (one `poll` each), and adds `new` to
/// those it looks at: run as each queue is made and each request is asked, so that a host gone
/// with nothing in flight holds its socket only until the process's next request.
fn sweep(new: Option<&Arc<Queue>>) {
    let open = OPEN.get();
    let mut open = lock(&open);
    let mut forsaken = Vec::new();
    open.retain(|queue| match queue.upgrade() {
        None => false,
        Some(queue) => match queue.closed_if_host_gone() {
            Gone::No => true,
            Gone::Was => false,
            Gone::Now(left) => {
                forsaken.push(left);
                false
            }
        },
    });
    open.extend(new.map(Arc::downgrade));
    drop(open);
    // Dropping a watch takes the watching thread's lock, under which it may log into a host
    // callback that asks for a request: let go of on a thread of their own.
    for left in forsaken {
        left.release_elsewhere();
    }
}

/// Whether a queue's host went away.
enum Gone {
    No,
    /// Before: the queue was closed already.
    Was,
    /// Just now: what it let go of, to release.
    Now(Forsaken),
}

fn mine(queue: &Queue) -> Result<(), Failure> {
    if queue.owner == std::process::id() {
        return Ok(());
    }
    Err(Failure::new(
        scope_result::InvalidArgument,
        format!(
            "the queue was made by process {}, of which this is a forked child: make a queue here",
            queue.owner
        ),
    ))
}

/// Runs `work` on a thread of its own and pushes the answer it makes to `queue` (a panic as
/// `SCOPE_RESULT_PANIC` of request `token` of `kind`). Returns once the thread has started; where
/// none could be, the failure is the caller's to return and nothing is pushed.
pub(crate) fn answered_to_queue(
    queue: Arc<Queue>,
    token: u64,
    kind: scope_answer_kind,
    work: impl FnOnce() -> scope_answer + Send + 'static,
) -> Result<(), Failure> {
    std::thread::Builder::new()
        .name("synaps-scope request".into())
        .spawn(move || {
            let answer = caught(work)
                .unwrap_or_else(|| scope_answer::of(token, kind, Err(Failure::panicked())));
            queue.push(answer);
        })
        .map(drop)
        .map_err(|e| Failure::new(scope_result::Io, format!("cannot start a thread: {e}")))
}

/// A new queue, and in `*reader` the descriptor to poll for it (readable when answers wait; read
/// and discard its bytes, then take answers until none is left). `*reader` is the caller's: close
/// it after freeing the queue, or to tell the library the host is gone (answers are then dropped,
/// and what they held freed). A socket (AF_UNIX, SOCK_STREAM, close-on-exec); the library never
/// calls into the host. A queue belongs to the process that made it.
///
/// # Safety
/// `reader` and `out` are writable.
#[no_mangle]
pub unsafe extern "C" fn scope_queue_new(
    reader: *mut c_int,
    out: *mut *mut scope_queue,
) -> scope_result {
    guard(|| {
        out_arg(reader, "reader")?;
        out_arg(out, "out")?;
        let mut ends = [0 as c_int; 2];
        // SAFETY: `ends` has room for the two descriptors.
        let made = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                ends.as_mut_ptr(),
            )
        };
        if made != 0 {
            let why = std::io::Error::last_os_error();
            return Err(Failure::new(
                scope_result::Io,
                format!("cannot make the queue's socket: {why}"),
            ));
        }
        // SAFETY: a descriptor socketpair just made, owned by nothing else.
        let writer = unsafe { OwnedFd::from_raw_fd(ends[1]) };
        let shared = Arc::new(Queue {
            owner: std::process::id(),
            state: Mutex::new(State {
                answers: VecDeque::new(),
                writer: Some(writer),
                events: 0,
                dropped: 0,
                watches: Vec::new(),
                pruned_at: 0,
            }),
        });
        sweep(Some(&shared));
        // SAFETY: both checked non-NULL; writable per the caller.
        unsafe {
            write_out(reader, ends[0]);
            hand_out(scope_queue { shared }, out);
        }
        Ok(())
    })
}

/// Takes the next answer into `*out`, the caller's to free with [`scope_answer_free`]; NULL when
/// none waits. Never blocks.
///
/// # Safety
/// `queue` is NULL or a live queue; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_queue_take(
    queue: *const scope_queue,
    out: *mut *mut scope_answer,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: NULL or live per the caller.
        let queue = unsafe { borrow(queue, "queue") }?;
        mine(&queue.shared)?;
        let answer = queue
            .shared
            .take()
            .map_or(ptr::null_mut(), |answer| Box::into_raw(Box::new(answer)));
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { write_out(out, answer) };
        Ok(())
    })
}

/// Frees a queue (NULL is accepted and ignored), with the answers it held and what they held;
/// the watches made through it stop warning. Requests still running answer to nowhere; the
/// caller's reading end stays open (close it).
///
/// # Safety
/// `queue` is NULL or a queue from this library, not yet freed, that no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn scope_queue_free(queue: *mut scope_queue) {
    // SAFETY: NULL or live per the caller.
    if let Some(queue) = unsafe { queue.as_ref() } {
        // A forked child's copy is only dropped: closing it would take a lock of the parent's.
        if mine(&queue.shared).is_ok() {
            let _ = caught(|| queue.shared.close());
        }
    }
    // SAFETY: NULL or a queue not yet freed and not in use, per the caller.
    unsafe { free(queue) }
}

/// The token of the request `answer` answers (0 for NULL).
///
/// # Safety
/// `answer` is NULL or a live answer.
#[no_mangle]
pub unsafe extern "C" fn scope_answer_token(answer: *const scope_answer) -> u64 {
    // SAFETY: NULL or live per the caller.
    unsafe { read_or(answer, 0, |answer| answer.token) }
}

/// What `answer` answers (`SCOPE_ANSWER_KIND_NONE` for NULL).
///
/// # Safety
/// `answer` is NULL or a live answer.
#[no_mangle]
pub unsafe extern "C" fn scope_answer_kind_of(answer: *const scope_answer) -> scope_answer_kind {
    // SAFETY: NULL or live per the caller.
    unsafe { read_or(answer, scope_answer_kind::None, |answer| answer.kind) }
}

/// The request's result, as its blocking form would return it (`SCOPE_RESULT_NULL_PARAMETER`
/// for NULL).
///
/// # Safety
/// `answer` is NULL or a live answer.
#[no_mangle]
pub unsafe extern "C" fn scope_answer_result(answer: *const scope_answer) -> scope_result {
    // SAFETY: NULL or live per the caller.
    unsafe { read_or(answer, scope_result::NullParameter, |answer| answer.result) }
}

/// The failure's message, valid as long as the answer; NULL on success (and for NULL).
///
/// # Safety
/// `answer` is NULL or a live answer.
#[no_mangle]
pub unsafe extern "C" fn scope_answer_error(answer: *const scope_answer) -> *const c_char {
    // SAFETY: NULL or live per the caller.
    unsafe {
        read_or(answer, ptr::null(), |answer| {
            answer
                .error
                .as_ref()
                .map_or(ptr::null(), |error| error.as_ptr())
        })
    }
}

/// Takes what a successful answer of `kind` holds out of it: once, and only from an answer of
/// that kind that succeeded.
///
/// # Safety
/// `answer` is NULL or a live answer.
unsafe fn take_out<T>(
    answer: *mut scope_answer,
    kind: scope_answer_kind,
    take: impl FnOnce(&mut Payload) -> Option<T>,
) -> Result<T, Failure> {
    // SAFETY: NULL or live per the caller.
    let answer = unsafe { answer.as_mut() }.ok_or_else(|| Failure::null("answer"))?;
    if answer.kind != kind || answer.result != scope_result::Ok {
        return Err(Failure::new(
            scope_result::InvalidArgument,
            format!(
                "the answer is of kind {} with result {}, not a successful answer of kind {}",
                answer.kind as u32, answer.result as u32, kind as u32
            ),
        ));
    }
    take(&mut answer.payload).ok_or_else(|| {
        Failure::new(
            scope_result::InvalidArgument,
            "what the answer held was taken already",
        )
    })
}

/// Takes the launcher out of a successful `SCOPE_ANSWER_KIND_LAUNCHER` answer into `*out`, the
/// caller's to free (NULL: launch directly). Once per answer.
///
/// # Safety
/// `answer` is NULL or a live answer; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_answer_take_launcher(
    answer: *mut scope_answer,
    out: *mut *mut scope_launcher,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: forwarded from the caller.
        let launcher = unsafe {
            take_out(
                answer,
                scope_answer_kind::Launcher,
                |payload| match payload {
                    Payload::Launcher(launcher) => launcher.take(),
                    _ => None,
                },
            )
        }?;
        let launcher = launcher.map_or(ptr::null_mut(), Box::into_raw);
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { write_out(out, launcher) };
        Ok(())
    })
}

/// Takes the handle out of a successful `SCOPE_ANSWER_KIND_HANDLE` answer into `*out`, the
/// caller's to free. Once per answer.
///
/// # Safety
/// `answer` is NULL or a live answer; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_answer_take_handle(
    answer: *mut scope_answer,
    out: *mut *mut scope_handle,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: forwarded from the caller.
        let handle = unsafe {
            take_out(answer, scope_answer_kind::Handle, |payload| match payload {
                Payload::Handle(handle) => handle.take(),
                _ => None,
            })
        }?;
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { write_out(out, Box::into_raw(handle)) };
        Ok(())
    })
}

/// Takes the watch out of a successful `SCOPE_ANSWER_KIND_OOMD_WATCH` answer into `*out`, the
/// caller's to free (its warnings then stop). Once per answer.
///
/// # Safety
/// `answer` is NULL or a live answer; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_answer_take_oomd_watch(
    answer: *mut scope_answer,
    out: *mut *mut scope_oomd_watch,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: forwarded from the caller.
        let watch = unsafe {
            take_out(
                answer,
                scope_answer_kind::OomdWatch,
                |payload| match payload {
                    Payload::OomdWatch(watch, _) => watch.take(),
                    _ => None,
                },
            )
        }?;
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { write_out(out, Box::into_raw(watch)) };
        Ok(())
    })
}

/// Why a `SCOPE_ANSWER_KIND_OOMD_WATCH` answer with `SCOPE_RESULT_CANNOT_WARN` cannot warn
/// (`SCOPE_CANNOT_WARN_KIND_NONE` for any other answer).
///
/// # Safety
/// `answer` is NULL or a live answer.
#[no_mangle]
pub unsafe extern "C" fn scope_answer_cannot_warn_kind(
    answer: *const scope_answer,
) -> scope_cannot_warn_kind {
    // SAFETY: NULL or live per the caller.
    unsafe {
        read_or(
            answer,
            scope_cannot_warn_kind::None,
            |answer| match answer.payload {
                Payload::OomdWatch(_, kind) => kind,
                _ => scope_cannot_warn_kind::None,
            },
        )
    }
}

/// How the scope ended, of a successful `SCOPE_ANSWER_KIND_ENDING` answer, valid as long as the
/// answer; NULL otherwise.
///
/// # Safety
/// `answer` is NULL or a live answer.
#[no_mangle]
pub unsafe extern "C" fn scope_answer_ending(answer: *const scope_answer) -> *const scope_ending {
    // SAFETY: NULL or live per the caller.
    unsafe {
        read_or(answer, ptr::null(), |answer| match &answer.payload {
            Payload::Ending(ending) => ending as *const scope_ending,
            _ => ptr::null(),
        })
    }
}

/// The pids of a successful `SCOPE_ANSWER_KIND_PIDS` answer (those in the scope when the kill
/// began), valid as long as the answer, their number in `*len`; NULL (and 0) when there were none
/// or for any other answer.
///
/// # Safety
/// `answer` is NULL or a live answer; `len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn scope_answer_pids(
    answer: *const scope_answer,
    len: *mut usize,
) -> *const u32 {
    // SAFETY: NULL or live per the caller.
    let (pids, count) = unsafe {
        read_or(answer, (ptr::null(), 0), |answer| match &answer.payload {
            Payload::Pids(pids) if !pids.is_empty() => (pids.as_ptr(), pids.len()),
            _ => (ptr::null(), 0),
        })
    };
    if !len.is_null() {
        // SAFETY: non-NULL, writable per the caller.
        unsafe { write_out(len, count) };
    }
    pids
}

/// The warning of a `SCOPE_ANSWER_KIND_OOMD_WARNING` answer, its strings valid as long as the
/// answer; NULL otherwise.
///
/// # Safety
/// `answer` is NULL or a live answer.
#[no_mangle]
pub unsafe extern "C" fn scope_answer_oomd_warning(
    answer: *const scope_answer,
) -> *const scope_oomd_warning {
    // SAFETY: NULL or live per the caller.
    unsafe {
        read_or(answer, ptr::null(), |answer| match &answer.payload {
            Payload::OomdWarning(warning) => warning.crossing(),
            _ => ptr::null(),
        })
    }
}

/// The line of a `SCOPE_ANSWER_KIND_LOG` answer (NUL-terminated, valid as long as the answer),
/// its level in `*level`; NULL otherwise (`*level` then untouched).
///
/// # Safety
/// `answer` is NULL or a live answer; `level` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn scope_answer_log_line(
    answer: *const scope_answer,
    level: *mut scope_log_level,
) -> *const c_char {
    // SAFETY: NULL or live per the caller.
    let line = unsafe {
        read_or(answer, None, |answer| match &answer.payload {
            Payload::Log(at, line) => Some((*at, line.as_ptr())),
            _ => None,
        })
    };
    match line {
        Some((at, line)) => {
            if !level.is_null() {
                // SAFETY: non-NULL, writable per the caller.
                unsafe { write_out(level, at) };
            }
            line
        }
        None => ptr::null(),
    }
}

/// Sends the library's log lines to `queue` as `SCOPE_ANSWER_KIND_LOG` answers with `token`,
/// taken on the host's own thread: the library never calls the host (for a host such as Node,
/// whose cross-thread callbacks are bounded). NULL puts the default back (lines on stderr). When
/// it returns, a callback it replaced is not running and will never be called again. The queue is
/// held until the sink is replaced; lines beyond what the queue holds for its host are dropped
/// and counted. In a forked child, lines go to stderr until the child sets a sink of its own.
///
/// # Safety
/// `queue` is NULL or a live queue.
#[no_mangle]
pub unsafe extern "C" fn scope_set_log_queue(
    queue: *const scope_queue,
    token: u64,
) -> scope_result {
    crate::log::ensure_installed();
    result_of(|| {
        let taker: Option<LineTaker> = if queue.is_null() {
            None
        } else {
            // SAFETY: live per the caller.
            let queue = unsafe { queue_arg(queue) }?;
            Some(Arc::new(move |level, line: &str| {
                queue.push(scope_answer::log_line(token, level, line));
            }))
        };
        replace_sink(None, ptr::null_mut(), taker);
        Ok(())
    })
}

/// Frees an answer (NULL is accepted and ignored), with what was not taken out of it.
///
/// # Safety
/// `answer` is NULL or an answer from [`scope_queue_take`], not yet freed.
#[no_mangle]
pub unsafe extern "C" fn scope_answer_free(answer: *mut scope_answer) {
    // SAFETY: NULL or an answer not yet freed, per the caller.
    unsafe { free(answer) }
}

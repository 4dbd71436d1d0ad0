//! State of this process's own that a forked child starts afresh, as a new process would.
//!
//! `fork()` copies every lock as it was: one that a thread of the parent held at that moment stays
//! held in the child for good, since the thread that would unlock it was not copied; and what the
//! lock guarded may be half changed. A plain `static Mutex` is therefore a hang waiting for the
//! first host that forks while another of its threads is in a request. Each piece of process-wide
//! state lives in a [`PerProcess`] instead: an atomically swapped pointer (arc-swap, lock-free)
//! to the state and the pid it belongs to. The first use in a process whose pid differs makes new
//! state and puts it in place; the copy of the parent's is never waited on, dropped or used (its
//! resources are the parent's: a ticket a child dropped would unlock its parent's turn), only
//! offered once to make the child's from (what a child keeps of its parent's settings), or to close
//! this process's copies of its file descriptors, where that needs no waiting; the child's state
//! holds it, so that it is never dropped and stays reachable.

use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use arc_swap::ArcSwapOption;

/// A value of one process's own (see the module's documentation).
pub struct PerProcess<T: 'static> {
    current: ArcSwapOption<Mine<T>>,
}

/// The value of one process, whose it is, and the parent's it replaced, held (never dropped, and
/// still reachable for leak checkers) for as long as this one lives.
pub struct Mine<T> {
    pid: u32,
    value: T,
    _parents: Option<Arc<Mine<T>>>,
}

impl<T> Deref for Mine<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> PerProcess<T> {
    /// None yet: each process makes its own on first use.
    pub const fn new() -> Self {
        PerProcess {
            current: ArcSwapOption::const_empty(),
        }
    }
}

impl<T> Default for PerProcess<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Default> PerProcess<T> {
    /// This process's value, made on its first use here.
    pub fn get(&self) -> Arc<Mine<T>> {
        self.get_inheriting(|_| T::default())
    }

    /// [`Self::get`]; where the value in place is a parent's, copied by `fork()`, this process's
    /// is made by `inherit` from it (what a child keeps of its parent's settings; its copies of
    /// the parent's file descriptors to close), and the parent's is left alone for good.
    pub fn get_inheriting(&self, inherit: impl FnOnce(&T) -> T) -> Arc<Mine<T>> {
        let pid = std::process::id();
        let mut inherit = Some(inherit);
        loop {
            let seen = self.current.load_full();
            if let Some(mine) = seen.as_ref().filter(|mine| mine.pid == pid) {
                return Arc::clone(mine);
            }
            let value = match (seen.as_deref(), inherit.take()) {
                (Some(parents), Some(inherit)) => inherit(&parents.value),
                _ => T::default(),
            };
            let fresh = Arc::new(Mine {
                pid,
                value,
                _parents: seen.clone(),
            });
            let before = self
                .current
                .compare_and_swap(&seen, Some(Arc::clone(&fresh)));
            if same(&before, &seen) {
                return fresh;
            }
            // Another thread of this process put its own in place first: that one is used, and
            // this one, never shared, is dropped.
        }
    }
}

fn same<T>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// Locks `mutex`, taking over from a holder that panicked (the state it guards stays consistent:
/// no holder leaves it half changed on a panic).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Locks `mutex` only if no thread holds it: for a parent's lock copied by `fork()`, which a thread
/// that held it then (and is gone) holds for good.
pub fn lock_if_free<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Counter(AtomicUsize);

    #[test]
    fn one_value_per_process_shared_by_its_threads() {
        static SHARED: PerProcess<Counter> = PerProcess::new();
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(|| {
                    SHARED.get().0.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(SHARED.get().0.load(Ordering::SeqCst), 8);
        assert!(Arc::ptr_eq(&SHARED.get(), &SHARED.get()));
    }
}

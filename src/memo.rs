//! A bounded memory of names: what is known of each of the last few thousand names met (slices,
//! config paths), keyed by a fingerprint, the oldest forgotten first, shared process-wide.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard};

use crate::per_process::{lock, PerProcess};

/// How many distinct names each once-per-name memory holds. A host that meets more names than
/// this (a daemon fed ever new config paths) forgets the oldest first, so memory stays bounded
/// (about 40 bytes a name) and a name forgotten may be warned about once more, never not at all.
pub(crate) const NAMES_REMEMBERED: usize = 4096;

/// A name's fingerprint: 128 bits of it, so that a long name (a config path) costs no more to
/// remember than a short one.
fn fingerprint(name: &str) -> u128 {
    let half = |seed: u8| {
        let mut hasher = DefaultHasher::new();
        seed.hash(&mut hasher);
        name.hash(&mut hasher);
        hasher.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

/// What is known of each of the last [`NAMES_REMEMBERED`] names, oldest forgotten first.
pub(crate) struct Remembered<V> {
    values: HashMap<u128, V>,
    order: VecDeque<u128>,
}

impl<V> Remembered<V> {
    pub(crate) fn new() -> Self {
        Remembered {
            values: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut V> {
        self.values.get_mut(&fingerprint(name))
    }

    /// Remembers `value` for `name`, forgetting the oldest name when full.
    pub(crate) fn insert(&mut self, name: &str, value: V) {
        let key = fingerprint(name);
        if self.values.insert(key, value).is_none() {
            self.order.push_back(key);
            if self.order.len() > NAMES_REMEMBERED {
                if let Some(oldest) = self.order.pop_front() {
                    self.values.remove(&oldest);
                }
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.values.values_mut()
    }
}

impl<V> Default for Remembered<V> {
    fn default() -> Self {
        Remembered::new()
    }
}

/// A process-wide [`Remembered`] (a forked child's starts afresh) behind a lock that a panicking
/// holder cannot poison for good.
pub(crate) struct Shared<V: 'static>(PerProcess<Mutex<Remembered<V>>>);

impl<V> Shared<V> {
    pub(crate) const fn new() -> Self {
        Shared(PerProcess::new())
    }

    /// Runs `f` on this process's memory, locked.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Remembered<V>) -> R) -> R {
        let remembered = self.0.get();
        let mut guard: MutexGuard<'_, Remembered<V>> = lock(&remembered);
        f(&mut guard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_bounded_and_forgets_the_oldest_name_first() {
        let mut remembered = Remembered::new();
        for i in 0..NAMES_REMEMBERED * 3 {
            remembered.insert(&format!("/home/u/config-{i}"), i);
        }
        assert_eq!(remembered.len(), NAMES_REMEMBERED);
        assert!(remembered.get_mut("/home/u/config-0").is_none());
        let newest = format!("/home/u/config-{}", NAMES_REMEMBERED * 3 - 1);
        assert_eq!(
            remembered.get_mut(&newest),
            Some(&mut (NAMES_REMEMBERED * 3 - 1))
        );
        remembered.insert(&newest, 7);
        assert_eq!(
            remembered.len(),
            NAMES_REMEMBERED,
            "a name remembered again is not added twice"
        );
    }
}

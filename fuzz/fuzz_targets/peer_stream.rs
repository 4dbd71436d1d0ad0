//! Arbitrary bytes from a peer that speaks where the manager should (auth answers, messages,
//! signals, any of them malformed), split at any byte, against the connection as the launcher
//! program converses: it must end within its bound, and hold no more memory than the conversation
//! needs, whatever the peer sends. The first byte picks how many bytes one read takes, and
//! whether the call goes out with the authentication (pipelined, as the launcher program sends
//! it) or after its answer.
#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;

/// The system allocator, counting the bytes live and the most ever live.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout is passed on as it came.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const BOUND: Duration = Duration::from_millis(100);
/// The most a conversation may add: the largest message read whole (64 KiB), one read (16 KiB),
/// its values (at most 16 times the message), and the kept signals, with room to spare.
const MEMORY_LIMIT: usize = 4 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let read_size = [1, 2, 3, 7, 16, 61, 512, 4096, 16384][usize::from(first) % 9];
    let pipelined = first >= 128;
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let (took, outcome) =
        synaps_scope::__fuzz::converse_with_peer(stream, read_size, BOUND, pipelined);
    let added = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    assert!(
        took < BOUND + Duration::from_millis(400),
        "the conversation took {took:?} against a bound of {BOUND:?}: {outcome}"
    );
    // The peer's bytes are copied once for the writer thread; beyond that, the conversation's own.
    assert!(
        added < MEMORY_LIMIT + stream.len(),
        "the conversation held {added} bytes: {outcome}"
    );
});

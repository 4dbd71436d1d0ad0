//! Thousands of forks while other threads of the parent log and use callsites for the first time,
//! beside two threads that keep both cores busy: no child waits on anything a parent's thread
//! held at the fork. The process is set up as the C and Python libraries set theirs up: the
//! library's sink installed once as the global subscriber (`diag::install_global_once`), so that
//! no child makes a `Dispatch` and a callsite's first use, in parent or child, takes no lock of
//! tracing-core's (with one dispatcher its registration reads none). Each child logs at callsites
//! of its own and of its parent's, runs the install again (it must find it done) and makes a
//! request (no bus named: direct, with the once-per-process warning), each within its bound. Its
//! own test binary: the global subscriber it sets is the process's for good.

#[path = "common/forks.rs"]
mod forks;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use forks::{fork_running, status_within};
use synaps_scope::diag::{install_global_once, CallbackSubscriber, TARGET};
use synaps_scope::{decide, Decision, LauncherOptions, ScopeKind};
use tracing::Level;

/// How many children are forked.
const FORKS: usize = 2000;

/// Events the sink took, in this process.
static EVENTS: AtomicUsize = AtomicUsize::new(0);

/// A distinct callsite for each number in the list: its first event registers it.
macro_rules! callsites {
    ($n:expr; $($site:literal)*) => {
        match $n {
            $($site => tracing::info!(target: TARGET, site = $site, "an event of its own callsite"),)*
            _ => {}
        }
    };
}

/// An event at the parent's callsite `n` (0-255), each first used at some point of the run.
fn parents_event(n: u32) {
    callsites!(n;
        0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
        32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
        62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91
        92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115
        116 117 118 119 120 121 122 123 124 125 126 127 128 129 130 131 132 133 134 135 136 137
        138 139 140 141 142 143 144 145 146 147 148 149 150 151 152 153 154 155 156 157 158 159
        160 161 162 163 164 165 166 167 168 169 170 171 172 173 174 175 176 177 178 179 180 181
        182 183 184 185 186 187 188 189 190 191 192 193 194 195 196 197 198 199 200 201 202 203
        204 205 206 207 208 209 210 211 212 213 214 215 216 217 218 219 220 221 222 223 224 225
        226 227 228 229 230 231 232 233 234 235 236 237 238 239 240 241 242 243 244 245 246 247
        248 249 250 251 252 253 254 255
    );
}

/// An event at the child's callsite `n` (0-15), never used in the parent: its first use registers
/// it in the child.
fn childs_event(n: u32) {
    callsites!(n; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
}

/// What a child does: log, install, ask; 0 when all of it took under a second.
fn child(n: usize) -> i32 {
    let started = Instant::now();
    childs_event(u32::try_from(n % 16).unwrap_or(0));
    parents_event(u32::try_from(n % 256).unwrap_or(0));
    install_global_once(
        || {},
        || -> CallbackSubscriber<fn(&Level, &str, &str)> {
            panic!("a forked child inherits the install")
        },
    );
    let env = [("PATH".into(), "/usr/bin:/bin".into())];
    let direct = matches!(
        decide(&env, ScopeKind::Tool, &LauncherOptions::default()),
        Ok(Decision::Direct(_))
    );
    if !direct {
        return 2;
    }
    if started.elapsed() > Duration::from_secs(1) {
        return 1;
    }
    0
}

#[test]
fn thousands_of_children_forked_amid_log_calls_and_first_uses_of_callsites_never_wait() {
    install_global_once(
        || {},
        || {
            CallbackSubscriber::new(Level::INFO, |_: &Level, _: &str, _: &str| {
                EVENTS.fetch_add(1, Ordering::Relaxed);
            })
        },
    );
    // A second dispatcher, as a host that also uses `with_default` has: every first use of a
    // callsite, and every rebuild of the callsites' interest, then reads tracing-core's lock of
    // dispatchers, which a child's new `Dispatch` would wait to write for ever if a parent's
    // thread was reading it at the fork.
    let _second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let stop = Arc::new(AtomicBool::new(false));
    // Both cores kept busy, as a loaded machine's are.
    let hogs: Vec<_> = (0..2)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut spins = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    spins = spins.wrapping_add(1);
                    std::hint::black_box(spins);
                }
            })
        })
        .collect();
    // Three threads log all the time, each reaching a new callsite of the parent's every few
    // milliseconds, so that first uses happen throughout the forks.
    let loggers: Vec<_> = (0..3u32)
        .map(|offset| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let started = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    let reached = u32::try_from(started.elapsed().as_millis() / 40).unwrap_or(255);
                    for site in 0..=reached.min(255) {
                        if site % 3 == offset {
                            parents_event(site);
                        }
                    }
                    tracing::debug!(target: TARGET, "below the sink's level");
                }
            })
        })
        .collect();
    // And one rebuilds the callsites' interest all the time: the read of that lock, held for as
    // long as every callsite takes to be asked again, rather than for one registration.
    let rebuilder = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                tracing::callsite::rebuild_interest_cache();
            }
        })
    };
    let started = Instant::now();
    let (mut hung, mut late, mut not_direct) = (0, 0, 0);
    for n in 0..FORKS {
        match status_within(fork_running(|| child(n)), Duration::from_secs(5)) {
            Some(0) => {}
            Some(1) => late += 1,
            Some(2) => not_direct += 1,
            _ => {
                // One is enough to fail; the rest would each wait out 5 s.
                hung += 1;
                break;
            }
        }
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for thread in hogs.into_iter().chain(loggers).chain([rebuilder]) {
        thread.join().unwrap();
    }
    eprintln!("{FORKS} forks in {took:?}");
    assert_eq!(
        (hung, late, not_direct),
        (0, 0, 0),
        "of {FORKS} children: hung (the first ends the run), past a second, not direct"
    );
    assert!(
        EVENTS.load(Ordering::Relaxed) > 0,
        "the parent's events reached the sink"
    );
}

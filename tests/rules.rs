//! The first rules, checked by a machine: random schedules of launches (every path, with and
//! without limits, kinds, slices and `required`, bursts of up to 64) and of the system's events (a
//! re-exec, a reload and a restart of the manager, its session bus stopped and started, relays in
//! front of both sockets, a unit of a colliding name, a handle's kill, signals to a waiter, a fork
//! of the host, cgroups made below a scope), against a real user manager of the rig's version.
//! After every step every rule is checked from outside (`rules/checks.rs`).
//!
//! A schedule comes from a seed that a failure prints, with the steps, the rule broken and the
//! shortest schedule found that still breaks it; `tests/rules/regressions.txt` keeps such
//! schedules, replayed first on every run.
//!
//!   SYNAPS_RULES_SECONDS   how long to draw schedules (default 20 s on 247 and 262, 6 s else; the
//!                          regressions and the schedule under way come on top)
//!   SYNAPS_RULES_SEED      the first seed (default: from the clock, printed)
//!   SYNAPS_RULES_STEPS     steps a schedule (default 24)
//!   SYNAPS_RULES_TREE      another tree's programs under test, built there (scripts/soak.sh)
//!   SYNAPS_RULES_SHRINK    how many replays shrinking may take (default 40)
//!   SYNAPS_RULES_KEEP_GOING=1  on past a break, one story told of each kind of break
//!   SYNAPS_RULES_VERBOSE=1 every schedule's steps and launches told, held or not
//!   SYNAPS_RULES_REPLAY    a file of schedules (as the regression file has them) replayed in place
//!                          of the regressions (with SYNAPS_RULES_SECONDS=0, one drawn after)

#[path = "rules/apply.rs"]
mod apply;
#[path = "rules/broker.rs"]
mod broker;
#[path = "rules/checks.rs"]
mod checks;
mod common;
#[path = "common/forks.rs"]
mod forks;
#[path = "rules/host.rs"]
mod host;
#[path = "rules/launch.rs"]
mod launch;
#[path = "rules/oomd.rs"]
mod oomd;
#[path = "rules/schedule.rs"]
mod schedule;
#[path = "rules/world.rs"]
mod world;

use std::time::{Duration, Instant};

use host::Programs;
use schedule::Step;
use world::World;

fn number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v:?} is no number"))
        })
}

/// A schedule's first broken step: its number and the rules it broke.
struct Broken {
    at: usize,
    rules: Vec<String>,
    launches: String,
}

/// Runs `steps` in a world of its own, checking every rule after each.
fn run(programs: &'static Programs, steps: &[Step]) -> Option<Broken> {
    let mut world = World::new(programs);
    let mut broken = None;
    for (at, step) in steps.iter().enumerate() {
        let mut rules = world.apply(at, step).err().into_iter().collect::<Vec<_>>();
        rules.extend(checks::check(&mut world));
        if !rules.is_empty() {
            broken = Some(Broken {
                at,
                rules,
                launches: String::new(),
            });
            break;
        }
    }
    if broken.is_none() {
        // What was to end (on its own, or as the schedule ended it) ends, and is judged.
        let to_end =
            |r: &world::Rec| r.launch.tool != schedule::Tool::Long || r.ended_by_schedule();
        let ended = host::within(Duration::from_secs(10), || {
            world.reap();
            world.recs.iter().all(|r| r.finished() || !to_end(r))
        });
        if !ended {
            let left: Vec<u64> = world
                .recs
                .iter()
                .filter(|r| !r.finished() && to_end(r))
                .map(|r| r.id)
                .collect();
            broken = Some(Broken {
                at: steps.len(),
                rules: vec![format!(
                    "rule 2: launches {left:?} had not ended 10 s after the schedule's end"
                )],
                launches: String::new(),
            });
        }
        let rules = checks::check(&mut world);
        if broken.is_none() && !rules.is_empty() {
            broken = Some(Broken {
                at: steps.len(),
                rules,
                launches: String::new(),
            });
        }
    }
    if let Some(b) = &mut broken {
        b.launches = checks::stderr_of_launches(&world);
    } else if number("SYNAPS_RULES_VERBOSE", 0) == 1 {
        eprintln!(
            "rules: a schedule held:\n{}{}",
            written(steps),
            checks::stderr_of_launches(&world)
        );
    }
    world.end();
    broken
}

fn written(steps: &[Step]) -> String {
    steps.iter().map(|s| format!("  {s}\n")).collect()
}

/// The failure's whole story: the seed, the steps, the rule, the shortest schedule that breaks it.
fn story(programs: &'static Programs, origin: &str, steps: &[Step], broken: Broken) -> String {
    let tries = number("SYNAPS_RULES_SHRINK", 40) as usize;
    let upto = steps[..=broken.at.min(steps.len() - 1)].to_vec();
    let shrunk = schedule::shrink(upto, |s| run(programs, s).is_some(), tries);
    let shrunk_broken = run(programs, &shrunk);
    format!(
        "{origin}: step {} broke the first rules:\n  {}\nthe schedule:\n{}the launches:\n{}\
         the shortest schedule found that breaks them ({} steps; add it to tests/rules/regressions.txt once fixed):\n{}\
         which broke:\n  {}",
        broken.at,
        broken.rules.join("\n  "),
        written(steps),
        broken.launches,
        shrunk.len(),
        written(&shrunk),
        shrunk_broken.map_or("nothing on its replay (a race: replay the seed)".into(), |b| b
            .rules
            .join("\n  "))
    )
}

fn fail(programs: &'static Programs, origin: &str, steps: &[Step], broken: Broken) -> ! {
    panic!("{}", story(programs, origin, steps, broken))
}

/// What kind of break a rule's line says, without its numbers and paths: one story each is told
/// when going on past breaks (`SYNAPS_RULES_KEEP_GOING=1`).
fn kind_of(rule: &str) -> String {
    let words: Vec<String> = rule
        .split_whitespace()
        .take(7)
        .map(|w| match w.contains("synaps-") || w.contains('/') {
            true => "<name>".to_owned(),
            false => w
                .chars()
                .map(|c| if c.is_ascii_digit() { '#' } else { c })
                .collect(),
        })
        .collect();
    words.join(" ")
}

#[test]
fn the_first_rules_hold_over_random_schedules_of_launches_and_events() {
    let Some(rig) = common::rig() else { return };
    let programs: &'static Programs = Box::leak(Box::new(Programs::find()));
    let started = Instant::now();

    // SYNAPS_RULES_REPLAY=FILE: the schedules of FILE (in the regression file's form) in place of
    // the regressions (an empty file: none).
    let replay = std::env::var_os("SYNAPS_RULES_REPLAY").filter(|f| !f.is_empty());
    let text = match &replay {
        Some(file) => std::fs::read_to_string(file).expect("SYNAPS_RULES_REPLAY reads"),
        None => include_str!("rules/regressions.txt").to_owned(),
    };
    let regressions = schedule::parse_regressions(&text).expect("the schedules read");
    // SYNAPS_RULES_KEEP_GOING=1: on past a break, telling one story of each kind (what an older
    // release breaks, all of it: the regressions first).
    let keep_going = number("SYNAPS_RULES_KEEP_GOING", 0) == 1;
    let mut kinds: Vec<String> = Vec::new();
    let told = |origin: &str, steps: &[Step], broken: Broken, kinds: &mut Vec<String>| {
        if !keep_going {
            fail(programs, origin, steps, broken);
        }
        let kind = kind_of(&broken.rules[0]);
        if !kinds.contains(&kind) {
            eprintln!(
                "rules: {:.0?} in, a break of a new kind:\n{}\n",
                started.elapsed(),
                story(programs, origin, steps, broken)
            );
            kinds.push(kind);
        }
    };
    for (about, steps) in &regressions {
        if let Some(broken) = run(programs, steps) {
            let origin = format!("the regression \"{}\"", about.trim());
            told(&origin, steps, broken, &mut kinds);
        }
    }

    // The oldest and the newest take the most of the suite's time (docs/testing.md).
    let share = if rig.version == 247 || rig.version == 262 {
        20
    } else {
        6
    };
    let budget = Duration::from_secs(number("SYNAPS_RULES_SECONDS", share));
    let length = number("SYNAPS_RULES_STEPS", 24) as usize;
    let first_seed = number(
        "SYNAPS_RULES_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            % 1_000_000_000,
    );
    eprintln!(
        "rules: systemd {}, first seed {first_seed} (SYNAPS_RULES_SEED replays it)",
        rig.version
    );
    let (mut schedules, mut steps_run) = (0u64, 0usize);
    while schedules == 0 || started.elapsed() < budget {
        let seed = first_seed + schedules;
        let steps = schedule::draw(seed, length);
        if let Some(broken) = run(programs, &steps) {
            let origin =
                format!("seed {seed} (SYNAPS_RULES_SEED={seed} SYNAPS_RULES_STEPS={length})");
            told(&origin, &steps, broken, &mut kinds);
        }
        schedules += 1;
        steps_run += steps.len();
    }
    assert!(
        kinds.is_empty(),
        "rules: breaks of {} kind(s), told above: {kinds:#?}",
        kinds.len()
    );
    let acted = host::acted_so_far();
    eprintln!("rules: what acted: {acted:?}");
    assert!(
        acted.get("launches scoped").is_some_and(|&n| n > 0),
        "no launch of the run was scoped: the rules held of nothing ({acted:?})"
    );
    eprintln!(
        "rules: {} regression schedule(s) and {schedules} drawn ({steps_run} steps, seeds {first_seed}..={}) held every rule in {:.0?}",
        regressions.len(),
        first_seed + schedules - 1,
        started.elapsed()
    );
}

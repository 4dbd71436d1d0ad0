//! Schedules: the operations and events a run applies in order, drawn from a seed, written one a
//! line (the form a failure prints and `tests/rules/regressions.txt` keeps), and shrunk.

use std::fmt;
use std::str::FromStr;

/// A seeded generator (SplitMix64): the same seed draws the same schedule on every machine.
pub struct Draw(u64);

impl Draw {
    pub fn new(seed: u64) -> Draw {
        Draw(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True one time in `n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
}

/// Names every variant of a unit-like enum once, for drawing, writing and reading it.
macro_rules! words {
    ($name:ident { $($variant:ident = $word:literal),+ $(,)? }) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name { $($variant),+ }
        #[allow(dead_code)] // Not every enum is drawn from all its words.
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn word(self) -> &'static str {
                match self { $($name::$variant => $word),+ }
            }
        }
        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($word => Ok($name::$variant),)+
                    _ => Err(format!("not a {}: {s:?}", stringify!($name))),
                }
            }
        }
    };
}

words!(Wrapper { Exec = "exec", SystemdRun = "systemd-run" });
words!(How {
    Run = "run",
    Wait = "wait",
    WrapOnce = "wrap",
    WrapTwice = "wrap-twice",
    WrapTaken = "wrap-taken",
    CHost = "c-host",
});
words!(Route {
    Private = "private",
    Bus = "bus",
    PrivateRelay = "private-relay",
    PrivateFdRelay = "private-fd-relay",
    BusRelay = "bus-relay",
});
words!(Tool {
    Exit0 = "exit0",
    Exit7 = "exit7",
    Long = "long",
    Brief = "brief",
    Leaves = "leaves",
});
words!(Limit { None = "-", Memory = "MemoryMax=256M", Tasks = "TasksMax=64", Cpu = "CPUWeight=50" });
words!(Kind { None = "-", Tool = "tool", Daemon = "daemon" });
words!(Sig { Term = "TERM", Int = "INT", Hup = "HUP", Usr1 = "USR1" });

/// One launch and everything it is launched with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    pub wrapper: Wrapper,
    pub how: How,
    pub route: Route,
    /// Launched from a new pid namespace (`unshare --pid --fork`).
    pub pidns: bool,
    /// `SYNAPS_PROCESS_SCOPES=required` (else `on`).
    pub required: bool,
    /// A config file naming a slice of its own for tools and daemons.
    pub slice: bool,
    pub limit: Limit,
    pub kind: Kind,
    pub tool: Tool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Launch(Launch),
    /// Launches of one kind, all at once.
    Burst(u8, Launch),
    Reexec,
    Reload,
    /// The user manager killed and started again, and its session bus with it.
    Restart,
    BusStop,
    BusStart,
    /// The session bus stopped and started again as dbus-broker (`true`) or dbus-daemon.
    BusSwitch(bool),
    /// A handle's kill of the Nth running scoped launch (modulo how many there are).
    Kill(u8),
    /// The stand-in oomd's kill of the Nth running scoped launch's scope, or (`true`) of a cgroup
    /// below it that its command is moved to first.
    Oomd(u8, bool),
    /// A signal to the Nth running waiter.
    Signal(u8, Sig),
    /// The host forks amid requests of its own; each child asks too and exits.
    Fork,
    /// A chain of cgroups made below the Nth running scoped launch's scope, the tool moved to its
    /// leaf.
    Nest(u8, u16),
}

impl Launch {
    fn draw(d: &mut Draw) -> Launch {
        let how = d.pick(How::ALL);
        // A new pid namespace goes with a launch whose own process is the command; a waiter or a C
        // host there would stand between the schedule's signals and the launch.
        let pidns = matches!(how, How::Run | How::WrapOnce) && d.one_in(4);
        Launch {
            wrapper: if d.one_in(3) {
                Wrapper::SystemdRun
            } else {
                Wrapper::Exec
            },
            how,
            route: d.pick(Route::ALL),
            pidns,
            required: d.one_in(3),
            slice: d.one_in(4),
            limit: d.pick(Limit::ALL),
            kind: d.pick(Kind::ALL),
            tool: d.pick(Tool::ALL),
        }
    }
}

impl Step {
    fn draw(d: &mut Draw) -> Step {
        match d.below(100) {
            0..=44 => Step::Launch(Launch::draw(d)),
            45..=51 => {
                let n = if d.one_in(5) {
                    64
                } else {
                    2 + d.below(15) as u8
                };
                let mut launch = Launch::draw(d);
                launch.how = d.pick(&[How::Run, How::Wait, How::WrapOnce]);
                launch.pidns &= launch.how != How::Wait;
                Step::Burst(n, launch)
            }
            52..=55 => Step::Reexec,
            56..=59 => Step::Reload,
            60..=62 => Step::Restart,
            63..=65 => Step::BusStop,
            66..=68 => Step::BusStart,
            69..=71 => Step::BusSwitch(d.one_in(2)),
            72..=76 => Step::Kill(d.below(8) as u8),
            77..=79 => Step::Oomd(d.below(8) as u8, d.one_in(2)),
            80..=87 => Step::Signal(d.below(8) as u8, d.pick(Sig::ALL)),
            88..=92 => Step::Fork,
            _ => Step::Nest(d.below(8) as u8, 1 + d.below(60) as u16),
        }
    }
}

/// A schedule of `steps` steps drawn from `seed`.
pub fn draw(seed: u64, steps: usize) -> Vec<Step> {
    let mut d = Draw::new(seed);
    (0..steps).map(|_| Step::draw(&mut d)).collect()
}

impl fmt::Display for Launch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} pidns={} required={} slice={} limit={} kind={} tool={}",
            self.wrapper.word(),
            self.how.word(),
            self.route.word(),
            u8::from(self.pidns),
            u8::from(self.required),
            u8::from(self.slice),
            self.limit.word(),
            self.kind.word(),
            self.tool.word()
        )
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Launch(l) => write!(f, "launch {l}"),
            Step::Burst(n, l) => write!(f, "burst {n} {l}"),
            Step::Reexec => f.write_str("reexec"),
            Step::Reload => f.write_str("reload"),
            Step::Restart => f.write_str("restart"),
            Step::BusStop => f.write_str("bus-stop"),
            Step::BusStart => f.write_str("bus-start"),
            Step::BusSwitch(true) => f.write_str("bus-broker"),
            Step::BusSwitch(false) => f.write_str("bus-daemon"),
            Step::Kill(n) => write!(f, "kill {n}"),
            Step::Oomd(n, below) => {
                write!(f, "oomd {n} {}", if *below { "below" } else { "scope" })
            }
            Step::Signal(n, s) => write!(f, "signal {n} {}", s.word()),
            Step::Fork => f.write_str("fork"),
            Step::Nest(n, depth) => write!(f, "nest {n} {depth}"),
        }
    }
}

fn flag(word: Option<&str>, key: &str) -> Result<String, String> {
    let word = word.ok_or_else(|| format!("{key}= missing"))?;
    word.strip_prefix(key)
        .and_then(|w| w.strip_prefix('='))
        .map(str::to_owned)
        .ok_or_else(|| format!("expected {key}=…, found {word:?}"))
}

fn parse_launch<'a>(mut w: impl Iterator<Item = &'a str>) -> Result<Launch, String> {
    let mut next = |what: &str| w.next().ok_or_else(|| format!("{what} missing"));
    let wrapper = next("wrapper")?.parse()?;
    let how = next("how")?.parse()?;
    let route = next("route")?.parse()?;
    let bit = |s: String| Ok::<bool, String>(s == "1");
    Ok(Launch {
        wrapper,
        how,
        route,
        pidns: bit(flag(next("pidns").ok(), "pidns")?)?,
        required: bit(flag(next("required").ok(), "required")?)?,
        slice: bit(flag(next("slice").ok(), "slice")?)?,
        limit: flag(next("limit").ok(), "limit")?.parse()?,
        kind: flag(next("kind").ok(), "kind")?.parse()?,
        tool: flag(next("tool").ok(), "tool")?.parse()?,
    })
}

impl FromStr for Step {
    type Err = String;
    fn from_str(line: &str) -> Result<Step, String> {
        let mut w = line.split_whitespace();
        let number = |s: Option<&str>| -> Result<u64, String> {
            s.ok_or("a number missing")?
                .parse()
                .map_err(|e| format!("{line:?}: {e}"))
        };
        Ok(match w.next().ok_or("an empty step")? {
            "launch" => Step::Launch(parse_launch(w)?),
            "burst" => {
                let n = number(w.next())? as u8;
                Step::Burst(n, parse_launch(w)?)
            }
            "reexec" => Step::Reexec,
            "reload" => Step::Reload,
            "restart" => Step::Restart,
            "bus-stop" => Step::BusStop,
            "bus-start" => Step::BusStart,
            "bus-broker" => Step::BusSwitch(true),
            "bus-daemon" => Step::BusSwitch(false),
            "kill" => Step::Kill(number(w.next())? as u8),
            "oomd" => {
                let n = number(w.next())? as u8;
                Step::Oomd(n, w.next() == Some("below"))
            }
            "signal" => {
                let n = number(w.next())? as u8;
                Step::Signal(n, w.next().ok_or("a signal missing")?.parse()?)
            }
            "fork" => Step::Fork,
            "nest" => {
                let n = number(w.next())? as u8;
                Step::Nest(n, number(w.next())? as u16)
            }
            other => return Err(format!("not a step: {other:?}")),
        })
    }
}

/// The schedules of a regression file: blocks of steps parted by blank lines, `#` lines
/// commenting them.
pub fn parse_regressions(text: &str) -> Result<Vec<(String, Vec<Step>)>, String> {
    let mut blocks = Vec::new();
    let (mut about, mut steps) = (String::new(), Vec::new());
    for line in text.lines().chain(std::iter::once("")) {
        let line = line.trim();
        if line.is_empty() {
            if !steps.is_empty() {
                blocks.push((std::mem::take(&mut about), std::mem::take(&mut steps)));
            }
            about.clear();
        } else if let Some(comment) = line.strip_prefix('#') {
            about.push_str(comment.trim());
            about.push(' ');
        } else {
            steps.push(line.parse()?);
        }
    }
    Ok(blocks)
}

/// The shortest schedule found, within `tries` replays, that still fails as `fails` says:
/// halves, then quarters and on down to single steps are taken out while it fails without them.
pub fn shrink(
    mut steps: Vec<Step>,
    mut fails: impl FnMut(&[Step]) -> bool,
    tries: usize,
) -> Vec<Step> {
    let mut left = tries;
    let mut chunk = ((steps.len() + 1) / 2).max(1);
    loop {
        let mut start = 0;
        while start < steps.len() && left > 0 {
            let mut without = steps.clone();
            without.drain(start..(start + chunk).min(steps.len()));
            left -= 1;
            if !without.is_empty() && fails(&without) {
                steps = without;
            } else {
                start += chunk;
            }
        }
        if chunk == 1 || left == 0 {
            return steps;
        }
        chunk = (chunk + 1) / 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drawn_schedule_reads_back_as_written() {
        for seed in 0..200 {
            for step in draw(seed, 30) {
                assert_eq!(step.to_string().parse::<Step>(), Ok(step));
            }
        }
    }
}

//! A launch's own resource limits (A6): the resource-control properties a caller may set on its
//! scope (`MemoryMax=2G`, `CPUQuota=200%`, …), in systemd's own syntax, checked once at intake and
//! then carried as systemd would carry them: typed values in `StartTransientUnit` (the launcher
//! program) or `-p NAME=VALUE` (systemd-run). Whether the user's manager can enforce each one is
//! told from the controllers its cgroup was given (`cgroup.controllers`), never assumed.

use std::fmt;
use std::str::FromStr;

use crate::input::intake::BadInput;
use crate::input::systemd_syntax::{self as syntax, Unread};

/// A resource-control property a launch may set on its scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Property {
    /// `MemoryMax`: the hard memory limit; past it the kernel's OOM killer acts in the scope.
    MemoryMax,
    /// `MemoryHigh`: the throttling limit; past it the scope's processes are slowed and reclaimed.
    MemoryHigh,
    /// `MemorySwapMax`: how much swap the scope may use.
    MemorySwapMax,
    /// `CPUWeight`: the scope's share of CPU under contention (1-10000, or `idle`).
    CpuWeight,
    /// `CPUQuota`: the most CPU time the scope may have, as a percentage of one CPU.
    CpuQuota,
    /// `TasksMax`: the most processes and threads the scope may hold.
    TasksMax,
    /// `IOWeight`: the scope's share of block I/O under contention (1-10000).
    IoWeight,
}

impl Property {
    /// Every property a launch may set, in the order systemd's documentation lists them.
    pub const ALL: [Property; 7] = [
        Property::MemoryHigh,
        Property::MemoryMax,
        Property::MemorySwapMax,
        Property::CpuWeight,
        Property::CpuQuota,
        Property::TasksMax,
        Property::IoWeight,
    ];

    /// The property's name, as systemd spells it.
    pub fn name(self) -> &'static str {
        match self {
            Property::MemoryMax => "MemoryMax",
            Property::MemoryHigh => "MemoryHigh",
            Property::MemorySwapMax => "MemorySwapMax",
            Property::CpuWeight => "CPUWeight",
            Property::CpuQuota => "CPUQuota",
            Property::TasksMax => "TasksMax",
            Property::IoWeight => "IOWeight",
        }
    }

    /// The cgroup controller that enforces it: without it in the manager's cgroup, the manager
    /// records the property and the kernel never applies it.
    pub fn controller(self) -> &'static str {
        match self {
            Property::MemoryMax | Property::MemoryHigh | Property::MemorySwapMax => "memory",
            Property::CpuWeight | Property::CpuQuota => "cpu",
            Property::TasksMax => "pids",
            Property::IoWeight => "io",
        }
    }

    fn names() -> String {
        Property::ALL.map(Property::name).join(", ")
    }
}

impl fmt::Display for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Property {
    type Err = BadInput;

    fn from_str(name: &str) -> Result<Self, BadInput> {
        Property::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| BadInput::Property {
                name: name.to_owned(),
                problem: format!(
                    "is not a property a launch may set (it may set {})",
                    Property::names()
                ),
            })
    }
}

/// A property's value, as the manager takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    /// A number of bytes, tasks, a weight, or microseconds of CPU per second (`t`).
    Number(u64),
    /// `infinity`: no limit (`t`, all ones).
    Infinity,
    /// A share of the machine's memory or of the kernel's task limit, in hundredths of a percent:
    /// sent as `<Name>Scale` (`u`), so that the manager works it out for its machine.
    Permyriad(u32),
}

/// One property and its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    property: Property,
    /// The value as the caller wrote it: what systemd-run is given, and what is shown.
    text: String,
    value: Value,
    /// The oldest systemd-run that reads the text as this library does (None: every one).
    oldest_systemd_run: Option<u32>,
}

impl Limit {
    /// Checks `value` for `property`, read as systemd 248 and later read it (`systemd-run -p`
    /// and the manager alike: the `systemd_syntax` module); refused with the reason where either
    /// would refuse it.
    pub fn new(property: Property, value: &str) -> Result<Limit, BadInput> {
        let bad = |problem: String| BadInput::Property {
            name: format!("{property}={value}"),
            problem,
        };
        // systemd skips leading tabs and newlines, but a value is said in warnings and log lines,
        // where one would start a line of its own: refused, which loses no launch.
        if value.chars().any(char::is_control) {
            return Err(bad("contains a control character".to_owned()));
        }
        let parsed = match property {
            Property::MemoryMax | Property::MemoryHigh => {
                scaled_or(value, 1, 10_000, syntax::size, "a size").map_err(bad)?
            }
            Property::MemorySwapMax => {
                scaled_or(value, 0, 10_000, syntax::size, "a size").map_err(bad)?
            }
            // The manager takes a share of the kernel's task limit below 100% only.
            Property::TasksMax => {
                scaled_or(value, 1, 9_999, syntax::atou64, "a whole number").map_err(bad)?
            }
            Property::CpuWeight if value == "idle" => Value::Number(0),
            Property::CpuWeight | Property::IoWeight if value.is_empty() => Value::Infinity,
            Property::CpuWeight | Property::IoWeight => {
                Value::Number(parse_weight(value).map_err(bad)?)
            }
            Property::CpuQuota if value.is_empty() => Value::Infinity,
            Property::CpuQuota => Value::Number(parse_quota(value).map_err(bad)?),
        };
        let oldest_systemd_run = oldest_reader(property, value);
        Ok(Limit {
            property,
            text: value.to_owned(),
            value: parsed,
            oldest_systemd_run,
        })
    }

    /// The property.
    pub fn property(&self) -> Property {
        self.property
    }

    /// The value, as given.
    pub fn value(&self) -> &str {
        &self.text
    }

    /// Whether the value is a share, which goes on the bus scaled as the manager's own
    /// systemd-run scales it: [`Limit::on_the_bus`] then wants the manager's version.
    pub(crate) fn is_share(&self) -> bool {
        matches!(self.value, Value::Permyriad(_))
    }

    /// What `StartTransientUnit` takes for it, on a manager of major version `manager` (None or 0:
    /// unknown, taken as the newest): the property's name on the bus and its value.
    pub(crate) fn on_the_bus(&self, manager: Option<u32>) -> (String, BusValue) {
        let name = self.property.name();
        match (self.property, self.value) {
            (Property::CpuQuota, Value::Number(usec)) => {
                ("CPUQuotaPerSecUSec".to_owned(), BusValue::U64(usec))
            }
            (Property::CpuQuota, Value::Infinity) => {
                ("CPUQuotaPerSecUSec".to_owned(), BusValue::U64(u64::MAX))
            }
            (_, Value::Number(n)) => (name.to_owned(), BusValue::U64(n)),
            (_, Value::Infinity) => (name.to_owned(), BusValue::U64(u64::MAX)),
            (_, Value::Permyriad(p)) => (format!("{name}Scale"), BusValue::U32(scale(p, manager))),
        }
    }

    /// The oldest systemd-run that reads this value as this library does (None: every one this
    /// library supports); an older one refuses it.
    pub(crate) fn oldest_systemd_run(&self) -> Option<u32> {
        self.oldest_systemd_run
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.property, self.text)
    }
}

impl FromStr for Limit {
    type Err = BadInput;

    /// `NAME=VALUE`, as `systemd-run -p` takes it.
    fn from_str(assignment: &str) -> Result<Self, BadInput> {
        let Some((name, value)) = assignment.split_once('=') else {
            return Err(BadInput::Property {
                name: assignment.to_owned(),
                problem: "has no '=' (expected NAME=VALUE)".to_owned(),
            });
        };
        Limit::new(name.parse()?, value)
    }
}

/// A property's value in a D-Bus message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BusValue {
    U64(u64),
    U32(u32),
}

/// The resource limits of a launch: each property at most once, in the order given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits(Vec<Limit>);

impl Limits {
    /// No limits: what every launch has unless its caller sets some.
    pub fn new() -> Self {
        Limits::default()
    }

    /// `NAME=VALUE` assignments, as `systemd-run -p` takes them (the command line's `-p`).
    pub fn parse<S: AsRef<str>>(
        assignments: impl IntoIterator<Item = S>,
    ) -> Result<Self, BadInput> {
        assignments
            .into_iter()
            .try_fold(Limits::new(), |limits, assignment| {
                limits.with(assignment.as_ref().parse()?)
            })
    }

    /// Names and values, as a map or pairs give them (Python's dict, Node's object, C's array).
    pub fn from_pairs<N: AsRef<str>, V: AsRef<str>>(
        pairs: impl IntoIterator<Item = (N, V)>,
    ) -> Result<Self, BadInput> {
        pairs.into_iter().try_fold(Limits::new(), |limits, (n, v)| {
            limits.set(n.as_ref(), v.as_ref())
        })
    }

    /// These limits and `name=value` (a builder): refused if the name is not one a launch may
    /// set, the value is not one for it, or the property is already set.
    pub fn set(self, name: &str, value: &str) -> Result<Self, BadInput> {
        self.with(Limit::new(name.parse()?, value)?)
    }

    /// These limits and `limit`; a property set twice is refused.
    pub fn with(mut self, limit: Limit) -> Result<Self, BadInput> {
        if self.get(limit.property).is_some() {
            return Err(BadInput::Property {
                name: limit.property.name().to_owned(),
                problem: "is given twice".to_owned(),
            });
        }
        self.0.push(limit);
        Ok(self)
    }

    /// The limit set on `property`, if any.
    pub fn get(&self, property: Property) -> Option<&Limit> {
        self.0.iter().find(|l| l.property == property)
    }

    /// Every limit, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = &Limit> {
        self.0.iter()
    }

    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// These limits but those `drop` names.
    pub(crate) fn without(&self, drop: &[Property]) -> Limits {
        Limits(
            self.0
                .iter()
                .filter(|l| !drop.contains(&l.property))
                .cloned()
                .collect(),
        )
    }
}

impl fmt::Display for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (at, limit) in self.0.iter().enumerate() {
            if at > 0 {
                f.write_str(" ")?;
            }
            limit.fmt(f)?;
        }
        Ok(())
    }
}

/// A limit that will not hold: the launch goes on with a warning that says so, or, in `required`
/// mode, is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unenforced {
    /// The property.
    pub property: Property,
    /// Why it will not be enforced.
    pub why: String,
    /// Whether it is still passed to the manager, which then records it without applying it (a
    /// controller it lacks); a value the wrapper cannot carry is left out, for the wrapper would
    /// refuse the whole launch.
    pub passed: bool,
}

impl fmt::Display for Unenforced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} will not be enforced: {}", self.property, self.why)
    }
}

/// The controllers the user's manager may use in its subtree, or why they are unknown.
pub(crate) type Controllers = Result<Vec<String>, String>;

/// The controllers of the manager whose own cgroup is `manager_cgroup` (the path it names as its
/// `ControlGroup`): `cgroup.controllers` there lists what its parent delegated to it.
pub(crate) fn controllers_of(manager_cgroup: Option<&str>) -> Controllers {
    let path = manager_cgroup.ok_or("the manager did not name its cgroup")?;
    let cgroup = crate::kernel::cgroup::Cgroup::at(path).map_err(|e| e.to_string())?;
    let file = cgroup.dir().join("cgroup.controllers");
    let text = std::fs::read_to_string(&file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    Ok(text.split_whitespace().map(str::to_owned).collect())
}

/// Which of `limits` will not hold, with a manager that has `controllers`, through systemd-run of
/// `systemd_run` version (None: the launcher program, or a version that could not be read).
pub(crate) fn unenforced(
    limits: &Limits,
    controllers: &Controllers,
    manager_cgroup: Option<&str>,
    systemd_run: Option<u32>,
) -> Vec<Unenforced> {
    limits
        .iter()
        .filter_map(|limit| {
            let property = limit.property;
            if let (Some(oldest), Some(version)) = (limit.oldest_systemd_run(), systemd_run) {
                if version < oldest {
                    return Some(Unenforced {
                        property,
                        why: format!(
                            "systemd-run {version} cannot pass {limit} (it reads it from \
                             systemd {oldest}), so it is left out"
                        ),
                        passed: false,
                    });
                }
            }
            let controller = property.controller();
            let why = match controllers {
                Ok(have) if have.iter().any(|c| c == controller) => return None,
                Ok(have) => format!(
                    "the user manager has no {controller} controller (its cgroup {} was given: {})",
                    manager_cgroup.unwrap_or("?"),
                    if have.is_empty() {
                        "none".to_owned()
                    } else {
                        have.join(" ")
                    }
                ),
                Err(why) => format!(
                    "cannot tell whether the user manager has the {controller} controller: {why}"
                ),
            };
            Some(Unenforced {
                property,
                why,
                passed: true,
            })
        })
        .collect()
}

/// The oldest systemd-run that reads `value` for `property` as systemd 248 and later do: 252 for
/// `CPUWeight=idle` (247 refuses it), 248 for a share written in parts of ten thousand (`‱`), to
/// two places of a percent or to one of a per-mille, which 247 refuses (it read `N‰`, `N%` and
/// `N.D%` only).
fn oldest_reader(property: Property, value: &str) -> Option<u32> {
    match property {
        Property::CpuWeight if value == "idle" => Some(252),
        Property::CpuWeight | Property::IoWeight => None,
        _ if syntax::permyriad(value).is_ok() && syntax::permille_v247(value).is_err() => Some(248),
        _ => None,
    }
}

/// `infinity` or empty (no limit), a share (sent scaled, `least` to `most` parts of ten
/// thousand), or a value `parse` reads (a `what`), at least `least`: as systemd-run reads a
/// memory or tasks limit, a share tried first and the number after it.
fn scaled_or(
    value: &str,
    least: u64,
    most: u32,
    parse: fn(&str) -> Result<u64, Unread>,
    what: &str,
) -> Result<Value, String> {
    if value == "infinity" || value.is_empty() {
        return Ok(Value::Infinity);
    }
    match syntax::permyriad(value) {
        Ok(permyriad) if permyriad > 10_000 => return Err("is more than 100%".to_owned()),
        Ok(permyriad) if permyriad > most => {
            return Err(format!("is out of range (the most is {}%)", percent(most)))
        }
        Ok(permyriad) if u64::from(permyriad) < least => {
            return Err("is out of range (0%)".to_owned())
        }
        Ok(permyriad) => return Ok(Value::Permyriad(permyriad)),
        // A share past a C int: systemd-run goes on to read it as a number, which it is not.
        Err(_) => {}
    }
    let n = parse(value).map_err(|unread| match unread {
        Unread::Invalid => format!(
            "is not {what} (expected {what}{}, a percentage, or infinity)",
            if what == "a size" {
                " with an optional B, K, M, G, T, P or E"
            } else {
                ""
            }
        ),
        Unread::OutOfRange => "is out of range (negative, or too large)".to_owned(),
    })?;
    if n < least {
        return Err(format!("is out of range (the least is {least})"));
    }
    Ok(Value::Number(n))
}

/// A share of ten thousand as a percentage, for a message.
fn percent(permyriad: u32) -> String {
    format!("{}.{:02}", permyriad / 100, permyriad % 100)
}

/// A weight, 1-10000, read as systemd's `cg_weight_parse` reads it.
fn parse_weight(value: &str) -> Result<u64, String> {
    match syntax::atou64(value) {
        Ok(weight @ 1..=10_000) => Ok(weight),
        Ok(_) | Err(Unread::OutOfRange) => Err("is out of range (1-10000)".to_owned()),
        Err(Unread::Invalid) => Err("is not a weight (a whole number from 1 to 10000)".to_owned()),
    }
}

/// A CPU quota, a percentage of one CPU above 0 (`200%` for two), as microseconds per second.
fn parse_quota(value: &str) -> Result<u64, String> {
    match syntax::permyriad(value) {
        Ok(0) => Err("is too small (more than 0% is needed)".to_owned()),
        Ok(permyriad) => Ok(u64::from(permyriad) * 100),
        Err(Unread::OutOfRange) => {
            Err("is out of range (negative, or past 21474836.47%)".to_owned())
        }
        Err(Unread::Invalid) => Err("is not a percentage (such as 50% or 200%)".to_owned()),
    }
}

/// The first systemd whose systemd-run rounds a share to the nearest part of `u32::MAX`
/// (`UINT32_SCALE_FROM_PERMYRIAD`); 247's rounded down. The manager works out its limit from the
/// scaled share, rounding down to a page, so the two differ by a page on machines of an even
/// number of pages at 50%, say: a manager of 247 is sent what its own systemd-run sends.
const SHARES_ROUNDED_SINCE: u32 = 248;

/// A share of 10000 as a share of `u32::MAX`, as the systemd-run of a manager of major version
/// `manager` scales it (None or 0: unknown, taken as the newest).
fn scale(permyriad: u32, manager: Option<u32>) -> u32 {
    let rounding = match manager {
        Some(version) if version != 0 && version < SHARES_ROUNDED_SINCE => 0,
        _ => 5000,
    };
    let scaled = (u64::from(permyriad) * u64::from(u32::MAX) + rounding) / 10_000;
    u32::try_from(scaled).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bus(assignment: &str) -> (String, BusValue) {
        assignment.parse::<Limit>().unwrap().on_the_bus(None)
    }

    fn refused(assignment: &str) -> String {
        assignment.parse::<Limit>().unwrap_err().to_string()
    }

    #[test]
    fn a_share_is_scaled_as_the_managers_own_systemd_run_scales_it() {
        let share = |assignment: &str, manager| {
            assignment
                .parse::<Limit>()
                .unwrap()
                .on_the_bus(Some(manager))
                .1
        };
        // 247 rounded down (`r * UINT32_MAX / 1000`); 248 on round to nearest.
        assert_eq!(share("MemoryMax=50%", 247), BusValue::U32(2_147_483_647));
        assert_eq!(share("MemoryMax=50%", 248), BusValue::U32(2_147_483_648));
        assert_eq!(share("MemoryMax=50%", 262), BusValue::U32(2_147_483_648));
        assert_eq!(share("MemoryMax=50%", 0), BusValue::U32(2_147_483_648));
        assert_eq!(share("MemoryHigh=100%", 247), BusValue::U32(u32::MAX));
        assert_eq!(share("TasksMax=0.1%", 247), BusValue::U32(4_294_967));
        assert_eq!(share("TasksMax=0.1%", 252), BusValue::U32(4_294_967));
        assert_eq!(share("MemorySwapMax=0%", 247), BusValue::U32(0));
    }

    #[test]
    fn values_in_systemds_syntax_go_on_the_bus_as_the_manager_takes_them() {
        let u64_ = |name: &str, n| (name.to_owned(), BusValue::U64(n));
        assert_eq!(bus("MemoryMax=64M"), u64_("MemoryMax", 64 << 20));
        assert_eq!(bus("MemoryMax=2G"), u64_("MemoryMax", 2 << 30));
        assert_eq!(bus("MemoryHigh=1.5G"), u64_("MemoryHigh", 3 << 29));
        assert_eq!(bus("MemoryHigh=4096"), u64_("MemoryHigh", 4096));
        assert_eq!(bus("MemorySwapMax=0"), u64_("MemorySwapMax", 0));
        assert_eq!(bus("MemoryMax=infinity"), u64_("MemoryMax", u64::MAX));
        assert_eq!(
            bus("MemoryMax=50%"),
            ("MemoryMaxScale".into(), BusValue::U32(2_147_483_648))
        );
        assert_eq!(
            bus("TasksMax=99.99%"),
            ("TasksMaxScale".into(), BusValue::U32(4_294_537_798))
        );
        assert_eq!(bus("TasksMax=010"), u64_("TasksMax", 8));
        assert_eq!(bus("TasksMax=0x10"), u64_("TasksMax", 16));
        assert_eq!(bus("CPUWeight=010"), u64_("CPUWeight", 8));
        assert_eq!(bus("IOWeight=+5"), u64_("IOWeight", 5));
        assert_eq!(bus("MemoryMax=010M"), u64_("MemoryMax", 10 << 20));
        assert_eq!(bus("MemoryMax= 64M"), u64_("MemoryMax", 64 << 20));
        assert_eq!(bus("MemoryMax=1.G"), u64_("MemoryMax", 1 << 30));
        assert_eq!(bus("MemoryMax=1G512M"), u64_("MemoryMax", 1_610_612_736));
        assert_eq!(
            bus("MemoryMax=1.1E"),
            u64_("MemoryMax", 1_268_213_655_067_531_680)
        );
        assert_eq!(bus("MemoryMax=010%"), bus("MemoryMax=8%"));
        assert_eq!(bus("MemoryMax="), u64_("MemoryMax", u64::MAX));
        assert_eq!(bus("CPUQuota="), u64_("CPUQuotaPerSecUSec", u64::MAX));
        assert_eq!(bus("CPUWeight="), u64_("CPUWeight", u64::MAX));
        assert_eq!(bus("CPUQuota=-0.5%"), u64_("CPUQuotaPerSecUSec", 5_000));
        assert_eq!(bus("TasksMax=8"), u64_("TasksMax", 8));
        assert_eq!(bus("CPUQuota=50%"), u64_("CPUQuotaPerSecUSec", 500_000));
        assert_eq!(bus("CPUQuota=200%"), u64_("CPUQuotaPerSecUSec", 2_000_000));
        assert_eq!(bus("CPUQuota=0.5%"), u64_("CPUQuotaPerSecUSec", 5_000));
        assert_eq!(bus("CPUWeight=idle"), u64_("CPUWeight", 0));
        assert_eq!(bus("CPUWeight=10000"), u64_("CPUWeight", 10_000));
        assert_eq!(bus("IOWeight=1"), u64_("IOWeight", 1));
        assert_eq!(bus("MemoryMax=5‰"), bus("MemoryMax=0.5%"));
        assert_eq!(bus("MemoryMax=50‱"), bus("MemoryMax=0.5%"));
    }

    #[test]
    fn bad_names_and_values_are_refused_with_the_reason() {
        for (assignment, reason) in [
            ("Slice=evil.slice", "is not a property a launch may set"),
            ("memorymax=1G", "is not a property a launch may set"),
            ("ExecStart=/bin/sh", "is not a property a launch may set"),
            ("MemoryMax", "has no '='"),
            ("MemoryMax=0", "out of range"),
            ("MemoryMax=0%", "out of range"),
            ("MemoryMax=-0%", "out of range"),
            ("MemoryMax=64X", "is not a size"),
            ("MemoryMax=64k", "is not a size"),
            ("MemoryMax=.5G", "is not a size"),
            ("MemoryMax=64M ", "is not a size"),
            ("MemoryMax=512M1G", "is not a size"),
            ("MemoryMax=0x10", "is not a size"),
            ("MemoryMax=-1", "out of range"),
            ("MemoryMax=-0", "out of range"),
            ("MemoryMax=16E", "out of range"),
            ("MemoryMax=15.5E", "out of range"),
            ("MemoryMax=0.99999999999999999999", "out of range"),
            ("MemoryMax=101%", "more than 100%"),
            ("MemoryMax=12.345%", "is not a size"),
            ("MemoryMax=Infinity", "is not a size"),
            ("MemoryMax=64M;TasksMax=1", "is not a size"),
            ("MemoryMax=64M\0", "control character"),
            ("MemoryMax=\t8M", "control character"),
            ("TasksMax=\n5", "control character"),
            ("TasksMax=\x0b0b1", "control character"),
            ("TasksMax=+0b101", "not a whole number"),
            ("TasksMax=0b0b101", "not a whole number"),
            ("TasksMax=0", "out of range"),
            ("TasksMax=-0", "out of range"),
            ("TasksMax=0%", "out of range"),
            ("TasksMax=100%", "the most is 99.99%"),
            ("TasksMax=8K", "not a whole number"),
            ("TasksMax=08", "not a whole number"),
            ("TasksMax=5 ", "not a whole number"),
            ("TasksMax=-5", "out of range"),
            ("TasksMax=18446744073709551616", "out of range"),
            ("CPUQuota=0%", "too small"),
            ("CPUQuota=-0%", "too small"),
            ("CPUQuota=50", "not a percentage"),
            ("CPUQuota=1.234%", "not a percentage"),
            ("CPUQuota=infinity", "not a percentage"),
            ("CPUQuota=21474837%", "out of range"),
            ("CPUQuota=21474836.48%", "out of range"),
            ("CPUWeight=0", "out of range"),
            ("CPUWeight=-0", "out of range"),
            ("CPUWeight=10001", "out of range"),
            ("CPUWeight=1e3", "not a weight"),
            ("CPUWeight=IDLE", "not a weight"),
            ("IOWeight=idle", "not a weight"),
        ] {
            let why = refused(assignment);
            assert!(why.contains(reason), "{assignment}: {why}");
        }
        let twice = Limits::parse(["TasksMax=8", "TasksMax=9"]).unwrap_err();
        assert_eq!(twice.to_string(), "property TasksMax is given twice");
    }

    #[test]
    fn limits_keep_their_order_and_text() {
        let limits = Limits::parse(["MemoryMax=64M", "CPUQuota=50%"]).unwrap();
        assert_eq!(limits.to_string(), "MemoryMax=64M CPUQuota=50%");
        let pairs = Limits::from_pairs([("MemoryMax", "64M"), ("CPUQuota", "50%")]).unwrap();
        assert_eq!(pairs, limits);
        assert_eq!(
            limits.without(&[Property::MemoryMax]).to_string(),
            "CPUQuota=50%"
        );
    }

    #[test]
    fn a_limit_without_its_controller_or_wrapper_is_said() {
        let limits = Limits::parse(["MemoryMax=64M", "CPUWeight=idle", "TasksMax=8"]).unwrap();
        let have: Controllers = Ok(vec!["memory".into(), "pids".into()]);
        let cg = Some("/user.slice/user-1000.slice/user@1000.service");
        assert_eq!(unenforced(&limits, &have, cg, None).len(), 1);
        let old = unenforced(&limits, &have, cg, Some(247));
        assert_eq!(
            old.iter()
                .map(|u| (u.property, u.passed))
                .collect::<Vec<_>>(),
            [(Property::CpuWeight, false)]
        );
        assert!(old[0]
            .why
            .contains("systemd-run 247 cannot pass CPUWeight=idle"));
        let shares = Limits::parse(["MemoryMax=12.25%", "TasksMax=5‱", "CPUQuota=50%"]).unwrap();
        let every: Controllers = Ok(["memory", "pids", "cpu"].map(str::to_owned).to_vec());
        let left_out = unenforced(&shares, &every, cg, Some(247));
        assert_eq!(
            left_out.iter().map(|u| u.property).collect::<Vec<_>>(),
            [Property::MemoryMax, Property::TasksMax]
        );
        assert!(unenforced(&shares, &every, cg, Some(252)).is_empty());
        let none: Controllers = Ok(vec![]);
        let all = unenforced(&limits, &none, cg, Some(252));
        assert_eq!(all.len(), 3);
        assert!(
            all[0].to_string().contains("no memory controller"),
            "{}",
            all[0]
        );
        let unknown: Controllers = Err("no cgroup2".into());
        assert!(unenforced(&limits, &unknown, None, None)
            .iter()
            .all(|u| u.why.starts_with("cannot tell") && u.passed));
    }
}

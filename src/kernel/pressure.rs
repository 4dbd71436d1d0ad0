//! Pressure stall information (PSI) of a scope: the share of time its tasks waited for memory, CPU
//! or I/O (`memory.pressure`, `cpu.pressure`, `io.pressure`), the figures systemd-oomd's pressure
//! rule reads. Every cgroup has them where the kernel has PSI, whatever its controllers.

use std::fmt;
use std::path::Path;

/// One line of a pressure file: `some` (at least one task waited) or `full` (every task did).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PressureLine {
    /// The share of the last 10 seconds spent waiting, in percent.
    pub avg10: f64,
    /// The same over the last 60 seconds.
    pub avg60: f64,
    /// The same over the last 300 seconds.
    pub avg300: f64,
    /// The whole time spent waiting since the cgroup was made, in microseconds.
    pub total_usec: u64,
}

/// One resource's pressure.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pressure {
    /// Some task waited.
    pub some: PressureLine,
    /// Every task waited at once (None where the kernel does not count it: CPU before 5.13).
    pub full: Option<PressureLine>,
}

/// A scope's pressure, per resource; None where the kernel has no PSI or the scope is gone.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ScopePressure {
    /// `memory.pressure`.
    pub memory: Option<Pressure>,
    /// `cpu.pressure`.
    pub cpu: Option<Pressure>,
    /// `io.pressure`.
    pub io: Option<Pressure>,
}

impl ScopePressure {
    /// Reads the pressure files of the cgroup directory `dir`; `same` says whether it is still the
    /// scope the caller asks about, asked after each file is read, so that no figure of another
    /// scope under the same path is given.
    pub(crate) fn read(dir: &Path, same: impl Fn() -> bool) -> Self {
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .ok()
                .filter(|_| same())
                .and_then(|text| parse(&text))
        };
        ScopePressure {
            memory: read("memory.pressure"),
            cpu: read("cpu.pressure"),
            io: read("io.pressure"),
        }
    }
}

impl fmt::Display for PressureLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "avg10={:.2} avg60={:.2} avg300={:.2} total={}",
            self.avg10, self.avg60, self.avg300, self.total_usec
        )
    }
}

/// A pressure file's text: `some avg10=… avg60=… avg300=… total=…`, then `full …` where counted.
/// None when its `some` line cannot be read.
pub(crate) fn parse(text: &str) -> Option<Pressure> {
    let mut some = None;
    let mut full = None;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let slot = match words.next() {
            Some("some") => &mut some,
            Some("full") => &mut full,
            _ => continue,
        };
        *slot = line_of(words);
    }
    Some(Pressure { some: some?, full })
}

/// The `key=value` words of one line.
fn line_of<'a>(words: impl Iterator<Item = &'a str>) -> Option<PressureLine> {
    let (mut avg10, mut avg60, mut avg300, mut total) = (None, None, None, None);
    for word in words {
        let (key, value) = word.split_once('=')?;
        match key {
            "avg10" => avg10 = value.parse().ok(),
            "avg60" => avg60 = value.parse().ok(),
            "avg300" => avg300 = value.parse().ok(),
            "total" => total = value.parse().ok(),
            _ => {}
        }
    }
    Some(PressureLine {
        avg10: avg10?,
        avg60: avg60?,
        avg300: avg300?,
        total_usec: total?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_lines_are_read_and_a_missing_full_line_is_none() {
        let text = "some avg10=1.50 avg60=0.25 avg300=0.00 total=123456\n\
                    full avg10=0.75 avg60=0.10 avg300=0.00 total=4567\n";
        let pressure = parse(text).unwrap();
        assert_eq!(pressure.some.avg10, 1.5);
        assert_eq!(pressure.some.total_usec, 123_456);
        assert_eq!(pressure.full.unwrap().avg60, 0.1);
        let cpu_before_5_13 = "some avg10=0.00 avg60=0.00 avg300=0.00 total=9\n";
        assert_eq!(parse(cpu_before_5_13).unwrap().full, None);
        assert_eq!(parse(""), None);
        assert_eq!(parse("some avg10=x avg60=0 avg300=0 total=1"), None);
        assert_eq!(
            pressure.some.to_string(),
            "avg10=1.50 avg60=0.25 avg300=0.00 total=123456"
        );
    }
}

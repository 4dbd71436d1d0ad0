//! The bounds a caller may give, on every surface alike: their defaults, and the one check that
//! refuses a bound that cannot be one.

use std::fmt;
use std::time::Duration;

/// How long a request may spend probing by default (R6).
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a kill, or a wait for a scope to empty, may take by default (R15): a scope's
/// processes get this long to be reaped.
pub const DEFAULT_KILL_TIMEOUT: Duration = Duration::from_secs(5);

/// A bound a caller gave that cannot be one: zero, negative, not a number, or beyond the clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadBound(String);

impl fmt::Display for BadBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadBound {}

/// A bound given in milliseconds (C, Node, the command line); `what` names it in the error.
pub fn bound_from_millis(ms: u64, what: &str) -> Result<Duration, BadBound> {
    match ms {
        0 => Err(BadBound(format!("{what} is 0 ms"))),
        ms => Ok(Duration::from_millis(ms)),
    }
}

/// A bound given in seconds (Python); `what` names it in the error.
pub fn bound_from_secs(seconds: f64, what: &str) -> Result<Duration, BadBound> {
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(BadBound(format!(
            "{what} must be a positive number of seconds, not {seconds}"
        )));
    }
    match Duration::try_from_secs_f64(seconds) {
        Ok(bound) if bound.is_zero() => Err(BadBound(format!(
            "{what} of {seconds} seconds is shorter than a nanosecond"
        ))),
        Ok(bound) => Ok(bound),
        Err(e) => Err(BadBound(format!("{what}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::{bound_from_millis, bound_from_secs};
    use std::time::Duration;

    #[test]
    fn a_bound_is_refused_unless_it_is_a_positive_time_the_clock_can_hold() {
        assert_eq!(bound_from_millis(1, "t"), Ok(Duration::from_millis(1)));
        assert_eq!(
            bound_from_millis(0, "t").unwrap_err().to_string(),
            "t is 0 ms"
        );
        assert_eq!(bound_from_secs(0.25, "t"), Ok(Duration::from_millis(250)));
        for refused in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-12, 1e30] {
            assert!(bound_from_secs(refused, "t").is_err(), "{refused}");
        }
        assert!(
            bound_from_secs(1e19, "t").is_ok(),
            "as long as the clock holds"
        );
    }
}

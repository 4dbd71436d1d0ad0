//! The launcher program's command line (A1), one type for both ends: `wrap` builds it, and the
//! launcher program parses it, so the two can never disagree.
//!
//! ```text
//! synaps-scope-exec --unit=UNIT [--slice=SLICE] --description=TEXT --timeout-ms=N [--required] \
//!     [--property=NAME=VALUE]... [--hold-fd=N] -- PROGRAM ARGV0 [ARGS...]
//! ```

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;

use crate::input::limits::{Limit, Limits};

/// What the launcher program is asked to do: make the scope `unit` (in `slice`) for itself
/// within `timeout_ms`, then exec `program` with `argv`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecLine {
    /// The scope's unit name.
    pub unit: String,
    /// The slice, as systemd names it (None: systemd's default).
    pub slice: Option<String>,
    /// The scope's description.
    pub description: String,
    /// How long making the scope may take, from the launcher program's start.
    pub timeout_ms: u64,
    /// Exit 125 instead of running the command unscoped when no scope can be made.
    pub required: bool,
    /// The scope's resource limits (A6), each `--property=NAME=VALUE`.
    pub limits: Limits,
    /// A descriptor to tell whether the scope was made on (`1` or `0`, where it is a socket) and
    /// then read to its end, before the exec: a parent that waits for the command
    /// (`synaps-scope run --wait`) watches the scope from its start so, and no command ends before
    /// it is watched.
    pub hold_fd: Option<i32>,
    /// The program to exec, by absolute path.
    pub program: OsString,
    /// Its whole argv, `argv[0]` included: what it sees.
    pub argv: Vec<OsString>,
}

/// The launcher program's usage, for `--help` and for a command line it cannot read.
pub const EXEC_USAGE: &str = "usage: synaps-scope-exec --unit=UNIT [--slice=SLICE] \
    --description=TEXT --timeout-ms=N [--required] [--property=NAME=VALUE]... [--hold-fd=N] \
    -- PROGRAM ARGV0 [ARGS...]";

/// A command line the launcher program cannot read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadExecLine(String);

impl fmt::Display for BadExecLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\n{EXEC_USAGE}", self.0)
    }
}

impl std::error::Error for BadExecLine {}

impl ExecLine {
    /// The arguments after the launcher program's own path.
    pub fn into_args(self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![format!("--unit={}", self.unit).into()];
        if let Some(slice) = &self.slice {
            args.push(format!("--slice={slice}").into());
        }
        args.push(format!("--description={}", self.description).into());
        args.push(format!("--timeout-ms={}", self.timeout_ms).into());
        if self.required {
            args.push("--required".into());
        }
        for limit in self.limits.iter() {
            args.push(format!("--property={limit}").into());
        }
        if let Some(fd) = self.hold_fd {
            args.push(format!("--hold-fd={fd}").into());
        }
        args.push("--".into());
        args.push(self.program);
        args.extend(self.argv);
        args
    }

    /// Reads the arguments after the launcher program's own path. Options take their value
    /// after `=` or as the next argument, in any order, each at most once.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<ExecLine, BadExecLine> {
        let mut args = args.into_iter();
        let (mut unit, mut slice, mut description, mut timeout_ms) = (None, None, None, None);
        let mut hold_fd = None;
        let mut required = false;
        let mut limits = Limits::new();
        loop {
            let Some(arg) = args.next() else {
                return Err(BadExecLine("no `--` before the command".into()));
            };
            if arg == "--" {
                break;
            }
            if arg == "--required" {
                required = true;
                continue;
            }
            let text = utf8(&arg)?;
            let (name, inline) = match text.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (text, None),
            };
            let value = match inline {
                Some(value) => value,
                None => match args.next() {
                    Some(value) => utf8(&value)?.to_owned(),
                    None => return Err(BadExecLine(format!("{name} needs a value"))),
                },
            };
            if name == "--property" {
                let limit: Limit = value.parse().map_err(|e| BadExecLine(format!("{e}")))?;
                limits = limits
                    .with(limit)
                    .map_err(|e| BadExecLine(format!("{e}")))?;
                continue;
            }
            let slot = match name {
                "--unit" => &mut unit,
                "--slice" => &mut slice,
                "--description" => &mut description,
                "--timeout-ms" => &mut timeout_ms,
                "--hold-fd" => &mut hold_fd,
                _ => return Err(BadExecLine(format!("unknown option {text:?}"))),
            };
            if slot.is_some() {
                return Err(BadExecLine(format!("{name} given twice")));
            }
            *slot = Some(value);
        }
        let missing = |name: &str| BadExecLine(format!("{name} is missing"));
        let timeout_ms = timeout_ms.ok_or_else(|| missing("--timeout-ms"))?;
        let timeout_ms = timeout_ms
            .parse()
            .map_err(|e| BadExecLine(format!("--timeout-ms={timeout_ms}: {e}")))?;
        let hold_fd = hold_fd
            .map(|fd| match fd.parse::<i32>() {
                Ok(n) if n >= 0 => Ok(n),
                _ => Err(BadExecLine(format!("--hold-fd={fd}: not a descriptor"))),
            })
            .transpose()?;
        let program = args
            .next()
            .ok_or_else(|| BadExecLine("no PROGRAM after `--`".into()))?;
        let argv: Vec<OsString> = args.collect();
        if argv.is_empty() {
            return Err(BadExecLine("no ARGV0 after PROGRAM".into()));
        }
        Ok(ExecLine {
            unit: unit.ok_or_else(|| missing("--unit"))?,
            slice,
            description: description.ok_or_else(|| missing("--description"))?,
            timeout_ms,
            required,
            limits,
            hold_fd,
            program,
            argv,
        })
    }
}

fn utf8(arg: &OsStr) -> Result<&str, BadExecLine> {
    std::str::from_utf8(arg.as_bytes())
        .map_err(|_| BadExecLine(format!("{} is not UTF-8", arg.to_string_lossy())))
}

#[cfg(test)]
mod tests {
    use super::{ExecLine, Limits};
    use proptest::prelude::*;
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    /// One value of each property.
    const LIMITS: [&str; 7] = [
        "MemoryMax=64M",
        "MemoryHigh=50%",
        "MemorySwapMax=0",
        "CPUWeight=idle",
        "CPUQuota=150%",
        "TasksMax=infinity",
        "IOWeight=10",
    ];

    fn bytes() -> impl Strategy<Value = OsString> {
        proptest::collection::vec(1u8..=255, 0..12).prop_map(OsString::from_vec)
    }

    fn line() -> impl Strategy<Value = ExecLine> {
        (
            "[a-z0-9-]{1,20}\\.scope",
            proptest::option::of("[a-z\\\\x0-9-]{1,12}\\.slice"),
            "[ -~]{0,30}",
            any::<u64>(),
            (
                any::<bool>(),
                proptest::sample::subsequence(LIMITS.to_vec(), 0..=LIMITS.len()),
            ),
            proptest::option::of(0..1024i32),
            bytes(),
            proptest::collection::vec(bytes(), 1..5),
        )
            .prop_map(
                |(
                    unit,
                    slice,
                    description,
                    timeout_ms,
                    (required, limits),
                    hold_fd,
                    program,
                    argv,
                )| {
                    ExecLine {
                        unit,
                        slice,
                        description,
                        timeout_ms,
                        required,
                        limits: Limits::parse(limits).unwrap(),
                        hold_fd,
                        program,
                        argv,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn what_is_built_parses_back_to_itself(line in line()) {
            prop_assert_eq!(ExecLine::parse(line.clone().into_args()), Ok(line));
        }
    }

    #[test]
    fn options_take_a_value_inline_or_next_in_any_order() {
        let args = [
            "--timeout-ms",
            "50",
            "--required",
            "--description=d",
            "--unit",
            "u.scope",
            "--",
            "/bin/true",
            "true",
        ];
        let line = ExecLine::parse(args.map(OsString::from)).unwrap();
        assert_eq!(
            (line.unit.as_str(), line.timeout_ms, line.required),
            ("u.scope", 50, true)
        );
    }

    #[test]
    fn a_line_it_cannot_read_is_refused_with_the_reason() {
        for (args, reason) in [
            (
                &["--unit=u", "--description=d", "--", "/p", "p"][..],
                "--timeout-ms is missing",
            ),
            (&["--unit=u", "--unit=v", "--"], "--unit given twice"),
            (&["--frob", "--"], "unknown option"),
            (
                &[
                    "--unit=u",
                    "--description=d",
                    "--timeout-ms=x",
                    "--",
                    "/p",
                    "p",
                ],
                "--timeout-ms=x",
            ),
            (
                &["--unit=u", "--description=d", "--timeout-ms=1", "--", "/p"],
                "no ARGV0",
            ),
            (&["--unit=u"], "no `--`"),
            (&["--property=Slice=x.slice", "--"], "property Slice"),
            (
                &[
                    "--hold-fd=-1",
                    "--unit=u",
                    "--description=d",
                    "--timeout-ms=1",
                    "--",
                    "/p",
                    "p",
                ],
                "--hold-fd=-1",
            ),
        ] {
            let refused = ExecLine::parse(args.iter().map(OsString::from)).unwrap_err();
            assert!(refused.to_string().contains(reason), "{args:?}: {refused}");
        }
    }
}

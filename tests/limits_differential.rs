//! Limits read as systemd reads them (A6, issue 60): a corpus of values, the odd ones first
//! (leading zeros, which `safe_atou64` reads as octal; hex and binary prefixes; signs; spaces;
//! fractions a C `double` rounds; sizes in components; shares to two places, per-mille and
//! per-ten-thousand; the edges of every range), each run through the rig's own
//! `systemd-run --user --scope -p NAME=VALUE` and through this library with each wrapper, against
//! the same manager. Each is refused by both, or held by both with every property the manager
//! shows alike; through the systemd-run wrapper no launch is lost (a value its systemd-run cannot
//! read is left out, said, and the command runs in its scope).

mod common;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::process::Command;

use common::{env_with, rig, with_wrapper};
use synaps_scope::{launcher_for_env, set_env, Limits, ScopeLauncher};

/// What the manager shows of a scope: the seven properties and whether it runs.
const SHOWN: [&str; 8] = [
    "MemoryMax",
    "MemoryHigh",
    "MemorySwapMax",
    "CPUWeight",
    "CPUQuotaPerSecUSec",
    "TasksMax",
    "IOWeight",
    "ActiveState",
];

#[rustfmt::skip]
const CORPUS: &[(&str, &str)] = &[
    // Sizes.
    ("MemoryMax", "64M"), ("MemoryMax", "1G"), ("MemoryMax", "1.5G"), ("MemoryMax", "4096"),
    ("MemoryMax", "1"), ("MemoryMax", "0"), ("MemoryMax", ""), ("MemoryMax", "infinity"),
    ("MemoryMax", "Infinity"), ("MemoryMax", "010"), ("MemoryMax", "00064"), ("MemoryMax", "010M"),
    ("MemoryMax", "0x10"), ("MemoryMax", "0b101"), ("MemoryMax", "+64M"), ("MemoryMax", "-0"),
    ("MemoryMax", "-1"), ("MemoryMax", " 64M"), ("MemoryMax", "64M "), ("MemoryMax", "64 M"),
    ("MemoryMax", "1G512M"), ("MemoryMax", "1G 512M"), ("MemoryMax", "512M1G"), ("MemoryMax", "1G1"),
    ("MemoryMax", "64k"), ("MemoryMax", "64X"), ("MemoryMax", "1.G"), ("MemoryMax", ".5G"),
    ("MemoryMax", "0.5"), ("MemoryMax", "1.5"), ("MemoryMax", "1.1E"), ("MemoryMax", "0.54P"),
    ("MemoryMax", "1.999999999999999999G"), ("MemoryMax", "15E"), ("MemoryMax", "15.5E"),
    ("MemoryMax", "16E"), ("MemoryMax", "1.10000000000000000000E"),
    ("MemoryMax", "0.99999999999999999999"), ("MemoryMax", "0.9999999999999999999"),
    ("MemoryMax", "1.23456789012345678901K"), ("MemoryMax", "18446744073709551614"),
    ("MemoryMax", "18446744073709551615"), ("MemoryMax", "18446744073709551616"),
    ("MemoryMax", "2.675K"), ("MemoryMax", "0.3M"), ("MemoryMax", "0.1K"), ("MemoryMax", "1.5B"),
    ("MemoryMax", "lots"), ("MemoryMax", "64M TasksMax=1"), ("MemoryMax", "64M;TasksMax=1"),
    ("MemoryMax", "1T"), ("MemoryMax", "3P"), ("MemoryMax", "\t8M"), ("MemoryMax", "1G\r512M"),
    // Shares of memory.
    ("MemoryMax", "50%"), ("MemoryMax", "010%"), ("MemoryMax", "0x10%"), ("MemoryMax", "5.5%"),
    ("MemoryMax", "12.34%"), ("MemoryMax", "12.345%"), ("MemoryMax", "100%"), ("MemoryMax", "101%"),
    ("MemoryMax", "0%"), ("MemoryMax", "-0%"), ("MemoryMax", "5‰"), ("MemoryMax", "5.5‰"),
    ("MemoryMax", "50‱"), ("MemoryMax", "1.5‱"), ("MemoryMax", " 50%"), ("MemoryMax", "50 %"),
    ("MemoryMax", "50.%"), ("MemoryMax", "0.01%"), ("MemoryMax", "99.99%"), ("MemoryMax", "1‱"),
    ("MemoryHigh", "48M"), ("MemoryHigh", "0"), ("MemoryHigh", "010"), ("MemoryHigh", "50%"),
    ("MemoryHigh", "33.33%"), ("MemoryHigh", "infinity"), ("MemoryHigh", ""), ("MemoryHigh", "2.5G"),
    ("MemoryHigh", "-0%"), ("MemoryHigh", "1G512M"), ("MemoryHigh", "00064M"), ("MemoryHigh", "7‰"),
    ("MemorySwapMax", "0"), ("MemorySwapMax", "0%"), ("MemorySwapMax", "-0%"), ("MemorySwapMax", "-0"),
    ("MemorySwapMax", "1G"), ("MemorySwapMax", "25%"), ("MemorySwapMax", "infinity"),
    ("MemorySwapMax", ""), ("MemorySwapMax", "010"), ("MemorySwapMax", "1.25%"),
    ("MemorySwapMax", "100%"), ("MemorySwapMax", "0.5"),
    // Counts of tasks.
    ("TasksMax", "8"), ("TasksMax", "1"), ("TasksMax", "0"), ("TasksMax", "010"), ("TasksMax", "00064"),
    ("TasksMax", "08"), ("TasksMax", "0x10"), ("TasksMax", "0X1f"), ("TasksMax", "0b101"),
    ("TasksMax", "0o17"), ("TasksMax", "+5"), ("TasksMax", " 5"), ("TasksMax", "5 "), ("TasksMax", "-0"),
    ("TasksMax", "-5"), ("TasksMax", "1K"), ("TasksMax", "infinity"), ("TasksMax", ""),
    ("TasksMax", "100%"), ("TasksMax", "99.99%"), ("TasksMax", "0%"), ("TasksMax", "10%"),
    ("TasksMax", "010%"), ("TasksMax", "1_000"), ("TasksMax", "4294967296"),
    ("TasksMax", "18446744073709551615"), ("TasksMax", "18446744073709551616"), ("TasksMax", "1.5"),
    ("TasksMax", "5‱"), ("TasksMax", "2.5‰"), ("TasksMax", "1000‰"), ("TasksMax", "\n5"),
    ("TasksMax", "+0b101"), ("TasksMax", "0b0b101"),
    // Weights.
    ("CPUWeight", "idle"), ("CPUWeight", ""), ("CPUWeight", "0"), ("CPUWeight", "1"),
    ("CPUWeight", "10000"), ("CPUWeight", "10001"), ("CPUWeight", "010"), ("CPUWeight", "0x10"),
    ("CPUWeight", "+5"), ("CPUWeight", " 5"), ("CPUWeight", "-0"), ("CPUWeight", "100 "),
    ("CPUWeight", "1e3"), ("CPUWeight", "infinity"), ("CPUWeight", "IDLE"), ("CPUWeight", "0b11"),
    ("CPUWeight", "09"), ("CPUWeight", "200"),
    ("IOWeight", "50"), ("IOWeight", "idle"), ("IOWeight", ""), ("IOWeight", "0"), ("IOWeight", "1"),
    ("IOWeight", "10000"), ("IOWeight", "10001"), ("IOWeight", "010"), ("IOWeight", "0x64"),
    ("IOWeight", "+7"), ("IOWeight", "-0"), ("IOWeight", "0o777"),
    // CPU quotas.
    ("CPUQuota", "50%"), ("CPUQuota", "0%"), ("CPUQuota", "-0%"), ("CPUQuota", "-0.5%"),
    ("CPUQuota", "0.01%"), ("CPUQuota", "0.001%"), ("CPUQuota", "200%"), ("CPUQuota", "21474836.47%"),
    ("CPUQuota", "21474836.48%"), ("CPUQuota", "21474837%"), ("CPUQuota", "42949672%"),
    ("CPUQuota", "5‰"), ("CPUQuota", "5.5‰"), ("CPUQuota", "1‱"), ("CPUQuota", ""), ("CPUQuota", "50"),
    ("CPUQuota", "infinity"), ("CPUQuota", "010%"), ("CPUQuota", "0x10%"), ("CPUQuota", " 50%"),
    ("CPUQuota", "50.%"), ("CPUQuota", "50.5%"), ("CPUQuota", "50.55%"), ("CPUQuota", "50.555%"),
    ("CPUQuota", "100%"), ("CPUQuota", "1.5‱"),
];

/// How one path took a value: refused (its words), held, with what the manager shows, or lost:
/// the command never ran.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Took {
    Refused(String),
    Held(BTreeMap<String, String>),
    Lost(String),
}

fn shown_of(stdout: &[u8]) -> BTreeMap<String, String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// `systemctl --user show` of `unit`, the properties the test compares.
fn show_argv(unit: &str) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec!["systemctl".into(), "--user".into(), "show".into()];
    for name in SHOWN {
        argv.extend(["-p".into(), name.into()]);
    }
    argv.extend(["--".into(), unit.into()]);
    argv
}

fn run(argv: &[OsString], env: &[(OsString, OsString)]) -> std::process::Output {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    set_env(&mut cmd, env);
    cmd.output().unwrap()
}

/// The rig's own systemd-run, given `name=value` as a person would.
fn through_systemd_run(at: usize, name: &str, value: &str, env: &[(OsString, OsString)]) -> Took {
    let unit = format!("synaps-differential-{}-{at}.scope", std::process::id());
    let mut argv: Vec<OsString> = ["systemd-run", "--user", "--scope", "--quiet"]
        .map(OsString::from)
        .to_vec();
    argv.push(format!("--unit={unit}").into());
    argv.push(format!("--property={name}={value}").into());
    argv.push("--".into());
    argv.extend(show_argv(&unit));
    let out = run(&argv, env);
    if out.status.success() {
        Took::Held(shown_of(&out.stdout))
    } else {
        Took::Refused(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// This library, through `launcher`'s wrapper: refused at intake, or the manager's view of the
/// scope from inside it. `left_out` is set when the wrapper said it leaves the value out.
fn through_library(
    launcher: &ScopeLauncher,
    name: &str,
    value: &str,
    env: &[(OsString, OsString)],
) -> (Took, bool) {
    let limits = match Limits::from_pairs([(name, value)]) {
        Ok(limits) => limits,
        Err(refused) => return (Took::Refused(refused.to_string()), false),
    };
    let launcher = launcher.with_limits(limits).unwrap();
    let left_out = launcher.unenforced().iter().any(|u| !u.passed);
    let wrapped = launcher.wrap(&show_argv("UNIT"), env, None);
    let unit = wrapped.unit.clone().expect("systemctl resolves");
    let mut argv = wrapped.argv;
    *argv.last_mut().unwrap() = unit.into();
    let out = run(&argv, env);
    if !out.status.success() {
        let lost = format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr));
        return (Took::Lost(lost), left_out);
    }
    let shown = shown_of(&out.stdout);
    if shown["ActiveState"] == "active" {
        (Took::Held(shown), left_out)
    } else {
        // The manager refused the scope, and the command ran unscoped, as `on` mode does.
        (
            Took::Refused(String::from_utf8_lossy(&out.stderr).into_owned()),
            left_out,
        )
    }
}

fn launcher_through(wrapper: &str) -> (ScopeLauncher, Vec<(OsString, OsString)>) {
    let env = with_wrapper(&env_with(&[]), wrapper);
    let launcher = launcher_for_env(&env)
        .unwrap()
        .expect("the rig's manager answers");
    assert_eq!(launcher.wrapper().name(), wrapper);
    (launcher, env)
}

/// What the manager shows of a scope with no limit: what a left-out value leaves.
fn defaults(launcher: &ScopeLauncher, env: &[(OsString, OsString)]) -> BTreeMap<String, String> {
    match through_library(launcher, "MemoryMax", "infinity", env).0 {
        Took::Held(shown) => shown,
        refused => panic!("a scope with no limit: {refused:?}"),
    }
}

/// The one way systemd-run 247 reads a value otherwise than 248 and later (but for shares it
/// cannot read, which the systemd-run wrapper leaves out), and the library
/// follows the newer: a CPU quota past 21474836.47% (a C int of parts of ten thousand), which 247
/// read in parts of a thousand. Such a value is refused on every path.
fn quota_past_an_int(name: &str, value: &str) -> bool {
    name == "CPUQuota" && ["21474836.48%", "21474837%", "42949672%"].contains(&value)
}

/// A C23 binary number after a sign or a `0b` prefix: a systemd-run of 254 to 260 built on glibc
/// 2.38 or later reads it (the rig's 257 is Debian 13's, on 2.41), 261 and later refuse it as
/// every build on an older glibc does, and so does the library.
fn c23_binary(value: &str) -> bool {
    ["+0b101", "0b0b101"].contains(&value)
}

#[test]
fn every_value_reads_as_the_rigs_systemd_run_reads_it_through_both_wrappers() {
    let Some(rig) = rig() else { return };
    assert!(CORPUS.len() >= 150, "{} values", CORPUS.len());
    let (exec, exec_env) = launcher_through("synaps-scope-exec");
    let (run_wrapper, run_env) = launcher_through("systemd-run");
    let plain = defaults(&exec, &exec_env);
    let mut differences = Vec::new();
    let mut held = 0;
    for (at, &(name, value)) in CORPUS.iter().enumerate() {
        let systemd_run = through_systemd_run(at, name, value, &exec_env);
        let (library, _) = through_library(&exec, name, value, &exec_env);
        let (wrapped, left_out) = through_library(&run_wrapper, name, value, &run_env);
        // Left out: the command runs in its scope without the value.
        let expected_wrapped = if left_out {
            Took::Held(plain.clone())
        } else {
            library.clone()
        };
        let agrees = match (&systemd_run, &library) {
            (Took::Refused(_), Took::Refused(_)) => true,
            (Took::Held(theirs), Took::Held(ours)) => theirs == ours,
            // systemd-run 247 cannot read a share to two places, or in parts of ten thousand:
            // the library reads it as 248 and later do, and its systemd-run wrapper leaves it out.
            (Took::Refused(_), Took::Held(_)) => rig.version < 248 && left_out,
            // A control character, which systemd skips at the start, is refused on purpose: a
            // value is said in log lines, where a newline would forge one.
            (Took::Held(_), Took::Refused(_)) => {
                (rig.version < 248 && quota_past_an_int(name, value))
                    || value.chars().any(char::is_control)
                    || (rig.version < 261 && c23_binary(value))
            }
            (Took::Lost(_), _) | (_, Took::Lost(_)) => false,
        };
        if !agrees || !same_outcome(&wrapped, &expected_wrapped) {
            differences.push(format!(
                "{name}={value:?}: systemd-run {systemd_run:?}; launcher program {library:?}; \
                 systemd-run wrapper {wrapped:?} (left out: {left_out})"
            ));
        }
        held += usize::from(matches!(library, Took::Held(_)));
    }
    assert!(
        differences.is_empty(),
        "{} differences:\n{}",
        differences.len(),
        differences.join("\n")
    );
    assert!(
        held >= 80,
        "the corpus is mostly values a launch takes: {held}"
    );
}

/// Refused by both (whatever the words), or held alike; a lost launch is like nothing.
fn same_outcome(a: &Took, b: &Took) -> bool {
    match (a, b) {
        (Took::Refused(_), Took::Refused(_)) => true,
        (Took::Held(a), Took::Held(b)) => a == b,
        _ => false,
    }
}

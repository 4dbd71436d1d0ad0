//! Switches and slices (R8-R10): `SYNAPS_PROCESS_SCOPES`, then the config file, loaded fresh by
//! every launcher request so that edits apply without a restart.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;

use crate::diag::TARGET;
use crate::input::inputs::Inputs;
use crate::input::kind::ScopeKind;
use crate::warn::WarnedSet;

pub use crate::input::inputs::{CONFIG_VAR, LAUNCHER_VAR, SWITCH_VAR};

/// The config key of the switch.
pub const SWITCH_KEY: &str = "process_scopes";
/// The config key choosing the wrapper.
pub const LAUNCHER_KEY: &str = "scope_launcher";

/// A larger config file is not read: it cannot be a hand-written `key = value` file.
const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// Malformed lines warned about one by one; beyond this a single summary WARN follows.
const MAX_LINE_WARNINGS: usize = 5;

/// Config warnings are given once per process each, however often the file is reloaded.
static CONFIG_WARNINGS: WarnedSet = WarnedSet::new();

/// Whether launches use scopes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Scopes when available, direct launches otherwise (the default).
    On,
    /// Always direct: no probe, no warning.
    Off,
    /// Scopes or an error: a request that would go direct because scopes are unavailable fails.
    Required,
}

impl Mode {
    fn parse(value: &str) -> Option<Mode> {
        match value {
            "on" => Some(Mode::On),
            "off" => Some(Mode::Off),
            "required" => Some(Mode::Required),
            _ => None,
        }
    }

    /// The value as written in the config: `on`, `off` or `required`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::On => "on",
            Mode::Off => "off",
            Mode::Required => "required",
        }
    }
}

/// Which program makes the scope (A1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LauncherChoice {
    /// The project's own launcher program where it is installed, systemd-run otherwise (the
    /// default).
    Auto,
    /// The project's own launcher program, `synaps-scope-exec`; where it is missing, scopes are
    /// unavailable.
    Exec,
    /// `systemd-run --user --scope`.
    SystemdRun,
}

impl LauncherChoice {
    fn parse(value: &str) -> Option<LauncherChoice> {
        match value {
            "auto" => Some(LauncherChoice::Auto),
            "synaps-scope-exec" => Some(LauncherChoice::Exec),
            "systemd-run" => Some(LauncherChoice::SystemdRun),
            _ => None,
        }
    }

    /// The value as written in the config: `auto`, `synaps-scope-exec` or `systemd-run`.
    pub fn as_str(self) -> &'static str {
        match self {
            LauncherChoice::Auto => "auto",
            LauncherChoice::Exec => "synaps-scope-exec",
            LauncherChoice::SystemdRun => "systemd-run",
        }
    }
}

const LAUNCHER_VALUES: &str = "auto, synaps-scope-exec, systemd-run";
const MODE_VALUES: &str = "on, off, required";

/// The setting an environment variable gives, if it is set; a value `parse` refuses is warned
/// about once (naming the values allowed) and ignored.
fn switch_setting<T>(
    raw: Option<&OsStr>,
    var: &'static str,
    parse: fn(&str) -> Option<T>,
    allowed: &str,
) -> Option<Setting<T>> {
    let raw = raw?.to_string_lossy();
    let value = parse(raw.trim());
    if value.is_none() {
        warn_once(format!(
            "{var}={raw:?} is not one of {allowed}; ignoring it"
        ));
    }
    value.map(|value| Setting {
        value,
        origin: Origin::Environment(var),
    })
}

/// The setting a config file line gives; a value `parse` refuses is warned about once, naming
/// file and line, and ignored.
fn file_setting<T>(
    entry: &Entry,
    origin: Origin,
    parse: fn(&str) -> Option<T>,
    allowed: &str,
) -> Option<Setting<T>> {
    let value = parse(&entry.value);
    if value.is_none() {
        warn_once(format!(
            "{origin}: {} = {:?} is not one of {allowed}; ignoring it",
            entry.key, entry.value
        ));
    }
    value.map(|value| Setting { value, origin })
}

/// Where a setting's value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Nothing set it.
    Default,
    /// A line of the config file.
    File {
        /// The config file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
    },
    /// An environment variable of the effective environment.
    Environment(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::File { path, line } => write!(f, "{}:{line}", path.display()),
            Origin::Environment(var) => write!(f, "environment {var}"),
        }
    }
}

/// A setting's value and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting<T> {
    /// The value in force.
    pub value: T,
    /// Where it came from.
    pub origin: Origin,
}

impl<T> Setting<T> {
    fn default_value(value: T) -> Self {
        Setting {
            value,
            origin: Origin::Default,
        }
    }
}

/// The settings one launcher request uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The config file consulted (whether or not it exists), if any path could be formed.
    pub path: Option<PathBuf>,
    /// The switch.
    pub mode: Setting<Mode>,
    /// `scope_launcher`: which program makes the scope.
    pub launcher: Setting<LauncherChoice>,
    /// `tool_scope_slice`: the slice of [`ScopeKind::Tool`] scopes (None: systemd's default).
    pub tool_slice: Setting<Option<String>>,
    /// `daemon_scope_slice`: the slice of [`ScopeKind::Daemon`] scopes.
    pub daemon_slice: Setting<Option<String>>,
}

/// One `key = value` line of a config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: String,
    pub value: String,
    pub line: usize,
}

/// A line that is neither blank, a comment, nor `key = value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Malformed {
    pub line: usize,
    pub why: &'static str,
}

impl Config {
    /// Loads the settings for one request from `env` (the effective environment) and the config
    /// file it names, warning (once per process per message) about anything wrong in either.
    pub fn load(env: &[(OsString, OsString)]) -> Config {
        Config::from_inputs(&Inputs::read(env))
    }

    /// The configuration a request's inputs give.
    pub(crate) fn from_inputs(inputs: &Inputs<'_>) -> Config {
        let path = inputs.config_path.clone();
        let mut config = Config {
            path: path.clone(),
            mode: Setting::default_value(Mode::On),
            launcher: Setting::default_value(LauncherChoice::Auto),
            tool_slice: Setting::default_value(None),
            daemon_slice: Setting::default_value(None),
        };
        if let Some(path) = &path {
            if let Some(text) = read_config(path, inputs.config_named) {
                config.apply_file(path, &text);
            }
        }
        if let Some(mode) = switch_setting(inputs.mode_switch, SWITCH_VAR, Mode::parse, MODE_VALUES)
        {
            config.mode = mode;
        }
        if let Some(choice) = switch_setting(
            inputs.launcher_switch,
            LAUNCHER_VAR,
            LauncherChoice::parse,
            LAUNCHER_VALUES,
        ) {
            config.launcher = choice;
        }
        config
    }

    /// The slice configured for `kind`, if any.
    pub fn slice_for(&self, kind: ScopeKind) -> Option<&str> {
        self.slice_setting(kind).value.as_deref()
    }

    /// The slice setting for `kind`, with where it came from.
    pub fn slice_setting(&self, kind: ScopeKind) -> &Setting<Option<String>> {
        match kind {
            ScopeKind::Tool => &self.tool_slice,
            ScopeKind::Daemon => &self.daemon_slice,
        }
    }

    fn slice_setting_mut(&mut self, kind: ScopeKind) -> &mut Setting<Option<String>> {
        match kind {
            ScopeKind::Tool => &mut self.tool_slice,
            ScopeKind::Daemon => &mut self.daemon_slice,
        }
    }

    fn apply_file(&mut self, path: &Path, text: &[u8]) {
        let (entries, malformed) = parse(text);
        for bad in malformed.iter().take(MAX_LINE_WARNINGS) {
            warn_once(format!(
                "{}:{}: malformed config line ({}); skipping it",
                path.display(),
                bad.line,
                bad.why
            ));
        }
        if malformed.len() > MAX_LINE_WARNINGS {
            warn_once(format!(
                "{}: {} more malformed config lines skipped",
                path.display(),
                malformed.len() - MAX_LINE_WARNINGS
            ));
        }
        for entry in entries {
            let origin = Origin::File {
                path: path.to_owned(),
                line: entry.line,
            };
            let slice = || Some(entry.value.clone()).filter(|v| !v.is_empty());
            match entry.key.as_str() {
                SWITCH_KEY => {
                    if let Some(mode) = file_setting(&entry, origin, Mode::parse, MODE_VALUES) {
                        self.mode = mode;
                    }
                }
                LAUNCHER_KEY => {
                    let parse = LauncherChoice::parse;
                    if let Some(choice) = file_setting(&entry, origin, parse, LAUNCHER_VALUES) {
                        self.launcher = choice;
                    }
                }
                key => {
                    if let Some(kind) = ScopeKind::ALL.into_iter().find(|k| k.slice_key() == key) {
                        *self.slice_setting_mut(kind) = Setting {
                            value: slice(),
                            origin,
                        };
                    }
                }
            }
        }
    }
}

/// The file's bytes, or None (with a WARN where one is due) when it cannot be used.
fn read_config(path: &Path, explicit: bool) -> Option<Vec<u8>> {
    let refuse = |why: String| {
        warn_once(format!(
            "config file {}: {why}; using defaults",
            path.display()
        ));
        None
    };
    // Opened without blocking and then checked through the open file, never by path first: a
    // FIFO opened for reading blocks until a writer appears, and a path checked and then opened
    // again may have become one in between.
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound && !explicit => return None,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return refuse(format!("named by {CONFIG_VAR} but does not exist"))
        }
        Err(e) => return refuse(format!("cannot be opened: {e}")),
    };
    match file.metadata() {
        Ok(meta) if meta.is_dir() => return refuse("is a directory".into()),
        Ok(meta) if !meta.is_file() => return refuse("is not a regular file".into()),
        Ok(meta) if meta.len() > MAX_CONFIG_BYTES => {
            return refuse(format!("is larger than {MAX_CONFIG_BYTES} bytes"))
        }
        Ok(_) => {}
        Err(e) => return refuse(format!("cannot be read: {e}")),
    }
    let mut text = Vec::new();
    match file.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut text) {
        Ok(_) if text.len() as u64 > MAX_CONFIG_BYTES => {
            refuse(format!("is larger than {MAX_CONFIG_BYTES} bytes"))
        }
        Ok(_) => Some(text),
        Err(e) => refuse(format!("cannot be read: {e}")),
    }
}

/// Parses `key = value` lines: `#` starts a comment line, blank lines are skipped, a value may be
/// wrapped in double quotes. Later entries of a key override earlier ones.
pub(crate) fn parse(text: &[u8]) -> (Vec<Entry>, Vec<Malformed>) {
    let mut entries = Vec::new();
    let mut malformed = Vec::new();
    for (index, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = index + 1;
        let Ok(content) = std::str::from_utf8(raw) else {
            malformed.push(Malformed {
                line,
                why: "not UTF-8",
            });
            continue;
        };
        let content = content.trim();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        match parse_line(content) {
            Ok((key, value)) => entries.push(Entry {
                key: key.to_owned(),
                value: value.to_owned(),
                line,
            }),
            Err(why) => malformed.push(Malformed { line, why }),
        }
    }
    (entries, malformed)
}

fn parse_line(content: &str) -> Result<(&str, &str), &'static str> {
    let (key, value) = content.split_once('=').ok_or("expected key = value")?;
    let key = key.trim();
    if key.is_empty() {
        return Err("empty key");
    }
    if !key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    {
        return Err("a key is letters, digits, '_', '-' and '.'");
    }
    let value = value.trim();
    let value = match value.strip_prefix('"') {
        Some(rest) => rest.strip_suffix('"').ok_or("unterminated double quote")?,
        None if value.ends_with('"') => return Err("unbalanced double quote"),
        None => value,
    };
    Ok((key, value))
}

fn warn_once(message: String) {
    if CONFIG_WARNINGS.first_time(&message) {
        tracing::warn!(target: TARGET, "{message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(items: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        items.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn parses_keys_values_quotes_comments_and_reports_malformed_lines() {
        let text = b"# comment\n\nprocess_scopes = off\n  tool_scope_slice=\"a b.slice\"\nno equals\n = x\nk = \"open\nk2 = close\"\nbad key = 1\n\xff\xfe = 1\nempty =\n";
        let (entries, malformed) = parse(text);
        let got: Vec<_> = entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str(), e.line))
            .collect();
        assert_eq!(
            got,
            vec![
                ("process_scopes", "off", 3),
                ("tool_scope_slice", "a b.slice", 4),
                ("empty", "", 11)
            ]
        );
        let bad: Vec<_> = malformed.iter().map(|m| m.line).collect();
        assert_eq!(bad, vec![5, 6, 7, 8, 9, 10]);
    }

    #[test]
    fn the_environment_switch_wins_and_bad_values_leave_the_default() {
        let config = Config::load(&env(&[(SWITCH_VAR, "off")]));
        assert_eq!(
            config.mode,
            Setting {
                value: Mode::Off,
                origin: Origin::Environment(SWITCH_VAR)
            }
        );
        let config = Config::load(&env(&[(SWITCH_VAR, "maybe")]));
        assert_eq!(config.mode, Setting::default_value(Mode::On));
    }
}

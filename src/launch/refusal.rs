//! Why a request does not get a launcher: the reasons a launch goes direct (R7, R8, R11) and the
//! errors of a request that cannot be answered at all (`required` mode, bad input), one type each
//! for every module that decides, launches or spawns.

use std::fmt;

use crate::input::config::Origin;
use crate::input::inputs::NO_USER_BUS;
use crate::input::intake::RefusedEnv;
use crate::input::kind::ScopeKind;
use crate::input::limits::Unenforced;
use crate::launch::exec_program::EXEC_PROGRAM;
use crate::warn;

/// Why a request decided on a direct launch.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DirectReason {
    /// `process_scopes = off` (or `SYNAPS_PROCESS_SCOPES=off`), set at `origin`.
    Off {
        /// Where the switch was set.
        origin: Origin,
    },
    /// Not Linux: scopes exist only under systemd.
    UnsupportedPlatform,
    /// No `systemd-run` in the effective PATH (and no launcher program found, or systemd-run
    /// chosen).
    NoSystemdRun,
    /// `scope_launcher = synaps-scope-exec`, but the launcher program is not installed.
    NoLauncherProgram {
        /// Where it was looked for.
        why: String,
    },
    /// Neither `XDG_RUNTIME_DIR` nor `DBUS_SESSION_BUS_ADDRESS` is set, so no user manager can be
    /// reached.
    NoUserBus,
    /// The probe (or the version query before it) failed.
    ProbeFailed {
        /// The slice the probe asked for (None: systemd's default).
        slice: Option<String>,
        /// systemd-run's complaint, the time-out, or the exit status.
        detail: String,
    },
    /// This process is in a pid namespace the user manager is outside of (a sandbox's
    /// `unshare --pid`, a container's), and systemd-run was to make the scope: it refuses a peer
    /// whose pid reads 0 ("No data available", every systemd from 247 to 262) and would not run
    /// the command at all. The launcher program makes scopes there (the manager knows it as the
    /// sender of its call).
    SystemdRunInPidNamespace {
        /// The slice the probe asked for (None: systemd's default).
        slice: Option<String>,
    },
    /// `required` mode, and limits were asked of the launch that will not be enforced
    /// ([`crate::ScopeLauncher::with_limits`]).
    LimitsNotEnforced {
        /// Each limit that will not hold, and why.
        unenforced: Vec<Unenforced>,
    },
    /// The child runs as another user or group, which a scope of this user's manager cannot
    /// hold.
    UserSwitch {
        /// The spawn options that switch, as the caller's surface names them (`uid=65534`).
        switches: String,
    },
}

impl fmt::Display for DirectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirectReason::Off { origin } => write!(f, "process scopes are off ({origin})"),
            DirectReason::UnsupportedPlatform => {
                f.write_str("process scopes need Linux with systemd")
            }
            DirectReason::NoSystemdRun => f.write_str("no systemd-run in the child's PATH"),
            DirectReason::NoLauncherProgram { why } => {
                write!(
                    f,
                    "the launcher program {EXEC_PROGRAM} was asked for but {why}"
                )
            }
            DirectReason::NoUserBus => f.write_str(NO_USER_BUS),
            DirectReason::ProbeFailed { slice, detail } => {
                write!(
                    f,
                    "the probe for {} failed: {detail}",
                    warn::slice_label(slice.as_deref())
                )
            }
            DirectReason::SystemdRunInPidNamespace { .. } => write!(
                f,
                "this process is in a pid namespace that the user manager is outside of, where \
                 systemd-run cannot reach the manager (\"No data available\") and would not run \
                 the command; the launcher program {EXEC_PROGRAM} makes scopes there"
            ),
            DirectReason::LimitsNotEnforced { unenforced } => {
                for (at, limit) in unenforced.iter().enumerate() {
                    if at > 0 {
                        f.write_str("; ")?;
                    }
                    limit.fmt(f)?;
                }
                Ok(())
            }
            DirectReason::UserSwitch { switches } => write!(
                f,
                "the child switches user ({switches}), and a scope of this user's systemd manager \
                 cannot hold another user's process"
            ),
        }
    }
}

/// A launcher request that cannot be answered with a launcher or "launch directly".
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScopeError {
    /// Scopes are required (`process_scopes = required`) but this launch would have gone direct.
    Unavailable {
        /// The kind of scope asked for.
        kind: ScopeKind,
        /// Why scopes are unavailable.
        reason: DirectReason,
    },
    /// The effective environment has an entry no process environment can hold (an empty key, a
    /// key with `=`, a NUL byte), in any mode: bad input, refused as on every surface.
    InvalidEnvironment(RefusedEnv),
}

impl fmt::Display for ScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScopeError::Unavailable { kind, reason } => write!(
                f,
                "process scopes are required but unavailable for a {kind} launch: {reason}"
            ),
            ScopeError::InvalidEnvironment(refused) => refused.fmt(f),
        }
    }
}

impl std::error::Error for ScopeError {}

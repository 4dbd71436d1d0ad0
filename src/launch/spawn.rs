//! The spawn policy every surface follows around a launcher, written once here for the command
//! line, C, Python and Node: a child that switches user runs directly; a shell command runs as
//! `SHELL -c …` inside the scope, its words handed over as the caller's language does (`shell`);
//! and a direct launch runs the program itself with the caller's argv[0] (the bindings spawn through
//! their language's own spawn, which does that; the command line, which spawns for itself, takes
//! it as a [`Launch`]). (The bounds a caller may give are checked by `intake`.)

use std::ffi::{OsStr, OsString};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::diag::TARGET;
use crate::launch::launcher::ScopeLauncher;
use crate::launch::refusal::{DirectReason, ScopeError};

/// Whether this process has said once why children that switch user run directly.
static USER_SWITCH_WARNED: AtomicBool = AtomicBool::new(false);

/// A child that runs as another user or group cannot run in a scope of this user's manager: the
/// wrapper would run as that user and could not reach the manager, so the command would never
/// run. `switches` names the spawn options that switch (as the caller's surface names them, e.g.
/// `uid=65534`). Such a child runs directly, with one warning per process saying why (the
/// reason is returned); in `required` mode it is refused before anything is spawned.
pub fn direct_for_user_switch(
    launcher: &ScopeLauncher,
    switches: &str,
) -> Result<DirectReason, ScopeError> {
    let reason = DirectReason::UserSwitch {
        switches: switches.to_owned(),
    };
    if launcher.required() {
        return Err(ScopeError::Unavailable {
            kind: launcher.kind(),
            reason,
        });
    }
    if !USER_SWITCH_WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(target: TARGET, "launching directly, not in a scope: {reason}");
    }
    Ok(reason)
}

/// A launch, as data: `program`, which sees `argv` (its `argv[0]` included, e.g. `-bash` for a
/// login shell).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// The program to run (a wrapper, or the command's own program).
    pub program: OsString,
    /// Its whole argv.
    pub argv: Vec<OsString>,
    /// The scope's unit, when wrapped.
    pub unit: Option<String>,
}

impl Launch {
    /// `program` with the argv `argv` (whose first element is what the program sees as its
    /// name), in a scope when `launcher` is given and the program resolves (R4: left unwrapped
    /// otherwise, so the spawn fails as a direct one would, naming the program).
    pub fn new(
        launcher: Option<&ScopeLauncher>,
        program: &OsStr,
        argv: Vec<OsString>,
        env: &[(OsString, OsString)],
    ) -> Launch {
        if let Some(launcher) = launcher {
            let wrapped = launcher.wrap_program(program, &argv, env, None);
            if let Some(unit) = wrapped.unit {
                return Launch {
                    program: wrapped.argv[0].clone(),
                    argv: wrapped.argv,
                    unit: Some(unit),
                };
            }
        }
        Launch {
            program: program.to_owned(),
            argv,
            unit: None,
        }
    }

    /// The argv to print for a caller that will run it itself: the program in `argv[0]`'s
    /// place, as a spawn by argv alone needs.
    pub fn spawnable_argv(&self) -> Vec<OsString> {
        let mut argv = self.argv.clone();
        if let Some(first) = argv.first_mut() {
            first.clone_from(&self.program);
        }
        argv
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::Launch;

    #[test]
    fn a_direct_launch_runs_the_program_with_the_caller_s_argv0() {
        let argv: Vec<OsString> = vec!["-bash".into(), "-l".into()];
        let launch = Launch::new(None, "/bin/bash".as_ref(), argv.clone(), &[]);
        assert_eq!(launch.program, "/bin/bash");
        assert_eq!(launch.argv, argv);
        assert_eq!(launch.unit, None);
        assert_eq!(
            launch.spawnable_argv(),
            vec![OsString::from("/bin/bash"), "-l".into()]
        );
    }
}

//! A shell command inside a scope: `SHELL -c …`, its words handed over as the caller's language
//! hands them to a shell, so that it means inside a scope what it means there without one.

use std::ffi::{OsStr, OsString};

/// How a surface's language hands a shell the words of a command, so that a shell command means
/// inside a scope what it means there without one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShellWords {
    /// Node's `child_process` (`shell: true`): the words joined with spaces are the one command.
    Joined,
    /// Python's `subprocess` (`shell=True`) and `sh -c` itself: the first word is the command,
    /// the others the shell's `$0`, `$1`…
    Positional,
}

impl ShellWords {
    /// Every way.
    pub const ALL: [ShellWords; 2] = [ShellWords::Positional, ShellWords::Joined];

    /// The way's number in the C ABI (`SCOPE_SHELL_WORDS_*`), which never changes.
    pub fn code(self) -> u32 {
        match self {
            ShellWords::Positional => 0,
            ShellWords::Joined => 1,
        }
    }
}

/// The shell a command runs in when the caller names none.
pub const DEFAULT_SHELL: &str = "/bin/sh";

/// The argv that runs `words` as a shell command: `SHELL -c COMMAND [WORDS…]`, SHELL being
/// `shell` or [`DEFAULT_SHELL`]. To be wrapped like any argv.
pub fn shell_argv(shell: Option<&OsStr>, words: &[OsString], how: ShellWords) -> Vec<OsString> {
    let mut argv = vec![
        shell.unwrap_or(OsStr::new(DEFAULT_SHELL)).to_owned(),
        OsString::from("-c"),
    ];
    match how {
        ShellWords::Joined => argv.push(words.join(OsStr::new(" "))),
        ShellWords::Positional => argv.extend_from_slice(words),
    }
    argv
}

#[cfg(test)]
mod tests {
    use std::ffi::{OsStr, OsString};

    use super::{shell_argv, ShellWords};

    #[test]
    fn a_shell_command_takes_its_words_as_the_language_of_the_caller_hands_them() {
        let words: Vec<OsString> = ["echo $0 $1", "a b", "c"].map(OsString::from).into();
        assert_eq!(
            shell_argv(None, &words, ShellWords::Joined),
            ["/bin/sh", "-c", "echo $0 $1 a b c"].map(OsString::from)
        );
        assert_eq!(
            shell_argv(
                Some(OsStr::new("/bin/bash")),
                &words,
                ShellWords::Positional
            ),
            ["/bin/bash", "-c", "echo $0 $1", "a b", "c"].map(OsString::from)
        );
        assert_eq!(
            shell_argv(None, &[], ShellWords::Joined),
            ["/bin/sh", "-c", ""].map(OsString::from)
        );
    }
}

//! Every line the command prints goes through here, where a write that fails is let go: a closed
//! stderr or stdout (EPIPE) loses the line, never the exit status, as `eprintln!` and `println!`
//! would with their panic (101).

use std::fmt;
use std::io::{self, Write};

/// Writes one line to stderr.
pub(crate) fn err(line: fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}

/// Writes `text` to stdout, flushed.
pub(crate) fn out(text: fmt::Arguments<'_>) {
    let mut out = io::stdout().lock();
    let _ = out.write_fmt(text).and_then(|()| out.flush());
}

/// `eprintln!` that lets a failed write go.
macro_rules! say {
    ($($arg:tt)*) => { $crate::say::err(format_args!($($arg)*)) };
}

/// `print!` that lets a failed write go.
macro_rules! say_out {
    ($($arg:tt)*) => { $crate::say::out(format_args!($($arg)*)) };
}

pub(crate) use {say, say_out};

//! The command's log lines (R16): the library's `tracing` events, filtered by `SYNAPS_SCOPE_LOG`
//! (a tracing-subscriber filter; `warn` when unset or unreadable), written to stderr as
//! `synaps-scope: <level>: <message> key=value…`.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The variable that sets the filter.
const FILTER_VARIABLE: &str = "SYNAPS_SCOPE_LOG";

/// Installs the command's subscriber for the whole process, background threads included.
pub fn init() {
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::WARN.into())
        .with_env_var(FILTER_VARIABLE)
        .from_env_lossy();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Its own word on a failed write is an `eprintln!`, which panics on a closed stderr: the
        // line is lost, as every other line of the command's is (`say`).
        .log_internal_errors(false)
        .event_format(OneLine)
        .try_init();
}

/// `synaps-scope: warning: …`, the same line the C ABI's default sink prints.
struct OneLine;

impl<S, N> FormatEvent<S, N> for OneLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let label = match *event.metadata().level() {
            Level::WARN => "warning",
            Level::ERROR => "error",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        write!(writer, "synaps-scope: {label}: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

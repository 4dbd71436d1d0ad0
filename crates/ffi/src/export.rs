//! What every fallible export runs behind: the library's log lines routed to the host's sink
//! (R16), then the body behind the panic boundary, its failure recorded as this thread's last
//! error.

use crate::error::{result_of, scope_result, Failure};
use crate::log;

/// Runs a fallible export: its [`scope_result`], the message of a failure kept for
/// `scope_last_error`, a panic turned into `SCOPE_RESULT_PANIC`.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Failure>) -> scope_result {
    log::ensure_installed();
    result_of(body)
}

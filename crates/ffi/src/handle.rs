//! `scope_handle` across the C ABI: find, inspect, kill and wait for a scope (R15).

use std::ffi::{c_char, CString};
use std::os::unix::ffi::OsStrExt;
use std::ptr;

use crate::args::{c_string, env_arg, out_arg, str_arg, timeout_arg};
use crate::boxed::{borrow, free, hand_out, read_or};
use crate::error::{copy_error, scope_result, Failure};
use crate::export::guard;
use crate::panic::guard_value;
use synaps_scope::{Ending, Evidence, OomdRule, ScopeEnding, ScopeHandle};

/// A running scope of this library, found by unit name. Immutable, so any number of threads may
/// use one handle at once (one reading it while another kills the scope); free it with
/// [`scope_handle_free`] once none of them is using it.
pub struct scope_handle {
    pub(crate) inner: ScopeHandle,
    unit: CString,
    cgroup: CString,
}

impl scope_handle {
    /// The handle itself, for the waits answered on a thread of their own.
    pub(crate) fn inner(&self) -> &ScopeHandle {
        &self.inner
    }
}

/// A usage figure the kernel does not offer (its controller is not enabled).
pub const SCOPE_STAT_UNKNOWN: u64 = u64::MAX;

/// A scope's usage; each figure is [`SCOPE_STAT_UNKNOWN`] where its controller is not enabled.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct scope_stats {
    /// `memory.current`, bytes.
    pub memory_current: u64,
    /// `memory.peak`, bytes.
    pub memory_peak: u64,
    /// `pids.current`.
    pub pids_current: u64,
}

impl scope_handle {
    /// The handle of `inner`, with its names as C takes them.
    pub(crate) fn new(inner: ScopeHandle) -> Result<Self, Failure> {
        let unit = c_string(inner.unit().as_bytes().to_vec())?;
        let cgroup = c_string(inner.cgroup_dir().as_os_str().as_bytes().to_vec())?;
        Ok(scope_handle {
            inner,
            unit,
            cgroup,
        })
    }
}

fn into_handle(inner: ScopeHandle, out: *mut *mut scope_handle) -> Result<(), Failure> {
    let handle = scope_handle::new(inner)?;
    // SAFETY: every caller checked `out` non-NULL first; the C caller guarantees it is writable.
    unsafe { hand_out(handle, out) };
    Ok(())
}

/// The scope `unit` found through the cgroup of `pid`, a process launched in it. Refused
/// (`SCOPE_RESULT_NOT_OURS`) unless `unit` is one of this library's names, and
/// (`SCOPE_RESULT_NOT_IN_SCOPE`) unless `pid` is in it.
///
/// # Safety
/// `unit` is NULL or a NUL-terminated string; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_from_pid(
    unit: *const c_char,
    pid: u32,
    out: *mut *mut scope_handle,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: forwarded from the caller.
        let unit = unsafe { str_arg(unit, "unit") }?;
        into_handle(
            ScopeHandle::from_pid(unit, pid).map_err(|e| Failure::of(&e))?,
            out,
        )
    })
}

/// The scope that process `pid` runs in, refused unless it is one of this library's.
///
/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_of_process(
    pid: u32,
    out: *mut *mut scope_handle,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        into_handle(
            ScopeHandle::of_process(pid).map_err(|e| Failure::of(&e))?,
            out,
        )
    })
}

/// The scope `unit`, found by asking the user manager reachable with `envp` (NULL: this
/// process's environment), within `timeout_ms`.
///
/// # Safety
/// `unit` is NULL or a NUL-terminated string; `envp` is NULL or a NULL-terminated array of
/// NUL-terminated strings; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_from_manager(
    unit: *const c_char,
    envp: *const *const c_char,
    timeout_ms: u32,
    out: *mut *mut scope_handle,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: forwarded from the caller.
        let unit = unsafe { str_arg(unit, "unit") }?;
        // SAFETY: forwarded from the caller.
        let env = unsafe { env_arg(envp) }?;
        let timeout = timeout_arg(timeout_ms, "timeout_ms")?;
        into_handle(
            ScopeHandle::from_manager(unit, env.as_pairs(), timeout)
                .map_err(|e| Failure::of(&e))?,
            out,
        )
    })
}

/// The handle's unit name (NULL for NULL), valid while the handle lives.
///
/// # Safety
/// `handle` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_unit(handle: *const scope_handle) -> *const c_char {
    // SAFETY: NULL or live per the caller.
    unsafe { read_or(handle, ptr::null(), |h| h.unit.as_ptr()) }
}

/// The scope's cgroup directory (NULL for NULL), valid while the handle lives.
///
/// # Safety
/// `handle` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_cgroup(handle: *const scope_handle) -> *const c_char {
    // SAFETY: NULL or live per the caller.
    unsafe { read_or(handle, ptr::null(), |h| h.cgroup.as_ptr()) }
}

/// The processes in the scope: `*pids` (free with [`scope_pids_free`]) holding `*len` entries.
/// An empty scope gives `*pids` NULL and `*len` 0.
///
/// # Safety
/// `handle` is NULL or a live handle; `pids` and `len` are writable.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_pids(
    handle: *const scope_handle,
    pids: *mut *mut u32,
    len: *mut usize,
) -> scope_result {
    guard(|| {
        out_arg(pids, "pids")?;
        out_arg(len, "len")?;
        // SAFETY: NULL or live per the caller.
        let handle = unsafe { borrow(handle, "handle") }?;
        let found = handle.inner.pids().map_err(|e| Failure::of(&e))?;
        // SAFETY: both checked non-NULL; writable per the caller.
        unsafe { write_pids(found, pids, len) };
        Ok(())
    })
}

/// Hands `found` to the caller as an array for [`scope_pids_free`] (NULL when empty).
///
/// # Safety
/// `pids` and `len` are non-NULL and writable.
unsafe fn write_pids(found: Vec<u32>, pids: *mut *mut u32, len: *mut usize) {
    let count = found.len();
    let array = if found.is_empty() {
        ptr::null_mut()
    } else {
        Box::into_raw(found.into_boxed_slice()).cast::<u32>()
    };
    // SAFETY: per this function's contract.
    unsafe {
        *pids = array;
        *len = count;
    }
}

/// Frees an array from [`scope_handle_pids`] (NULL is accepted and ignored).
///
/// # Safety
/// `pids` is NULL or from `scope_handle_pids` with its `len`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn scope_pids_free(pids: *mut u32, len: usize) {
    guard_value((), || {
        if !pids.is_null() {
            // SAFETY: the pointer and length of a boxed slice from scope_handle_pids, freed once.
            drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(pids, len)) });
        }
    })
}

/// The scope's usage into `*out`; absent controllers read as [`SCOPE_STAT_UNKNOWN`].
///
/// # Safety
/// `handle` is NULL or a live handle; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_stats(
    handle: *const scope_handle,
    out: *mut scope_stats,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: NULL or live per the caller.
        let handle = unsafe { borrow(handle, "handle") }?;
        let stats = handle.inner.stats();
        let known = |v: Option<u64>| v.unwrap_or(SCOPE_STAT_UNKNOWN);
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe {
            *out = scope_stats {
                memory_current: known(stats.memory_current),
                memory_peak: known(stats.memory_peak),
                pids_current: known(stats.pids_current),
            }
        };
        Ok(())
    })
}

/// How a scope ended. The numbers never change meaning.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum scope_ending_kind {
    /// Processes are still in the scope.
    Running = 0,
    /// systemd-oomd killed it (`rule` says under which rule, where that can be told).
    Oomd = 1,
    /// The kernel's OOM killer killed `kernel_oom_kills` process(es) in it.
    KernelOom = 2,
    /// A scope handle's kill found processes in it and killed them (a kill that found it empty
    /// is not this).
    HandleKill = 3,
    /// Its processes ended without any of the above.
    OnItsOwn = 4,
    /// It ended, but how cannot be told (no evidence of a kill, and no count of the kernel's).
    Unknown = 5,
}

/// The systemd-oomd rule that killed a scope. The numbers never change meaning.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum scope_oomd_rule {
    /// Not killed by oomd, or both rules cover the scope, or the managers could not say.
    Unknown = 0,
    /// `ManagedOOMSwap=kill`: swap and memory nearly used up.
    Swap = 1,
    /// `ManagedOOMMemoryPressure=kill`: memory pressure over its limit.
    MemoryPressure = 2,
}

/// What an answer of [`scope_handle_ending`] rests on. The numbers never change meaning.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum scope_evidence {
    /// Nothing: no mark, no signal, no count (with [`scope_ending_kind::Unknown`]).
    None = 0,
    /// The kernel says processes are in the scope (`cgroup.events`).
    CgroupEvents = 1,
    /// systemd-oomd's `Killed` signal, sent by the owner of `org.freedesktop.oom1` on the system
    /// bus: no process of the user can send it.
    OomdSignal = 2,
    /// oomd's mark on the cgroup, where its signal could not be heard: forgeable.
    OomdMark = 3,
    /// A kill through this handle or a copy of it, in this process.
    OwnKill = 4,
    /// The kill mark of a handle in another process: forgeable.
    KillMark = 5,
    /// The kernel's count of OOM kills (`memory.events`), read once the scope was empty.
    MemoryEvents = 6,
    /// The kernel's count of OOM kills, whose last reading was lost with the cgroup.
    MemoryEventsLost = 7,
}

/// How a scope ended, from [`scope_handle_ending`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct scope_ending {
    /// How it ended.
    pub kind: scope_ending_kind,
    /// With [`scope_ending_kind::Oomd`], the rule that acted.
    pub rule: scope_oomd_rule,
    /// With [`scope_ending_kind::KernelOom`], how many processes the kernel killed.
    pub kernel_oom_kills: u64,
    /// What the answer rests on.
    pub evidence: scope_evidence,
    /// Whether any process of the user could have made that evidence (a mark on the cgroup).
    pub forgeable: bool,
}

impl From<Ending> for scope_ending {
    fn from(ending: Ending) -> Self {
        let mut out = scope_ending {
            kind: scope_ending_kind::Unknown,
            rule: scope_oomd_rule::Unknown,
            kernel_oom_kills: 0,
            evidence: match ending.evidence {
                Evidence::Nothing => scope_evidence::None,
                Evidence::CgroupEvents => scope_evidence::CgroupEvents,
                Evidence::OomdSignal => scope_evidence::OomdSignal,
                Evidence::OomdMark => scope_evidence::OomdMark,
                Evidence::OwnKill => scope_evidence::OwnKill,
                Evidence::KillMark => scope_evidence::KillMark,
                Evidence::MemoryEvents => scope_evidence::MemoryEvents,
                Evidence::MemoryEventsLost => scope_evidence::MemoryEventsLost,
            },
            forgeable: ending.evidence.forgeable(),
        };
        out.kind = match ending.how {
            ScopeEnding::Running => scope_ending_kind::Running,
            ScopeEnding::KilledByOomd { rule } => {
                out.rule = match rule {
                    Some(OomdRule::Swap) => scope_oomd_rule::Swap,
                    Some(OomdRule::MemoryPressure) => scope_oomd_rule::MemoryPressure,
                    None => scope_oomd_rule::Unknown,
                };
                scope_ending_kind::Oomd
            }
            ScopeEnding::KilledByKernelOom { kills } => {
                out.kernel_oom_kills = kills;
                scope_ending_kind::KernelOom
            }
            ScopeEnding::KilledByHandle => scope_ending_kind::HandleKill,
            ScopeEnding::EndedOnItsOwn => scope_ending_kind::OnItsOwn,
            ScopeEnding::Unknown => scope_ending_kind::Unknown,
        };
        out
    }
}

/// How the scope ended, and what that rests on, into `*out`: answered after the manager has
/// collected the scope too, from what the handle kept since it was made. May block up to
/// `timeout_ms`: for oomd's signal, where its mark is there and the signal not yet; for an oomd
/// kill no signal named, to ask the user manager reached with `envp` (NULL: this process's
/// environment) and the system manager which rules cover the scope.
///
/// # Safety
/// `handle` is NULL or a live handle; `envp` is NULL or a NULL-terminated array of C strings;
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_ending(
    handle: *const scope_handle,
    envp: *const *const c_char,
    timeout_ms: u32,
    out: *mut scope_ending,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: NULL or live per the caller.
        let handle = unsafe { borrow(handle, "handle") }?;
        // SAFETY: forwarded from the caller.
        let env = unsafe { env_arg(envp) }?;
        let timeout = timeout_arg(timeout_ms, "timeout_ms")?;
        let ending = handle.inner.ending(env.as_pairs(), timeout);
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { *out = ending.into() };
        Ok(())
    })
}

/// Kills every process in the scope (descendants that left the process group included) and
/// waits up to `timeout_ms` until it is empty, as the kernel counts it: a killed process may still
/// be finishing its exit (not yet a zombie), but runs none of its own code again.
///
/// # Safety
/// `handle` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_kill(
    handle: *const scope_handle,
    timeout_ms: u32,
) -> scope_result {
    guard(|| {
        // SAFETY: NULL or live per the caller.
        let handle = unsafe { borrow(handle, "handle") }?;
        let timeout = timeout_arg(timeout_ms, "timeout_ms")?;
        handle
            .inner
            .kill(timeout)
            .map(drop)
            .map_err(|e| Failure::of(&e))
    })
}

/// [`scope_handle_kill`] that also says which processes were in the scope when the kill began, as
/// every surface's kill does: `*pids` (free with [`scope_pids_free`]) holding `*len` entries,
/// written only on success.
///
/// # Safety
/// `handle` is NULL or a live handle; `pids` and `len` are writable.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_kill_pids(
    handle: *const scope_handle,
    timeout_ms: u32,
    pids: *mut *mut u32,
    len: *mut usize,
) -> scope_result {
    guard(|| {
        out_arg(pids, "pids")?;
        out_arg(len, "len")?;
        // SAFETY: NULL or live per the caller.
        let handle = unsafe { borrow(handle, "handle") }?;
        let timeout = timeout_arg(timeout_ms, "timeout_ms")?;
        let killed = handle.inner.kill(timeout).map_err(|e| Failure::of(&e))?;
        // SAFETY: both checked non-NULL; writable per the caller.
        unsafe { write_pids(killed, pids, len) };
        Ok(())
    })
}

/// Waits up to `timeout_ms` until no process is left in the scope.
///
/// # Safety
/// `handle` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_wait_empty(
    handle: *const scope_handle,
    timeout_ms: u32,
) -> scope_result {
    guard(|| {
        // SAFETY: NULL or live per the caller.
        let handle = unsafe { borrow(handle, "handle") }?;
        let timeout = timeout_arg(timeout_ms, "timeout_ms")?;
        handle
            .inner
            .wait_empty(timeout)
            .map_err(|e| Failure::of(&e))
    })
}

/// Frees a handle (NULL is accepted and ignored). The scope itself is not touched.
///
/// # Safety
/// `handle` is NULL or a handle from this library, not yet freed, that no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_free(handle: *mut scope_handle) {
    // SAFETY: NULL or a handle not yet freed and not in use, per the caller.
    unsafe { free(handle) }
}

/// [`scope_handle_from_manager`] that also copies a failure's message into `error`, for callers
/// that run it on a worker thread.
///
/// # Safety
/// As [`scope_handle_from_manager`]; `error` is NULL or writable for `error_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_from_manager_r(
    unit: *const c_char,
    envp: *const *const c_char,
    timeout_ms: u32,
    out: *mut *mut scope_handle,
    error: *mut c_char,
    error_len: usize,
) -> scope_result {
    // SAFETY: forwarded from the caller.
    unsafe {
        copy_error(
            scope_handle_from_manager(unit, envp, timeout_ms, out),
            error,
            error_len,
        )
    }
}

/// [`scope_handle_kill`] that also copies a failure's message into `error`.
///
/// # Safety
/// As [`scope_handle_kill`]; `error` is NULL or writable for `error_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_kill_r(
    handle: *const scope_handle,
    timeout_ms: u32,
    error: *mut c_char,
    error_len: usize,
) -> scope_result {
    // SAFETY: forwarded from the caller.
    unsafe { copy_error(scope_handle_kill(handle, timeout_ms), error, error_len) }
}

/// [`scope_handle_kill_pids`] that also copies a failure's message into `error`.
///
/// # Safety
/// As [`scope_handle_kill_pids`]; `error` is NULL or writable for `error_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_kill_pids_r(
    handle: *const scope_handle,
    timeout_ms: u32,
    pids: *mut *mut u32,
    len: *mut usize,
    error: *mut c_char,
    error_len: usize,
) -> scope_result {
    // SAFETY: forwarded from the caller.
    unsafe {
        copy_error(
            scope_handle_kill_pids(handle, timeout_ms, pids, len),
            error,
            error_len,
        )
    }
}

/// [`scope_handle_wait_empty`] that also copies a failure's message into `error`.
///
/// # Safety
/// As [`scope_handle_wait_empty`]; `error` is NULL or writable for `error_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_wait_empty_r(
    handle: *const scope_handle,
    timeout_ms: u32,
    error: *mut c_char,
    error_len: usize,
) -> scope_result {
    // SAFETY: forwarded from the caller.
    unsafe {
        copy_error(
            scope_handle_wait_empty(handle, timeout_ms),
            error,
            error_len,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header's names are the core's words (`KernelOom` is `kernel-oom`), which Node derives
    /// from them.
    #[test]
    fn each_ending_kind_is_named_as_the_core_words_it() {
        let kebab = |name: String| {
            let mut word = String::new();
            for (at, c) in name.chars().enumerate() {
                if c.is_ascii_uppercase() && at > 0 {
                    word.push('-');
                }
                word.push(c.to_ascii_lowercase());
            }
            word
        };
        for ending in [
            ScopeEnding::Running,
            ScopeEnding::KilledByOomd {
                rule: Some(OomdRule::Swap),
            },
            ScopeEnding::KilledByOomd {
                rule: Some(OomdRule::MemoryPressure),
            },
            ScopeEnding::KilledByKernelOom { kills: 2 },
            ScopeEnding::KilledByHandle,
            ScopeEnding::EndedOnItsOwn,
            ScopeEnding::Unknown,
        ] {
            let c = scope_ending::from(Ending {
                how: ending,
                evidence: Evidence::Nothing,
            });
            assert_eq!(kebab(format!("{:?}", c.kind)), ending.as_str());
            if let ScopeEnding::KilledByOomd { rule: Some(rule) } = ending {
                assert_eq!(kebab(format!("{:?}", c.rule)), rule.as_str());
            }
        }
        for evidence in [
            Evidence::Nothing,
            Evidence::CgroupEvents,
            Evidence::OomdSignal,
            Evidence::OomdMark,
            Evidence::OwnKill,
            Evidence::KillMark,
            Evidence::MemoryEvents,
            Evidence::MemoryEventsLost,
        ] {
            let c = scope_ending::from(Ending {
                how: ScopeEnding::Unknown,
                evidence,
            });
            assert_eq!(kebab(format!("{:?}", c.evidence)), evidence.as_str());
            assert_eq!(c.forgeable, evidence.forgeable());
        }
    }
}

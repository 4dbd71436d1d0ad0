//! Opaque handles are boxes: handed out through an out-parameter, borrowed from a pointer that
//! may be NULL, and freed at most once by a `_free` that accepts NULL.

use crate::error::Failure;
use crate::panic::guard_value;

/// Writes an out-parameter.
///
/// # Safety
/// `out` is non-NULL (checked with `out_arg` before any work) and writable.
pub(crate) unsafe fn write_out<T>(out: *mut T, value: T) {
    // SAFETY: per this function's contract.
    unsafe { out.write(value) };
}

/// Hands `value` to C as a handle through `out`.
///
/// # Safety
/// As [`write_out`].
pub(crate) unsafe fn hand_out<T>(value: T, out: *mut *mut T) {
    // SAFETY: forwarded from the caller.
    unsafe { write_out(out, Box::into_raw(Box::new(value))) };
}

/// A handle argument that must not be NULL.
///
/// # Safety
/// `handle` is NULL or a live handle that outlives `'a`.
pub(crate) unsafe fn borrow<'a, T>(handle: *const T, what: &str) -> Result<&'a T, Failure> {
    // SAFETY: NULL or live per the caller.
    unsafe { handle.as_ref() }.ok_or_else(|| Failure::null(what))
}

/// Frees a handle from [`hand_out`], behind the panic boundary; NULL is accepted and ignored.
///
/// # Safety
/// `handle` is NULL or from [`hand_out`], not yet freed, and in use by no other thread.
pub(crate) unsafe fn free<T>(handle: *mut T) {
    guard_value((), || {
        if !handle.is_null() {
            // SAFETY: a pointer from Box::into_raw, freed at most once per the caller.
            drop(unsafe { Box::from_raw(handle) });
        }
    })
}

/// A getter's answer: `read` of the handle, or `fallback` for NULL (and for a panic, behind the
/// boundary).
///
/// # Safety
/// `handle` is NULL or a live handle.
pub(crate) unsafe fn read_or<T, R: Copy>(
    handle: *const T,
    fallback: R,
    read: impl FnOnce(&T) -> R,
) -> R {
    guard_value(fallback, || {
        // SAFETY: NULL or live per the caller.
        unsafe { handle.as_ref() }.map_or(fallback, read)
    })
}

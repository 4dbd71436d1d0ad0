//! A launch's resource limits across the C ABI: made from an array of name/value pairs
//! (`scope_limits_new`), given to a launcher (`scope_launcher_with_limits`), and told back when
//! one will not be enforced.

use std::ffi::{c_char, CString};

use crate::args::{c_string, out_arg, str_arg};
use crate::boxed::{borrow, free, hand_out, read_or};
use crate::error::{scope_result, Failure};
use crate::export::guard;
use crate::launcher::scope_launcher;
use synaps_scope::Limits;

/// One resource-control property of a scope, as `systemd-run -p NAME=VALUE` takes it: `name` one
/// of `MemoryMax`, `MemoryHigh`, `MemorySwapMax`, `CPUWeight`, `CPUQuota`, `TasksMax`, `IOWeight`;
/// `value` in systemd's syntax (`512M`, `2G`, `50%`, `infinity`, `200%` for two CPUs).
#[repr(C)]
pub struct scope_property {
    /// The property's name (UTF-8, NUL-terminated).
    pub name: *const c_char,
    /// Its value (UTF-8, NUL-terminated).
    pub value: *const c_char,
}

/// Checked resource limits for the scopes of a launcher. Immutable. Free with
/// [`scope_limits_free`].
pub struct scope_limits {
    inner: Limits,
}

/// The most properties one call takes: more than every property there is, many times over.
const MAX_PROPERTIES: usize = 1024;

/// Checks `len` properties at `properties` and makes limits of them: a name that is not one a
/// launch may set, a value that is not one for it, or a name given twice is refused with
/// `SCOPE_RESULT_INVALID_ARGUMENT` (a string that is not UTF-8 with `SCOPE_RESULT_INVALID_UTF8`),
/// the reason in `scope_last_error()`. `properties` may be NULL when `len` is 0. `*out` is written
/// only on success.
///
/// # Safety
/// `properties` is NULL or points to `len` entries whose strings are NUL-terminated; `out` is
/// writable.
#[no_mangle]
pub unsafe extern "C" fn scope_limits_new(
    properties: *const scope_property,
    len: usize,
    out: *mut *mut scope_limits,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        if len > MAX_PROPERTIES {
            return Err(Failure::new(
                scope_result::InvalidArgument,
                format!("len is {len}, more than {MAX_PROPERTIES} properties"),
            ));
        }
        if properties.is_null() && len > 0 {
            return Err(Failure::null("properties"));
        }
        let mut pairs = Vec::with_capacity(len);
        for at in 0..len {
            // SAFETY: `properties` points to `len` entries per the caller, and `at < len`.
            let property = unsafe { &*properties.add(at) };
            // SAFETY: NULL or NUL-terminated per the caller; both outlive this call.
            let name = unsafe { str_arg(property.name, &format!("properties[{at}].name")) }?;
            // SAFETY: as above.
            let value = unsafe { str_arg(property.value, &format!("properties[{at}].value")) }?;
            pairs.push((name, value));
        }
        let inner = Limits::from_pairs(pairs).map_err(|e| Failure::bad_input(&e))?;
        // SAFETY: `out` was checked non-NULL; the caller guarantees it is writable.
        unsafe { hand_out(scope_limits { inner }, out) };
        Ok(())
    })
}

/// Frees limits from [`scope_limits_new`]; NULL is ignored. Launchers made with them keep their
/// own copy.
///
/// # Safety
/// `limits` is NULL or from `scope_limits_new`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn scope_limits_free(limits: *mut scope_limits) {
    // SAFETY: per the caller.
    unsafe { free(limits) }
}

/// A new launcher like `launcher` whose launches each give their scope `limits`. A limit that
/// will not be enforced (the user manager was not given its cgroup controller, or the systemd-run
/// in use cannot pass the value) is warned about through the log callback and listed by
/// [`scope_launcher_unenforced`]; in `required` mode it is refused with
/// `SCOPE_RESULT_REQUIRED_UNAVAILABLE` instead. Asks nothing of the manager (no blocking). `*out`
/// is written only on success; free it with `scope_launcher_free`.
///
/// # Safety
/// `launcher` and `limits` are NULL or live handles; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_with_limits(
    launcher: *const scope_launcher,
    limits: *const scope_limits,
    out: *mut *mut scope_launcher,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: NULL or live per the caller.
        let launcher = unsafe { borrow(launcher, "launcher") }?;
        // SAFETY: NULL or live per the caller.
        let limits = unsafe { borrow(limits, "limits") }?;
        let inner = launcher
            .inner
            .with_limits(limits.inner.clone())
            .map_err(|e| Failure::of(&e))?;
        let unenforced = inner
            .unenforced()
            .iter()
            .map(|u| c_string(u.to_string().into_bytes()))
            .collect::<Result<Vec<CString>, _>>()?;
        let made = scope_launcher::with(inner, unenforced)?;
        // SAFETY: `out` was checked non-NULL; the caller guarantees it is writable.
        unsafe { hand_out(made, out) };
        Ok(())
    })
}

/// How many of the launcher's limits will not be enforced (0 for a NULL launcher).
///
/// # Safety
/// `launcher` is NULL or a live launcher.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_unenforced_count(launcher: *const scope_launcher) -> usize {
    // SAFETY: NULL or a live launcher per the caller.
    unsafe { read_or(launcher, 0, |l| l.unenforced.len()) }
}

/// The `index`th limit that will not be enforced, and why, in words ("MemoryMax will not be
/// enforced: the user manager has no memory controller …"); NULL past the end or for a NULL
/// launcher. Valid as long as the launcher.
///
/// # Safety
/// `launcher` is NULL or a live launcher.
#[no_mangle]
pub unsafe extern "C" fn scope_launcher_unenforced(
    launcher: *const scope_launcher,
    index: usize,
) -> *const c_char {
    // SAFETY: NULL or a live launcher per the caller.
    unsafe {
        read_or(launcher, std::ptr::null(), |l| {
            l.unenforced
                .get(index)
                .map_or(std::ptr::null(), |s| s.as_ptr())
        })
    }
}

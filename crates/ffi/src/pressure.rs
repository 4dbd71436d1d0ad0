//! A scope's pressure stall information across the C ABI: plain structs the caller owns, filled by
//! `scope_handle_pressure`.

use crate::args::out_arg;
use crate::boxed::{borrow, write_out};
use crate::error::scope_result;
use crate::export::guard;
use crate::handle::scope_handle;
use synaps_scope::{Pressure, PressureLine};

/// One line of a pressure file: the share of the last 10, 60 and 300 seconds spent waiting, in
/// percent, and the whole time spent waiting, in microseconds.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct scope_pressure_line {
    /// The last 10 seconds, in percent.
    pub avg10: f64,
    /// The last 60 seconds, in percent.
    pub avg60: f64,
    /// The last 300 seconds, in percent.
    pub avg300: f64,
    /// Since the cgroup was made, in microseconds.
    pub total_usec: u64,
}

/// One resource's pressure: `some` (a task waited) where `has_some`, `full` (every task waited
/// at once) where `has_full`; a line the kernel does not give is all zeros.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct scope_pressure {
    /// Whether the kernel gives this resource's pressure for the scope.
    pub has_some: bool,
    /// Whether it counts `full` too (CPU from Linux 5.13).
    pub has_full: bool,
    /// Some task waited.
    pub some: scope_pressure_line,
    /// Every task waited at once.
    pub full: scope_pressure_line,
}

/// A scope's pressure, per resource (`memory.pressure`, `cpu.pressure`, `io.pressure`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct scope_pressures {
    /// Waiting for memory: what systemd-oomd's pressure rule reads.
    pub memory: scope_pressure,
    /// Waiting for CPU.
    pub cpu: scope_pressure,
    /// Waiting for I/O.
    pub io: scope_pressure,
}

fn line(line: PressureLine) -> scope_pressure_line {
    scope_pressure_line {
        avg10: line.avg10,
        avg60: line.avg60,
        avg300: line.avg300,
        total_usec: line.total_usec,
    }
}

fn resource(pressure: Option<Pressure>) -> scope_pressure {
    pressure.map_or_else(scope_pressure::default, |p| scope_pressure {
        has_some: true,
        has_full: p.full.is_some(),
        some: line(p.some),
        full: p.full.map(line).unwrap_or_default(),
    })
}

/// The scope's pressure stall information into `*out`: each resource's `has_some` is false where
/// the kernel has no PSI, and for a scope that is gone.
///
/// # Safety
/// `handle` is NULL or a live handle; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn scope_handle_pressure(
    handle: *const scope_handle,
    out: *mut scope_pressures,
) -> scope_result {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: NULL or live per the caller.
        let handle = unsafe { borrow(handle, "handle") }?;
        let pressure = handle.inner.pressure();
        let pressures = scope_pressures {
            memory: resource(pressure.memory),
            cpu: resource(pressure.cpu),
            io: resource(pressure.io),
        };
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { write_out(out, pressures) };
        Ok(())
    })
}

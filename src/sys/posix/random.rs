//! The kernel's random bits on the portable path: none asked for (no call
//! that never blocks is found on every system it serves), so the caller
//! mixes the clock and a counter.

/// No kernel source here: `None`.
pub fn kernel_bits() -> Option<u64> {
    None
}

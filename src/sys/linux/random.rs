//! The kernel's random bits on Linux: `getrandom(2)`, without blocking.

/// 64 bits from `getrandom(2)` with `GRND_NONBLOCK`; `None` if it fails or
/// gives fewer (a pool not yet ready says EAGAIN rather than wait).
pub fn kernel_bits() -> Option<u64> {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into the buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), libc::GRND_NONBLOCK) };
    (n == bytes.len() as isize).then(|| u64::from_ne_bytes(bytes))
}

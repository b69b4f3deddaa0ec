//! Random bits for names nobody else picks (temporary files, cgroup
//! leaves), without ever panicking: std's random hash keys panic when the
//! kernel's source fails.

/// 64 unpredictable bits from the kernel where the platform has a source
/// that never blocks (Linux: `getrandom(2)`); where it has none, or it
/// fails, a mix of the clock and a counter (a taken name is then simply
/// tried again).
pub fn random_bits() -> u64 {
    if let Some(bits) = super::platform::random::kernel_bits() {
        return bits;
    }
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    nanos ^ COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

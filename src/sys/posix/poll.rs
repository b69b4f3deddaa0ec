//! The poll call on the portable path: `poll(2)`, whose limit is in
//! milliseconds.

use std::time::Duration;

/// `poll(2)` on `pfds` for at most `timeout` (`None`: no limit), rounded up
/// to the millisecond so that a deadline is never woken for before it is
/// due. Returns what the call returned (-1: see errno).
pub fn poll_raw(pfds: &mut [libc::pollfd], timeout: Option<Duration>) -> libc::c_int {
    let ms: libc::c_int = match timeout {
        None => -1,
        Some(d) => d.as_nanos().div_ceil(1_000_000).min(libc::c_int::MAX as u128) as libc::c_int,
    };
    // SAFETY: `pfds` is a slice of initialised pollfds.
    unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) }
}

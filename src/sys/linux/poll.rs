//! The poll call on Linux: a limited wait is `ppoll(2)`, to the nanosecond
//! (the relay's rests are fractions of a millisecond).

use std::time::Duration;

/// `ppoll(2)` on `pfds` for at most `timeout`; `poll(2)` with no limit
/// (`None`). Returns what the call returned (-1: see errno).
pub fn poll_raw(pfds: &mut [libc::pollfd], timeout: Option<Duration>) -> libc::c_int {
    let Some(d) = timeout else {
        // SAFETY: `pfds` is a slice of initialised pollfds.
        return unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, -1) };
    };
    let limit = libc::timespec {
        tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(d.subsec_nanos() as i32),
    };
    // SAFETY: `pfds` is a slice of initialised pollfds, `limit` a valid
    // timespec; a null mask leaves the signal mask as it is.
    unsafe { libc::ppoll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, &limit, std::ptr::null()) }
}

//! What the portable path adds to the calls that decide what outlives
//! what: closing a range of fds without a call for it (no such call is on
//! every system), and no parent-death signal (`--die-with-parent` watches
//! for the parent's death instead). Linux's: `linux/lifetime.rs`.

use std::io;
use std::os::fd::RawFd;

/// Fds asked about in one [`close_range`] poll.
const BATCH: usize = 256;

/// Close the open fds among `first..=last`, up to the limit on open files:
/// `poll(2)` on a batch of fd numbers for no event, which marks each number
/// that is not open POLLNVAL, then `close(2)` the others (a `close` per
/// open fd, not one per number up to the limit). A failed poll is returned,
/// and the caller closes each number.
pub fn close_range(first: RawFd, last: RawFd) -> io::Result<()> {
    let last = last.min(crate::sys::fd::open_max());
    let mut from = first;
    while from <= last {
        let count = (last - from + 1).min(BATCH as RawFd) as usize;
        let mut set = [libc::pollfd { fd: -1, events: 0, revents: 0 }; BATCH];
        for (fd, p) in (from..).zip(set[..count].iter_mut()) {
            p.fd = fd;
        }
        // SAFETY: `count` initialised pollfds (no more than the limit on open
        // files, which poll allows), no wait.
        if unsafe { libc::poll(set.as_mut_ptr(), count as libc::nfds_t, 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        for p in set[..count].iter().filter(|p| p.revents & libc::POLLNVAL == 0) {
            // SAFETY: closing an fd of this process that the caller closes on
            // purpose; nothing here holds it as an OwnedFd.
            unsafe { libc::close(p.fd) };
        }
        from += count as RawFd;
    }
    Ok(())
}

/// No parent-death signal here: `Ok(false)`, nothing announces the
/// parent's death.
pub fn set_parent_death_signal(signal: i32) -> io::Result<bool> {
    let _ = signal;
    Ok(false)
}

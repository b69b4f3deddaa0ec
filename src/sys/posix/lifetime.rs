//! What the portable path adds to the calls that decide what outlives
//! what: nothing. No call closes a range of fds (the caller closes each),
//! and nothing announces the parent's death (`--die-with-parent` watches
//! for it instead). Linux's: `linux/lifetime.rs`.

use std::io;
use std::os::fd::RawFd;

/// No call closes a range of fds here: `Unsupported`, and the caller
/// closes each.
pub fn close_range(first: RawFd, last: RawFd) -> io::Result<()> {
    let _ = (first, last);
    Err(io::ErrorKind::Unsupported.into())
}

/// No parent-death signal here: `Ok(false)`, nothing announces the
/// parent's death.
pub fn set_parent_death_signal(signal: i32) -> io::Result<bool> {
    let _ = signal;
    Ok(false)
}

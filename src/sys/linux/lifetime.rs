//! What Linux adds to the calls that decide what outlives what: closing a
//! range of fds in one call, and the parent-death signal of
//! `--die-with-parent`. (The portable calls: [`crate::sys::lifetime`].)

use std::io;
use std::os::fd::RawFd;

/// `close_range(2)`: close fds `first..=last` in one call. An error (a
/// kernel before 5.9, a seccomp filter) leaves them to the caller.
pub fn close_range(first: RawFd, last: RawFd) -> io::Result<()> {
    // SAFETY: close_range takes plain integers; it closes only fds of this
    // process (its copies after fork), which the caller uses no more.
    if unsafe { libc::syscall(libc::SYS_close_range, first as u32, last as u32, 0u32) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `prctl(PR_SET_PDEATHSIG, signal)`: have the kernel send `signal` when the
/// thread that created pgrun exits. `Ok(true)`: it will.
pub fn set_parent_death_signal(signal: i32) -> io::Result<bool> {
    let signal = nix::sys::signal::Signal::try_from(signal)?;
    nix::sys::prctl::set_pdeathsig(signal).map_err(io::Error::from)?;
    Ok(true)
}

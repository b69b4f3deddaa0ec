//! The guard's channel on the portable path: the Unix socket pair that ties
//! the guard to pgrun, and nothing more.
//!
//! pgrun keeps one end, the guard the other (both close-on-exec, so the
//! command never inherits one). The guard's end hangs up once every copy of
//! pgrun's end is closed: when pgrun exits, however it exits. There are no
//! pidfds here, so nothing is handed over ([`HANDS_OVER`] is false, [`send`]
//! has nothing to send, [`receive`] finds nothing); Linux's channel carries
//! the run's processes too (`linux/guard_channel.rs`).

use super::pidfd::Pidfd;
use crate::sys::ids::Pid;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

/// Whether processes are handed over the channel on this platform: no.
pub const HANDS_OVER: bool = false;

/// The channel: a Unix socket pair, close-on-exec. Returns (the guard's
/// end, pgrun's end).
pub fn pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let (a, b) = std::os::unix::net::UnixStream::pair()?;
    Ok((a.into(), b.into()))
}

/// Block until the other end hangs up (every copy of it is closed): no CPU.
/// The wait asks for no event, so only a hang-up or an error wakes it
/// (nothing is sent over this channel anyway). Any error is returned (EINTR
/// included) for the caller to judge.
pub fn wait_hangup(fd: BorrowedFd<'_>) -> io::Result<()> {
    crate::sys::poll::wait_hangup(fd, 0)
}

/// pgrun's end as the command's process should get it: `None`, nothing is
/// handed over.
pub fn for_the_child(tie: BorrowedFd<'_>) -> Option<BorrowedFd<'_>> {
    let _ = tie;
    None
}

/// Hand processes to the guard: nothing to do, no [`Pidfd`] can exist here.
pub fn send(tie: BorrowedFd<'_>, processes: &[(Pid, &Pidfd)]) -> io::Result<()> {
    let _ = (tie, processes);
    Ok(())
}

/// Take the processes handed over: there are none.
pub fn receive(tie: BorrowedFd<'_>) -> io::Result<Vec<(Pid, Pidfd)>> {
    let _ = tie;
    Ok(Vec::new())
}

/// The command's process hands itself to the guard: never asked here
/// ([`for_the_child`] gives it no channel), so nothing is sent.
///
/// # Safety
/// None needed; the same signature as Linux's.
pub(in crate::sys) unsafe fn send_self(tie: libc::c_int) -> Result<(), i32> {
    let _ = tie;
    Ok(())
}

//! Waiting on fds: `poll(2)` on a few of them at once ([`poll`], with
//! [`PollFd`] saying what each waits for), on one for readability or
//! writability, and until one hangs up.
//!
//! Raw libc: [`PollFd`] holds plain fds (the relay matches them by number),
//! and nix's poll wants a `BorrowedFd` for each (and its poll feature is
//! not enabled). The call itself is the platform's (`poll_raw` in
//! `linux/poll.rs` and `posix/poll.rs`).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// One fd for [`poll`]: what to wait for, and whether it came.
#[derive(Clone, Copy, Debug)]
pub struct PollFd {
    pub fd: std::os::fd::RawFd,
    /// Wait for writability instead of readability.
    pub write: bool,
    /// Wait for a priority event (POLLPRI) instead: what a cgroup's
    /// `cgroup.events` reports when it changes.
    pub priority: bool,
    /// Wait for nothing but POLLERR/POLLHUP (events 0): the write end of a
    /// pipe whose reader left, without waking while it has room.
    pub errors: bool,
    /// Set by [`poll`]: the fd is ready, or hung up or in error (so the next
    /// read or write will not block and will say which).
    pub ready: bool,
}

impl PollFd {
    pub fn read(fd: BorrowedFd<'_>) -> Self {
        PollFd { fd: fd.as_raw_fd(), write: false, priority: false, errors: false, ready: false }
    }
    pub fn write(fd: BorrowedFd<'_>) -> Self {
        PollFd { fd: fd.as_raw_fd(), write: true, priority: false, errors: false, ready: false }
    }
    pub fn priority(fd: BorrowedFd<'_>) -> Self {
        PollFd { fd: fd.as_raw_fd(), write: false, priority: true, errors: false, ready: false }
    }
    /// Only an error or hangup on `fd` (the kernel reports those whatever
    /// is asked for): a pipe's write end says POLLERR (Linux) or POLLHUP
    /// (BSD) once no reader is left.
    pub fn errors(fd: BorrowedFd<'_>) -> Self {
        PollFd { fd: fd.as_raw_fd(), write: false, priority: false, errors: true, ready: false }
    }
}

/// Most fds one [`poll`] call watches.
pub const POLL_MAX: usize = 8;

/// `poll(2)` on up to [`POLL_MAX`] fds, for at most `timeout` (`None`: no
/// limit). Marks the ready ones; EINTR counts as "none yet". On Linux a
/// limited wait is `ppoll(2)`, to the nanosecond (the relay's rests are
/// fractions of a millisecond); on the portable path (which has no rests)
/// poll's milliseconds, rounded up so that a deadline is never woken for
/// before it is due.
pub fn poll(set: &mut [PollFd], timeout: Option<Duration>) -> io::Result<()> {
    assert!(set.len() <= POLL_MAX, "poll: too many fds");
    let mut pfds = [libc::pollfd { fd: -1, events: 0, revents: 0 }; POLL_MAX];
    for (p, s) in pfds.iter_mut().zip(set.iter()) {
        let events = if s.errors {
            0
        } else if s.priority {
            libc::POLLPRI
        } else if s.write {
            libc::POLLOUT
        } else {
            libc::POLLIN
        };
        *p = libc::pollfd { fd: s.fd, events, revents: 0 };
    }
    let n = super::platform::poll::poll_raw(&mut pfds[..set.len()], timeout);
    for (p, s) in pfds.iter().zip(set.iter_mut()) {
        s.ready = n > 0 && p.revents != 0;
    }
    if n < 0 {
        let err = io::Error::last_os_error();
        return if err.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(err) };
    }
    Ok(())
}

/// `poll(2)` on one fd for readability, for at most `timeout` (`None`: no
/// limit). Returns whether the fd is readable; EINTR counts as "not yet".
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<bool> {
    let mut set = [PollFd::read(fd)];
    poll(&mut set, timeout)?;
    Ok(set[0].ready)
}

/// `poll(2)` on one fd for writability, without waiting: whether a write
/// of up to `PIPE_BUF` bytes would not block now.
pub fn writable_now(fd: BorrowedFd<'_>) -> bool {
    let mut set = [PollFd::write(fd)];
    poll(&mut set, Some(Duration::ZERO)).is_ok() && set[0].ready
}

/// Block until `fd` hangs up or fails (POLLHUP, POLLERR, or one of the
/// `also` events), with no limit; nothing else wakes the caller (the
/// kernel wakes a poller only for the events it asked for). POLLNVAL is
/// EBADF; any error is returned (EINTR included) for the caller to judge.
pub fn wait_hangup(fd: BorrowedFd<'_>, also: libc::c_short) -> io::Result<()> {
    let mut set = [libc::pollfd { fd: fd.as_raw_fd(), events: also, revents: 0 }];
    loop {
        // SAFETY: one valid pollfd, its count.
        let n = unsafe { libc::poll(set.as_mut_ptr(), 1, -1) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let got = set[0].revents;
        if got & libc::POLLNVAL != 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        if got & (also | libc::POLLHUP | libc::POLLERR) != 0 {
            return Ok(());
        }
    }
}

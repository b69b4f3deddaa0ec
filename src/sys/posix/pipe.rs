//! What the portable path adds to pipes: nothing. No pipe is widened,
//! nothing moves kernel to kernel (the relay reads and writes), and there
//! is no description of pgrun's own to be had for the caller's pipe or
//! terminal (the relay writes `PIPE_BUF` bytes once `poll` says so).
//! Linux's: `linux/pipe.rs`.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

/// A pipe is not widened here: false.
pub fn widen(fd: BorrowedFd<'_>, capacity: usize) -> bool {
    let _ = (fd, capacity);
    false
}

/// Nothing is spliced here: false.
pub fn can_splice_to(fd: BorrowedFd<'_>) -> bool {
    let _ = fd;
    false
}

/// Nothing is teed here: false.
pub fn can_tee_to(fd: BorrowedFd<'_>) -> bool {
    let _ = fd;
    false
}

/// No `splice(2)` here: `Unsupported`.
pub fn splice_nowait(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    let _ = (from, to, len);
    Err(io::ErrorKind::Unsupported.into())
}

/// No `tee(2)` here: `Unsupported`.
pub fn tee_nowait(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    let _ = (from, to, len);
    Err(io::ErrorKind::Unsupported.into())
}

/// No way to reopen a terminal here: `None`.
pub fn reopen_terminal_nonblocking(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    let _ = fd;
    None
}

/// No way to reopen a pipe here: `None`.
pub fn reopen_pipe_nonblocking(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    let _ = fd;
    None
}

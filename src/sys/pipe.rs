//! Pipes and plain reads and writes, for relaying the command's output
//! (`--max-output`, `--output-file`): creating the inner pipes,
//! non-blocking reads of their read ends, writes to pgrun's own stdout and
//! stderr (or a non-blocking description of their pipe), moving bytes
//! kernel to kernel where Linux allows (`splice(2)`, `tee(2)`; on the
//! portable path these say `Unsupported` and the relay reads and writes),
//! and the few questions the relay asks about an fd.
//!
//! What only Linux has (widening a pipe, `splice`, `tee`, reopening the
//! caller's pipe or terminal non-blocking) is the platform's
//! (`linux/pipe.rs`, `posix/pipe.rs`), and is named here as well.

pub use super::fd::is_pipe;
use super::fd::{retried_on_eintr, set_nonblocking};
pub use super::platform::pipe::{
    can_splice_to, can_tee_to, reopen_pipe_nonblocking, reopen_terminal_nonblocking, splice_nowait, tee_nowait, widen,
};
use nix::errno::Errno;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

/// `pipe(2)` for the command's output: both ends close-on-exec (the child
/// gets the write end by `dup2`, which clears the flag on the copy), the
/// read end non-blocking, widened to hold `capacity` bytes ([`widen`], so
/// a fast writer wakes pgrun less often). Also returns whether it does.
pub fn output_pipe(capacity: usize) -> io::Result<(OwnedFd, OwnedFd, bool)> {
    let (read_end, write_end) = super::spawn::cloexec_pipe()?;
    set_nonblocking(read_end.as_fd())?;
    let wide = widen(read_end.as_fd(), capacity);
    Ok((read_end, write_end, wide))
}

/// `read(2)`, retried on EINTR. A non-blocking fd with nothing to read gives
/// `ErrorKind::WouldBlock`; 0 is end of file.
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match nix::unistd::read(fd, buf) {
            Err(Errno::EINTR) => continue,
            other => return Ok(other?),
        }
    }
}

/// `write(2)`, retried on EINTR; returns how many bytes were written.
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    loop {
        match nix::unistd::write(fd, buf) {
            Err(Errno::EINTR) => continue,
            other => return Ok(other?),
        }
    }
}

/// `ioctl(FIONREAD)`: how many bytes a pipe holds right now. (Raw libc:
/// nix's ioctl macros generate `unsafe fn`s, which would gain nothing.)
pub fn bytes_readable(fd: BorrowedFd<'_>) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int to the pointer we pass.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD as _, &mut n) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n.max(0) as usize)
}

/// How a write to an fd can wait for its reader, which says how the relay
/// writes to it without ever blocking (`fstat(2)`, `isatty(3)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// A regular file, a block device or a character device that is not a
    /// terminal (`/dev/null`): a write is taken at once.
    Immediate,
    /// A socket: [`send_nowait`] never blocks, whatever the socket's flags.
    Socket,
    /// A pipe, a FIFO or a terminal: a write can wait for a reader. Written
    /// `PIPE_BUF` bytes at a time, each only once `poll` says it is
    /// writable (then a pipe takes it without blocking).
    Waits,
    /// A description of pgrun's own with O_NONBLOCK (a terminal, see
    /// [`reopen_terminal_nonblocking`], or a pipe, see
    /// [`reopen_pipe_nonblocking`]): a write takes what fits.
    NonBlocking,
}

/// What kind of destination `fd` is (an fd `fstat` fails on is taken to
/// be one that waits).
pub fn write_kind(fd: BorrowedFd<'_>) -> WriteKind {
    let Ok(st) = nix::sys::stat::fstat(fd) else { return WriteKind::Waits };
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG | libc::S_IFBLK => WriteKind::Immediate,
        libc::S_IFCHR if !nix::unistd::isatty(fd).unwrap_or(false) => WriteKind::Immediate,
        libc::S_IFSOCK => WriteKind::Socket,
        _ => WriteKind::Waits,
    }
}

/// `send(2)` with `MSG_DONTWAIT`, retried on EINTR: a write to a socket
/// that never blocks, without setting O_NONBLOCK on a file description
/// pgrun shares with its caller. A full socket gives
/// `ErrorKind::WouldBlock`.
pub fn send_nowait(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for `buf.len()` bytes for the call.
    retried_on_eintr(|| unsafe { libc::send(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) })
}

/// pgrun's own fds 1 and 2, where the relayed streams go.
pub fn own_stdout_stderr() -> (BorrowedFd<'static>, BorrowedFd<'static>) {
    // SAFETY: fds 0-2 are kept open for pgrun's whole life (see
    // `reserve_standard_fds`; pgrun never closes them), so they outlive any
    // borrow.
    unsafe { (BorrowedFd::borrow_raw(1), BorrowedFd::borrow_raw(2)) }
}

/// `PIPE_BUF`: a write of at most this many bytes to a pipe that polls
/// writable does not block.
pub const PIPE_BUF: usize = libc::PIPE_BUF;

/// A pipe for the command's stdin (`--stdin-pipe`): `(read end, write
/// end)`, both close-on-exec (the child gets the read end by `dup2`), the
/// write end non-blocking, so that the supervising pgrun never waits on it.
pub fn input_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read_end, write_end) = super::spawn::cloexec_pipe()?;
    set_nonblocking(write_end.as_fd())?;
    Ok((read_end, write_end))
}

/// A non-blocking pipe pgrun keeps to itself, both ends close-on-exec.
pub fn private_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read_end, write_end) = super::spawn::cloexec_pipe()?;
    set_nonblocking(read_end.as_fd())?;
    set_nonblocking(write_end.as_fd())?;
    Ok((read_end, write_end))
}

/// The inode number of the pipe or FIFO `fd`, or `None` if it is
/// something else (`fstat`).
pub fn fifo_inode(fd: BorrowedFd<'_>) -> io::Result<Option<u64>> {
    let st = nix::sys::stat::fstat(fd)?;
    #[allow(clippy::unnecessary_cast)] // st_ino is u32 on some targets
    Ok((st.st_mode & libc::S_IFMT == libc::S_IFIFO).then_some(st.st_ino as u64))
}

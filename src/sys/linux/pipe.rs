//! What Linux adds to pipes: widening one (`F_SETPIPE_SZ`), moving bytes
//! kernel to kernel (`splice(2)`, `tee(2)`), and a description of pgrun's
//! own for the caller's pipe or terminal (`/proc/self/fd/N`), non-blocking.
//! The rest of the relay's calls are portable ([`crate::sys::pipe`]).

use crate::sys::fd::{is_pipe, retried_on_eintr};
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::stat::{Mode, fstat};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// Widen the pipe `fd` to hold at least `capacity` bytes, where it holds
/// less (`F_SETPIPE_SZ`): never narrower, best effort (a refusal,
/// `pipe-max-size` or the user's pipe budget, leaves it as it was; a pipe
/// already that wide is left alone). Returns whether it now holds that
/// much. Only the pipe's buffer changes, never a file description's flags,
/// so it is also done to a pipe pgrun shares with its caller.
pub fn widen(fd: BorrowedFd<'_>, capacity: usize) -> bool {
    let holds = |n: libc::c_int| usize::try_from(n).is_ok_and(|n| n >= capacity);
    if fcntl(fd, FcntlArg::F_GETPIPE_SZ).is_ok_and(holds) {
        return true;
    }
    fcntl(fd, FcntlArg::F_SETPIPE_SZ(capacity.min(libc::c_int::MAX as usize) as libc::c_int)).is_ok_and(holds)
}

/// Whether [`splice_nowait`] can write to `fd`: a pipe or FIFO, or a
/// regular file not opened for appending (`splice(2)` refuses O_APPEND).
pub fn can_splice_to(fd: BorrowedFd<'_>) -> bool {
    is_pipe(fd) || is_regular_file_not_appending(fd)
}

/// Whether `fd` is a regular file whose description has no O_APPEND
/// (either question failing: no).
fn is_regular_file_not_appending(fd: BorrowedFd<'_>) -> bool {
    let regular = fstat(fd).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG);
    regular && fcntl(fd, FcntlArg::F_GETFL).is_ok_and(|flags| !OFlag::from_bits_retain(flags).contains(OFlag::O_APPEND))
}

/// Whether [`tee_nowait`] can write to `fd`: a pipe or FIFO.
pub fn can_tee_to(fd: BorrowedFd<'_>) -> bool {
    is_pipe(fd)
}

/// Move up to `len` bytes from the pipe `from` to `to` (a pipe, or a
/// regular file at its description's offset, as `write` would) inside the
/// kernel, without copying them through pgrun: `splice(2)` with
/// `SPLICE_F_NONBLOCK`, which waits for neither pipe and changes neither
/// description's flags (the caller's stdout keeps its own). `Ok(0)`: `from`
/// is at its end. `WouldBlock`: `from` is empty or `to` is a full pipe.
/// Retried on EINTR.
pub fn splice_nowait(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    // SAFETY: two valid fds, no offsets (null: the pipe has none, the
    // file's own is used and moved), plain flags; splice touches no
    // memory of ours.
    retried_on_eintr(|| unsafe {
        libc::splice(
            from.as_raw_fd(),
            std::ptr::null_mut(),
            to.as_raw_fd(),
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_NONBLOCK | libc::SPLICE_F_MOVE,
        )
    })
}

/// Copy up to `len` bytes from the front of the pipe `from` into the pipe
/// `to`, leaving them in `from` (to be read or spliced next): `tee(2)` with
/// `SPLICE_F_NONBLOCK`, no copy through pgrun. `Ok(0)`: `from` is at its
/// end. `WouldBlock`: `from` is empty or `to` is full. Retried on EINTR.
pub fn tee_nowait(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    // SAFETY: two valid fds, plain flags; tee touches no memory of ours.
    retried_on_eintr(|| unsafe { libc::tee(from.as_raw_fd(), to.as_raw_fd(), len, libc::SPLICE_F_NONBLOCK) })
}

/// A file description of pgrun's own for the terminal `fd`, opened
/// non-blocking (`/proc/self/fd/N`, `O_NOCTTY`): written through it, a
/// terminal that stops taking output makes a write take what fits and
/// return (a `PIPE_BUF` write after POLLOUT may still wait: a terminal
/// polls writable with any room left, and newlines grow on the way), while
/// the caller's description keeps its flags. `None` if it cannot be had
/// (another user's terminal, no /proc) or is not the same terminal.
pub fn reopen_terminal_nonblocking(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    let flags = OFlag::O_WRONLY | OFlag::O_NOCTTY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let own = nix::fcntl::open(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str(), flags, Mode::empty()).ok()?;
    let (theirs, ours) = (fstat(fd).ok()?, fstat(&own).ok()?);
    let same = theirs.st_rdev == ours.st_rdev && nix::unistd::isatty(&own).unwrap_or(false);
    same.then_some(own)
}

/// A file description of pgrun's own for the pipe or FIFO `fd`, opened
/// write-only and non-blocking (`/proc/self/fd/N` opens the same pipe
/// anew): written through it, a write takes what fits (up to the pipe's
/// whole buffer at once, not `PIPE_BUF` after each `poll`) and never waits,
/// while the caller's description keeps its flags. `None` if it cannot be
/// had (no reader left: ENXIO; another user's FIFO; no /proc) or is not the
/// same pipe.
pub fn reopen_pipe_nonblocking(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    let theirs = fstat(fd).ok()?;
    if theirs.st_mode & libc::S_IFMT != libc::S_IFIFO {
        return None;
    }
    let flags = OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let own = nix::fcntl::open(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str(), flags, Mode::empty()).ok()?;
    let ours = fstat(&own).ok()?;
    let same =
        ours.st_mode & libc::S_IFMT == libc::S_IFIFO && (ours.st_dev, ours.st_ino) == (theirs.st_dev, theirs.st_ino);
    same.then_some(own)
}

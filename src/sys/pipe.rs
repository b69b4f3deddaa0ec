//! Pipes and plain reads and writes, for relaying the command's output
//! (`--max-output`, `--output-file`): creating the inner pipes,
//! non-blocking reads of their read ends, writes to pgrun's own stdout and
//! stderr (or a non-blocking description of their pipe), moving bytes
//! kernel to kernel where Linux allows (`splice(2)`, `tee(2)`; elsewhere
//! these say `Unsupported` and the relay reads and writes), and the few
//! questions the relay asks about an fd.

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
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

/// Widen the pipe `fd` to hold at least `capacity` bytes, on Linux, where
/// it holds less (`F_SETPIPE_SZ`): never narrower, best effort (a refusal,
/// `pipe-max-size` or the user's pipe budget, leaves it as it was; a pipe
/// already that wide is left alone). Returns whether it now holds that
/// much (elsewhere: false). Only the pipe's buffer changes, never a file
/// description's flags, so it is also done to a pipe pgrun shares with
/// its caller.
pub fn widen(fd: BorrowedFd<'_>, capacity: usize) -> bool {
    #[cfg(linux_strengths)]
    {
        let holds = |n: libc::c_int| usize::try_from(n).is_ok_and(|n| n >= capacity);
        if fcntl(fd, FcntlArg::F_GETPIPE_SZ).is_ok_and(holds) {
            return true;
        }
        fcntl(fd, FcntlArg::F_SETPIPE_SZ(capacity.min(libc::c_int::MAX as usize) as libc::c_int)).is_ok_and(holds)
    }
    #[cfg(not(linux_strengths))]
    {
        let _ = (fd, capacity);
        false
    }
}

/// `fcntl(F_SETFL, O_NONBLOCK)` on an fd pgrun owns alone.
pub(super) fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
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

/// Whether [`splice_nowait`] can write to `fd`: on Linux, a pipe or FIFO,
/// or a regular file not opened for appending (`splice(2)` refuses
/// O_APPEND).
pub fn can_splice_to(fd: BorrowedFd<'_>) -> bool {
    cfg!(linux_strengths) && (is_pipe(fd) || is_regular_file_not_appending(fd))
}

/// Whether [`tee_nowait`] can write to `fd`: a pipe or FIFO, on Linux.
pub fn can_tee_to(fd: BorrowedFd<'_>) -> bool {
    cfg!(linux_strengths) && is_pipe(fd)
}

/// Whether `fd` is a pipe or FIFO (`fstat` failing: no).
pub fn is_pipe(fd: BorrowedFd<'_>) -> bool {
    nix::sys::stat::fstat(fd).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFIFO)
}

/// Whether `fd` is a regular file whose description has no O_APPEND
/// (either question failing: no).
fn is_regular_file_not_appending(fd: BorrowedFd<'_>) -> bool {
    let regular = nix::sys::stat::fstat(fd).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG);
    regular && fcntl(fd, FcntlArg::F_GETFL).is_ok_and(|flags| !OFlag::from_bits_retain(flags).contains(OFlag::O_APPEND))
}

/// Move up to `len` bytes from the pipe `from` to `to` (a pipe, or a
/// regular file at its description's offset, as `write` would) inside the
/// kernel, without copying them through pgrun: `splice(2)` with
/// `SPLICE_F_NONBLOCK`, which waits for neither pipe and changes neither
/// description's flags (the caller's stdout keeps its own). `Ok(0)`: `from`
/// is at its end. `WouldBlock`: `from` is empty or `to` is a full pipe.
/// Retried on EINTR. Off Linux: `Unsupported`.
pub fn splice_nowait(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    #[cfg(linux_strengths)]
    {
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
    #[cfg(not(linux_strengths))]
    {
        let _ = (from, to, len);
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Copy up to `len` bytes from the front of the pipe `from` into the pipe
/// `to`, leaving them in `from` (to be read or spliced next): `tee(2)` with
/// `SPLICE_F_NONBLOCK`, no copy through pgrun. `Ok(0)`: `from` is at its
/// end. `WouldBlock`: `from` is empty or `to` is full. Retried on EINTR.
/// Off Linux: `Unsupported`.
pub fn tee_nowait(from: BorrowedFd<'_>, to: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    #[cfg(linux_strengths)]
    {
        // SAFETY: two valid fds, plain flags; tee touches no memory of ours.
        retried_on_eintr(|| unsafe { libc::tee(from.as_raw_fd(), to.as_raw_fd(), len, libc::SPLICE_F_NONBLOCK) })
    }
    #[cfg(not(linux_strengths))]
    {
        let _ = (from, to, len);
        Err(io::ErrorKind::Unsupported.into())
    }
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

/// A file description of pgrun's own for the terminal `fd`, opened
/// non-blocking (on Linux: `/proc/self/fd/N`, `O_NOCTTY`): written through
/// it, a terminal that stops taking output makes a write take what fits
/// and return (a `PIPE_BUF` write after POLLOUT may still wait: a terminal
/// polls writable with any room left, and newlines grow on the way), while
/// the caller's description keeps its flags. `None` if it cannot be had
/// (another user's terminal, no /proc, not Linux) or is not the same
/// terminal.
pub fn reopen_terminal_nonblocking(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    #[cfg(linux_strengths)]
    {
        use nix::sys::stat::{Mode, fstat};
        let flags = OFlag::O_WRONLY | OFlag::O_NOCTTY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let own = nix::fcntl::open(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str(), flags, Mode::empty()).ok()?;
        let (theirs, ours) = (fstat(fd).ok()?, fstat(&own).ok()?);
        let same = theirs.st_rdev == ours.st_rdev && nix::unistd::isatty(&own).unwrap_or(false);
        same.then_some(own)
    }
    #[cfg(not(linux_strengths))]
    {
        let _ = fd;
        None
    }
}

/// A file description of pgrun's own for the pipe or FIFO `fd`, opened
/// write-only and non-blocking (on Linux: `/proc/self/fd/N` opens the same
/// pipe anew): written through it, a write takes what fits (up to the
/// pipe's whole buffer at once, not `PIPE_BUF` after each `poll`) and never
/// waits, while the caller's description keeps its flags. `None` if it
/// cannot be had (no reader left: ENXIO; another user's FIFO; no /proc;
/// not Linux) or is not the same pipe.
pub fn reopen_pipe_nonblocking(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    #[cfg(linux_strengths)]
    {
        use nix::sys::stat::{Mode, fstat};
        let theirs = fstat(fd).ok()?;
        if theirs.st_mode & libc::S_IFMT != libc::S_IFIFO {
            return None;
        }
        let flags = OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let own = nix::fcntl::open(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str(), flags, Mode::empty()).ok()?;
        let ours = fstat(&own).ok()?;
        let same = ours.st_mode & libc::S_IFMT == libc::S_IFIFO
            && (ours.st_dev, ours.st_ino) == (theirs.st_dev, theirs.st_ino);
        same.then_some(own)
    }
    #[cfg(not(linux_strengths))]
    {
        let _ = fd;
        None
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

/// Make a raw call that returns a byte count or -1 with errno, again while
/// it fails with EINTR.
fn retried_on_eintr(mut call: impl FnMut() -> isize) -> io::Result<usize> {
    loop {
        let n = call();
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
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

//! One fd at a time: the standard fds kept open from the start, the most
//! a process may have, whether an fd is a pipe, its O_NONBLOCK flag, and a
//! raw call on it retried on EINTR. (The calls that move bytes: [`super::pipe`].)

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use std::io;
use std::os::fd::{BorrowedFd, RawFd};

/// Make sure fds 0, 1 and 2 are open: any of them that is closed gets
/// `/dev/null`, close-on-exec. Otherwise the first file pgrun opens (the
/// signalfd, the pid file) would land there, and pgrun's error lines would
/// be written into it. Close-on-exec, so the command still finds the fd
/// closed, exactly as pgrun's caller left it.
pub fn reserve_standard_fds() {
    for fd in 0..=2 {
        // SAFETY: F_GETFD on any integer is harmless; EBADF means closed.
        // (A raw probe: an fd that may be closed cannot be a BorrowedFd.)
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            // open takes the lowest free fd, which is `fd` since the lower
            // ones are open; it stays open for pgrun's whole life.
            if let Ok(null) =
                nix::fcntl::open(c"/dev/null", OFlag::O_RDWR | OFlag::O_CLOEXEC, nix::sys::stat::Mode::empty())
            {
                let _ = std::os::fd::IntoRawFd::into_raw_fd(null);
            }
        }
    }
}

/// The most fds a process may have open (`sysconf(_SC_OPEN_MAX)`, at most
/// 65,536; 1024 where it does not say): a bound for walks over fd numbers.
pub(super) fn open_max() -> RawFd {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::OPEN_MAX) {
        Ok(Some(n)) if n > 0 => n.min(65_536) as RawFd,
        _ => 1024,
    }
}

/// `fcntl(F_SETFL, O_NONBLOCK)` on an fd pgrun owns alone.
pub(super) fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// `fcntl(F_SETFL)` without `O_NONBLOCK`, on an fd pgrun owns alone.
pub(super) fn set_blocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK))?;
    Ok(())
}

/// Whether `fd` is a pipe or FIFO (`fstat` failing: no).
pub fn is_pipe(fd: BorrowedFd<'_>) -> bool {
    nix::sys::stat::fstat(fd).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFIFO)
}

/// Make a raw call that returns a byte count or -1 with errno, again while
/// it fails with EINTR.
pub(super) fn retried_on_eintr(mut call: impl FnMut() -> isize) -> io::Result<usize> {
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

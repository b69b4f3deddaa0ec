//! Unix stream sockets on the portable path: one made non-blocking and
//! close-on-exec by `fcntl` after `socket` (pgrun has no other thread that
//! could fork in between), and no abstract namespace (Linux's:
//! `linux/socket.rs`).

use std::io;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};

/// `socket(AF_UNIX, SOCK_STREAM)`, then `FD_CLOEXEC` and `O_NONBLOCK`.
pub fn stream_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain integers in; the fd returned is owned at once.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    nix::fcntl::fcntl(fd.as_fd(), nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC))?;
    crate::sys::fd::set_nonblocking(fd.as_fd())?;
    Ok(fd)
}

/// There is no abstract namespace here: `Unsupported`.
pub fn abstract_address(name: &[u8]) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    let _ = name;
    Err(io::Error::new(io::ErrorKind::Unsupported, "no abstract socket namespace on this system"))
}

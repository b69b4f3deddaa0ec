//! Unix stream sockets on Linux: one made non-blocking and close-on-exec
//! in the same call, and addresses in the abstract namespace (a socket
//! named by bytes, not by a file: a D-Bus address may name one). Its twin
//! in `posix/` has no such namespace.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// `socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC)`.
pub fn stream_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain integers in; the fd returned is owned at once.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The address of the socket named `name` in the abstract namespace: a
/// NUL, then the name (no NUL after it), its length said by the length.
pub fn abstract_address(name: &[u8]) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: an all-zero sockaddr_un is a valid value.
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    address.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let room = &mut address.sun_path[1..];
    if name.len() > room.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "an abstract socket name longer than 107 bytes"));
    }
    for (to, &b) in room.iter_mut().zip(name) {
        *to = b as libc::c_char;
    }
    let len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + 1 + name.len();
    Ok((address, len as libc::socklen_t))
}

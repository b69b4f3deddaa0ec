//! Connecting to a Unix stream socket within a deadline: what the D-Bus
//! client needs to reach a bus that may not take the connection.
//!
//! A blocking `connect(2)` to a Unix stream socket whose listen queue is
//! full waits until a place frees, without limit (Linux): a bus that is
//! stuck, or flooded, would hold pgrun past every deadline. So the socket
//! is made non-blocking ([`platform::socket::stream_socket`]) and the
//! connect is tried again on a backoff while the queue is full (`EAGAIN`,
//! what Linux says for a Unix socket), or waited for with `poll(2)` where
//! the system says it is under way (`EINPROGRESS`), until the deadline;
//! then the socket is made blocking again for its caller, which sets its
//! own timeouts on each read and write.
//!
//! Raw libc: `connect` and `getsockopt(SO_ERROR)` on a `sockaddr_un` (nix's
//! socket feature is not enabled).

use super::platform;
use super::poll::{PollFd, poll};
use crate::backoff::Backoff;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Instant;

/// A Unix socket's name.
#[derive(Clone, Copy, Debug)]
pub enum SocketName<'a> {
    /// A socket file.
    Path(&'a Path),
    /// A name in Linux's abstract namespace (`Unsupported` elsewhere).
    Abstract(&'a [u8]),
}

/// Connect a Unix stream socket to `name`, by `deadline`: a full listen
/// queue is tried again on a backoff, a connection under way is waited
/// for; past the deadline, `TimedOut`. The stream returned blocks.
pub fn unix_connect(name: SocketName<'_>, deadline: Instant) -> io::Result<UnixStream> {
    let (address, len) = match name {
        SocketName::Path(path) => path_address(path)?,
        SocketName::Abstract(bytes) => platform::socket::abstract_address(bytes)?,
    };
    let socket = platform::socket::stream_socket()?;
    let full = || io::Error::new(io::ErrorKind::TimedOut, "its listen queue stayed full: no place for pgrun in time");
    let mut backoff = Backoff::default();
    loop {
        // SAFETY: a socket we own; `address` is a valid sockaddr_un of
        // which the first `len` bytes are the address.
        let rc = unsafe { libc::connect(socket.as_raw_fd(), (&raw const address).cast(), len) };
        if rc == 0 {
            break;
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(n) if n == libc::EAGAIN || n == libc::EWOULDBLOCK => {
                if !backoff.pause_until(Some(deadline)) {
                    return Err(full());
                }
            }
            Some(libc::EINPROGRESS | libc::EALREADY) => {
                wait_connected(socket.as_fd(), deadline)?;
                break;
            }
            _ => return Err(err),
        }
    }
    let flags = OFlag::from_bits_retain(fcntl(socket.as_fd(), FcntlArg::F_GETFL)?);
    fcntl(socket.as_fd(), FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK))?;
    Ok(UnixStream::from(socket))
}

/// Wait (poll for writability) until the connection under way on
/// `socket` is made or failed, by `deadline`: its `SO_ERROR` says which.
fn wait_connected(socket: BorrowedFd<'_>, deadline: Instant) -> io::Result<()> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "the connection was not made by the deadline"));
        }
        let mut set = [PollFd::write(socket)];
        poll(&mut set, Some(left))?;
        if set[0].ready {
            break;
        }
    }
    let mut error: libc::c_int = 0;
    let mut size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a socket we hold; `error` and `size` are valid for writing
    // and `size` says how large `error` is.
    let rc = unsafe {
        libc::getsockopt(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ERROR, (&raw mut error).cast(), &mut size)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    match error {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// The address of the socket file at `path` (with its NUL, which must fit).
fn path_address(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: an all-zero sockaddr_un is a valid value.
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    address.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.contains(&0) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a socket path with a NUL byte in it"));
    }
    if bytes.len() >= address.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a socket path longer than {} bytes", address.sun_path.len() - 1),
        ));
    }
    for (to, &b) in address.sun_path.iter_mut().zip(bytes) {
        *to = b as libc::c_char;
    }
    let len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + bytes.len() + 1;
    Ok((address, len as libc::socklen_t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A listening socket file is connected to, and the stream blocks
    /// again (a read waits rather than saying EAGAIN).
    #[test]
    fn a_listening_socket_is_connected_and_the_stream_blocks() {
        let dir = std::env::temp_dir().join(format!("pgrun-sys-socket-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("s");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let stream = unix_connect(SocketName::Path(&path), Instant::now() + Duration::from_secs(30)).unwrap();
        let (_peer, _) = listener.accept().unwrap();
        let flags = OFlag::from_bits_retain(fcntl(stream.as_fd(), FcntlArg::F_GETFL).unwrap());
        assert!(!flags.contains(OFlag::O_NONBLOCK));
        let missing = unix_connect(SocketName::Path(&dir.join("none")), Instant::now() + Duration::from_secs(30));
        assert_eq!(missing.unwrap_err().kind(), io::ErrorKind::NotFound);
        let long = dir.join("x".repeat(200));
        assert_eq!(
            unix_connect(SocketName::Path(&long), Instant::now()).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

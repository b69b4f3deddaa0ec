//! Sockets in an abstract namespace: none on the portable path (Linux's:
//! `linux/socket.rs`).

use std::io;
use std::os::unix::net::UnixStream;

/// There is no abstract namespace here: `Unsupported`.
pub fn connect_abstract(name: &[u8]) -> io::Result<UnixStream> {
    let _ = name;
    Err(io::Error::new(io::ErrorKind::Unsupported, "no abstract socket namespace on this system"))
}

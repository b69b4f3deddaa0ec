//! Linux's abstract socket namespace: a Unix socket named by bytes, not by
//! a file (a D-Bus address may name one). Its twin in `posix/` has none.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};

/// Connect to the Unix socket named `name` in the abstract namespace.
pub fn connect_abstract(name: &[u8]) -> io::Result<UnixStream> {
    UnixStream::connect_addr(&SocketAddr::from_abstract_name(name)?)
}

//! Reaching an fd another process holds: not on the portable path, which
//! has no `/proc/PID/fd` (Linux's: `linux/fd_reach.rs`). Every call says
//! `Unsupported`; `--stdin-pipe` reaches its senders through a folder of
//! FIFOs instead (`sys::fifo_folder`, chosen by [`AVAILABLE`]).

use crate::sys::Pid;
use std::io;
use std::os::fd::{OwnedFd, RawFd};

/// Whether this platform can reach another process's fds: no.
pub const AVAILABLE: bool = false;

fn unsupported() -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, "not available on this platform")
}

/// No tags here: `Unsupported`.
pub fn tag(name: &str) -> io::Result<OwnedFd> {
    let _ = name;
    Err(unsupported())
}

/// No tags here: `Unsupported`.
pub fn tags_of(pid: Pid, prefix: &str) -> io::Result<Vec<String>> {
    let _ = (pid, prefix);
    Err(unsupported())
}

/// No `/proc/PID/fd` here: `Unsupported`.
pub fn open_for_writing(pid: Pid, fd: RawFd) -> io::Result<std::fs::File> {
    let _ = (pid, fd);
    Err(unsupported())
}

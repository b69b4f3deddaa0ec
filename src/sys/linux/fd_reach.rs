//! Reaching an fd another process holds, the way Linux allows it to that
//! process's own user (or root) and to no one else: `/proc/PID/fd/N`.
//! Used for `--stdin-pipe`: the supervising pgrun holds the pipe's write
//! end, and `pgrun send` opens the same pipe through that pgrun's fd (the
//! kernel checks that the sender may look into the process: same user,
//! or root). Nothing is created in any file system.
//!
//! Where the fds are, the holder says with a *tag*: an fd of its own whose
//! link in `/proc/PID/fd` reads as a name it chose (a `memfd`, which
//! holds no bytes and no path anyone could open). The portable path
//! (`posix/fd_reach.rs`) has neither.

use crate::sys::Pid;
use std::ffi::CString;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

/// Whether this platform can reach another process's fds: yes.
pub const AVAILABLE: bool = true;

/// What a tag's link reads as: `/memfd:NAME (deleted)`.
const TAG_PREFIX: &str = "/memfd:";

/// An fd whose link in `/proc/self/fd` reads as `name` (close-on-exec): a
/// `memfd_create(2)` of that name, never written to.
pub fn tag(name: &str) -> io::Result<OwnedFd> {
    let name = CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a tag"))?;
    // SAFETY: a valid NUL-terminated name and plain flags; the call
    // touches no other memory of ours.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: memfd_create returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The names of the tags process `pid` holds that begin with `prefix`, in
/// the order of its fds. An fd that closes while it is looked at is
/// skipped; a process that cannot be looked into (another user's:
/// `PermissionDenied`) or is gone (`NotFound`) is an error.
pub fn tags_of(pid: Pid, prefix: &str) -> io::Result<Vec<String>> {
    let folder = format!("/proc/{pid}/fd");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&folder)? {
        let entry = entry?;
        let link = match std::fs::read_link(entry.path()) {
            Ok(link) => link,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let Some(name) = link.to_str().and_then(|l| l.strip_prefix(TAG_PREFIX)) else { continue };
        let name = name.strip_suffix(" (deleted)").unwrap_or(name);
        if name.starts_with(prefix) {
            found.push(name.to_owned());
        }
    }
    Ok(found)
}

/// Open, for writing and non-blocking, what process `pid` holds as its fd
/// `fd` (a pipe: the same pipe, through a description of the caller's
/// own), close-on-exec.
pub fn open_for_writing(pid: Pid, fd: RawFd) -> io::Result<std::fs::File> {
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(format!("/proc/{pid}/fd/{fd}"))
}

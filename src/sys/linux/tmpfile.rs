//! Files with no name yet (Linux): `open(O_TMPFILE)` makes a file in a
//! folder that no path names, which the kernel frees with the last fd to it
//! (so with pgrun, however pgrun ends, SIGKILL included), until
//! `linkat(2)` gives it a name. Linked through `/proc/self/fd/N` with
//! `AT_SYMLINK_FOLLOW`, the way open(2) documents for an unprivileged
//! process (`AT_EMPTY_PATH` needs `CAP_DAC_READ_SEARCH` before Linux 6.10).
//!
//! A file system without it (`EOPNOTSUPP`), a kernel older than 3.11
//! (`EISDIR`: the flag reads as `O_DIRECTORY` there), or no `/proc` to link
//! through: `Ok(None)`, and the caller names its file from the start.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// `open(folder, O_TMPFILE | O_RDWR, mode)`: a file with no name in
/// `folder` (close-on-exec, as std opens every file), or `Ok(None)` where
/// such a file cannot be made or could never be linked (see the module
/// doc). Any other failure (a read-only or full file system, no search or
/// write permission, no fd left) is the error a named file would meet too.
pub fn open_unnamed(folder: &Path, mode: u32) -> io::Result<Option<File>> {
    let opened = OpenOptions::new().read(true).write(true).mode(mode).custom_flags(libc::O_TMPFILE).open(folder);
    let file = match opened {
        Ok(file) => file,
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)) => return Ok(None),
        Err(e) => return Err(e),
    };
    // It will be linked through /proc: where that does not lead to it (no
    // /proc mounted), it could never get a name.
    let meta = file.metadata()?;
    match std::fs::metadata(proc_path(&file)) {
        Ok(found) if found.dev() == meta.dev() && found.ino() == meta.ino() => Ok(Some(file)),
        _ => Ok(None),
    }
}

/// `linkat(2)` of a file made by [`open_unnamed`] to `path`: it appears
/// there whole, with whatever locks it holds; `AlreadyExists` if something
/// is there (nothing is replaced).
pub fn link_unnamed(file: &File, path: &Path) -> io::Result<()> {
    use nix::fcntl::{AT_FDCWD, AtFlags};
    nix::unistd::linkat(AT_FDCWD, &proc_path(file), AT_FDCWD, path, AtFlags::AT_SYMLINK_FOLLOW).map_err(io::Error::from)
}

/// `/proc/self/fd/N` for `file`.
fn proc_path(file: &File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

//! Files with no name yet, on the portable path: none (POSIX has no
//! `O_TMPFILE`). Every temporary file is named from the start, and what
//! removes it after a SIGKILL is the guard (see `exit_hooks`).

use std::fs::File;
use std::io;
use std::path::Path;

/// No unnamed files here: `Ok(None)`, and the caller names its file.
pub fn open_unnamed(folder: &Path, mode: u32) -> io::Result<Option<File>> {
    let _ = (folder, mode);
    Ok(None)
}

/// Never called: [`open_unnamed`] makes no such file here.
pub fn link_unnamed(file: &File, path: &Path) -> io::Result<()> {
    let _ = (file, path);
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

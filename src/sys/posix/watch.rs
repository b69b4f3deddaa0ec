//! Changes to files on the portable path: POSIX has no way to announce
//! them, so nothing is watched and [`Changes::fd`] is `None`; the caller
//! looks at the files again in ticks (`pgrun output --wait`: at most 20 ms
//! apart). Linux's announces them: `linux/watch.rs`.

use std::io;
use std::os::fd::BorrowedFd;
use std::path::Path;

/// No changes are announced here.
pub struct Changes {
    _none: (),
}

impl Changes {
    /// Nothing to set up.
    pub fn new() -> io::Result<Changes> {
        Ok(Changes { _none: () })
    }

    /// Nothing is watched here.
    pub fn watch(&self, path: &Path) -> io::Result<()> {
        let _ = path;
        Ok(())
    }

    /// No fd announces a change here: `None`.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// Nothing was announced.
    pub fn clear(&self) -> io::Result<()> {
        Ok(())
    }
}

//! What the portable path adds to reading `/proc`: it asks it nothing that
//! the kernel's calls can stand in for ([`ASKS_PROC`] is false: a group is
//! probed with `kill(0)`, a child with `waitid`), as it must where there is
//! no `/proc`; and it lists folders with std's reader. Linux's:
//! `linux/proc.rs`.

use std::io;

/// Whether pgrun asks `/proc` how many processes a group has, whom a
/// process runs as, and whether a process is still its child: no.
pub const ASKS_PROC: bool = false;

/// The names in folder `path` (without `.` and `..`): std's reader.
pub fn list_folder(path: impl AsRef<std::path::Path>) -> io::Result<Vec<std::ffi::OsString>> {
    std::fs::read_dir(path)?.map(|entry| entry.map(|e| e.file_name())).collect()
}

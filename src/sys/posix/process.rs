//! What the portable path adds to signalling and reaping: nothing. There
//! is no child subreaper: a process of the run whose parent ends is
//! reparented to init, and pgrun follows the group by its number alone.
//! Linux's: `linux/process.rs`.

use std::io;

/// Whether a running pgrun of this build is a child subreaper: no.
pub const RUN_PGRUN_IS_SUBREAPER: bool = false;

/// No child subreaper here: does nothing, and returns false.
pub fn become_subreaper() -> io::Result<bool> {
    Ok(false)
}

//! What Linux adds to signalling and reaping: pgrun as a child subreaper,
//! so that every process of its run stays one of its descendants.

use std::io;

/// Whether a running pgrun of this build is a child subreaper (see
/// [`become_subreaper`]; it refuses to run otherwise): while it lives,
/// every process of its run is one of its descendants.
pub const RUN_PGRUN_IS_SUBREAPER: bool = true;

/// `prctl(PR_SET_CHILD_SUBREAPER)`: orphaned descendants are reparented to
/// pgrun instead of init, so pgrun can reap their zombies and hears of their
/// deaths. Returns true: pgrun is one now.
pub fn become_subreaper() -> io::Result<bool> {
    nix::sys::prctl::set_child_subreaper(true)?;
    Ok(true)
}

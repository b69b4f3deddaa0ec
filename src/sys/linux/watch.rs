//! Changes to files as events a `poll` can wait for: `inotify(7)`. `pgrun
//! output --wait` watches its FILE (a write, a truncation) and the run's
//! pid file (removed, or renamed over: its link count changes) and learns
//! of each change as the fd turns readable, not in ticks. (The portable
//! path announces nothing: `posix/watch.rs`.)

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

/// Changes to a few files, announced on one fd.
pub struct Changes {
    inotify: Inotify,
}

impl Changes {
    /// `inotify_init1(2)`, non-blocking and close-on-exec: nothing watched
    /// yet.
    pub fn new() -> io::Result<Changes> {
        Ok(Changes { inotify: Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)? })
    }

    /// `inotify_add_watch(2)` of the file at `path` (the file it names
    /// now, followed if a symlink): writes and truncation (`IN_MODIFY`),
    /// its link count and attributes (`IN_ATTRIB`: removed, or another
    /// file renamed over it), and its own move or deletion.
    pub fn watch(&self, path: &Path) -> io::Result<()> {
        let mask = AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_ATTRIB
            | AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_DELETE_SELF;
        self.inotify.add_watch(path, mask)?;
        Ok(())
    }

    /// The fd that turns readable once a watched file changed; `None`
    /// where changes are not announced (not here).
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.inotify.as_fd())
    }

    /// Take every change announced so far. What each was is not kept:
    /// the caller looks at the files themselves again.
    pub fn clear(&self) -> io::Result<()> {
        loop {
            match self.inotify.read_events() {
                Ok(events) if events.is_empty() => return Ok(()),
                Ok(_) => continue,
                Err(Errno::EAGAIN) => return Ok(()),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

//! What the guard withdraws once the run it stopped is gone: the
//! temporary names pgrun left, the pid file, and the cancel markers that
//! were the run's, each only while the path still names the very file
//! (device and inode) that was the run's, and each failure one warning
//! line, never read as "gone".

use crate::say;
use crate::sys::{self, Pid};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Remove the temporary names pgrun had made and not placed or removed
/// when it died (recorded in memory shared with the guard, see
/// [`crate::exit_hooks`]): each if it is still the file pgrun made there
/// ([`crate::atomic_file::remove_left`]).
pub(super) fn remove_temporaries_left() {
    for named in crate::exit_hooks::temporaries_left() {
        let removed = match named.folder {
            // `--stdin-pipe`'s folder (the portable path's), with its FIFOs.
            true => crate::sys::fifo_folder::remove_left(&named.path, named.id, &crate::stdin_pipe::ENTRIES),
            false => crate::atomic_file::remove_left(&named),
        };
        if let Err(e) = removed {
            let what = crate::say::errno_text(&e);
            say::line(format_args!("guard: warning: cannot remove {}: {what}", named.path.display()));
        }
    }
}

/// How often, and how far apart, the guard looks again at a path whose
/// look failed for a passing reason (see [`remove_pidfile_if_ours`]).
const LOOK_RETRIES: u32 = 4;
const LOOK_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(25);

/// Remove the pid file if it is still the one pgrun published (same
/// device and inode) and it is stale: a reader's removal, under the claim
/// byte, refused while a live run holds the file's lock. The inode number
/// alone proves nothing: once pgrun died its file was stale, another run
/// may have replaced it meanwhile, and a new file often gets the old
/// number (ext4). That run holds its file's lock from before the file
/// appears at the path, so the lock tells it apart, whatever its inode.
///
/// A look that fails (the path's stat, the lock's test: ENOMEM, EINTR, an
/// I/O error) proves nothing: the whole check is made again, a few times
/// ([`LOOK_RETRIES`]), then reported with one warning line naming the
/// path, the file left in place.
pub(super) fn remove_pidfile_if_ours(path: Option<PathBuf>, id: Option<(u64, u64)>) {
    use crate::pidfile::RecordError;
    let (Some(path), Some((dev, ino))) = (path, id) else { return };
    let look = || -> std::io::Result<()> {
        let record = match crate::pidfile::read_record(&path, true) {
            Ok(record) => record,
            Err(RecordError::Unreadable(e)) => return Err(e),
            Err(_) => return Ok(()),
        };
        if record.meta.dev() == dev && record.meta.ino() == ino {
            crate::pidfile::remove_if_stale(&path, &record)?;
        }
        Ok(())
    };
    let mut tries = 0;
    while let Err(e) = look() {
        if tries == LOOK_RETRIES {
            let what = crate::say::errno_text(&e);
            say::line(format_args!("guard: warning: cannot check pid file {}: {what}; left in place", path.display()));
            return;
        }
        tries += 1;
        std::thread::sleep(LOOK_RETRY_PAUSE);
    }
}

/// Remove the marker if it is still the file pgrun made or found (its
/// stopping note, pgrun's) or the guard found, and still what it was then
/// (see [`crate::pidfile::still_taken`]).
pub(super) fn remove_marker_if_ours(path: Option<&Path>, taken: Option<crate::pidfile::Taken>, pgrun: Pid) {
    let (Some(path), Some(taken)) = (path, taken) else { return };
    if let Err(e) = crate::pidfile::remove_if_still_taken(path, taken, pgrun, sys::geteuid()) {
        let what = crate::say::errno_text(&e);
        say::line(format_args!("guard: warning: cannot remove cancel marker {}: {what}", path.display()));
    }
}

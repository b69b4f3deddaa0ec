//! The cancel marker (`PIDFILE.cancel` by default).
//!
//! Markers count only when owned by the pid file's user or by root: in a
//! sticky `/tmp`, another user's `job.pid.cancel` must not cancel our runs.
//! The run consumes a marker with one `unlink(2)`: the unlink succeeding
//! *is* the check, so a marker created concurrently is never both seen and
//! left behind.
//!
//! A marker is a cancel request, except the one a run creates itself when
//! it starts stopping: that one holds a note naming the run
//! (`pgrun-stopping pgrun=PID pgid=PGID`), which says "stopping" next to a
//! live pid file and nothing at all once the run has ended. So a marker the
//! ending run could not remove (EIO, EROFS, EACCES...) never cancels the
//! next run; that run ignores it, and the next run to stop on the path
//! replaces it. A cancel that finds such a note turns it into a request.

use crate::atomic_file::{self, TempFile, folder_of};
use crate::sys::{Pid, geteuid};
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The cancel marker for a pid file: `PIDFILE.cancel`.
pub fn default_marker(pidfile: &Path) -> PathBuf {
    let mut s = pidfile.as_os_str().to_owned();
    s.push(".cancel");
    PathBuf::from(s)
}

/// What is at a marker's path, from the point of view of `owner`'s runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    Absent,
    /// A file or folder owned by `owner` or root that is not a stopping
    /// note: it says "cancel".
    Request,
    /// The note a pgrun wrote when it started stopping its run (see
    /// [`create_note`]): "that run is stopping", never a cancel request.
    Stopping,
    /// Owned by another user (this uid): ignored.
    Foreign(u32),
}

/// The first word of a stopping note: `pgrun-stopping pgrun=PID pgid=PGID`.
const NOTE_START: &[u8] = b"pgrun-stopping ";

/// The stopping note of this pgrun for the run of group `pgid`.
fn note(pgid: Pid) -> String {
    format!("pgrun-stopping pgrun={} pgid={pgid}\n", crate::sys::getpid())
}

/// Look at `marker` without following a symlink. A regular file is read
/// (its first line) to tell a stopping note from a request; anything else,
/// or a file that cannot be read, is a request.
pub fn marker(marker: &Path, owner: u32) -> Marker {
    let meta = match fs::symlink_metadata(marker) {
        Err(_) => return Marker::Absent,
        Ok(meta) if meta.uid() != owner && meta.uid() != 0 => return Marker::Foreign(meta.uid()),
        Ok(meta) => meta,
    };
    if !meta.is_file() || meta.len() == 0 {
        return Marker::Request;
    }
    let mut start = [0u8; NOTE_START.len()];
    let read = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(marker)
        .and_then(|mut file| io::Read::read_exact(&mut file, &mut start));
    if read.is_ok() && start == NOTE_START { Marker::Stopping } else { Marker::Request }
}

/// Check for a cancel request and consume it in one step: whether there
/// was one. The `unlink` succeeding is the check, so of two runs (or a run
/// and a cancel's clean-up) only one ever consumes a marker. A folder is
/// removed with `rmdir`; one that cannot be removed still says "cancel". A
/// stopping note is no request: left alone (it is removed by the run it
/// belongs to, or by the next run that stops on this path).
pub fn consume_marker(path: &Path, owner: u32) -> bool {
    match marker(path, owner) {
        Marker::Absent => false,
        Marker::Foreign(uid) => {
            crate::verbose!("ignoring cancel marker {} owned by uid {uid}", path.display());
            false
        }
        Marker::Stopping => {
            crate::verbose!("ignoring {}: a stopping run's note, not a cancel request", path.display());
            false
        }
        Marker::Request => match fs::remove_file(path) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(_) => match fs::remove_dir(path) {
                Ok(()) => true,
                Err(e) if e.kind() == io::ErrorKind::NotFound => false,
                Err(_) => true,
            },
        },
    }
}

/// Request a cancel: create the marker as an empty file; `Ok(false)` if
/// something was already there. A stopping note there (of a run that is
/// stopping, or of one that ended and could not remove it) is turned into a
/// request in place, so that a run starting next still honours it.
pub fn create_marker(marker: &Path) -> io::Result<bool> {
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(atomic_file::MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(marker)
    {
        Ok(file) => {
            let _ = file.set_permissions(fs::Permissions::from_mode(atomic_file::MODE));
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            if self::marker(marker, geteuid()) != Marker::Stopping {
                return Ok(false);
            }
            let note = OpenOptions::new().write(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(marker)?;
            note.set_len(0)?;
            Ok(true)
        }
        Err(e) => Err(e),
    }
}

/// A run starts stopping: put its stopping note at `marker` (so that a
/// marker next to a live pid file means "stopping"); `Ok(false)` if
/// something was already there (a cancel request, say), which is left as
/// it is. The note appears whole (written under a temporary name, then
/// linked into place): no reader ever sees it empty, which would be a
/// request.
pub fn create_note(marker: &Path, pgid: Pid) -> io::Result<bool> {
    let note = note(pgid);
    let temp = TempFile::create(marker, note.len())?;
    temp.set_content(note.as_bytes())?;
    match temp.link_into_place() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// The run of group `pgid` ends: remove the marker at `path` (its own note,
/// or the request that cancelled it), unless it is another user's.
///
/// One that cannot be removed must not cancel the next run on this path:
/// it is reported (one warning line naming the path and the errno) and, if
/// it is a request, overwritten with this run's stopping note, which no run
/// takes for a request. Only if that fails too does the warning say that
/// the next run will be cancelled.
pub fn remove_marker_at_exit(path: &Path, owner: u32, pgid: Pid) {
    let found = marker(path, owner);
    if matches!(found, Marker::Absent | Marker::Foreign(_)) {
        return;
    }
    let removed = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir(path),
        _ => fs::remove_file(path),
    };
    let err = match removed {
        Ok(()) => return,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return,
        Err(e) => e,
    };
    let harmless = found == Marker::Stopping || overwrite_with_note(path, pgid).is_ok();
    crate::say::line(format_args!(
        "warning: cannot remove cancel marker {}: {}{}",
        path.display(),
        errno_text(&err),
        if harmless { "" } else { "; it will cancel the next run that uses it" }
    ));
}

/// Replace a request's content with this run's stopping note, in place
/// (the note is written first, then the file cut to its length).
fn overwrite_with_note(path: &Path, pgid: Pid) -> io::Result<()> {
    let file = OpenOptions::new().write(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let note = note(pgid);
    std::os::unix::fs::FileExt::write_all_at(&file, note.as_bytes(), 0)?;
    file.set_len(note.len() as u64)
}

/// "Input/output error (EIO)": the text and the errno's name.
fn errno_text(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(code) => format!("{err} ({:?})", nix::errno::Errno::from_raw(code)),
        None => err.to_string(),
    }
}

/// Whether two paths name the same file, by any spelling: the same folder
/// and name once folders are resolved, a symlink (chain) to the other, or a
/// hard link of it. Used to refuse a cancel marker that is the pid file.
pub fn same_file(a: &Path, b: &Path) -> bool {
    let (ra, rb) = (resolve(a), resolve(b));
    if ra.is_some() && ra == rb {
        return true;
    }
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(ma), Ok(mb)) => ma.dev() == mb.dev() && ma.ino() == mb.ino(),
        _ => false,
    }
}

/// `path` with its folder canonicalised and symlinks at the end followed,
/// even to a file that does not exist yet.
fn resolve(path: &Path) -> Option<PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        let folder = fs::canonicalize(folder_of(&path)).ok()?;
        let here = folder.join(path.file_name()?);
        match fs::read_link(&here) {
            Ok(target) => path = folder.join(target),
            Err(_) => return Some(here),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopping_note_is_no_request() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("job.pid.cancel");
        let me = geteuid();
        assert_eq!(marker(&m, me), Marker::Absent);
        assert!(create_note(&m, 4242).unwrap());
        assert_eq!(marker(&m, me), Marker::Stopping);
        assert!(!consume_marker(&m, me), "a note is not consumed as a request");
        assert!(!create_note(&m, 4243).unwrap(), "something is there already");
        assert!(create_marker(&m).unwrap(), "cancel turns a note into its request");
        assert_eq!(marker(&m, me), Marker::Request);
        assert!(!create_note(&m, 4242).unwrap(), "a run starting to stop leaves a request alone");
        fs::write(&m, "cancel, please\n").unwrap();
        assert_eq!(marker(&m, me), Marker::Request, "any other content is a request");
        assert!(consume_marker(&m, me));
        assert_eq!(marker(&m, me), Marker::Absent);
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    }

    #[test]
    fn same_file_by_any_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let pid = dir.path().join("job.pid");
        assert!(same_file(&pid, &dir.path().join("./job.pid")));
        assert!(same_file(&pid, &dir.path().join("sub/../job.pid")) || !dir.path().join("sub").exists());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("job.pid", &link).unwrap();
        assert!(same_file(&link, &pid), "a symlink to a pid file that does not exist yet");
        fs::write(&pid, "1\n").unwrap();
        let hard = dir.path().join("hard");
        fs::hard_link(&pid, &hard).unwrap();
        assert!(same_file(&hard, &pid));
        assert!(!same_file(&dir.path().join("job.pid.cancel"), &pid));
    }
}

//! The cancel marker (`PIDFILE.cancel` by default).
//!
//! Markers count only when owned by the pid file's user or by root: in a
//! sticky `/tmp`, another user's `job.pid.cancel` must not cancel our runs.
//! The run consumes a marker with one `unlink(2)`: the unlink succeeding
//! *is* the check, so a marker created concurrently is never both seen and
//! left behind.
//!
//! A marker is a cancel request, except a note pgrun wrote there: the one a
//! run creates when it starts stopping (`pgrun-stopping pgrun=PID
//! pgid=PGID`), which says "stopping" next to the pid file of the pgrun it
//! names and nothing at all otherwise, and a request that was consumed but
//! could not be removed (`pgrun-consumed pgrun=PID`). So a marker that
//! cannot be removed (EIO, EROFS, EACCES...) is reported and never cancels
//! a later run: that run ignores a note, and the next run to stop or end on
//! the path replaces or removes it. A cancel that finds a note turns it
//! into a request.
//!
//! One note says more while it is held: from the moment a run that was
//! stopping (or cancelled) is withdrawn until its pgrun exits, that pgrun
//! keeps its stopping note at the marker path write-locked
//! ([`hold_ending_note`]). The pid file is gone by then, but a cancel that
//! comes late still finds the run's end under way ([`ending_run`]: the note
//! names the pgrun that holds its lock) and waits for that pgrun to exit
//! instead of for a new run; the lock, let go of by the kernel at pgrun's
//! exit (its fd is left open once the note is removed), is also how a
//! cancel without pidfds learns of that exit. The note is removed from the
//! path before its lock goes, so a cancel that comes
//! later still has the pgrun it saw before it made its marker to wait for
//! (see [`super::SeenPgrun`]). Held or not, it is a note: no run takes it
//! for a request.

use crate::atomic_file::{self, TempFile, folder_of};
use crate::say::errno_text;
use crate::sys::lock::{self, Kind, Range};
use crate::sys::{Pid, geteuid};
use std::fs::{self, File, OpenOptions};
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
    /// A file or folder owned by `owner` or root that is not a note: it
    /// says "cancel".
    Request,
    /// A note pgrun wrote there, never a cancel request: with the pid of
    /// the pgrun that started stopping its run (`pgrun-stopping`, see
    /// [`create_note`]), or `None` for a request that was consumed but
    /// could not be removed (`pgrun-consumed`).
    Note(Option<Pid>),
    /// Owned by another user (this uid): ignored.
    Foreign(u32),
}

/// How every note starts; a file that starts otherwise is a request.
const STOPPING: &str = "pgrun-stopping ";
const CONSUMED: &str = "pgrun-consumed ";

/// The note of this pgrun, which started stopping the run of group `pgid`.
fn stopping_note(pgid: Pid) -> String {
    format!("{STOPPING}pgrun={} pgid={pgid}\n", crate::sys::getpid())
}

/// The note that replaces a request this pgrun consumed but could not
/// remove.
fn consumed_note() -> String {
    format!("{CONSUMED}pgrun={}\n", crate::sys::getpid())
}

/// Read a note's first line: `Some(pgrun)` for a stopping note (the pid
/// it names, 0 if none can be read), `None` for a consumed one; `Err` if
/// the text is no note.
fn parse_note(text: &str) -> Result<Option<Pid>, ()> {
    let pgrun =
        |rest: &str| rest.split_ascii_whitespace().find_map(|w| w.strip_prefix("pgrun=")).and_then(|n| n.parse().ok());
    if let Some(rest) = text.strip_prefix(STOPPING) {
        return Ok(Some(pgrun(rest).unwrap_or(0)));
    }
    if text.starts_with(CONSUMED) {
        return Ok(None);
    }
    Err(())
}

/// Look at `marker` without following a symlink. A regular file is read
/// (its first 64 bytes) to tell a note from a request; anything else, or a
/// file that cannot be read, is a request.
pub fn marker(marker: &Path, owner: u32) -> Marker {
    let meta = match fs::symlink_metadata(marker) {
        Err(_) => return Marker::Absent,
        Ok(meta) if meta.uid() != owner && meta.uid() != 0 => return Marker::Foreign(meta.uid()),
        Ok(meta) => meta,
    };
    if !meta.is_file() || meta.len() == 0 {
        return Marker::Request;
    }
    let mut text = Vec::new();
    let read = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(marker)
        .and_then(|file| io::Read::read_to_end(&mut io::Read::take(file, 64), &mut text));
    match read.ok().and_then(|_| parse_note(&String::from_utf8_lossy(&text)).ok()) {
        Some(note) => Marker::Note(note),
        None => Marker::Request,
    }
}

/// Check for a cancel request and consume it in one step: whether there
/// was one. The `unlink` succeeding is the check, so of two runs (or a run
/// and a cancel's clean-up) only one ever consumes a marker. A note is no
/// request: left alone (it is removed by the next run that ends on this
/// path). A request that cannot be removed still says "cancel" this once;
/// it is reported (one warning line) and overwritten with a consumed note,
/// so that it cancels nothing more.
pub fn consume_marker(path: &Path, owner: u32) -> bool {
    match marker(path, owner) {
        Marker::Absent => false,
        Marker::Foreign(uid) => {
            crate::verbose!("ignoring cancel marker {} owned by uid {uid}", path.display());
            false
        }
        Marker::Note(_) => {
            crate::verbose!("ignoring {}: a note pgrun left, not a cancel request", path.display());
            false
        }
        Marker::Request => match remove(path) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => {
                warn_left(path, &e, overwrite_with(path, &consumed_note()).is_ok());
                true
            }
        },
    }
}

/// Remove a marker: a folder with `rmdir`, anything else with `unlink`.
fn remove(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir(path),
        _ => fs::remove_file(path),
    }
}

/// Say that the marker at `path` could not be removed, and what that means
/// for the next run.
fn warn_left(path: &Path, err: &io::Error, harmless: bool) {
    crate::say::line(format_args!(
        "warning: cannot remove cancel marker {}: {}{}",
        path.display(),
        errno_text(err),
        if harmless { "" } else { "; it will cancel the next run that uses it" }
    ));
}

/// Request a cancel: create the marker as an empty file; `Ok(false)` if
/// something was already there. A note there (of a run that is stopping,
/// or one left by a run that ended) is turned into a request in place, so
/// that a run starting next still honours it.
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
            if !matches!(self::marker(marker, geteuid()), Marker::Note(_)) {
                return Ok(false);
            }
            // The note of a run whose pgrun is ending it: that run is being
            // stopped already (see `ending_run`), and the note is its.
            if ending_run(marker, geteuid()).is_some() {
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
/// marker next to a live pid file means "stopping"); `Ok(false)` if a
/// request was already there, which is left as it is. A note left there
/// by an ended run is replaced. The note appears whole (written under a
/// temporary name, then linked or renamed into place): no reader ever sees
/// it empty, which would be a request.
pub fn create_note(marker: &Path, pgid: Pid) -> io::Result<bool> {
    let note = stopping_note(pgid);
    let temp = TempFile::create(marker, note.len())?;
    temp.set_content(note.as_bytes())?;
    if matches!(self::marker(marker, geteuid()), Marker::Note(_)) {
        return temp.rename_into_place().map(|_| true);
    }
    match temp.link_into_place() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// A marker a run took for its own when it started stopping: the note it
/// wrote there, or the request it found there (the one that cancelled
/// it); by device and inode, so that a file put at the path later (a
/// cancel's request for the next run) is never taken for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    pub dev: u64,
    pub ino: u64,
    /// The run's own stopping note (else: a request).
    pub note: bool,
}

impl Taken {
    /// What is at `path` now, taken as the run's note (`note`) or as the
    /// request that cancelled it; `None` if nothing is there.
    pub fn at(path: &Path, note: bool) -> Option<Taken> {
        let meta = fs::symlink_metadata(path).ok()?;
        Some(Taken { dev: meta.dev(), ino: meta.ino(), note })
    }

    /// The request at `path` (a file or folder of this user's or root's
    /// that is no note), as a request taken; `None` if there is none.
    pub fn request_at(path: &Path) -> Option<Taken> {
        (marker(path, geteuid()) == Marker::Request).then(|| Taken::at(path, false)).flatten()
    }
}

/// Remove the marker at `path` if it is still `taken` (see
/// [`still_taken`]); nothing else is touched. Gone already is no error.
pub fn remove_if_still_taken(path: &Path, taken: Taken, pgrun: Pid, owner: u32) -> io::Result<()> {
    if !still_taken(path, taken, pgrun, owner) {
        return Ok(());
    }
    match remove(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Whether the marker at `path` is still `taken`: the same file (device
/// and inode) and still what it was then, the stopping note of the pgrun
/// `pgrun`, or a request. A cancel that finds the note makes a request of
/// it, in place: no longer the note (a published run's end takes it all
/// the same, as a request: see [`hold_ending_note`]).
pub fn still_taken(path: &Path, taken: Taken, pgrun: Pid, owner: u32) -> bool {
    let was = if taken.note { Marker::Note(Some(pgrun)) } else { Marker::Request };
    marker(path, owner) == was
        && fs::symlink_metadata(path).is_ok_and(|meta| meta.dev() == taken.dev && meta.ino() == taken.ino)
}

/// pgrun died (SIGKILL) before its run was stopped: its guard puts the
/// stopping note of that pgrun (`pgrun`, its group `pgid`) at `path` in
/// place of the request `taken` (one it knows was the run's: the request
/// that cancelled it, or one made while pgrun lived), if the path still
/// names that request. While the guard stops the run its pid file is
/// stale, so another run may start on it: that run must not take the
/// request made for this one and be cancelled before it starts. The note
/// says "stopping" as pgrun's own would; a cancel that comes now makes a
/// request of it, for the next run. Returns the note placed, to be removed
/// once the run is stopped (as the guard removes pgrun's own notes), or
/// `None` if the path no longer names that request.
pub fn note_in_place_of_request(path: &Path, taken: Taken, pgrun: Pid, pgid: Pid) -> io::Result<Option<Taken>> {
    let owner = geteuid();
    if taken.note || !still_taken(path, taken, pgrun, owner) {
        return Ok(None);
    }
    let note = format!("{STOPPING}pgrun={pgrun} pgid={pgid}\n");
    let temp = TempFile::unnamed(path, note.len())?;
    temp.set_content(note.as_bytes())?;
    let meta = temp.file().metadata()?;
    // Looked at again right before the rename: a request withdrawn by its
    // cancel meanwhile is not replaced (dropped, the note leaves no name).
    if !still_taken(path, taken, pgrun, owner) {
        return Ok(None);
    }
    temp.rename_into_place()?;
    Ok(Some(Taken { dev: meta.dev(), ino: meta.ino(), note: true }))
}

/// This pgrun's run ends (its pid file, if it had one, still published,
/// so no other run lives on the path): remove the marker at `path` if it
/// is the one the run took (`taken`, see [`Taken`]), a note an earlier run
/// left, or, for a run that was `published`, a request. Never another
/// user's, and never a request at the end of a run that was not
/// published: any request then is a cancel of the next run, dropped by
/// `pgrun cancel` or `--keep-pending`.
///
/// A published run takes every request it finds at its end as its own:
/// it was made while the run was published (a request there before is
/// taken at the start or right after publishing), so the cancel that made
/// it finds this run, live or ending, and is answered by its end. A
/// request made once the run is over (see [`super::Published::mark_over`])
/// is withdrawn by that cancel itself.
///
/// One that cannot be removed must not cancel the next run on this path:
/// it is reported (one warning line naming the path and the errno) and, if
/// it is a request, overwritten with a consumed note, which no run takes
/// for a request. Only if that fails too does the warning say that the
/// next run will be cancelled.
pub fn remove_marker_at_exit(path: &Path, owner: u32, taken: Option<Taken>, published: bool) {
    let me = crate::sys::getpid();
    let found = marker(path, owner);
    let ours = match found {
        Marker::Absent | Marker::Foreign(_) => false,
        Marker::Note(Some(pgrun)) if pgrun != me => true,
        Marker::Note(None) => true,
        Marker::Request if published => true,
        Marker::Note(Some(_)) | Marker::Request => taken.is_some_and(|t| still_taken(path, t, me, owner)),
    };
    if !ours {
        return;
    }
    match remove(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            let harmless = matches!(found, Marker::Note(_)) || overwrite_with(path, &consumed_note()).is_ok();
            warn_left(path, &e, harmless);
        }
    }
}

/// The note a pgrun holds at the marker path from its run's withdrawal
/// until it exits (see the module doc): removed when dropped, if the path
/// still names it, as pgrun's last step but its exit; its lock is held
/// until pgrun's exit itself (its fd is left open for the kernel to
/// close), so that a cancel that found the note and waits on its lock
/// sees pgrun's exit, not the removal.
pub struct EndingNote {
    path: PathBuf,
    locked: Option<File>,
    dev: u64,
    ino: u64,
}

/// The run of group `pgid` is gone and about to be withdrawn: if the
/// marker at `path` is still the one the run took (`taken`: its stopping
/// note, or the request that cancelled it), or, for a run that was
/// `published`, any request (see [`remove_marker_at_exit`]: such a request
/// is this run's, a note of this run made a request by a cancel included),
/// put this pgrun's stopping note there instead, write-locked by this
/// pgrun until the returned note is dropped (it appears locked, by a
/// rename over what was there). Anything else is left to
/// [`remove_marker_at_exit`]'s rule (a note an earlier run left is removed,
/// a request for the next run kept), and nothing is held: a run that was
/// not stopping, and that no cancel asked to stop, leaves no trace. A
/// marker that cannot be replaced is removed as that function does.
/// `before_placed` is told the note's device and inode before it is
/// renamed into place (pgrun tells its guard: a SIGKILL right after the
/// rename leaves the guard to remove it).
pub fn hold_ending_note(
    path: &Path,
    pgid: Pid,
    owner: u32,
    taken: Option<Taken>,
    published: bool,
    before_placed: impl FnOnce(u64, u64),
) -> Option<EndingNote> {
    let me = crate::sys::getpid();
    let request = published && marker(path, owner) == Marker::Request;
    if !request && !taken.is_some_and(|t| still_taken(path, t, me, owner)) {
        remove_marker_at_exit(path, owner, taken, published);
        return None;
    }
    match place_ending_note(path, pgid, before_placed) {
        Ok(note) => Some(note),
        Err(e) => {
            crate::verbose!("cannot put the ending note at {}: {}", path.display(), errno_text(&e));
            remove_marker_at_exit(path, owner, taken, published);
            None
        }
    }
}

fn place_ending_note(path: &Path, pgid: Pid, before_placed: impl FnOnce(u64, u64)) -> io::Result<EndingNote> {
    let note = stopping_note(pgid);
    let temp = TempFile::create(path, note.len())?;
    temp.set_content(note.as_bytes())?;
    if !lock::try_write_lock(temp.file(), Range::Record)? {
        return Err(io::Error::other("its new file is locked by another process"));
    }
    crate::test_hook::pause("ending-note");
    // Known before it is placed (a rename keeps the inode): once in place,
    // nothing is left to fail.
    let meta = temp.file().metadata()?;
    before_placed(meta.dev(), meta.ino());
    let file = temp.rename_into_place()?;
    crate::test_hook::pause("ending-note-placed");
    Ok(EndingNote { path: path.to_path_buf(), locked: Some(file), dev: meta.dev(), ino: meta.ino() })
}

impl EndingNote {
    /// The note's device and inode.
    pub fn id(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }
}

impl Drop for EndingNote {
    /// pgrun is about to exit: remove the note if it is still this one (a
    /// run that started since may have put its own there). One that cannot
    /// be removed is a note all the same: reported, harmless.
    fn drop(&mut self) {
        let removed = match fs::symlink_metadata(&self.path) {
            Ok(meta) if meta.dev() == self.dev && meta.ino() == self.ino => fs::remove_file(&self.path),
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = removed
            && e.kind() != io::ErrorKind::NotFound
        {
            warn_left(&self.path, &e, true);
        }
        crate::test_hook::pause("note-removed");
        // The lock stays until pgrun exits: the kernel closes the fd then,
        // however pgrun exits (see the type's doc).
        std::mem::forget(self.locked.take());
    }
}

/// A pgrun that has withdrawn its run and not exited yet, as a reader
/// finds it: the note at the marker path names it, and it holds the
/// note's lock (so it is alive, and its pid is still its own).
pub struct EndingRun {
    file: File,
    pgrun: Pid,
}

impl EndingRun {
    /// The pgrun that is ending its run.
    pub fn pgrun(&self) -> Pid {
        self.pgrun
    }

    /// Whether that pgrun still holds the note's lock (has not exited). An
    /// error says nothing either way: it is returned.
    pub fn held(&self) -> io::Result<bool> {
        Ok(lock::holder(&self.file, Range::FirstByte)?.is_some_and(|h| h.kind == Kind::Write && h.pid == self.pgrun))
    }
}

/// The pgrun ending its run at the marker `path` (see the module doc):
/// `None` unless `path` holds a stopping note of `owner`'s whose lock is
/// held by the very pgrun it names. Anything that cannot be read proves
/// nothing, and is `None`: for a glance only (see [`ending_run_checked`]
/// where the answer decides).
pub fn ending_run(path: &Path, owner: u32) -> Option<EndingRun> {
    ending_run_checked(path, owner).ok().flatten()
}

/// [`ending_run`], but a look that failed for want of resources or by an
/// I/O error (EMFILE, ENFILE, ENOMEM, EIO...) is that error, never "no
/// note": no file there (ENOENT), a symlink (ELOOP), another user's or
/// not a note at all are `None`.
pub fn ending_run_checked(path: &Path, owner: u32) -> io::Result<Option<EndingRun>> {
    let opened = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ELOOP | libc::ENOTDIR)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() || meta.uid() != owner {
        return Ok(None);
    }
    let mut text = Vec::new();
    io::Read::read_to_end(&mut io::Read::take(&mut file, 64), &mut text)?;
    let Ok(Some(pgrun)) = parse_note(&String::from_utf8_lossy(&text)) else { return Ok(None) };
    let run = EndingRun { file, pgrun };
    Ok((pgrun > 0 && run.held()?).then_some(run))
}

/// Replace a request's content with `note`, in place (the note is written
/// first, then the file cut to its length).
fn overwrite_with(path: &Path, note: &str) -> io::Result<()> {
    let file = OpenOptions::new().write(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    std::os::unix::fs::FileExt::write_all_at(&file, note.as_bytes(), 0)?;
    file.set_len(note.len() as u64)
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
        assert_eq!(marker(&m, me), Marker::Note(Some(crate::sys::getpid())));
        assert!(!consume_marker(&m, me), "a note is not consumed as a request");
        assert!(create_note(&m, 4243).unwrap(), "a note left there is replaced");
        assert_eq!(marker(&m, me), Marker::Note(Some(crate::sys::getpid())));
        assert!(create_marker(&m).unwrap(), "cancel turns a note into its request");
        assert_eq!(marker(&m, me), Marker::Request);
        assert!(!create_note(&m, 4242).unwrap(), "a run starting to stop leaves a request alone");
        fs::write(&m, "pgrun-consumed pgrun=7\n").unwrap();
        assert_eq!(marker(&m, me), Marker::Note(None));
        assert!(!consume_marker(&m, me), "a consumed request cancels nothing more");
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

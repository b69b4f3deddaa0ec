//! The pid file protocol and the cancel marker, for the run that publishes
//! and for the readers (`cancel`, `status`) that look at it.
//!
//! A published run holds a write lock from byte 0 of its pid file (see
//! [`lock`]); held by a process running as the file's owner, that lock is
//! what "alive" means, and nothing else is (not a read lock, not another
//! user's lock, not a starting run's claim).
//!
//! A starting run claims the path before its command starts:
//! - no file: nothing to claim; it publishes with `link(2)`, which fails
//!   rather than replaces if another run got there first;
//! - a live run's file: refused (exit 125);
//! - a stale file: it write-locks the claim byte of that file (never byte 0,
//!   so no reader mistakes it for a live run), then checks that the path
//!   still names the inode it locked and starts over if not (another run
//!   replaced it meanwhile). Holding the claim, it alone may replace the
//!   file, with `rename(2)`.
//!
//! The temporary file the record is published from is created, sized and
//! locked during the claim too, so everything that can fail does so before
//! the command starts. A reader that finds a stale file removes it only
//! while holding the same claim byte, so it never removes a file a starting
//! run is about to replace.
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
use crate::backoff::Backoff;
use crate::sys::lock::{self, CLAIM_BYTE, Kind, Range};
use crate::sys::{Pid, geteuid, process};
use crate::test_hook;
use anyhow::{Context, Result, bail};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Fail unless the folder of `path` exists and `path` is not a symlink or a
/// directory. `what` names the file in the message ("pid file", "report").
pub fn check_target(path: &Path, what: &str) -> Result<()> {
    check_folder(path, what)?;
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => bail!("refusing {what} {}: it is a symlink", path.display()),
        Ok(m) if m.is_dir() => bail!("{what} {} is a directory", path.display()),
        _ => Ok(()),
    }
}

/// Fail unless the folder of `path` exists and is a directory.
pub fn check_folder(path: &Path, what: &str) -> Result<()> {
    let folder = folder_of(path);
    match fs::metadata(folder) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => bail!("{what} folder {} is not a directory", folder.display()),
        Err(e) => bail!("{what} folder {}: {e}", folder.display()),
    }
}

/// The longest record: a 32-bit group id in decimal and a newline. The
/// temporary file reserves this much before the command starts.
const RECORD_SPACE: usize = 11;

/// What became of a claim that had to wait for another starting run.
pub enum Claimed {
    Claim(Claim),
    /// A termination signal arrived while waiting (its number).
    Interrupted(i32),
}

/// A pid file claimed for this run but not yet published.
pub struct Claim {
    path: PathBuf,
    /// The stale file, its claim byte write-locked by us, so that no other
    /// run replaces it while we start; `None` if there was no file.
    stale: Option<File>,
    /// The record to be, created and locked already (taken by `publish`).
    temp: Option<TempFile>,
}

impl Drop for Claim {
    /// A run that ends before it publishes (cancelled before the start, a
    /// command not found) removes the stale file it had claimed: nobody
    /// else may replace it meanwhile, and leaving it helps no one.
    fn drop(&mut self) {
        if let Some(stale) = self.stale.take()
            && let Ok(meta) = stale.metadata()
            && names(&self.path, &meta)
        {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// A published pid file, locked for as long as this value lives.
pub struct Published {
    path: PathBuf,
    _locked: File,
    dev: u64,
    ino: u64,
}

/// Claim `path` for a run: refuse a live run's file, a symlink, a missing
/// folder, a claim byte another user holds; wait (with backoff) while
/// another starting run of ours holds the claim, asking `interrupted` for a
/// termination signal between tries. Then prepare the record's temporary
/// file.
pub fn claim(path: &Path, interrupted: &mut dyn FnMut() -> Option<i32>) -> Result<Claimed> {
    check_target(path, "pid file")?;
    let me = geteuid();
    let mut backoff = Backoff::default();
    let mut said_waiting = false;
    let stale = loop {
        let file = match open_existing(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => break None,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                bail!("refusing pid file {}: it is a symlink", path.display())
            }
            Err(e) => return Err(e).with_context(|| format!("cannot open pid file {}", path.display())),
        };
        test_hook::pause("claim-opened");
        let meta = file.metadata().with_context(|| format!("cannot stat pid file {}", path.display()))?;
        if let Some(pid) = live_holder(&file, &meta).with_context(|| lock_context(path))? {
            bail!("pid file {} is held by a live run (pgrun pid {})", path.display(), shown_pid(pid))
        }
        if lock::try_write_lock(&file, Range::Claim).with_context(|| lock_context(path))? {
            // Whoever replaced the file between our open and our lock did so
            // holding this same claim: the path no longer names our inode.
            if names(path, &meta) {
                break Some(file);
            }
            continue;
        }
        if let Some(holder) = lock::holder(&file, Range::Claim).with_context(|| lock_context(path))?
            && is_foreign(holder, me)
        {
            bail!(
                "pid file {} is blocked: process {} of another user holds a lock on its byte {CLAIM_BYTE}",
                path.display(),
                shown_pid(holder.pid)
            )
        }
        // Another run of ours is starting on this path: it will publish (and
        // we then refuse) or give up (and we claim). Wait for either.
        if let Some(signal) = interrupted() {
            return Ok(Claimed::Interrupted(signal));
        }
        if !said_waiting {
            crate::verbose!("another run is starting on pid file {}; waiting", path.display());
            said_waiting = true;
        }
        backoff.pause_until(None);
    };
    test_hook::pause("claimed");
    let temp =
        TempFile::create(path, RECORD_SPACE).with_context(|| format!("cannot prepare pid file {}", path.display()))?;
    if !lock::try_write_lock(temp.file(), Range::Record)
        .with_context(|| format!("cannot lock the new pid file for {}", path.display()))?
    {
        bail!("cannot lock the new pid file for {}", path.display());
    }
    Ok(Claimed::Claim(Claim { path: path.to_path_buf(), stale, temp: Some(temp) }))
}

fn lock_context(path: &Path) -> String {
    format!("cannot read the locks of pid file {}", path.display())
}

fn shown_pid(pid: Pid) -> String {
    if pid > 0 { pid.to_string() } else { "unknown: another PID namespace".to_string() }
}

/// A lock on the claim byte that no starting run of ours could hold: a read
/// lock (starters and cancellers take write locks), or one held by a
/// process of another user.
fn is_foreign(holder: lock::Holder, me: u32) -> bool {
    holder.kind == Kind::Read || process::effective_uid(holder.pid).is_some_and(|uid| uid != me)
}

/// Open an existing pid file read-write without following a symlink.
fn open_existing(path: &Path) -> io::Result<File> {
    let file =
        OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// The pgrun that holds `file` as a live run: a write lock on byte 0 held
/// by a process running as the file's owner. A holder in a PID namespace
/// we cannot see (pid 0) cannot be checked; a write lock needs write access
/// to a 0644 file, so it is the owner's (or root's), and counts.
fn live_holder(file: &File, meta: &fs::Metadata) -> io::Result<Option<Pid>> {
    Ok(match lock::holder(file, Range::FirstByte)? {
        Some(lock::Holder { kind: Kind::Write, pid: 0 }) => Some(0),
        Some(lock::Holder { kind: Kind::Write, pid }) => {
            process::effective_uid(pid).is_none_or(|uid| uid == meta.uid()).then_some(pid)
        }
        _ => None,
    })
}

impl Claim {
    /// Publish `pgid` atomically; the new file is locked already.
    pub fn publish(mut self, pgid: Pid) -> Result<Published> {
        let path = self.path.clone();
        let temp = self.temp.take().expect("published once");
        temp.set_content(format!("{pgid}\n").as_bytes())
            .with_context(|| format!("cannot write pid file {}", path.display()))?;
        let stale = self.stale.take();
        // Replace the stale file only if the path still names it: holding its
        // claim keeps every starting run and canceller away, but not
        // somebody's `rm` (after which another run may have published).
        let replace = stale.as_ref().and_then(|f| f.metadata().ok()).is_some_and(|meta| names(&path, &meta));
        let file = if replace {
            // The claim ends with `stale`, once the new file is in place.
            let placed = temp.rename_into_place();
            drop(stale);
            placed.with_context(|| format!("cannot publish pid file {}", path.display()))?
        } else {
            match temp.link_into_place() {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    bail!("pid file {} was created by another run while this one started", path.display())
                }
                Err(e) => return Err(e).with_context(|| format!("cannot publish pid file {}", path.display())),
            }
        };
        let meta = file.metadata().context("cannot stat the pid file")?;
        Ok(Published { path, _locked: file, dev: meta.dev(), ino: meta.ino() })
    }
}

impl Published {
    /// The published file's device and inode.
    pub fn id(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }

    /// Remove the pid file if it is still ours; the lock goes with it.
    pub fn remove(self) {
        if let Ok(meta) = fs::symlink_metadata(&self.path)
            && meta.dev() == self.dev
            && meta.ino() == self.ino
        {
            let _ = fs::remove_file(&self.path);
        }
    }
}

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

/// A pid file as a reader (`cancel`, `status`) finds it.
pub struct Record {
    /// Open without following symlinks; used for `F_GETLK` (and, read-write,
    /// for the claim byte when removing a stale file).
    pub file: File,
    pub pgid: Pid,
    pub meta: fs::Metadata,
}

/// What the locks of a record say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// A published run: the pgrun holding the lock (0: in a PID namespace
    /// the reader cannot see).
    Live(Pid),
    /// Not published: a starting run (or a canceller) holds the claim byte.
    Claimed,
    /// Not published and nobody claims it.
    Stale,
}

impl Record {
    /// What the locks say now.
    pub fn liveness(&self) -> io::Result<Liveness> {
        if let Some(pid) = live_holder(&self.file, &self.meta)? {
            return Ok(Liveness::Live(pid));
        }
        Ok(match lock::holder(&self.file, Range::Claim)? {
            Some(lock::Holder { kind: Kind::Write, .. }) => Liveness::Claimed,
            _ => Liveness::Stale,
        })
    }
}

/// Why a pid file could not be read as a record.
#[derive(Debug)]
pub enum RecordError {
    Missing,
    Symlink,
    NotRegular,
    Unreadable(io::Error),
    /// Its content is not one decimal group id and a newline.
    NotAGroupId(String),
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Missing => write!(f, "no such file"),
            RecordError::Symlink => write!(f, "it is a symlink"),
            RecordError::NotRegular => write!(f, "it is not a regular file"),
            RecordError::Unreadable(e) => write!(f, "{e}"),
            RecordError::NotAGroupId(text) => write!(f, "its content {text:?} is not a process-group id"),
        }
    }
}

/// Open and parse the pid file at `path` without following a symlink.
/// `writable` asks for a read-write fd where one can be had (needed to
/// take its claim byte when removing a stale file).
pub fn read_record(path: &Path, writable: bool) -> Result<Record, RecordError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(RecordError::Missing),
        Err(e) => return Err(RecordError::Unreadable(e)),
    };
    if meta.file_type().is_symlink() {
        return Err(RecordError::Symlink);
    }
    if !meta.is_file() {
        return Err(RecordError::NotRegular);
    }
    let open = |write: bool| {
        OpenOptions::new().read(true).write(write).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)
    };
    // Read-only where writing is refused (a read-only mount, a file that is
    // not ours): the record can still be read and its lock tested.
    let opened = match open(writable) {
        Err(e) if writable && matches!(e.raw_os_error(), Some(libc::EROFS) | Some(libc::EACCES)) => open(false),
        other => other,
    };
    let mut file = opened.map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => RecordError::Missing,
        _ if e.raw_os_error() == Some(libc::ELOOP) => RecordError::Symlink,
        _ => RecordError::Unreadable(e),
    })?;
    let mut text = String::new();
    let mut limited = io::Read::take(&mut file, 64);
    io::Read::read_to_string(&mut limited, &mut text).map_err(|_| RecordError::NotAGroupId("<not text>".into()))?;
    let meta = file.metadata().map_err(RecordError::Unreadable)?;
    let pgid = parse_group_id(&text).ok_or_else(|| RecordError::NotAGroupId(text.clone()))?;
    Ok(Record { file, pgid, meta })
}

/// Exactly one positive decimal number and a newline.
pub fn parse_group_id(text: &str) -> Option<Pid> {
    let digits = text.strip_suffix('\n')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.starts_with('0') {
        return None;
    }
    digits.parse().ok()
}

/// Remove a stale record, holding its claim byte so that no starting run is
/// replacing it meanwhile, and only if `path` still names it and it is
/// still not live. Returns whether it was removed. (The record must have
/// been opened writable.)
pub fn remove_if_stale(path: &Path, record: &Record) -> bool {
    if !matches!(lock::try_write_lock(&record.file, Range::Claim), Ok(true)) {
        return false;
    }
    let removed = names(path, &record.meta)
        && matches!(live_holder(&record.file, &record.meta), Ok(None))
        && fs::remove_file(path).is_ok();
    let _ = lock::unlock(&record.file, Range::Claim);
    removed
}

/// Whether `path` still names the file `meta` describes.
fn names(path: &Path, meta: &fs::Metadata) -> bool {
    fs::symlink_metadata(path).is_ok_and(|now| now.dev() == meta.dev() && now.ino() == meta.ino())
}

/// Whether `path` still names the file `record` was read from. A run
/// removes its pid file only after its group is gone, so a record whose
/// path has moved on belongs to a run that has ended.
pub fn still_names(path: &Path, record: &Record) -> bool {
    names(path, &record.meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_ids_are_one_decimal_line() {
        assert_eq!(parse_group_id("4242\n"), Some(4242));
        for bad in ["", "\n", "4242", "-1\n", "0\n", "042\n", " 42\n", "42 \n", "42\n\n", "4x\n", "99999999999\n"] {
            assert_eq!(parse_group_id(bad), None, "{bad:?}");
        }
    }

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

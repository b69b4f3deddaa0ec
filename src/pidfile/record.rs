//! A pid file as its readers (`cancel`, `status`) find it: opened without
//! following a symlink, its content parsed as one group id, and what its
//! locks say (a live run, a starting run's claim, or stale). A stale record
//! is removed only under its claim byte, and whether the path still names
//! the file a reader found tells a run that withdrew its record (it ended)
//! from one whose pgrun died without doing so. While the lock is held, the
//! group number in it names the run only as long as that group holds one
//! of the lock holder's descendants (see [`group_holds_run_of`]).

use crate::sys::lock::{self, Kind, Range};
use crate::sys::{Pid, process};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The pgrun that holds `file` as a live run: a write lock on byte 0 held
/// by a process running as the file's owner. A holder in a PID namespace
/// we cannot see (pid 0) cannot be checked; a write lock needs write access
/// to a 0644 file, so it is the owner's (or root's), and counts.
pub(super) fn live_holder(file: &File, meta: &fs::Metadata) -> io::Result<Option<Pid>> {
    Ok(match lock::holder(file, Range::FirstByte)? {
        Some(lock::Holder { kind: Kind::Write, pid: 0 }) => Some(0),
        Some(lock::Holder { kind: Kind::Write, pid }) => {
            crate::sys::proc::effective_uid(pid).is_none_or(|uid| uid == meta.uid()).then_some(pid)
        }
        _ => None,
    })
}

/// The pgrun holding the file at `path` as a live run's pid file, told by
/// its lock alone (nothing is read): a starting run asks this of the path
/// it is to put its report at. Nothing there, a file that is not a regular
/// one, or one it may not read (a pid file is 0644: not a run's) holds no
/// run; any other failure to look is an error, never "no run".
pub fn live_run_at(path: &Path) -> io::Result<Option<Pid>> {
    let opened = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied) => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Ok(None);
    }
    live_holder(&file, &meta)
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

impl Record {
    /// Whether the run of `holder`, found holding this record's lock, is
    /// over: it takes no more cancel requests (see
    /// [`super::Published::mark_over`]), it let go of its lock, or it is
    /// gone. A `cancel` that made its request before it found the run not
    /// over knows that the run takes that request at its end; one that
    /// finds it over must withdraw its request itself. An error proves
    /// nothing either way: it is returned.
    pub fn run_over(&self, holder: Pid) -> io::Result<bool> {
        if self.liveness()? != Liveness::Live(holder) {
            return Ok(true);
        }
        let open = lock::holder(&self.file, Range::Open)?;
        Ok(!open.is_some_and(|h| h.kind == Kind::Write && h.pid == holder))
    }
}

/// The release of a record's lock, as an event a `poll` can wait for: a
/// thread blocks until no process holds a write lock on byte 0 (see
/// [`lock::wait_unlocked`]), then closes its end of a socket, so the other
/// end turns readable. For `pgrun wait`, which must learn of a run's end
/// when its pgrun lets go of the lock, not when that pgrun exits.
pub struct ReleaseWatch {
    wake: std::os::unix::net::UnixStream,
    outcome: std::sync::mpsc::Receiver<io::Result<()>>,
}

impl Record {
    /// Start watching for the release of this record's lock.
    pub fn watch_release(&self) -> io::Result<ReleaseWatch> {
        let file = self.file.try_clone()?;
        let (wake, tell) = std::os::unix::net::UnixStream::pair()?;
        let (send, outcome) = std::sync::mpsc::channel();
        std::thread::Builder::new().name("lock-watch".into()).spawn(move || {
            let _ = send.send(lock::wait_unlocked(&file, Range::FirstByte));
            drop(tell);
        })?;
        Ok(ReleaseWatch { wake, outcome })
    }
}

impl ReleaseWatch {
    /// Readable once the lock was let go of (or the wait for it failed).
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.wake)
    }

    /// Once [`ReleaseWatch::fd`] is readable: `Ok` if the lock was let go
    /// of, the error that ended the wait otherwise.
    pub fn outcome(&self) -> io::Result<()> {
        self.outcome.recv().unwrap_or_else(|_| Err(io::Error::other("the wait for the lock ended without an answer")))
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
    crate::test_hook::pause("record-read");
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
/// still not live. Returns whether it was removed; an error when a look at
/// the path, its claim byte or its lock's holder failed, which proves
/// nothing either way (a removal refused is reported here, one line). A
/// record opened read-only (a file not ours, a read-only mount) is never
/// removed.
pub fn remove_if_stale(path: &Path, record: &Record) -> io::Result<bool> {
    match lock::try_write_lock(&record.file, Range::Claim) {
        Ok(true) => {}
        Ok(false) => return Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::EBADF) => return Ok(false),
        Err(e) => return Err(e),
    }
    let removed = (|| {
        if !still_names(path, record)? || live_holder(&record.file, &record.meta)?.is_some() {
            return Ok(false);
        }
        match fs::remove_file(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => {
                crate::say::line(format_args!(
                    "warning: cannot remove stale pid file {}: {}",
                    path.display(),
                    crate::say::errno_text(&e)
                ));
                Ok(false)
            }
        }
    })();
    let _ = lock::unlock(&record.file, Range::Claim);
    removed
}

/// Whether `path` still names the file `record` was read from. A run
/// removes its pid file only after its group is gone, and before it lets
/// go of its lock, so a record whose path has moved on (nothing there any
/// more, or another file) belongs to a run that has ended, even if its
/// lock was found free. A path that cannot be looked at proves neither:
/// the error is returned.
pub fn still_names(path: &Path, record: &Record) -> io::Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(now) => Ok(now.dev() == record.meta.dev() && now.ino() == record.meta.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether process group `pgid` (a record's content) still holds a process
/// of the run of the live pgrun `holder` (the record's lock holder), as
/// `cancel` and `status` need to know before they act on or count it: the
/// group may have ended while its pgrun finishes, and its number been
/// taken by somebody else. That pgrun is a child subreaper, so every
/// process of its run (zombies included) descends from it; a group that
/// took the number after the run's group ended does not. Where pgrun is
/// no subreaper, the number is all there is to go by.
pub fn group_holds_run_of(holder: Pid, pgid: Pid) -> bool {
    if !process::RUN_PGRUN_IS_SUBREAPER {
        return process::group_exists(pgid);
    }
    // The common case, in one read: the leader, still pgrun's child.
    if crate::sys::proc::stat(pgid).is_some_and(|s| s.pgrp == pgid && s.ppid == holder) {
        return true;
    }
    // Else walk down from pgrun: what the run has, not what the machine
    // has (a `/proc` scan per cancel made 200 runs cancelled at once take
    // 10 s). A member found proves the group is the run's. None found
    // proves nothing: a children file longer than a page is read in
    // parts, each resumed by position, so a child that stays put is
    // skipped when siblings listed before it ended between two parts (and
    // a file that cannot be read is taken for "no children"). The scan
    // below answers that case: it lists `/proc` by pid, which no other
    // process's end can shift.
    if let Some(below) = crate::sys::proc::descendants(holder, crate::sys::proc::MAX_PIDS)
        && below.into_iter().any(|pid| crate::sys::proc::stat(pid).is_some_and(|s| s.pgrp == pgid))
    {
        return true;
    }
    let table = crate::sys::proc::scan();
    if table.is_empty() {
        // No /proc to look in: the number is all there is.
        return process::group_exists(pgid);
    }
    let parents: std::collections::BTreeMap<Pid, Pid> = table.iter().map(|(pid, s)| (*pid, s.ppid)).collect();
    let parent_of = |pid: Pid| parents.get(&pid).copied();
    table.iter().filter(|(_, stat)| stat.pgrp == pgid).any(|&(pid, _)| {
        let mut at = pid;
        // A parent chain is no longer than the table (bounded even if
        // it changes between two reads).
        for _ in 0..=table.len() {
            match parent_of(at) {
                Some(parent) if parent == holder => return true,
                Some(parent) if parent > 1 => at = parent,
                _ => return false,
            }
        }
        false
    })
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
}

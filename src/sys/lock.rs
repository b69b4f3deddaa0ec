//! POSIX record locks (`fcntl` `F_SETLK`/`F_GETLK`) on the byte ranges of
//! the pid file protocol, and on one byte of a folder ([`Range::Mark`]:
//! a run's report path, marked in use).
//!
//! - [`Range::Record`]: a published run holds a write lock from byte 0 to
//!   the end of the file (and beyond). "Byte 0 is write-locked by a process
//!   running as the file's owner" is what "the run is alive" means.
//! - [`Range::Claim`]: one byte at [`CLAIM_BYTE`], far past the end of any
//!   pid file. A starting run that replaces a stale file write-locks only
//!   this byte of the old file, so that starters serialise with each other
//!   (and with a canceller removing the file) while a reader testing byte 0
//!   never mistakes a starter for a live run.
//! - [`Range::Open`]: byte 1, part of the live run's lock while the run is
//!   open (it still takes the cancel requests made for it); pgrun lets go
//!   of that byte alone once the run is over, keeping byte 0 (the run is
//!   still published, and alive, until the pid file is withdrawn).
//!
//! The kernel drops the locks when their holder exits, however it exits, so
//! pid reuse cannot fool a reader. Record locks belong to the process and
//! vanish when *any* of its fds for the file is closed, so pgrun opens each
//! pid file once and keeps that one fd.

use super::ids::Pid;
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, fcntl};
use std::fs::File;
use std::io;

/// The offset of the claim byte: 2^30, far past the end of any pid file and
/// representable in a 32-bit `off_t`.
pub const CLAIM_BYTE: i64 = 1 << 30;

/// Which part of a pid file a lock covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Range {
    /// Byte 0 to the end of the file and beyond: the live run's lock.
    Record,
    /// Byte 0 alone: what a reader tests to tell a live run.
    FirstByte,
    /// The one byte at [`CLAIM_BYTE`]: a starting run's claim.
    Claim,
    /// Byte 1 alone: held by a live run's pgrun until its run is over.
    Open,
    /// One byte at the offset given (>= 0), read-locked on a folder by
    /// each run whose report is at the name the offset stands for.
    Mark(libc::off_t),
}

/// The kind of a lock someone holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
}

/// A lock another process holds, as `F_GETLK` describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    pub kind: Kind,
    /// The holder's pid in the caller's PID namespace; 0 when the holder is
    /// not visible from it (it lives in a sibling or parent namespace).
    pub pid: Pid,
}

/// The `struct flock` for `range` (nix's fcntl takes libc's struct as is).
fn flock(range: Range, kind: libc::c_short) -> libc::flock {
    // SAFETY: flock is plain data; all-zero is a valid starting value (and
    // the only portable one: some systems add fields of their own).
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = kind;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    let (start, len) = match range {
        Range::Record => (0, 0), // length 0: to the end, however long it grows
        Range::FirstByte => (0, 1),
        Range::Claim => (CLAIM_BYTE as libc::off_t, 1),
        Range::Open => (1, 1),
        Range::Mark(at) => (at, 1),
    };
    lock.l_start = start;
    lock.l_len = len;
    lock
}

/// `fcntl(F_SETLK, F_WRLCK)` on `range`: take the write lock without
/// waiting. `Ok(false)` if another process holds a conflicting lock.
pub fn try_write_lock(file: &File, range: Range) -> io::Result<bool> {
    let lock = flock(range, libc::F_WRLCK as libc::c_short);
    match fcntl(file, FcntlArg::F_SETLK(&lock)) {
        Ok(_) => Ok(true),
        Err(Errno::EAGAIN | Errno::EACCES) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// `fcntl(F_SETLK, F_RDLCK)` on `range`: take a read lock without
/// waiting (a read-only fd, a folder's included). `Ok(false)` if another
/// process holds a write lock there.
pub fn try_read_lock(file: &File, range: Range) -> io::Result<bool> {
    let lock = flock(range, libc::F_RDLCK as libc::c_short);
    match fcntl(file, FcntlArg::F_SETLK(&lock)) {
        Ok(_) => Ok(true),
        Err(Errno::EAGAIN | Errno::EACCES) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// `fcntl(F_SETLK, F_UNLCK)` on `range`.
pub fn unlock(file: &File, range: Range) -> io::Result<()> {
    let lock = flock(range, libc::F_UNLCK as libc::c_short);
    fcntl(file, FcntlArg::F_SETLK(&lock))?;
    Ok(())
}

/// `fcntl(F_GETLK)` on `range`: a lock another process holds that would
/// block a write lock there, or `None`. Locks of the caller itself never
/// show.
pub fn holder(file: &File, range: Range) -> io::Result<Option<Holder>> {
    let mut lock = flock(range, libc::F_WRLCK as libc::c_short);
    fcntl(file, FcntlArg::F_GETLK(&mut lock))?;
    let kind = match lock.l_type {
        t if t == libc::F_UNLCK as libc::c_short => return Ok(None),
        t if t == libc::F_RDLCK as libc::c_short => Kind::Read,
        _ => Kind::Write,
    };
    Ok(Some(Holder { kind, pid: lock.l_pid }))
}

/// `fcntl(F_SETLKW, F_RDLCK)` on `range`, then `F_UNLCK`: block until no
/// other process holds a write lock there (its holder let go of it, or
/// exited), the way `pgrun wait` learns of a run's end as an event. The
/// read lock is held only for the instant between the two calls. EINTR is
/// retried; any other error is returned (never read as "let go").
pub fn wait_unlocked(file: &File, range: Range) -> io::Result<()> {
    let lock = flock(range, libc::F_RDLCK as libc::c_short);
    loop {
        match fcntl(file, FcntlArg::F_SETLKW(&lock)) {
            Ok(_) => break,
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    unlock(file, range)
}

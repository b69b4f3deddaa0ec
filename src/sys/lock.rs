//! POSIX record locks (`fcntl` `F_SETLK`/`F_GETLK`) on whole files.
//!
//! A live run holds a write lock on its pid file; the kernel drops it when
//! pgrun exits, however it exits, so "locked" means "alive" and pid reuse
//! cannot fool a reader. Record locks belong to the process and vanish when
//! *any* of its fds for the file is closed, so pgrun opens the pid file once
//! and keeps that one fd.

use super::Pid;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

fn whole_file_write_lock(kind: libc::c_short) -> libc::flock {
    // SAFETY: flock is plain data; all-zero is a valid starting value.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = kind;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = 0;
    lock.l_len = 0; // to the end of the file, however long it grows
    lock
}

/// `fcntl(F_SETLK, F_WRLCK)`: take the write lock without waiting.
/// `Ok(false)` if another process holds a conflicting lock.
pub fn try_write_lock(file: &File) -> io::Result<bool> {
    let lock = whole_file_write_lock(libc::F_WRLCK as libc::c_short);
    // SAFETY: a valid fd and a valid flock pointer.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &lock) } == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(err),
    }
}

/// `fcntl(F_GETLK)`: the pid of the process holding a lock that would block
/// a write lock, or `None` if nobody does.
pub fn lock_holder(file: &File) -> io::Result<Option<Pid>> {
    let mut lock = whole_file_write_lock(libc::F_WRLCK as libc::c_short);
    // SAFETY: a valid fd and a valid, writable flock pointer.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut lock) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((lock.l_type != libc::F_UNLCK as libc::c_short).then_some(lock.l_pid))
}

//! Pidfds: a handle on one process that no reuse of its pid can redirect
//! (`pidfd_open(2)`, `pidfd_send_signal(2)`), for the code that stops
//! processes it is not the parent of.
//!
//! Linux has them; the portable path has none (`posix/pidfd.rs`:
//! [`Pidfd::open`] says so with `None`, and no [`Pidfd`] can exist), so the
//! code that holds them reads as one program on every platform, with the
//! group's number as its fallback.

use crate::sys::ids::Pid;
use crate::sys::poll::wait_readable;
use crate::sys::signals::Signal;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// A process held by a pidfd.
pub struct Pidfd(std::os::fd::OwnedFd);

impl Pidfd {
    /// Whether this platform has pidfds: without them, looking for
    /// processes to hold is wasted.
    pub const SUPPORTED: bool = true;

    /// `pidfd_open(2)`: hold process `pid`; `None` where the platform has
    /// no pidfds or the process is already gone.
    pub fn open(pid: Pid) -> Option<Pidfd> {
        pidfd_open(pid).map(Pidfd)
    }

    /// `pidfd_open(2)`, its failure told apart from the process being
    /// gone: `Ok(None)` only for ESRCH (no process has that number any
    /// more: it was reaped) and where the platform has no pidfds; any
    /// other failure (EMFILE, ENFILE, ENOMEM, a seccomp filter's EPERM or
    /// ENOSYS) is an error, the process may well be there.
    pub fn hold(pid: Pid) -> io::Result<Option<Pidfd>> {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd >= 0 {
            // SAFETY: the kernel just gave us this fd; pidfds are close-on-exec.
            return Ok(Some(Pidfd(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })));
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ESRCH) { Ok(None) } else { Err(err) }
    }

    /// A pidfd another process opened and handed over (the guard's tie).
    pub fn from_owned(fd: std::os::fd::OwnedFd) -> Pidfd {
        Pidfd(fd)
    }

    /// Whether the process has exited (a zombie has). A failed poll is no
    /// proof of an exit: false, and the caller asks again.
    pub fn exited(&self) -> bool {
        pidfd_exited(std::os::fd::AsFd::as_fd(&self.0))
    }

    /// Wait up to `timeout` (`None`: no limit) for the process to exit;
    /// true once it has. An error says nothing about the process.
    pub fn wait_exited(&self, timeout: Option<std::time::Duration>) -> io::Result<bool> {
        wait_readable(std::os::fd::AsFd::as_fd(&self.0), timeout)
    }

    /// `pidfd_send_signal(2)`; `Ok(false)` if the process has already
    /// exited. `Signal::PROBE` asks whether it is not yet reaped.
    pub fn signal(&self, signal: Signal) -> io::Result<bool> {
        pidfd_signal(std::os::fd::AsFd::as_fd(&self.0), signal)
    }
}

impl std::os::fd::AsFd for Pidfd {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// A handle that becomes readable when a process exits: a pidfd on Linux
/// (`pidfd_open(2)`); `None` where the platform has none or the process is
/// already gone.
pub fn pidfd_open(pid: Pid) -> Option<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the kernel just gave us this fd; pidfds are close-on-exec.
    Some(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Whether the process a pidfd refers to has exited (a pidfd becomes
/// readable then; a zombie has exited).
/// A failed poll is no proof of an exit: false, and the caller asks again.
pub fn pidfd_exited(pidfd: std::os::fd::BorrowedFd<'_>) -> bool {
    wait_readable(pidfd, Some(std::time::Duration::ZERO)).unwrap_or(false)
}

/// `pidfd_send_signal(2)`: signal the process a pidfd refers to. Unlike
/// `kill(pid)`, this can never reach a process that reused the pid.
/// `Ok(false)` if the process has already exited (ESRCH).
pub fn pidfd_signal(pidfd: std::os::fd::BorrowedFd<'_>, signal: Signal) -> io::Result<bool> {
    // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
    let rc = unsafe {
        libc::syscall(libc::SYS_pidfd_send_signal, pidfd.as_raw_fd(), signal.0, std::ptr::null::<libc::siginfo_t>(), 0)
    };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) { Ok(false) } else { Err(err) }
}

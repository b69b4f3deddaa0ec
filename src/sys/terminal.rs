//! The controlling terminal's foreground process group.
//!
//! A command in a new process group that is not the terminal's foreground
//! group is stopped by SIGTTIN as soon as it reads the terminal. So when
//! pgrun itself is in the foreground, it hands the terminal to the command's
//! group (both the child, before exec, and pgrun, after the spawn, call
//! `tcsetpgrp`, so neither order loses) and takes it back before it exits.
//! SIGTTOU is blocked in pgrun and in the child until exec, which is what
//! lets a background process call `tcsetpgrp` at all.

use super::Pid;
use std::io;

/// Stdin, if it is a terminal whose foreground group is pgrun's own group:
/// the terminal pgrun was started in the foreground of. `None` when pgrun
/// runs in the background, or its stdin is not a terminal (a shell without
/// job control gives its `&` commands /dev/null as stdin, so those never
/// take the terminal from the script).
pub fn foreground_terminal() -> Option<i32> {
    (foreground_group(libc::STDIN_FILENO) == Some(super::getpgrp())).then_some(libc::STDIN_FILENO)
}

/// `tcgetpgrp(3)`: the terminal's foreground group, if `fd` is a terminal.
pub fn foreground_group(fd: i32) -> Option<Pid> {
    // SAFETY: tcgetpgrp takes an fd and returns -1 if it is not a terminal.
    let pgrp = unsafe { libc::tcgetpgrp(fd) };
    (pgrp > 0).then_some(pgrp)
}

/// `tcsetpgrp(3)`: make `pgid` the terminal's foreground group.
pub fn set_foreground_group(fd: i32, pgid: Pid) -> io::Result<()> {
    // SAFETY: plain integers; the caller keeps SIGTTOU blocked.
    if unsafe { libc::tcsetpgrp(fd, pgid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Stop pgrun itself with `signal` (TSTP, TTIN, TTOU or STOP), as a job
/// control shell expects of a job whose command stopped; returns once pgrun
/// has been continued. `signal` is unblocked for the moment it takes.
pub fn stop_self(signal: i32) {
    let mut set = super::sigmask::SigSet::empty();
    set.add(signal);
    // SAFETY: valid sigset pointers; kill on our own pid. A blocked stop
    // signal is delivered (and stops us) as soon as it is unblocked, before
    // sigprocmask returns.
    unsafe {
        let mut old = super::sigmask::SigSet::empty();
        libc::sigprocmask(libc::SIG_UNBLOCK, set.as_ptr(), old.as_mut_ptr());
        libc::kill(libc::getpid(), signal);
        libc::sigprocmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut());
    }
}

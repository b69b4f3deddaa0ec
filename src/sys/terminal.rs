//! The controlling terminal: its foreground process group, and stopping
//! pgrun itself as a job. The rules for when pgrun calls these live in
//! [`crate::terminal`]; this file only wraps the calls.
//!
//! SIGTTOU is blocked in pgrun (and in the child until exec), which is what
//! lets a process outside the foreground group call `tcsetpgrp` at all.
//! `tcgetpgrp`/`tcsetpgrp` stay raw libc: they take fds by number (0 and 1,
//! or the forked child's copy), which nix would want as `BorrowedFd`s.

use super::ids::Pid;
use std::io;
use std::os::fd::OwnedFd;

/// `tcgetpgrp(3)`: the terminal's foreground group, if `fd` is pgrun's
/// controlling terminal (Linux refuses with ENOTTY for any other terminal)
/// and it has a foreground group.
pub fn foreground_group(fd: i32) -> Option<Pid> {
    // SAFETY: tcgetpgrp takes an fd and returns -1 if it is not a terminal.
    let pgrp = unsafe { libc::tcgetpgrp(fd) };
    (pgrp > 0).then_some(pgrp)
}

/// `tcsetpgrp(3)`: make `pgid` the terminal's foreground group. Allocates
/// nothing, so the forked child may call it before exec.
pub fn set_foreground_group(fd: i32, pgid: Pid) -> io::Result<()> {
    // SAFETY: plain integers; the caller keeps SIGTTOU blocked.
    if unsafe { libc::tcsetpgrp(fd, pgid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// In the forked child: make the caller's group the terminal's foreground
/// group, but only if `from` (pgrun's group) still is: pgrun may have been
/// stopped and sent to the background (Ctrl-Z, `bg`) since it decided to
/// hand the terminal over. Async-signal-safe: `tcgetpgrp`, `getpid` and
/// `tcsetpgrp` only, no allocation. An error is `tcsetpgrp`'s (errno is
/// left as it set it): the hand-off was due and could not be made.
pub fn take_from(fd: i32, from: Pid) -> io::Result<()> {
    if foreground_group(fd) == Some(from) {
        // nix's getpid is the bare call: async-signal-safe.
        set_foreground_group(fd, super::ids::getpid())?;
    }
    Ok(())
}

/// `open("/dev/tty")`: the controlling terminal, whatever fds 0-2 are;
/// `None` if pgrun has none (ENXIO) or may not open it. Non-blocking and
/// close-on-exec: pgrun only asks it about process groups, and the command
/// never inherits it.
pub fn open_controlling() -> Option<OwnedFd> {
    use nix::fcntl::OFlag;
    let flags = OFlag::O_RDONLY | OFlag::O_NOCTTY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    nix::fcntl::open(c"/dev/tty", flags, nix::sys::stat::Mode::empty()).ok()
}

/// Stop pgrun's whole job with `signal` (TSTP, TTIN, TTOU or STOP), as the
/// terminal would have had the command been in it: `kill(0, signal)`, to
/// pgrun's own process group, so that a shell script or a pipeline that
/// shares pgrun's job stops with it and the shell sees the job stopped.
/// Returns once pgrun has been continued (at once if the signal is ignored,
/// or if pgrun's group is orphaned, where the kernel discards it). `signal`
/// is unblocked for the moment it takes. An error says which call failed;
/// the mask is put back whenever it was changed.
pub fn stop_job(signal: super::signals::Signal) -> io::Result<()> {
    use super::sigmask;
    let mut set = sigmask::SigSet::empty();
    set.add(signal.0);
    // A blocked stop signal is delivered (and stops us) as soon as it is
    // unblocked, before sigprocmask returns.
    let old = sigmask::unblock(&set).map_err(|e| io::Error::new(e.kind(), format!("cannot unblock it: {e}")))?;
    // SAFETY: kill(0, sig) signals the caller's own process group; no
    // pointers are involved.
    let sent = if unsafe { libc::kill(0, signal.0) } == 0 { Ok(()) } else { Err(io::Error::last_os_error()) };
    sigmask::set_mask(&old).map_err(|e| io::Error::new(e.kind(), format!("cannot block it again: {e}")))?;
    sent.map_err(|e| io::Error::new(e.kind(), format!("cannot send it: {e}")))
}

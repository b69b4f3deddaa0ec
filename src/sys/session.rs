//! The calls of `--detach`: a new session for the supervising pgrun, a
//! close-on-exec copy of the caller's stderr, fds 0, 1 and 2 pointed at a
//! destination, and the wait for the supervising pgrun's exit status when it
//! ends before publishing.

use super::ids::Pid;
use super::process::ChildStatus;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

/// `setsid(2)`: a new session and group led by this process, with no
/// controlling terminal (fails if this process already leads a group).
pub fn new_session() -> io::Result<()> {
    nix::unistd::setsid().map(drop).map_err(io::Error::from)
}

/// `fcntl(F_DUPFD_CLOEXEC)`: a copy of `fd` above 2, close-on-exec.
pub fn dup_cloexec(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    fd.try_clone_to_owned()
}

/// `dup2` `stdin` onto fd 0, and `stdout`, `stderr` onto fds 1 and 2 (the
/// copies are not close-on-exec: the command inherits them).
pub fn point_standard_fds(stdin: BorrowedFd<'_>, stdout: BorrowedFd<'_>, stderr: BorrowedFd<'_>) -> io::Result<()> {
    nix::unistd::dup2_stdin(stdin)?;
    nix::unistd::dup2_stdout(stdout)?;
    nix::unistd::dup2_stderr(stderr)?;
    Ok(())
}

/// `dup2` `/dev/null` onto fd 0 alone.
pub fn point_stdin_at_null() -> io::Result<()> {
    let null = open_null()?;
    nix::unistd::dup2_stdin(&null)?;
    Ok(())
}

/// `dup2` `/dev/null` onto fds 1 and 2: what this process writes there
/// goes nowhere from now on, and it no longer holds what they held.
pub fn point_stdout_stderr_at_null() -> io::Result<()> {
    let null = open_null()?;
    nix::unistd::dup2_stdout(&null)?;
    nix::unistd::dup2_stderr(&null)?;
    Ok(())
}

/// `/dev/null`, open for reading and writing, close-on-exec.
pub fn open_null() -> io::Result<OwnedFd> {
    let null = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null")?;
    Ok(OwnedFd::from(null))
}

/// `waitpid(pid, &status, 0)`, retried on EINTR: how child `pid` ended.
/// (Raw libc: nix's `waitpid` fails after reaping a child a real-time
/// signal ended, losing its status.)
pub fn wait_status(pid: Pid) -> io::Result<ChildStatus> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a writable int; `pid` is this process's child.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            return Ok(if libc::WIFSIGNALED(status) {
                ChildStatus::Signaled(libc::WTERMSIG(status))
            } else {
                ChildStatus::Exited(libc::WEXITSTATUS(status))
            });
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

//! The calls that decide what outlives what: forking the guard (a copy of
//! pgrun that outlives a SIGKILLed pgrun), naming it, moving it out of the
//! caller's group, waiting for it, and the parent-death signal of
//! `--die-with-parent`.

use super::Pid;
use std::io;
use std::os::fd::RawFd;

/// `fork(2)`: `Some(child)` in the parent, `None` in the child.
///
/// pgrun is single-threaded whenever it forks, so the child is a complete
/// copy that may allocate and run ordinary code; it must end with
/// [`exit_now`] and never return into the parent's stack frames (their
/// destructors would act on the parent's files).
pub fn fork() -> io::Result<Option<Pid>> {
    // SAFETY: fork has no memory-safety preconditions; with one thread the
    // child inherits a consistent heap and no held locks.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some(pid)),
    }
}

/// `_exit(2)`: end the process now, running no destructors and flushing
/// nothing.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and has no preconditions.
    unsafe { libc::_exit(code) }
}

/// `setpgid(2)`: move `pid` into group `pgid` (0: a group of its own).
pub fn setpgid(pid: Pid, pgid: Pid) -> io::Result<()> {
    // SAFETY: plain integers.
    if unsafe { libc::setpgid(pid, pgid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `waitpid(pid, NULL, 0)`, retried on EINTR; ECHILD (already reaped) is
/// not an error.
pub fn wait_for(pid: Pid) {
    loop {
        // SAFETY: waiting for our own child; a null status is allowed.
        let rc = unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        if rc >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// Keep only fds 0, 1, 2 and `keep`, which becomes fd 3; close the rest.
/// Returns the new number of `keep`.
pub fn close_all_but(keep: RawFd) -> RawFd {
    // SAFETY: dup2 and close take plain fds; closing fds this process owns
    // (its copies after fork) cannot affect the parent.
    unsafe {
        if keep != 3 {
            libc::dup2(keep, 3);
        }
        #[cfg(target_os = "linux")]
        if libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32) == 0 {
            return 3;
        }
        let max = match libc::sysconf(libc::_SC_OPEN_MAX) {
            n if n > 0 => n.min(65_536) as RawFd,
            _ => 1024,
        };
        for fd in 4..max {
            libc::close(fd);
        }
    }
    3
}

/// Point fds 0 and 1 at `/dev/null`, so that a process pgrun leaves
/// running for a moment does not hold its caller's pipes open.
pub fn detach_stdin_stdout() {
    // SAFETY: open of a NUL-terminated path; dup2 and close of plain fds.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            if null > 2 {
                libc::close(null);
            }
        }
    }
}

/// `prctl(PR_SET_NAME)`: the name `ps` and `/proc/PID/comm` show (Linux
/// only; at most 15 bytes are kept).
pub fn set_name(name: &std::ffi::CStr) {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of up to 16 bytes.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = name;
}

/// `prctl(PR_SET_PDEATHSIG, signal)`: have the kernel send `signal` when the
/// thread that created pgrun exits (Linux only).
#[cfg(linux_strengths)]
pub fn set_parent_death_signal(signal: i32) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `write(2)` of a whole small record to a pipe; false if the reader is
/// gone (EPIPE: SIGPIPE is blocked in pgrun) or the write failed.
pub fn write_record(fd: RawFd, record: &[u8]) -> bool {
    loop {
        // SAFETY: writing from a live slice of the given length.
        let n = unsafe { libc::write(fd, record.as_ptr().cast(), record.len()) };
        if n == record.len() as isize {
            return true;
        }
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return false;
    }
}

/// `read(2)` exactly `buf.len()` bytes, blocking; false at end of file (or
/// on an error): the writer is gone.
pub fn read_record(fd: RawFd, buf: &mut [u8]) -> bool {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reading into the unfilled part of a live buffer.
        let n = unsafe { libc::read(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        match n {
            0 => return false,
            n if n > 0 => got += n as usize,
            _ if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => {}
            _ => return false,
        }
    }
    true
}

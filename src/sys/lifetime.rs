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

/// A page of memory shared between pgrun and the guard it forks
/// (`mmap(MAP_SHARED | MAP_ANONYMOUS)`): pgrun stores what the guard will
/// need there without a syscall and without waking it.
pub struct SharedPage {
    ptr: *mut std::sync::atomic::AtomicU64,
}

/// Slots of 8 bytes in a [`SharedPage`].
pub const SHARED_SLOTS: usize = 16;

impl SharedPage {
    pub fn new() -> io::Result<SharedPage> {
        // SAFETY: a fresh anonymous mapping, no address hint, no fd.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedPage { ptr: ptr.cast() })
    }

    /// Slot `i` (`< SHARED_SLOTS`), zero at first.
    pub fn slot(&self, i: usize) -> &std::sync::atomic::AtomicU64 {
        assert!(i < SHARED_SLOTS);
        // SAFETY: the mapping is 4096 bytes, page-aligned and zeroed, so
        // each of its first SHARED_SLOTS u64s is a valid AtomicU64 for as
        // long as the mapping lives, which is as long as `self`.
        unsafe { &*self.ptr.add(i) }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), 4096) };
    }
}

/// `read(2)` of one byte, blocking, retried on EINTR: returns once the
/// write end is closed by everyone (end of file) or a byte arrives.
pub fn block_until_closed(fd: RawFd) {
    let mut byte = 0u8;
    loop {
        // SAFETY: reading one byte into a stack variable.
        let n = unsafe { libc::read(fd, (&mut byte as *mut u8).cast(), 1) };
        if n == 0 || (n < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)) {
            return;
        }
    }
}

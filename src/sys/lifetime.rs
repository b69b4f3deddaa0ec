//! The calls that decide what outlives what: forking the guard (a copy of
//! pgrun that outlives a SIGKILLed pgrun), naming it, moving it out of the
//! caller's group, the page it shares with pgrun, waiting for it, and the
//! parent-death signal of `--die-with-parent`. (The socket that ties the
//! guard to pgrun: [`super::guard_channel`].)
//!
//! nix expresses `setpgid`, `waitpid`, `dup2` onto stdin/stdout and `prctl`;
//! raw libc remains for `fork` (unsafe in nix too), `close`, `mmap` and
//! `_exit`. What only Linux has (`close_range(2)`, the parent-death signal)
//! is the platform's (`linux/lifetime.rs`, `posix/lifetime.rs`).

use super::ids::Pid;
pub use super::platform::lifetime::set_parent_death_signal;
use std::io;
use std::os::fd::RawFd;

/// `fork(2)`: `Some(child)` in the parent, `None` in the child.
///
/// pgrun is single-threaded whenever it forks, so the child is a complete
/// copy that may allocate and run ordinary code; it must end with
/// [`exit_now`] and never return into the parent's stack frames
/// (their destructors would act on the parent's files).
pub fn fork() -> io::Result<Option<Pid>> {
    // SAFETY: fork has no memory-safety preconditions; with one thread the
    // child inherits a consistent heap and no held locks.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some(pid)),
    }
}

/// `setpgid(2)`: move `pid` into group `pgid` (0: a group of its own).
pub fn setpgid(pid: Pid, pgid: Pid) -> io::Result<()> {
    use nix::unistd::Pid as NixPid;
    nix::unistd::setpgid(NixPid::from_raw(pid), NixPid::from_raw(pgid)).map_err(io::Error::from)
}

/// `waitpid(pid, NULL, 0)`, retried on EINTR; ECHILD (already reaped) is
/// not an error. The status is not wanted.
pub fn wait_for(pid: Pid) {
    use nix::errno::Errno;
    // nix reports a status it cannot name (a real-time signal) as an error
    // after reaping: either way the child is reaped.
    while let Err(Errno::EINTR) = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None) {}
}

/// Close every fd but 0, 1, 2 and those in `keep`, which keep their
/// numbers (no `dup2` that could fail and lose one).
pub fn close_all_but(keep: &[RawFd]) {
    let mut keep: Vec<RawFd> = keep.iter().copied().filter(|&fd| fd > 2).collect();
    keep.sort_unstable();
    let mut from = 3;
    for fd in keep.iter().copied().chain([RawFd::MAX]) {
        if fd > from {
            close_range(from, fd - 1);
        }
        from = fd.saturating_add(1);
    }
}

/// Close fds `first..=last`: the platform's way (Linux's `close_range(2)`;
/// the portable path closes the open ones it finds), else (where that
/// fails) one `close` per fd up to the limit on open files.
fn close_range(first: RawFd, last: RawFd) {
    if super::platform::lifetime::close_range(first, last).is_ok() {
        return;
    }
    for fd in first..=last.min(super::fd::open_max()) {
        // SAFETY: closing a plain fd number this process may hold; nothing
        // here holds it as an OwnedFd.
        unsafe { libc::close(fd) };
    }
}

/// Point fds 0 and 1 at `/dev/null`, so that a process pgrun leaves
/// running for a moment does not hold its caller's pipes open.
pub fn detach_stdin_stdout() -> io::Result<()> {
    let null = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null")?;
    nix::unistd::dup2_stdin(&null)?;
    nix::unistd::dup2_stdout(&null)?;
    Ok(())
}

/// `prctl(PR_SET_NAME)`: the name `ps` and `/proc/PID/comm` show (Linux
/// only; at most 15 bytes are kept).
pub fn set_name(name: &std::ffi::CStr) {
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_name(name);
    #[cfg(not(target_os = "linux"))]
    let _ = name;
}

/// Memory shared between pgrun and the processes it forks afterwards, the
/// guard above all (`mmap(MAP_SHARED | MAP_ANONYMOUS)`): pgrun stores what
/// the guard will need there without a syscall and without waking it. One
/// page by default; [`SharedPage::with_slots`] makes a larger one.
pub struct SharedPage {
    ptr: *mut std::sync::atomic::AtomicU64,
    slots: usize,
}

// SAFETY: only `AtomicU64`s are ever reached through the pointer (see
// `slot`), and the mapping lives as long as the value: sharing or moving
// it between threads is as safe as sharing those atomics.
unsafe impl Send for SharedPage {}
// SAFETY: as above.
unsafe impl Sync for SharedPage {}

/// Slots of 8 bytes in a [`SharedPage`] made by [`SharedPage::new`].
pub const SHARED_SLOTS: usize = 16;

impl SharedPage {
    pub fn new() -> io::Result<SharedPage> {
        SharedPage::with_slots(SHARED_SLOTS)
    }

    /// A mapping of `slots` slots (at least one page): the kernel gives
    /// memory only to the pages written, so a large one that is mostly
    /// unused costs address space, not memory.
    pub fn with_slots(slots: usize) -> io::Result<SharedPage> {
        let slots = slots.max(SHARED_SLOTS);
        // SAFETY: a fresh anonymous mapping, no address hint, no fd.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::bytes(slots),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedPage { ptr: ptr.cast(), slots })
    }

    /// The mapping's length for `slots` slots: whole pages of 4096 bytes.
    fn bytes(slots: usize) -> usize {
        (slots * 8).next_multiple_of(4096)
    }

    /// How many slots there are.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Slot `i` (`< self.slots()`), zero at first.
    pub fn slot(&self, i: usize) -> &std::sync::atomic::AtomicU64 {
        assert!(i < self.slots);
        // SAFETY: the mapping is at least `slots * 8` bytes, page-aligned
        // and zeroed, so each of its first `slots` u64s is a valid
        // AtomicU64 for as long as the mapping lives, which is as long as
        // `self`.
        unsafe { &*self.ptr.add(i) }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `with_slots`, of this length,
        // unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), Self::bytes(self.slots)) };
    }
}

/// `_exit(2)`: end pgrun now, running no exit handlers and flushing nothing
/// (for the panic hook, where nothing else may run any more; for a forked
/// copy of pgrun, which must never return into the parent's frames).
pub fn exit_now(code: u8) -> ! {
    // SAFETY: _exit has no preconditions and does not return.
    unsafe { libc::_exit(libc::c_int::from(code)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn is_open(fd: RawFd) -> bool {
        // SAFETY: F_GETFD on any number is harmless; EBADF means closed.
        unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
    }

    #[test]
    fn a_range_is_closed_where_its_fds_are_open_and_nothing_past_it() {
        // Numbers far above any fd the other tests of this process hold.
        let base = super::super::fd::open_max() - 8;
        let null = std::fs::File::open("/dev/null").unwrap();
        let at = |n: RawFd| {
            // SAFETY: F_DUPFD_CLOEXEC copies an open fd to the lowest free
            // number from `base + n`.
            let fd = unsafe { libc::fcntl(null.as_raw_fd(), libc::F_DUPFD_CLOEXEC, base + n) };
            assert_eq!(fd, base + n, "fd {} is taken", base + n);
            fd
        };
        let (first, last, past) = (at(0), at(2), at(4));
        assert!(!is_open(base + 1));
        close_range(first, last);
        assert!(!is_open(first) && !is_open(last), "the range's open fds are closed");
        assert!(is_open(past), "the fd past the range is left open");
        // SAFETY: the copy made above, closed once.
        unsafe { libc::close(past) };
    }
}

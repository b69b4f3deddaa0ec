//! The one place where pgrun talks to the kernel.
//!
//! Every `libc`/`nix` call pgrun makes lives below this module, behind a
//! small safe function with the syscall's name in its doc line; the rest of
//! the crate never sees a raw pointer or an `unsafe` block. Submodules group
//! the calls by what they serve: [`spawn`] (creating the command's process
//! and its steps before exec), [`process`] (signalling groups, reaping),
//! [`signals`] (the platform's signal numbers and names), [`sigmask`]
//! (signal sets and masks), [`wakeup`] (turning signals into a
//! pollable fd), [`lock`] (fcntl record locks), [`terminal`] (the
//! foreground process group of the controlling terminal), [`pipe`] (the
//! pipes and reads and writes of `--max-output`), [`proc`] (reading
//! `/proc`), [`cgroup`] (the cgroup v2 files of `--contain cgroup`),
//! [`pidfd`] (a hold on one process that pid reuse cannot redirect),
//! [`lifetime`] (the guard's fork, the page it shares with pgrun, the
//! parent-death signal), [`guard_channel`] (the socket that ties the guard
//! to pgrun and carries the pidfds handed to it), [`session`] (what
//! `--detach` needs: a new session, the standard fds pointed elsewhere),
//! [`rlimit`] (resource limits for `--rlimit`).
//!
//! The calls go through nix's safe wrappers wherever the nix features this
//! crate enables (`fs`, `process`, `signal`, `user`) express them. Raw libc
//! remains where they do not: any signal number (nix's `Signal` names no
//! real-time signal, and its `waitpid` fails *after* reaping a child one of
//! them ended), calls on raw fds the facade takes as plain integers (an fd
//! that may be closed is no `BorrowedFd`), the forked child before exec
//! (nix's `execvp` allocates), pidfds, glibc's reserved signals; calls nix
//! 0.32 does not wrap (`_exit`, `getrandom`, `ioctl(FIONREAD)`); and calls
//! of nix features left out (`poll`; the `socket` calls of the guard's tie
//! and `send`; `pread`; `mmap`). Each module's doc names its own.

pub mod cgroup;
pub mod guard_channel;
pub mod lifetime;
pub mod lock;
pub mod pidfd;
pub mod pipe;
pub mod proc;
pub mod process;
pub mod rlimit;
pub mod session;
pub mod sigmask;
pub mod signals;
pub mod spawn;
pub mod terminal;
pub mod wakeup;

pub use signals::{Signal, max_signal, realtime_range};

use std::io;
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// Whether pgrun can follow what leaves the command's group here: be a
/// child subreaper, list its descendants in `/proc` and hold them by
/// pidfds (Linux, unless built with `posix-fallback`). `--contain tree` and
/// `cgroup` need it.
pub const CAN_CONTAIN: bool = cfg!(linux_strengths);

/// A process or process-group id, as the kernel numbers them.
pub type Pid = libc::pid_t;

/// One fd for [`poll`]: what to wait for, and whether it came.
#[derive(Clone, Copy, Debug)]
pub struct PollFd {
    pub fd: std::os::fd::RawFd,
    /// Wait for writability instead of readability.
    pub write: bool,
    /// Wait for a priority event (POLLPRI) instead: what a cgroup's
    /// `cgroup.events` reports when it changes.
    pub priority: bool,
    /// Wait for nothing but POLLERR/POLLHUP (events 0): the write end of a
    /// pipe whose reader left, without waking while it has room.
    pub errors: bool,
    /// Set by [`poll`]: the fd is ready, or hung up or in error (so the next
    /// read or write will not block and will say which).
    pub ready: bool,
}

impl PollFd {
    pub fn read(fd: BorrowedFd<'_>) -> Self {
        use std::os::fd::AsRawFd;
        PollFd { fd: fd.as_raw_fd(), write: false, priority: false, errors: false, ready: false }
    }
    pub fn write(fd: BorrowedFd<'_>) -> Self {
        use std::os::fd::AsRawFd;
        PollFd { fd: fd.as_raw_fd(), write: true, priority: false, errors: false, ready: false }
    }
    pub fn priority(fd: BorrowedFd<'_>) -> Self {
        use std::os::fd::AsRawFd;
        PollFd { fd: fd.as_raw_fd(), write: false, priority: true, errors: false, ready: false }
    }
    /// Only an error or hangup on `fd` (the kernel reports those whatever
    /// is asked for): a pipe's write end says POLLERR (Linux) or POLLHUP
    /// (BSD) once no reader is left.
    pub fn errors(fd: BorrowedFd<'_>) -> Self {
        use std::os::fd::AsRawFd;
        PollFd { fd: fd.as_raw_fd(), write: false, priority: false, errors: true, ready: false }
    }
}

/// Most fds one [`poll`] call watches.
pub const POLL_MAX: usize = 8;

/// `poll(2)` on up to [`POLL_MAX`] fds, for at most `timeout` (`None`: no
/// limit). Marks the ready ones; EINTR counts as "none yet". Raw libc:
/// [`PollFd`] holds plain fds (the relay matches them by number), and nix's
/// poll wants a `BorrowedFd` for each. On Linux a limited wait is
/// `ppoll(2)`, to the nanosecond (the relay's rests are fractions of a
/// millisecond); elsewhere (and in the portable build, which has no rests,
/// so that the suite tests this path) poll's milliseconds, rounded up so
/// that a deadline is never woken for before it is due.
pub fn poll(set: &mut [PollFd], timeout: Option<Duration>) -> io::Result<()> {
    assert!(set.len() <= POLL_MAX, "poll: too many fds");
    let mut pfds = [libc::pollfd { fd: -1, events: 0, revents: 0 }; POLL_MAX];
    for (p, s) in pfds.iter_mut().zip(set.iter()) {
        let events = if s.errors {
            0
        } else if s.priority {
            libc::POLLPRI
        } else if s.write {
            libc::POLLOUT
        } else {
            libc::POLLIN
        };
        *p = libc::pollfd { fd: s.fd, events, revents: 0 };
    }
    let n = poll_raw(&mut pfds[..set.len()], timeout);
    for (p, s) in pfds.iter().zip(set.iter_mut()) {
        s.ready = n > 0 && p.revents != 0;
    }
    if n < 0 {
        let err = io::Error::last_os_error();
        return if err.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(err) };
    }
    Ok(())
}

/// `poll(2)`, or on Linux for a limited wait `ppoll(2)`, on `pfds`.
fn poll_raw(pfds: &mut [libc::pollfd], timeout: Option<Duration>) -> libc::c_int {
    #[cfg(linux_strengths)]
    if let Some(d) = timeout {
        let limit = libc::timespec {
            tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(d.subsec_nanos() as i32),
        };
        // SAFETY: `pfds` is a slice of initialised pollfds, `limit` a valid
        // timespec; a null mask leaves the signal mask as it is.
        return unsafe { libc::ppoll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, &limit, std::ptr::null()) };
    }
    let ms: libc::c_int = match timeout {
        None => -1,
        Some(d) => d.as_nanos().div_ceil(1_000_000).min(libc::c_int::MAX as u128) as libc::c_int,
    };
    // SAFETY: `pfds` is a slice of initialised pollfds.
    unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) }
}

/// `poll(2)` on one fd for readability, for at most `timeout` (`None`: no
/// limit). Returns whether the fd is readable; EINTR counts as "not yet".
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<bool> {
    let mut set = [PollFd::read(fd)];
    poll(&mut set, timeout)?;
    Ok(set[0].ready)
}

/// `poll(2)` on one fd for writability, without waiting: whether a write
/// of up to `PIPE_BUF` bytes would not block now.
pub fn writable_now(fd: BorrowedFd<'_>) -> bool {
    let mut set = [PollFd::write(fd)];
    poll(&mut set, Some(Duration::ZERO)).is_ok() && set[0].ready
}

/// `getpid(2)`.
pub fn getpid() -> Pid {
    nix::unistd::getpid().as_raw()
}

/// `getppid(2)`.
pub fn getppid() -> Pid {
    nix::unistd::getppid().as_raw()
}

/// `getpgrp(2)`: the caller's process group.
pub fn getpgrp() -> Pid {
    nix::unistd::getpgrp().as_raw()
}

/// `getpgid(2)` of another process; `None` if it does not exist.
pub fn getpgid(pid: Pid) -> Option<Pid> {
    nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid))).ok().map(nix::unistd::Pid::as_raw)
}

/// `geteuid(2)`.
pub fn geteuid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Make sure fds 0, 1 and 2 are open: any of them that is closed gets
/// `/dev/null`, close-on-exec. Otherwise the first file pgrun opens (the
/// signalfd, the pid file) would land there, and pgrun's error lines would
/// be written into it. Close-on-exec, so the command still finds the fd
/// closed, exactly as pgrun's caller left it.
pub fn reserve_standard_fds() {
    for fd in 0..=2 {
        // SAFETY: F_GETFD on any integer is harmless; EBADF means closed.
        // (A raw probe: an fd that may be closed cannot be a BorrowedFd.)
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            use nix::fcntl::OFlag;
            // open takes the lowest free fd, which is `fd` since the lower
            // ones are open; it stays open for pgrun's whole life.
            if let Ok(null) =
                nix::fcntl::open(c"/dev/null", OFlag::O_RDWR | OFlag::O_CLOEXEC, nix::sys::stat::Mode::empty())
            {
                let _ = std::os::fd::IntoRawFd::into_raw_fd(null);
            }
        }
    }
}

/// `_exit(2)`: end pgrun now, running no exit handlers and flushing nothing
/// (for the panic hook, where nothing else may run any more).
pub fn exit_now(code: u8) -> ! {
    // SAFETY: _exit has no preconditions and does not return.
    unsafe { libc::_exit(libc::c_int::from(code)) }
}

/// 64 unpredictable bits from getrandom(2) (without blocking, Linux), for a
/// name nobody else picks; never a panic (std's random hash keys panic when
/// getrandom fails); a mix of the clock and a counter where it fails (a
/// taken name is then simply tried again).
pub fn random_bits() -> u64 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let mut bytes = [0u8; 8];
        // SAFETY: getrandom writes at most `bytes.len()` bytes into the buffer.
        let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), libc::GRND_NONBLOCK) };
        if n == bytes.len() as isize {
            return u64::from_ne_bytes(bytes);
        }
    }
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    nanos ^ COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

//! The calls that decide what outlives what: forking the guard (a copy of
//! pgrun that outlives a SIGKILLed pgrun), naming it, moving it out of the
//! caller's group, the socket pair that ties it to pgrun (and carries the
//! pidfds of the run's processes to it), waiting for it, and the
//! parent-death signal of `--die-with-parent`.
//!
//! nix expresses `setpgid`, `waitpid`, `dup2` onto stdin/stdout and `prctl`;
//! raw libc remains for `fork` (unsafe in nix too), `close_range`, `mmap`,
//! and the tie's `poll`, `send` and `SCM_RIGHTS` messages (nix's socket
//! feature needs a crate this project does not carry, and its poll feature
//! is not enabled).

use super::Pid;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// `fork(2)`: `Some(child)` in the parent, `None` in the child.
///
/// pgrun is single-threaded whenever it forks, so the child is a complete
/// copy that may allocate and run ordinary code; it must end with
/// [`super::exit_now`] and never return into the parent's stack frames
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

/// Close fds `first..=last`: `close_range(2)` on Linux, else one `close` per
/// fd up to the limit on open files.
fn close_range(first: RawFd, last: RawFd) {
    #[cfg(target_os = "linux")]
    // SAFETY: close_range takes plain integers; it closes only fds of this
    // process (its copies after fork), which nothing here uses any more.
    if unsafe { libc::syscall(libc::SYS_close_range, first as u32, last as u32, 0u32) } == 0 {
        return;
    }
    let max = match nix::unistd::sysconf(nix::unistd::SysconfVar::OPEN_MAX) {
        Ok(Some(n)) if n > 0 => n.min(65_536) as RawFd,
        _ => 1024,
    };
    for fd in first..=last.min(max) {
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

/// `prctl(PR_SET_PDEATHSIG, signal)`: have the kernel send `signal` when the
/// thread that created pgrun exits. `Ok(false)` where the platform has no
/// such signal (anything but Linux, and the portable build): nothing
/// announces the parent's death there.
pub fn set_parent_death_signal(signal: i32) -> io::Result<bool> {
    #[cfg(linux_strengths)]
    {
        let signal = nix::sys::signal::Signal::try_from(signal)?;
        nix::sys::prctl::set_pdeathsig(signal).map_err(io::Error::from)?;
        Ok(true)
    }
    #[cfg(not(linux_strengths))]
    {
        let _ = signal;
        Ok(false)
    }
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

/// The tie between pgrun and its guard: a Unix socket pair (close-on-exec,
/// so the command never inherits an end). pgrun keeps one end, the guard
/// the other; the guard's end hangs up when pgrun's closes, which happens
/// when pgrun exits, however it exits.
pub fn tie() -> io::Result<(OwnedFd, OwnedFd)> {
    let (a, b) = std::os::unix::net::UnixStream::pair()?;
    Ok((a.into(), b.into()))
}

/// What a look at the tie found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TieState {
    /// The other end hung up: every copy of it is closed.
    pub hung_up: bool,
    /// A message is waiting.
    pub message: bool,
}

/// Block until the other end of the tie hangs up or, with `messages`, a
/// message arrives: no CPU. Without `messages` no message wakes the caller
/// (on Linux the wait asks for `POLLRDHUP` alone, and the kernel wakes a
/// poller only for the events it asked for; elsewhere nothing is ever
/// sent). Any error is returned (EINTR included) for the caller to judge.
pub fn wait_tie(fd: BorrowedFd<'_>, messages: bool) -> io::Result<TieState> {
    poll_tie(fd, messages, -1)
}

/// What the tie holds now, without waiting.
pub fn peek_tie(fd: BorrowedFd<'_>) -> io::Result<TieState> {
    poll_tie(fd, true, 0)
}

fn poll_tie(fd: BorrowedFd<'_>, messages: bool, timeout: libc::c_int) -> io::Result<TieState> {
    #[cfg(target_os = "linux")]
    let hangup = libc::POLLRDHUP;
    #[cfg(not(target_os = "linux"))]
    let hangup = 0;
    let events = hangup | if messages { libc::POLLIN } else { 0 };
    let mut set = [libc::pollfd { fd: fd.as_raw_fd(), events, revents: 0 }];
    // SAFETY: one valid pollfd, its count.
    let n = unsafe { libc::poll(set.as_mut_ptr(), 1, timeout) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let got = set[0].revents;
    if got & libc::POLLNVAL != 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    let hung_up = got & (hangup | libc::POLLHUP | libc::POLLERR) != 0;
    Ok(TieState { hung_up, message: !hung_up && got & libc::POLLIN != 0 })
}

/// Most fds one message of [`send_processes`] carries.
#[cfg(linux_strengths)]
const FDS_PER_MESSAGE: usize = 32;

/// Send `(pid, pidfd)` pairs over the tie, without blocking (`SCM_RIGHTS`;
/// the pids as the message's bytes). The guard takes them only once pgrun
/// is gone. Linux only: elsewhere there are no pidfds to send.
#[cfg(linux_strengths)]
pub fn send_processes(tie: BorrowedFd<'_>, processes: &[(Pid, BorrowedFd<'_>)]) -> io::Result<()> {
    for chunk in processes.chunks(FDS_PER_MESSAGE) {
        let pids: Vec<Pid> = chunk.iter().map(|(pid, _)| *pid).collect();
        let fds: Vec<RawFd> = chunk.iter().map(|(_, fd)| fd.as_raw_fd()).collect();
        let fds_len = std::mem::size_of_val(fds.as_slice());
        // SAFETY: CMSG_SPACE computes a size from a length.
        let space = unsafe { libc::CMSG_SPACE(fds_len as u32) } as usize;
        let mut control = vec![0u64; space.div_ceil(8)];
        let mut iov =
            libc::iovec { iov_base: pids.as_ptr() as *mut libc::c_void, iov_len: size_of_val(pids.as_slice()) };
        // SAFETY: a zeroed msghdr is valid; the fields set below point at
        // live buffers of the lengths given.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer holds CMSG_SPACE(fds_len) bytes, so its
        // first header and the data after it are within it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(fds_len as u32) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(cmsg), fds_len);
        }
        // SAFETY: msg points at the buffers above, alive during the call.
        let sent = unsafe { libc::sendmsg(tie.as_raw_fd(), &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        if sent as usize != iov.iov_len {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short message to the guard"));
        }
    }
    Ok(())
}

/// Send a notice over the tie, without blocking: a message of one pid 0
/// and no fd (Linux only).
#[cfg(linux_strengths)]
pub fn send_notice(tie: BorrowedFd<'_>) -> io::Result<()> {
    let bytes = (0 as Pid).to_ne_bytes();
    // SAFETY: sending the bytes of a live local array.
    let sent = unsafe {
        libc::send(tie.as_raw_fd(), bytes.as_ptr().cast(), bytes.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    if sent as usize != bytes.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short message to the guard"));
    }
    Ok(())
}

/// What was queued on the tie.
#[cfg(linux_strengths)]
#[derive(Default)]
pub struct Received {
    /// The `(pid, pidfd)` pairs sent with [`send_processes`].
    pub processes: Vec<(Pid, OwnedFd)>,
    /// How many notices ([`send_notice`]).
    pub notices: usize,
}

/// Take everything queued on the tie, without blocking.
#[cfg(linux_strengths)]
pub fn receive_processes(tie: BorrowedFd<'_>) -> io::Result<Received> {
    use std::os::fd::FromRawFd;
    let mut out = Received::default();
    loop {
        let mut pids = [0 as Pid; FDS_PER_MESSAGE];
        // SAFETY: CMSG_SPACE computes a size from a length.
        let space = unsafe { libc::CMSG_SPACE((FDS_PER_MESSAGE * size_of::<RawFd>()) as u32) } as usize;
        let mut control = vec![0u64; space.div_ceil(8)];
        let mut iov = libc::iovec { iov_base: pids.as_mut_ptr().cast(), iov_len: size_of_val(&pids) };
        // SAFETY: a zeroed msghdr is valid; the fields set below point at
        // live buffers of the lengths given.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: msg points at the buffers above, alive during the call;
        // received fds are made close-on-exec.
        let got = unsafe { libc::recvmsg(tie.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) };
        if got < 0 {
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(out),
                _ => return Err(err),
            }
        }
        if got == 0 {
            return Ok(out);
        }
        let mut fds = Vec::new();
        // SAFETY: walking the control messages the kernel wrote into
        // `control`, within msg_controllen; each SCM_RIGHTS payload is an
        // array of fds now owned by this process.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let len = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                    for i in 0..len / size_of::<RawFd>() {
                        fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        // Notices are pid 0; each other pid goes with the next fd, in order.
        let count = got as usize / size_of::<Pid>();
        out.notices += pids[..count].iter().filter(|&&p| p == 0).count();
        out.processes.extend(pids[..count].iter().copied().filter(|&p| p != 0).zip(fds));
    }
}

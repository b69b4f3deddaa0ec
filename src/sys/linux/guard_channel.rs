//! The guard's channel: the Unix socket pair that ties the guard to pgrun,
//! and the pidfds of the run's processes handed to the guard over it.
//!
//! pgrun keeps one end, the guard the other (both close-on-exec, so the
//! command never inherits one). The guard's end hangs up once every copy of
//! pgrun's end is closed: when pgrun exits, however it exits, and when the
//! command's process, which holds a copy from its creation to its exec, has
//! exec'd. The guard waits for that hang-up alone, so nothing sent over
//! the channel wakes it; it takes what was sent only once pgrun is gone.
//!
//! On Linux the command's process, before anything else and before its
//! exec, sends a pidfd of itself (`send_self`, raw syscalls only: it runs
//! between the fork and the exec): whenever pgrun dies, the guard holds the
//! command, because the hang-up it waits for cannot come before that
//! process has exec'd, after its hand-over. pgrun hands more processes over
//! later ([`send`]). The portable path has no pidfds: its channel
//! (`posix/guard_channel.rs`) carries nothing, and it is only the tie.
//!
//! Raw libc: `sendmsg`/`recvmsg` with `SCM_RIGHTS` (nix's socket feature
//! needs a crate this project does not carry); the wait for the hang-up is
//! [`crate::sys::poll`]'s.

use super::pidfd::Pidfd;
use crate::sys::ids::Pid;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// Whether processes are handed over the channel on this platform (pidfds).
pub const HANDS_OVER: bool = true;

/// The channel: a Unix socket pair, close-on-exec. Returns (the guard's
/// end, pgrun's end).
pub fn pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let (a, b) = std::os::unix::net::UnixStream::pair()?;
    Ok((a.into(), b.into()))
}

/// Block until the other end hangs up (every copy of it is closed): no CPU,
/// and no message wakes the caller (the wait asks for `POLLRDHUP` alone,
/// and the kernel wakes a poller only for the events it asked for).
/// Any error is returned (EINTR included) for the caller to judge.
pub fn wait_hangup(fd: BorrowedFd<'_>) -> io::Result<()> {
    crate::sys::poll::wait_hangup(fd, libc::POLLRDHUP)
}

/// pgrun's end as the command's process should get it, to hand itself over
/// before its exec (`send_self`).
pub fn for_the_child(tie: BorrowedFd<'_>) -> Option<BorrowedFd<'_>> {
    Some(tie)
}

/// Most fds one message carries.
const FDS_PER_MESSAGE: usize = 32;

/// Hand `(pid, pidfd)` pairs to the guard, without blocking (`SCM_RIGHTS`;
/// the pids as the message's bytes).
pub fn send(tie: BorrowedFd<'_>, processes: &[(Pid, &Pidfd)]) -> io::Result<()> {
    for chunk in processes.chunks(FDS_PER_MESSAGE) {
        use std::os::fd::AsFd;
        let pids: Vec<Pid> = chunk.iter().map(|(pid, _)| *pid).collect();
        let fds: Vec<libc::c_int> = chunk.iter().map(|(_, fd)| fd.as_fd().as_raw_fd()).collect();
        let mut control = vec![0u64; control_words(fds.len())];
        // SAFETY: the buffers live across the call, sized as given.
        let sent = unsafe { send_message(tie.as_raw_fd(), &pids, &fds, &mut control) };
        match sent {
            Ok(n) if n == size_of_val(pids.as_slice()) => {}
            Ok(_) => return Err(io::Error::new(io::ErrorKind::WriteZero, "short message to the guard")),
            Err(errno) => return Err(io::Error::from_raw_os_error(errno)),
        }
    }
    Ok(())
}

/// The `u64` words of a control buffer for `fds` fds.
fn control_words(fds: usize) -> usize {
    // SAFETY: CMSG_SPACE computes a size from a length.
    let space = unsafe { libc::CMSG_SPACE((fds * size_of::<libc::c_int>()) as u32) } as usize;
    space.div_ceil(8)
}

/// One `sendmsg(MSG_DONTWAIT | MSG_NOSIGNAL)` of `pids` as bytes and `fds`
/// as `SCM_RIGHTS`, with `control` as the control buffer (at least
/// [`control_words`] words; else EINVAL). Allocates nothing and touches no
/// errno but the call's: safe between fork and exec. Returns the bytes sent, or the
/// errno.
///
/// # Safety
/// `tie` is an open fd number; `fds` are open fds.
unsafe fn send_message(tie: libc::c_int, pids: &[Pid], fds: &[libc::c_int], control: &mut [u64]) -> Result<usize, i32> {
    let fds_len = size_of_val(fds);
    // SAFETY: CMSG_SPACE computes a size from a length.
    let space = unsafe { libc::CMSG_SPACE(fds_len as u32) } as usize;
    if space > size_of_val(control) {
        return Err(libc::EINVAL);
    }
    let mut iov = libc::iovec { iov_base: pids.as_ptr() as *mut libc::c_void, iov_len: size_of_val(pids) };
    // SAFETY: a zeroed msghdr is valid; the fields set below point at live
    // buffers of the lengths given.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer holds CMSG_SPACE(fds_len) bytes (asserted),
    // so its first header and the data after it are within it.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fds_len as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(cmsg), fds_len);
    }
    // SAFETY: msg points at the buffers above, alive during the call.
    let sent = unsafe { libc::sendmsg(tie, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if sent < 0 { Err(nix::errno::Errno::last_raw()) } else { Ok(sent as usize) }
}

/// The command's process hands itself to the guard, between the fork and
/// the exec: `pidfd_open(getpid())` and one message over `tie`, raw syscalls
/// on stack buffers (no allocation, async-signal-safe, and safe in a child
/// that shares pgrun's memory). The pidfd is close-on-exec: the exec closes
/// the process's own copy. Returns the errno of the step that failed.
///
/// # Safety
/// Only in the child between fork (or `CLONE_VM | CLONE_VFORK`) and exec;
/// `tie` is an open fd number.
pub(in crate::sys) unsafe fn send_self(tie: libc::c_int) -> Result<(), i32> {
    // SAFETY: getpid and pidfd_open take plain integers (raw: the C
    // library's getpid may answer from a cache in a clone).
    let pid = unsafe { libc::syscall(libc::SYS_getpid) } as Pid;
    // SAFETY: as above.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(nix::errno::Errno::last_raw());
    }
    let mut control = [0u64; 4];
    // SAFETY: `fd` was just opened; the buffers are on this stack.
    match unsafe { send_message(tie, &[pid], &[fd as libc::c_int], &mut control) } {
        Ok(n) if n == size_of::<Pid>() => Ok(()),
        Ok(_) => Err(libc::EMSGSIZE),
        Err(errno) => Err(errno),
    }
}

/// Take everything queued on the channel, without blocking: the processes
/// handed over, in order.
pub fn receive(tie: BorrowedFd<'_>) -> io::Result<Vec<(Pid, Pidfd)>> {
    use std::os::fd::FromRawFd;
    let mut out = Vec::new();
    loop {
        let mut pids = [0 as Pid; FDS_PER_MESSAGE];
        let mut control = vec![0u64; control_words(FDS_PER_MESSAGE)];
        let mut iov = libc::iovec { iov_base: pids.as_mut_ptr().cast(), iov_len: size_of_val(&pids) };
        // SAFETY: a zeroed msghdr is valid; the fields set below point
        // at live buffers of the lengths given.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of_val(control.as_slice()) as _;
        // SAFETY: msg points at the buffers above, alive during the
        // call; received fds are made close-on-exec.
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
        // `control`, within msg_controllen; each SCM_RIGHTS payload is
        // an array of fds now owned by this process.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let len = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    let data = libc::CMSG_DATA(cmsg).cast::<libc::c_int>();
                    for i in 0..len / size_of::<libc::c_int>() {
                        fds.push(Pidfd::from_owned(OwnedFd::from_raw_fd(data.add(i).read_unaligned())));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        // Each pid goes with the next fd, in order.
        let count = got as usize / size_of::<Pid>();
        out.extend(pids[..count].iter().copied().zip(fds));
    }
}

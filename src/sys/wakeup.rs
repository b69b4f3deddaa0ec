//! Turning blocked signals into a file descriptor the event loop can poll.
//!
//! On Linux this is a `signalfd(2)`: signals stay blocked and are read as
//! data, so no code runs in signal context at all. Elsewhere it is the
//! classic self-pipe: a handler whose only act is to write the signal number
//! into a non-blocking pipe, which the loop then reads.

use super::sigmask::SigSet;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};

/// Signals delivered to pgrun, readable as a pollable fd.
pub struct SignalSource {
    #[cfg(linux_strengths)]
    fd: std::os::fd::OwnedFd,
    #[cfg(not(linux_strengths))]
    pipe: (std::os::fd::OwnedFd, std::os::fd::OwnedFd),
}

impl AsFd for SignalSource {
    fn as_fd(&self) -> BorrowedFd<'_> {
        #[cfg(linux_strengths)]
        return self.fd.as_fd();
        #[cfg(not(linux_strengths))]
        return self.pipe.0.as_fd();
    }
}

#[cfg(linux_strengths)]
impl SignalSource {
    /// `signalfd(2)` for `set`, which the caller has already blocked.
    pub fn new(set: &SigSet) -> io::Result<Self> {
        use std::os::fd::FromRawFd;
        // SAFETY: a valid sigset_t pointer; -1 asks for a new fd.
        let fd = unsafe { libc::signalfd(-1, set.as_ptr(), libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: signalfd returned a fresh fd that nothing else owns.
        Ok(SignalSource { fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) } })
    }

    /// Every signal that has arrived, oldest first; empty if none.
    pub fn drain(&self) -> io::Result<Vec<i32>> {
        use std::os::fd::AsRawFd;
        const SIZE: usize = std::mem::size_of::<libc::signalfd_siginfo>();
        let mut out = Vec::new();
        loop {
            let mut buf = [0u8; SIZE * 8];
            // SAFETY: reading into a stack buffer of the given size.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let err = io::Error::last_os_error();
                match err.kind() {
                    io::ErrorKind::WouldBlock => return Ok(out),
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(err),
                }
            }
            let n = n as usize;
            for chunk in buf[..n].chunks_exact(SIZE) {
                // ssi_signo is the first field, a u32 in native byte order.
                out.push(u32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]) as i32);
            }
            if n < buf.len() {
                return Ok(out);
            }
        }
    }

    /// Nothing to undo on Linux: the mask is restored by the child itself.
    pub fn activate(&self, _set: &SigSet, _keep_blocked: &SigSet) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(not(linux_strengths))]
mod self_pipe {
    use std::sync::atomic::{AtomicI32, Ordering};
    /// The pipe's write end, for the handler. -1 until installed.
    pub static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

    /// The handler: write the signal number, nothing else.
    pub extern "C" fn on_signal(signal: libc::c_int) {
        let fd = WRITE_FD.load(Ordering::Relaxed);
        let byte = signal as u8;
        // SAFETY: write(2) is async-signal-safe; errno is saved and restored
        // around it so the interrupted code does not see it change. A full
        // pipe drops the byte, which is fine: the loop drains and re-checks.
        unsafe {
            let saved = *super::super::process::errno_location();
            libc::write(fd, (&byte as *const u8).cast(), 1);
            *super::super::process::errno_location() = saved;
        }
    }
}

#[cfg(not(linux_strengths))]
impl SignalSource {
    /// A self-pipe; the handlers are installed by [`SignalSource::activate`].
    pub fn new(_set: &SigSet) -> io::Result<Self> {
        use std::os::fd::AsRawFd;
        let pipe = super::process::cloexec_pipe()?;
        for fd in [&pipe.0, &pipe.1] {
            // SAFETY: a valid fd; O_NONBLOCK keeps the handler from blocking.
            unsafe {
                let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
            }
        }
        self_pipe::WRITE_FD.store(pipe.1.as_raw_fd(), std::sync::atomic::Ordering::Relaxed);
        Ok(SignalSource { pipe })
    }

    /// Install the handlers for `set` and unblock it, except the signals in
    /// `keep_blocked` (SIGTTOU and SIGPIPE: blocked is what lets pgrun call
    /// tcsetpgrp from the background, and what turns a broken pipe into a
    /// plain EPIPE). Called after the command has been spawned with the
    /// original mask.
    pub fn activate(&self, set: &SigSet, keep_blocked: &SigSet) -> io::Result<()> {
        let mut handled = SigSet::empty();
        // Up to the platform's last signal: FreeBSD's real-time signals run
        // to 126. (The self-pipe carries a number as one byte: all fit.)
        for signal in 1..=crate::signame::max_signal() {
            if !set.contains(signal) || keep_blocked.contains(signal) {
                continue;
            }
            handled.add(signal);
            // SAFETY: a zeroed sigaction with a valid handler and an empty
            // mask is a valid argument; SA_RESTART keeps syscalls simple.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = self_pipe::on_signal as *const () as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
        // SAFETY: a valid sigset_t.
        unsafe { libc::sigprocmask(libc::SIG_UNBLOCK, handled.as_ptr(), std::ptr::null_mut()) };
        Ok(())
    }

    /// Every signal number written by the handler since the last call.
    pub fn drain(&self) -> io::Result<Vec<i32>> {
        use std::os::fd::AsRawFd;
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: reading into a stack buffer of the given size.
            let n = unsafe { libc::read(self.pipe.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return Ok(out);
            }
            out.extend(buf[..n as usize].iter().map(|&b| b as i32));
        }
    }
}

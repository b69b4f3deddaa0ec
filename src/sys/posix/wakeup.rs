//! Turning blocked signals into a file descriptor the event loop can poll,
//! the portable way: the classic self-pipe. A handler whose only act is to
//! write the signal number into a non-blocking pipe, which the loop then
//! reads. (Linux's is a signalfd: `linux/wakeup.rs`.)

use crate::sys::sigmask::SigSet;
use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Signals delivered to pgrun, readable as a pollable fd.
pub struct SignalSource {
    pipe: (OwnedFd, OwnedFd),
}

impl AsFd for SignalSource {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.pipe.0.as_fd()
    }
}

mod self_pipe {
    use std::sync::atomic::{AtomicI32, Ordering};
    /// The pipe's write end, for the handler. -1 until installed.
    pub static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

    /// The handler: write the signal number, nothing else. errno is saved
    /// and restored around the write so the interrupted code does not see it
    /// change (nix's errno accessors are a bare read and write of it).
    pub extern "C" fn on_signal(signal: libc::c_int) {
        let fd = WRITE_FD.load(Ordering::Relaxed);
        let byte = signal as u8;
        let saved = nix::errno::Errno::last_raw();
        // SAFETY: write(2) is async-signal-safe, and the pointer and length
        // describe `byte`. A full pipe drops the byte, which is fine: the
        // loop drains and re-checks. (Raw: the fd comes from an atomic.)
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
        nix::errno::Errno::set_raw(saved);
    }
}

impl SignalSource {
    /// A self-pipe; the handlers are installed by [`SignalSource::activate`].
    pub fn new(_set: &SigSet) -> io::Result<Self> {
        use std::os::fd::AsRawFd;
        // pipe(2) and then the flags (there is no pipe2 on every system):
        // pgrun is single-threaded, so no fork can come between.
        let pipe = nix::unistd::pipe()?;
        // O_NONBLOCK keeps the handler from blocking.
        for fd in [&pipe.0, &pipe.1] {
            fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
            crate::sys::fd::set_nonblocking(fd.as_fd())?;
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
        for signal in 1..=crate::sys::signals::max_signal() {
            if !set.contains(signal) || keep_blocked.contains(signal) {
                continue;
            }
            handled.add(signal);
            // SAFETY: a zeroed sigaction with a valid handler and an empty
            // mask is a valid argument; SA_RESTART keeps syscalls simple.
            // (Raw libc: nix's sigaction takes no real-time signal.)
            let rc = unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = self_pipe::on_signal as *const () as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut())
            };
            if rc != 0 {
                let err = io::Error::last_os_error();
                return Err(io::Error::new(err.kind(), format!("sigaction of signal {signal}: {err}")));
            }
        }
        crate::sys::sigmask::unblock(&handled)?;
        Ok(())
    }

    /// Every signal number written by the handler since the last call.
    pub fn drain(&self) -> io::Result<Vec<i32>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            match nix::unistd::read(&self.pipe.0, &mut buf) {
                Ok(n) if n > 0 => out.extend(buf[..n].iter().map(|&b| b as i32)),
                _ => return Ok(out),
            }
        }
    }
}

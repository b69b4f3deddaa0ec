//! Turning blocked signals into a file descriptor the event loop can poll.
//!
//! On Linux this is a `signalfd(2)`: signals stay blocked and are read as
//! data, so no code runs in signal context at all. (The portable path's is
//! the classic self-pipe: `posix/wakeup.rs`.)

use crate::sys::sigmask::SigSet;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};

/// Signals delivered to pgrun, readable as a pollable fd.
pub struct SignalSource {
    fd: nix::sys::signalfd::SignalFd,
}

impl AsFd for SignalSource {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl SignalSource {
    /// `signalfd(2)` for `set`, which the caller has already blocked.
    pub fn new(set: &SigSet) -> io::Result<Self> {
        use nix::sys::signalfd::{SfdFlags, SignalFd};
        let fd = SignalFd::with_flags(set.as_nix(), SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)?;
        Ok(SignalSource { fd })
    }

    /// Every signal that has arrived, oldest first; empty if none. Reads
    /// up to eight at a time (nix's `read_signal` takes one per read, and
    /// would need one more read to learn that none is left).
    pub fn drain(&self) -> io::Result<Vec<i32>> {
        const SIZE: usize = std::mem::size_of::<libc::signalfd_siginfo>();
        let mut out = Vec::new();
        let mut buf = [0u8; SIZE * 8];
        loop {
            let n = match nix::unistd::read(&self.fd, &mut buf) {
                Ok(n) => n,
                Err(nix::errno::Errno::EAGAIN) => return Ok(out),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
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

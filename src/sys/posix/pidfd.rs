//! Pidfds on the portable path: there are none. [`Pidfd::open`] says so
//! with `None`, and no [`Pidfd`] can exist, so the code that holds them
//! (written for Linux's, `linux/pidfd.rs`) falls back to the group's number
//! and never reaches a method here.

use crate::sys::ids::Pid;
use crate::sys::signals::Signal;
use std::io;
use std::os::fd::OwnedFd;

/// No pidfds here: a value of this type cannot exist.
pub struct Pidfd(std::convert::Infallible);

impl Pidfd {
    /// Whether this platform has pidfds: without them, looking for
    /// processes to hold is wasted.
    pub const SUPPORTED: bool = false;

    /// No process can be held here: always `None`.
    pub fn open(pid: Pid) -> Option<Pidfd> {
        let _ = pid;
        None
    }

    /// No process can be held here: always `Ok(None)`.
    pub fn hold(pid: Pid) -> io::Result<Option<Pidfd>> {
        let _ = pid;
        Ok(None)
    }

    /// Never called: no [`Pidfd`] exists.
    pub fn exited(&self) -> bool {
        match self.0 {}
    }

    /// Never called: no [`Pidfd`] exists.
    pub fn wait_exited(&self, timeout: Option<std::time::Duration>) -> io::Result<bool> {
        let _ = timeout;
        match self.0 {}
    }

    /// Never called: no [`Pidfd`] exists.
    pub fn signal(&self, signal: Signal) -> io::Result<bool> {
        let _ = signal;
        match self.0 {}
    }
}

/// A handle that becomes readable when a process exits: none here.
pub fn pidfd_open(pid: Pid) -> Option<OwnedFd> {
    let _ = pid;
    None
}

//! Signal sets and the process signal mask.
//!
//! pgrun blocks every signal it handles before it spawns anything, so that
//! none is lost or delivered asynchronously; the mask it found at start-up
//! is kept as a value and restored in the child just before exec.

use std::io;
use std::mem::MaybeUninit;

/// A `sigset_t`, copyable so that the child can restore it without
/// allocating between fork and exec.
#[derive(Clone, Copy)]
pub struct SigSet(libc::sigset_t);

impl SigSet {
    /// `sigemptyset(3)`.
    pub fn empty() -> Self {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initialises the set it is given; it cannot fail
        // for a valid pointer.
        unsafe { libc::sigemptyset(set.as_mut_ptr()) };
        // SAFETY: initialised just above.
        SigSet(unsafe { set.assume_init() })
    }

    /// `sigaddset(3)`; numbers the C library reserves for itself are skipped.
    pub fn add(&mut self, signal: i32) {
        // SAFETY: self.0 is an initialised sigset_t; an invalid number only
        // makes sigaddset return EINVAL, which we ignore on purpose.
        unsafe { libc::sigaddset(&mut self.0, signal) };
    }

    /// `sigismember(3)`.
    pub fn contains(&self, signal: i32) -> bool {
        // SAFETY: self.0 is an initialised sigset_t.
        unsafe { libc::sigismember(&self.0, signal) == 1 }
    }

    pub(crate) fn as_ptr(&self) -> *const libc::sigset_t {
        &self.0
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut libc::sigset_t {
        &mut self.0
    }
}

/// `sigprocmask(SIG_BLOCK)`: block `set` and return the mask as it was.
pub fn block(set: &SigSet) -> io::Result<SigSet> {
    let mut old = SigSet::empty();
    // SAFETY: both pointers are valid sigset_t; pgrun is single-threaded, so
    // sigprocmask and pthread_sigmask are the same thing.
    let rc = unsafe { libc::sigprocmask(libc::SIG_BLOCK, set.as_ptr(), &mut old.0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old)
}

/// `sigpending(2)`: the blocked signals waiting for pgrun.
pub fn pending() -> SigSet {
    let mut set = SigSet::empty();
    // SAFETY: a valid sigset_t pointer; sigpending cannot fail with one.
    unsafe { libc::sigpending(&mut set.0) };
    set
}

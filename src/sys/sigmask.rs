//! Signal sets, the process signal mask, and the signal state pgrun was
//! started with.
//!
//! pgrun blocks every signal it handles before it spawns anything, so that
//! none is lost or delivered asynchronously; the mask it found at start-up
//! is kept as a value and restored in the child just before exec.
//!
//! [`take_over_at_start`] runs first thing in every mode: it blocks SIGPIPE
//! (a closed stderr must not kill pgrun) and gives SIGCHLD its default
//! disposition back if the caller ignored it (an ignored SIGCHLD makes the
//! kernel reap pgrun's children itself, and pgrun would never learn the
//! command's status). What the caller had is kept in [`Inherited`], so that
//! the command still gets exactly that.

use std::io;
use std::mem::MaybeUninit;
use std::sync::OnceLock;

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

    /// Add one of the signals the C library reserves for itself (32 up to
    /// its `SIGRTMIN`), which `sigaddset` refuses, by setting its bit: a
    /// Linux `sigset_t` is an array of `unsigned long`, signal N at bit N-1.
    #[cfg(target_os = "linux")]
    pub(crate) fn add_reserved(&mut self, signal: i32) {
        let bit = (signal - 1) as usize;
        let bits = libc::c_ulong::BITS as usize;
        assert!(bit < std::mem::size_of::<libc::sigset_t>() * 8, "signal {signal} out of range");
        // SAFETY: the index is inside the sigset_t (asserted above), which is
        // plain memory made of c_ulong words.
        unsafe {
            let words = (&mut self.0 as *mut libc::sigset_t).cast::<libc::c_ulong>();
            *words.add(bit / bits) |= 1 << (bit % bits);
        }
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

/// The signal state pgrun's caller handed it, before pgrun changed any.
#[derive(Clone, Copy)]
pub struct Inherited {
    /// The signal mask pgrun was started with.
    pub mask: SigSet,
    /// Whether SIGCHLD was ignored (pgrun resets it to the default for
    /// itself; the command gets it ignored again).
    pub sigchld_ignored: bool,
}

static INHERITED: OnceLock<Inherited> = OnceLock::new();

/// Block SIGPIPE and restore SIGCHLD's default disposition, remembering what
/// the caller had. Call once, before anything can write to a pipe or start a
/// child; later calls change nothing.
pub fn take_over_at_start() -> Inherited {
    *INHERITED.get_or_init(|| {
        let mut pipe = SigSet::empty();
        pipe.add(libc::SIGPIPE);
        // Cannot fail for a valid set; if it did, the empty mask is the best
        // guess of what the caller had.
        let mask = block(&pipe).unwrap_or_else(|_| SigSet::empty());
        let sigchld_ignored = if crate::test_hook::active(crate::test_hook::KEEP_SIGCHLD_IGNORED) {
            false
        } else {
            reset_if_ignored(libc::SIGCHLD)
        };
        Inherited { mask, sigchld_ignored }
    })
}

/// What [`take_over_at_start`] found (taking over now if it has not run).
pub fn inherited() -> Inherited {
    take_over_at_start()
}

/// `sigaction(2)`: if `signal` is ignored, make it default; true if it was.
fn reset_if_ignored(signal: i32) -> bool {
    // SAFETY: a zeroed sigaction is a valid out-parameter; a null new action
    // only queries.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers; querying cannot fail for a valid signal.
    if unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) } != 0 || old.sa_sigaction != libc::SIG_IGN {
        return false;
    }
    // SAFETY: a zeroed sigaction with SIG_DFL and an empty mask is valid.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut());
    }
    true
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

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

use nix::sys::signal::{self as nix_signal, SigHandler, SigmaskHow, Signal};
use std::io;
use std::sync::OnceLock;

/// A `sigset_t`, copyable so that the child can restore it without
/// allocating between fork and exec. It wraps nix's set, which the nix calls
/// take as is; adding and testing members goes through libc, because nix's
/// `Signal` names no real-time signal.
#[derive(Clone, Copy)]
pub struct SigSet(nix_signal::SigSet);

impl SigSet {
    /// `sigemptyset(3)`.
    pub fn empty() -> Self {
        SigSet(nix_signal::SigSet::empty())
    }

    /// `sigaddset(3)`; numbers the C library reserves for itself are skipped.
    pub fn add(&mut self, signal: i32) {
        let mut raw = *self.0.as_ref();
        // SAFETY: `raw` is a copy of an initialised sigset_t; an invalid
        // number only makes sigaddset return EINVAL (ignored on purpose) and
        // leaves it as it was, so it is still a valid set to wrap.
        unsafe {
            libc::sigaddset(&mut raw, signal);
            self.0 = nix_signal::SigSet::from_sigset_t_unchecked(raw);
        }
    }

    /// Add one of the signals the C library reserves for itself (32 up to
    /// its `SIGRTMIN`), which `sigaddset` refuses, by setting its bit: a
    /// Linux `sigset_t` is an array of `unsigned long`, signal N at bit N-1.
    #[cfg(target_os = "linux")]
    pub(crate) fn add_reserved(&mut self, signal: i32) {
        let bit = (signal - 1) as usize;
        let bits = libc::c_ulong::BITS as usize;
        assert!(bit < std::mem::size_of::<libc::sigset_t>() * 8, "signal {signal} out of range");
        let mut raw = *self.0.as_ref();
        // SAFETY: the index is inside the sigset_t (asserted above), which is
        // plain memory made of c_ulong words; setting a bit in a copy of a
        // valid set leaves a valid set to wrap.
        unsafe {
            let words = (&mut raw as *mut libc::sigset_t).cast::<libc::c_ulong>();
            *words.add(bit / bits) |= 1 << (bit % bits);
            self.0 = nix_signal::SigSet::from_sigset_t_unchecked(raw);
        }
    }

    /// Whether the set holds one of the signals the C library reserves for
    /// itself (Linux: 32 up to its `SIGRTMIN`), which `sigismember` and
    /// `sigprocmask` do not see or set: only the kernel's view of the mask
    /// has them.
    pub fn has_reserved(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            let bits = libc::c_ulong::BITS as usize;
            let raw = self.0.as_ref();
            // SAFETY: a sigset_t is plain memory made of c_ulong words, and
            // signals 32.. lie in its first 128 bits on every Linux target.
            let words =
                unsafe { std::slice::from_raw_parts((raw as *const libc::sigset_t).cast::<libc::c_ulong>(), 2) };
            (32..libc::SIGRTMIN()).any(|signal| {
                let bit = (signal - 1) as usize;
                words[bit / bits] & (1 << (bit % bits)) != 0
            })
        }
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// `sigismember(3)`.
    pub fn contains(&self, signal: i32) -> bool {
        // SAFETY: self.0 wraps an initialised sigset_t.
        unsafe { libc::sigismember(self.0.as_ref(), signal) == 1 }
    }

    /// For the raw calls in the forked child.
    pub(crate) fn as_ptr(&self) -> *const libc::sigset_t {
        self.0.as_ref()
    }

    /// nix's set, for nix's calls (signalfd, posix_spawn's attributes: there
    /// are neither on OpenBSD or DragonFly).
    #[cfg_attr(
        not(any(target_os = "linux", target_os = "freebsd", target_os = "netbsd", target_vendor = "apple")),
        allow(dead_code)
    )]
    pub(super) fn as_nix(&self) -> &nix_signal::SigSet {
        &self.0
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
/// child; later calls change nothing. An error (the kernel refused either
/// call) is pgrun's failure: without it pgrun cannot tell the command the
/// mask it was given, nor keep SIGCHLD from being ignored.
///
/// `keep_sigchld_ignored` leaves an ignored SIGCHLD ignored in pgrun too
/// (and says it was not): a test gate, which the caller reads
/// (`test_hook::KEEP_SIGCHLD_IGNORED`), never this module.
pub fn take_over_at_start(keep_sigchld_ignored: bool) -> io::Result<Inherited> {
    if let Some(inherited) = INHERITED.get() {
        return Ok(*inherited);
    }
    let mut pipe = SigSet::empty();
    pipe.add(libc::SIGPIPE);
    let mask = block(&pipe).map_err(|e| io::Error::new(e.kind(), format!("cannot block SIGPIPE: {e}")))?;
    let sigchld_ignored = if keep_sigchld_ignored {
        false
    } else {
        reset_if_ignored(Signal::SIGCHLD)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot give SIGCHLD its default action: {e}")))?
    };
    Ok(*INHERITED.get_or_init(|| Inherited { mask, sigchld_ignored }))
}

/// What [`take_over_at_start`] found (taking over now, with no test gate,
/// if it has not run).
pub fn inherited() -> io::Result<Inherited> {
    take_over_at_start(false)
}

/// `sigaction(2)`: if `signal` is ignored, make it default; true if it was.
///
/// nix has no query-only sigaction, so this sets the default (no flags, so
/// no SA_NOCLDSTOP either) and says whether it was ignored. At start-up
/// that is all there can be (exec resets every caught signal and its
/// flags); a caught one, should there ever be one, is put back.
fn reset_if_ignored(signal: Signal) -> io::Result<bool> {
    let default =
        nix_signal::SigAction::new(SigHandler::SigDfl, nix_signal::SaFlags::empty(), nix_signal::SigSet::empty());
    // SAFETY: installing SIG_DFL, or putting back the action that was there,
    // installs no handler of ours that could run in signal context.
    unsafe {
        let old = nix_signal::sigaction(signal, &default)?;
        match old.handler() {
            SigHandler::SigIgn => Ok(true),
            SigHandler::SigDfl => Ok(false),
            _ => {
                nix_signal::sigaction(signal, &old)?;
                Ok(false)
            }
        }
    }
}

/// `sigprocmask(SIG_BLOCK)`: block `set` and return the mask as it was.
/// (pgrun is single-threaded, so sigprocmask and pthread_sigmask are the
/// same thing.)
pub fn block(set: &SigSet) -> io::Result<SigSet> {
    let mut old = SigSet::empty();
    nix_signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set.0), Some(&mut old.0))?;
    Ok(old)
}

/// `sigprocmask(SIG_UNBLOCK)`: unblock `set` and return the mask as it was.
pub(super) fn unblock(set: &SigSet) -> io::Result<SigSet> {
    let mut old = SigSet::empty();
    nix_signal::sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&set.0), Some(&mut old.0))?;
    Ok(old)
}

/// `sigprocmask(SIG_BLOCK, NULL)`: the signal mask as it is.
pub(super) fn current() -> io::Result<SigSet> {
    let mut mask = SigSet::empty();
    nix_signal::sigprocmask(SigmaskHow::SIG_BLOCK, None, Some(&mut mask.0))?;
    Ok(mask)
}

/// `sigprocmask(SIG_SETMASK)`: make `mask` the signal mask.
pub(super) fn set_mask(mask: &SigSet) -> io::Result<()> {
    nix_signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&mask.0), None)?;
    Ok(())
}

/// `sigpending(2)` (which nix lacks): the blocked signals waiting for pgrun.
pub fn pending() -> io::Result<SigSet> {
    let mut raw = *SigSet::empty().0.as_ref();
    // SAFETY: `raw` is an initialised sigset_t, which sigpending fills in
    // on success (and leaves as it was otherwise), so it is a valid set to
    // wrap.
    unsafe {
        if libc::sigpending(&mut raw) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(SigSet(nix_signal::SigSet::from_sigset_t_unchecked(raw)))
    }
}

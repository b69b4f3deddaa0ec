//! The steps of the command's process between its creation (fork or clone) and its exec (see
//! [`super`]): raw, async-signal-safe calls only, on memory prepared before
//! it exists, and no allocation. A failed step is said on the exec-status
//! page ([`super::status_page`]) as its step byte and errno.

use super::super::sigmask::SigSet;
use super::status_page::StatusPage;
use super::{Detach, SpawnOptions};

/// The step that failed in the child, as it says it on the
/// exec-status page. Every step but the exec is a set-up step: its failure
/// is pgrun's, not the command's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum ChildStep {
    JoinCgroup = 1,
    Detach = 2,
    Terminal = 3,
    Redirect = 4,
    Sigchld = 5,
    SignalMask = 6,
    Exec = 7,
}

impl ChildStep {
    const ALL: [ChildStep; 7] = [
        ChildStep::JoinCgroup,
        ChildStep::Detach,
        ChildStep::Terminal,
        ChildStep::Redirect,
        ChildStep::Sigchld,
        ChildStep::SignalMask,
        ChildStep::Exec,
    ];

    pub(super) fn from_byte(byte: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|step| *step as u8 == byte)
    }

    /// What the step does, for the error message.
    pub(super) fn what(self, detach: Detach) -> &'static str {
        match self {
            ChildStep::JoinCgroup => "joining the cgroup",
            ChildStep::Detach if detach == Detach::Session => "setsid",
            ChildStep::Detach => "setpgid",
            ChildStep::Terminal => "taking the terminal",
            ChildStep::Redirect => "dup2 onto stdin/stdout/stderr",
            ChildStep::Sigchld => "ignoring SIGCHLD again",
            ChildStep::SignalMask => "restoring the signal mask",
            ChildStep::Exec => "exec",
        }
    }
}

/// The step byte of a failed `--rlimit`: this plus the setting's slot
/// number (see [`super::rlimit::Settings`]).
pub(super) const RLIMIT_STEP: u8 = 32;

/// What the child needs, prepared before it exists.
pub(super) struct Plan<'a> {
    /// A NULL-terminated array of valid C strings.
    pub argv: &'a [*const libc::c_char],
    pub options: &'a SpawnOptions<'a>,
    /// Where the child says how far it got.
    pub status: &'a StatusPage,
}

/// The child's side of [`super::spawn`], in the child. Only
/// async-signal-safe calls on memory prepared before the child exists; no
/// allocation; what it says goes to the exec-status page.
pub(super) fn run(plan: &Plan<'_>) -> ! {
    let (argv, options, status) = (plan.argv, plan.options, plan.status);
    // Before anything: the exec-status page is mapped in this process from
    // here on (see `StatusPage::child_starts`).
    status.child_starts();
    // SAFETY (whole function): every call below is async-signal-safe and works
    // on memory that was fully prepared before the child existed; `argv` is a
    // NULL-terminated array of valid C strings.
    unsafe {
        if let Some(pause) = options.pause_in_child {
            pause.wait();
        }
        // First: from here on the guard holds this process, whenever pgrun
        // dies (the guard's channel hangs up only once this copy of pgrun's
        // end is closed, by the exec, after the message is queued).
        if let Some(tie) = options.hand_over
            && let Err(errno) = super::super::guard_channel::send_self(std::os::fd::AsRawFd::as_raw_fd(&tie))
        {
            status.hand_over_failed(errno);
        }
        let parent_group = libc::getpgrp();
        // Join the cgroup first, so nothing the command does runs outside it.
        if let Some(procs) = options.join_cgroup
            && libc::write(procs, b"0".as_ptr().cast(), 1) != 1
        {
            fail(status, ChildStep::JoinCgroup);
        }
        let rc = match options.detach {
            Detach::Group => libc::setpgid(0, 0),
            Detach::Session => libc::setsid(),
        };
        if rc < 0 {
            fail(status, ChildStep::Detach);
        }
        // SIGTTOU is still blocked here (pgrun's mask), so a group that is
        // not yet in the foreground may take the terminal, before the
        // command can touch it (the rules: crate::terminal).
        if let Some(tty) = options.take_terminal
            && super::super::terminal::take_from(tty, parent_group).is_err()
        {
            fail(status, ChildStep::Terminal);
        }
        if let Some(input) = options.stdin
            && libc::dup2(input, 0) < 0
        {
            fail(status, ChildStep::Redirect);
        }
        if let Some([out, err]) = options.stdout_stderr
            && (libc::dup2(out, 1) < 0 || libc::dup2(err, 2) < 0)
        {
            fail(status, ChildStep::Redirect);
        }
        if options.ignore_sigchld {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_IGN;
            if libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut()) != 0 {
                fail(status, ChildStep::Sigchld);
            }
        }
        // The limits last before the mask, so no earlier step runs under
        // them (nothing after this but the mask and the exec).
        if let Err(slot) = options.rlimits.apply_in_child() {
            fail_at(status, RLIMIT_STEP + slot as u8);
        }
        if set_mask_exactly(&options.child_mask) != 0 {
            fail(status, ChildStep::SignalMask);
        }
        status.about_to_exec();
        libc::execvp(argv[0], argv.as_ptr());
        fail(status, ChildStep::Exec);
    }
}

/// Set the signal mask to `mask` exactly, the C library's reserved signals
/// included (glibc's `sigprocmask` drops those): the raw `rt_sigprocmask`
/// on Linux. Async-signal-safe; returns 0 or -1.
///
/// # Safety
/// Only a valid `SigSet`; called in the child.
unsafe fn set_mask_exactly(mask: &SigSet) -> libc::c_int {
    #[cfg(target_os = "linux")]
    // SAFETY: a valid sigset_t pointer (128 bytes); the kernel reads the
    // first _NSIG/8 bytes of it, the size it expects.
    unsafe {
        let size: libc::size_t = if cfg!(any(target_arch = "mips", target_arch = "mips64")) { 16 } else { 8 };
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            mask.as_ptr(),
            std::ptr::null::<libc::sigset_t>(),
            size,
        ) as libc::c_int
    }
    #[cfg(not(target_os = "linux"))]
    // SAFETY: a valid sigset_t pointer; no old mask wanted.
    unsafe {
        libc::sigprocmask(libc::SIG_SETMASK, mask.as_ptr(), std::ptr::null_mut())
    }
}

/// Say that `step` failed, with the errno it left, and `_exit(127)`.
///
/// # Safety
/// Only to be called in the child.
unsafe fn fail(status: &StatusPage, step: ChildStep) -> ! {
    // SAFETY: the same contract.
    unsafe { fail_at(status, step as u8) }
}

/// [`fail`] with the step as its byte (a `--rlimit` failure is
/// [`RLIMIT_STEP`] plus the setting's slot).
///
/// # Safety
/// Only to be called in the child.
unsafe fn fail_at(status: &StatusPage, step: u8) -> ! {
    // nix's errno read is a bare read of it, before any other call:
    // async-signal-safe; the rest is a store and `_exit`.
    status.failed(step, nix::errno::Errno::last_raw());
    // SAFETY: ends the child without running anything of pgrun's.
    unsafe { libc::_exit(127) }
}

/// A test-only pause of the child, first thing after it exists (see
/// [`crate::test_hook::child_pause`]): it creates `GATE.reached`, then
/// waits until `GATE` exists (at most two minutes). The paths are made
/// before the child exists; the child only makes raw calls.
pub struct ChildPause {
    reached: std::ffi::CString,
    gate: std::ffi::CString,
}

impl ChildPause {
    /// A pause at gate file `gate` (its name without NUL bytes).
    pub fn new(gate: &std::path::Path) -> Option<ChildPause> {
        use std::os::unix::ffi::OsStrExt;
        let reached = std::ffi::CString::new([gate.as_os_str().as_bytes(), b".reached"].concat()).ok()?;
        let gate = std::ffi::CString::new(gate.as_os_str().as_bytes()).ok()?;
        Some(ChildPause { reached, gate })
    }

    /// # Safety
    /// Only to be called in the child.
    unsafe fn wait(&self) {
        // SAFETY: open, close, access and nanosleep are async-signal-safe
        // and take NUL-terminated paths made before the fork, and a stack
        // timespec.
        unsafe {
            let fd = libc::open(self.reached.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC, 0o644);
            if fd >= 0 {
                libc::close(fd);
            }
            let pause = libc::timespec { tv_sec: 0, tv_nsec: 2_000_000 };
            for _ in 0..60_000 {
                if libc::access(self.gate.as_ptr(), libc::F_OK) == 0 {
                    break;
                }
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
        }
    }
}

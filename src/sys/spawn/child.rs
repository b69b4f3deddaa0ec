//! The steps of the command's process between its fork and its exec
//! (see [`super`]): raw, async-signal-safe calls only, on memory prepared
//! before it exists, and no allocation. A failed step is reported through
//! the exec-status pipe as its step byte and errno.

use super::super::sigmask::SigSet;
use super::{Detach, SpawnOptions};

/// What the forked child reports through the exec-status pipe when it
/// fails: the step (one byte) and errno (four). Every step but the exec is a
/// set-up step: its failure is pgrun's, not the command's.
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
    /// Not a failure: a note that the child could not hand itself to the
    /// guard, sent before the child goes on.
    HandOver = 8,
}

impl ChildStep {
    const ALL: [ChildStep; 8] = [
        ChildStep::JoinCgroup,
        ChildStep::Detach,
        ChildStep::Terminal,
        ChildStep::Redirect,
        ChildStep::Sigchld,
        ChildStep::SignalMask,
        ChildStep::Exec,
        ChildStep::HandOver,
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
            ChildStep::Redirect => "dup2 onto stdout/stderr",
            ChildStep::Sigchld => "ignoring SIGCHLD again",
            ChildStep::SignalMask => "restoring the signal mask",
            ChildStep::Exec => "exec",
            ChildStep::HandOver => "handing itself to the guard",
        }
    }
}

/// The length of the child's failure message: a step byte and an errno.
pub(super) const REPORT_LEN: usize = 5;

/// The step byte of a failed `--rlimit`: this plus the setting's slot
/// number (see [`super::rlimit::Settings`]).
pub(super) const RLIMIT_STEP: u8 = 32;

/// What the child needs, prepared before it exists.
pub(super) struct Plan<'a> {
    /// A NULL-terminated array of valid C strings.
    pub argv: &'a [*const libc::c_char],
    pub options: &'a SpawnOptions<'a>,
    /// The write end of the exec-status pipe.
    pub err_fd: libc::c_int,
}

/// The child's side of [`super::spawn`], in the forked child. Only
/// async-signal-safe calls on memory prepared before the fork; no
/// allocation.
pub(super) fn run(plan: &Plan<'_>) -> ! {
    let (argv, options, err_fd) = (plan.argv, plan.options, plan.err_fd);
    // SAFETY (whole function): every call below is async-signal-safe and works
    // on memory that was fully prepared before the fork; `argv` is a
    // NULL-terminated array of valid C strings.
    unsafe {
        if let Some(pause) = options.pause_in_child {
            pause.wait();
        }
        // First: from here on the guard holds this process, whenever pgrun
        // dies (the guard's channel hangs up only once this copy of pgrun's
        // end is closed, by the exec, after the message is queued).
        #[cfg(linux_strengths)]
        if let Some(tie) = options.hand_over
            && let Err(errno) = super::super::guard_channel::send_self(std::os::fd::AsRawFd::as_raw_fd(&tie))
        {
            note(err_fd, ChildStep::HandOver, errno);
        }
        let parent_group = libc::getpgrp();
        // Join the cgroup first, so nothing the command does runs outside it.
        if let Some(procs) = options.join_cgroup
            && libc::write(procs, b"0".as_ptr().cast(), 1) != 1
        {
            report_and_exit(err_fd, ChildStep::JoinCgroup);
        }
        let rc = match options.detach {
            Detach::Group => libc::setpgid(0, 0),
            Detach::Session => libc::setsid(),
        };
        if rc < 0 {
            report_and_exit(err_fd, ChildStep::Detach);
        }
        // SIGTTOU is still blocked here (pgrun's mask), so a group that is
        // not yet in the foreground may take the terminal, before the
        // command can touch it (the rules: crate::terminal).
        if let Some(tty) = options.take_terminal
            && super::super::terminal::take_from(tty, parent_group).is_err()
        {
            report_and_exit(err_fd, ChildStep::Terminal);
        }
        if let Some([out, err]) = options.stdout_stderr
            && (libc::dup2(out, 1) < 0 || libc::dup2(err, 2) < 0)
        {
            report_and_exit(err_fd, ChildStep::Redirect);
        }
        if options.ignore_sigchld {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_IGN;
            if libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut()) != 0 {
                report_and_exit(err_fd, ChildStep::Sigchld);
            }
        }
        // The limits last before the mask, so no earlier step runs under
        // them (nothing after this but the mask and the exec).
        if let Err(slot) = options.rlimits.apply_in_child() {
            report_byte_and_exit(err_fd, RLIMIT_STEP + slot as u8);
        }
        if set_mask_exactly(&options.child_mask) != 0 {
            report_and_exit(err_fd, ChildStep::SignalMask);
        }
        libc::execvp(argv[0], argv.as_ptr());
        report_and_exit(err_fd, ChildStep::Exec);
    }
}

/// Set the signal mask to `mask` exactly, the C library's reserved signals
/// included (glibc's `sigprocmask` drops those): the raw `rt_sigprocmask`
/// on Linux. Async-signal-safe; returns 0 or -1.
///
/// # Safety
/// Only a valid `SigSet`; called in the forked child.
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

/// Write the failed step and errno to the exec-status pipe and
/// `_exit(127)`. The five bytes go in one write, which a pipe takes whole
/// (fewer than PIPE_BUF); EINTR is retried. Should the write fail anyway,
/// the parent sees EOF and, after it, the child's exit status 127, the
/// best that is left to say.
///
/// # Safety
/// Only to be called in the forked child.
unsafe fn report_and_exit(err_fd: libc::c_int, step: ChildStep) -> ! {
    // SAFETY: the same contract.
    unsafe { report_byte_and_exit(err_fd, step as u8) }
}

/// [`report_and_exit`] with the step as its byte (a `--rlimit` failure is
/// [`RLIMIT_STEP`] plus the setting's slot).
///
/// # Safety
/// Only to be called in the forked child.
unsafe fn report_byte_and_exit(err_fd: libc::c_int, step: u8) -> ! {
    // nix's errno read is a bare read of it: async-signal-safe.
    // SAFETY: the same contract.
    unsafe {
        write_report(err_fd, step, nix::errno::Errno::last_raw());
        libc::_exit(127);
    }
}

/// Write a step byte and an errno to the exec-status pipe, in one write,
/// which a pipe takes whole (fewer than PIPE_BUF); EINTR is retried.
///
/// # Safety
/// Only to be called in the forked child.
unsafe fn write_report(err_fd: libc::c_int, step: u8, errno: i32) {
    let e = errno.to_ne_bytes();
    let buf: [u8; REPORT_LEN] = [step, e[0], e[1], e[2], e[3]];
    // SAFETY: write is async-signal-safe; the pointer and length describe
    // a stack buffer. (Raw libc: the fd is a plain integer.)
    unsafe {
        while libc::write(err_fd, buf.as_ptr().cast(), buf.len()) < 0 && nix::errno::Errno::last_raw() == libc::EINTR {}
    }
}

/// Note a step that failed without ending the child (the hand-over): the
/// parent reads it before the outcome. Should the write fail, nothing is
/// noted.
///
/// # Safety
/// Only to be called in the forked child.
#[cfg(linux_strengths)]
unsafe fn note(err_fd: libc::c_int, step: ChildStep, errno: i32) {
    // SAFETY: the same contract.
    unsafe { write_report(err_fd, step as u8, errno) }
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
    /// Only to be called in the forked child.
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

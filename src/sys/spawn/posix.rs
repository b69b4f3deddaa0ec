//! The plain case through `posix_spawnp(3)`: a new group, nothing to hand
//! to the guard, no terminal, no cgroup to join, no limit, a mask the C
//! library can set, no peak resident set to report. `posix_spawn` goes through nix.

use super::super::Pid;
use super::super::sigmask::SigSet;
use super::{Detach, SpawnError, SpawnOptions, Spawned};
use std::ffi::CString;
use std::io;

/// Spawn with `posix_spawnp` if the spawn is the plain case; `None` if it
/// is not, or if `posix_spawnp` failed in a way the fork path may overcome
/// (then nothing of the command has run).
pub(super) fn spawn_if_plain(argv: &[CString], options: &SpawnOptions<'_>) -> Option<Result<Spawned, SpawnError>> {
    // posix_spawn can set a signal to its default, not to "ignored": an
    // ignored SIGCHLD to hand on takes the fork path. So does every system
    // nix offers no posix_spawn for (OpenBSD, DragonFly), joining a cgroup
    // before exec, and a process that must hand itself to the guard before
    // its exec (posix_spawn runs no code of pgrun's in the child).
    #[cfg(any(target_os = "linux", target_os = "freebsd", target_os = "netbsd", target_vendor = "apple"))]
    if options.detach == Detach::Group
        && options.hand_over.is_none()
        && options.pause_in_child.is_none()
        && options.take_terminal.is_none()
        && !options.ignore_sigchld
        // posix_spawn sets the mask through the C library, which leaves out
        // its reserved signals: a caller that blocked them takes the fork path.
        && !options.child_mask.has_reserved()
        && options.join_cgroup.is_none()
        // --stdin-pipe: the fork path points fd 0 at the pipe.
        && options.stdin.is_none()
        // posix_spawn has no way to set a resource limit in the child, and
        // setting it on pgrun around the spawn would bind pgrun too (a
        // lowered hard limit for good): --rlimit takes the fork path.
        && options.rlimits.is_empty()
        // posix_spawn execs the command out of pgrun's memory (the C
        // library's vfork-style clone), and the kernel credits the command
        // with pgrun's peak resident set: a reported peak takes the fork path.
        && !options.own_peak
        && let Some(defaults) = reserved_signal_defaults()
    {
        let spawned = match spawn_posix(argv, &options.child_mask, &defaults, options.stdout_stderr) {
            Ok(spawned) => spawned,
            // pgrun's own mask could not be put back: final, whatever
            // posix_spawn did (no second start by fork).
            Err(e) => return Some(Err(e)),
        };
        match spawned {
            // posix_spawnp returns once the child has exec'd: this is the
            // first moment its pid is known.
            Ok(pid) => {
                if let Some(created) = options.on_created {
                    created(pid);
                }
                return Some(Ok(Spawned { pid, hand_over_failed: None }));
            }
            // Not found is not found either way (the fork path would only
            // search PATH again).
            Err(SpawnError::Exec(e)) if e.raw_os_error() == Some(libc::ENOENT) => {
                return Some(Err(SpawnError::Exec(e)));
            }
            // Any other error may come from a step before the exec, which
            // posix_spawn reports with the same kind of number: its clone3
            // refused (EPERM from an older seccomp profile; glibc falls back
            // to clone on ENOSYS only), setpgid, dup2, the mask. The fork path
            // says which step failed, and starts the command where only
            // clone3 was refused. It also runs a file without a #! line
            // (ENOEXEC) with /bin/sh, as execvp does and posix_spawnp not.
            // Nothing of the command has run: posix_spawn fails only before
            // a successful exec.
            Err(SpawnError::Exec(e) | SpawnError::Setup(e)) => {
                crate::verbose!("posix_spawn failed ({e}); starting the command with fork and exec");
            }
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "freebsd", target_os = "netbsd", target_vendor = "apple")))]
    let _ = (argv, options);
    None
}

/// The common case, through `posix_spawnp(3)`: a vfork-style spawn (no page
/// tables copied, measurably faster at start-up) that sets the group and the
/// mask in the child and reports exec errors itself. It leaves signal
/// dispositions alone (pgrun installs no handlers on Linux, so nothing is
/// caught), except the C library's reserved signals (below), and returns
/// only after the child has exec'd, so the group exists.
///
/// The outer error is final: pgrun's own mask could not be put back, so
/// whatever posix_spawn did (a child that ran is stopped and reaped), no
/// other way of starting the command may be tried. The inner one is
/// posix_spawn's own failure, before any exec: the fork path may try again.
#[cfg(any(target_os = "linux", target_os = "freebsd", target_os = "netbsd", target_vendor = "apple"))]
fn spawn_posix(
    argv: &[CString],
    mask: &SigSet,
    defaults: &SigSet,
    stdout_stderr: Option<[libc::c_int; 2]>,
) -> Result<Result<Pid, SpawnError>, SpawnError> {
    use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawnp};
    let prepare = || -> Result<(PosixSpawnAttr, PosixSpawnFileActions), nix::errno::Errno> {
        let mut attr = PosixSpawnAttr::init()?;
        attr.set_flags(
            PosixSpawnFlags::POSIX_SPAWN_SETPGROUP
                | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
                | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
        )?;
        attr.set_pgroup(nix::unistd::Pid::from_raw(0))?;
        attr.set_sigmask(mask.as_nix())?;
        attr.set_sigdefault(defaults.as_nix())?;
        let mut actions = PosixSpawnFileActions::init()?;
        if let Some(fds) = stdout_stderr {
            for (fd, target) in fds.into_iter().zip([1, 2]) {
                actions.add_dup2(fd, target)?;
            }
        }
        Ok((attr, actions))
    };
    let (attr, actions) = match prepare() {
        Ok(prepared) => prepared,
        Err(e) => return Ok(Err(SpawnError::Setup(e.into()))),
    };
    // The C library blocks every signal around its clone and then restores
    // the mask it saved, without checking that the save worked (a failed
    // one restores garbage, and pgrun would miss SIGCHLD). pgrun puts its
    // own mask back itself, checked.
    let own_mask = match super::super::sigmask::current() {
        Ok(mask) => mask,
        Err(e) => return Ok(Err(SpawnError::Setup(e))),
    };
    let spawned = posix_spawnp(&argv[0], &actions, &attr, argv, &super::environment());
    if let Err(e) = super::super::sigmask::set_mask(&own_mask) {
        let what = format!("cannot restore pgrun's signal mask after posix_spawn: {e}");
        let what = match spawned.map(|pid| super::abandon_child(pid.as_raw())) {
            Ok(Err(e)) => format!("{what} (and the child could not be stopped and reaped: {e})"),
            _ => what,
        };
        return Err(SpawnError::Setup(io::Error::new(e.kind(), what)));
    }
    Ok(match spawned {
        Ok(pid) => Ok(pid.as_raw()),
        Err(e) => Err(SpawnError::from_exec(e.into(), argv)),
    })
}

/// The `POSIX_SPAWN_SETSIGDEF` set for [`spawn_posix`]; `None`: take the
/// fork path instead.
///
/// glibc and musl keep signals 32 up to their `SIGRTMIN` for themselves and
/// set them to "ignored" in every child `posix_spawn` makes, unless they are
/// in this set; "ignored" survives exec, so the command would see them
/// ignored although pgrun's caller ignored nothing. pgrun asks the kernel how
/// it has them (the C library's `sigaction` refuses these numbers) and puts
/// every one it does not ignore in the set: the command gets the default,
/// as after a plain fork and exec. Other systems reserve none.
#[cfg(any(target_os = "linux", target_os = "freebsd", target_os = "netbsd", target_vendor = "apple"))]
fn reserved_signal_defaults() -> Option<SigSet> {
    // Only Linux's C libraries reserve any: elsewhere the set stays empty.
    #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
    let mut set = SigSet::empty();
    #[cfg(target_os = "linux")]
    for signal in 32..libc::SIGRTMIN() {
        if !kernel_ignores(signal)? {
            set.add_reserved(signal);
        }
    }
    Some(set)
}

/// Whether `signal` is ignored, asked of the kernel with a raw
/// `rt_sigaction(2)`; `None` if the kernel does not answer the question as
/// asked (then the caller takes the fork path, which needs no answer).
#[cfg(target_os = "linux")]
fn kernel_ignores(signal: i32) -> Option<bool> {
    // The kernel's struct sigaction: the handler is its first field, after
    // the flags on MIPS. The buffer is larger than any variant of it.
    let mips = cfg!(any(target_arch = "mips", target_arch = "mips64"));
    let sigset_size: libc::size_t = if mips { 16 } else { 8 };
    let mut old = [0usize; 16];
    // SAFETY: a null new action only queries; `old` is writable and larger
    // than the kernel's struct sigaction.
    let rc =
        unsafe { libc::syscall(libc::SYS_rt_sigaction, signal, std::ptr::null::<u8>(), old.as_mut_ptr(), sigset_size) };
    (rc == 0).then(|| old[usize::from(mips)] == libc::SIG_IGN)
}

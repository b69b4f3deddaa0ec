//! Spawning the command, signalling its group, reaping, and asking whether a
//! group or a process still exists.
//!
//! The spawn is written out here rather than through `std::process::Command`,
//! because std resets the signal mask and SIGPIPE's disposition in the child
//! and pgrun's contract is to pass both through exactly as it received them.
//! The common case (a new group, no terminal) is one `posix_spawnp`; the rest
//! (`--setsid`, a terminal hand-off, a script without `#!`) is fork and
//! execvp, where the child makes only async-signal-safe calls on memory
//! prepared before the fork. A `posix_spawnp` that fails for any reason but
//! "not found" is retried on the fork path, whose child says which step
//! failed (a set-up step is pgrun's failure, 125; the exec is the
//! command's, 126/127) and which needs no clone3.
//!
//! `posix_spawnp`, the pipes and prctl go through nix. The forked child stays
//! raw libc (nix's `execvp` allocates its argument array), and so do `kill`
//! and `waitpid`: nix's `Signal` names no real-time signal, which pgrun
//! forwards, and nix's `waitpid` reports an error *after* reaping a child
//! one of them ended, losing its status.

use super::sigmask::SigSet;
use super::{Pid, Signal};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// How the command is detached from pgrun's own group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detach {
    /// `setpgid(0, 0)`: a new process group in pgrun's session.
    Group,
    /// `setsid()`: a new session (and group) with no controlling terminal.
    Session,
}

/// Why a spawn failed, as the child or the parent saw it.
#[derive(Debug)]
pub enum SpawnError {
    /// exec itself failed: the command was not found or not executable.
    Exec(io::Error),
    /// Anything before exec (pipe, fork, setpgid/setsid), and a process that
    /// could not be created at all (EAGAIN, ENOMEM): pgrun's own failure.
    Setup(io::Error),
}

impl SpawnError {
    /// An error `posix_spawnp` or `execvp` returned. They report a failed
    /// fork/clone (process limit, memory) with the same number as a failed
    /// exec; EAGAIN and ENOMEM mean the process could not be made, so they
    /// are set-up failures, not "the command cannot be executed".
    fn from_exec(err: io::Error) -> Self {
        match err.raw_os_error() {
            Some(libc::EAGAIN | libc::ENOMEM) => SpawnError::Setup(err),
            _ => SpawnError::Exec(err),
        }
    }
}

/// What the forked child reports through the exec-status pipe when it
/// fails: the step (one byte) and errno (four). Every step but the exec is a
/// set-up step: its failure is pgrun's, not the command's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum ChildStep {
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

    fn from_byte(byte: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|step| *step as u8 == byte)
    }

    /// What the step does, for the error message.
    fn what(self, detach: Detach) -> &'static str {
        match self {
            ChildStep::JoinCgroup => "joining the cgroup",
            ChildStep::Detach if detach == Detach::Session => "setsid",
            ChildStep::Detach => "setpgid",
            ChildStep::Terminal => "taking the terminal",
            ChildStep::Redirect => "dup2 onto stdout/stderr",
            ChildStep::Sigchld => "ignoring SIGCHLD again",
            ChildStep::SignalMask => "restoring the signal mask",
            ChildStep::Exec => "exec",
        }
    }
}

/// The length of the child's failure message: a step byte and an errno.
const REPORT_LEN: usize = 5;

/// The step byte of a failed `--rlimit`: this plus the setting's slot
/// number (see [`super::rlimit::Settings`]).
const RLIMIT_STEP: u8 = 32;

/// How to start the command.
#[derive(Clone, Copy)]
pub struct SpawnOptions<'a> {
    pub detach: Detach,
    /// The signal mask the command starts with: the one pgrun was given.
    pub child_mask: SigSet,
    /// A terminal whose foreground group the child takes before exec
    /// (decided by [`crate::terminal`]).
    pub take_terminal: Option<libc::c_int>,
    /// Fds that become the command's stdout and stderr (`dup2` onto 1 and
    /// 2; `--max-output`); otherwise both pass through.
    pub stdout_stderr: Option<[libc::c_int; 2]>,
    /// The caller ignored SIGCHLD: pgrun took the default back for itself,
    /// and the command gets "ignored" again before exec.
    pub ignore_sigchld: bool,
    /// An fd of a cgroup's `cgroup.procs`: the child writes `0` to it before
    /// exec, so the command is born in that cgroup (`--contain cgroup`).
    pub join_cgroup: Option<libc::c_int>,
    /// Called with the child's pid the moment it exists (in the parent,
    /// before waiting for the exec's outcome), so the guard can hold it.
    pub on_created: Option<&'a dyn Fn(Pid)>,
    /// `--rlimit`: limits the child sets before exec.
    pub rlimits: super::rlimit::Settings,
}

/// Start the command: fork, detach the child into a new group or session,
/// take the terminal if asked, restore the caller's signal mask, and
/// `execvp(argv[0], argv)`. The plain new-group case goes through
/// `posix_spawnp` instead, which does the same without copying pgrun.
///
/// Returns once the child has exec'd (or failed to), so the new group exists
/// before the caller can publish its id: the child's setpgid/setsid happens
/// before its exec closes the close-on-exec error pipe the parent reads.
pub fn spawn(argv: &[CString], options: &SpawnOptions<'_>) -> Result<Pid, SpawnError> {
    assert!(!argv.is_empty(), "spawn needs a program name");
    // posix_spawn can set a signal to its default, not to "ignored": an
    // ignored SIGCHLD to hand on takes the fork path. So does every system
    // nix offers no posix_spawn for (OpenBSD, DragonFly), and joining a
    // cgroup before exec.
    #[cfg(any(target_os = "linux", target_os = "freebsd", target_os = "netbsd", target_vendor = "apple"))]
    if options.detach == Detach::Group
        && options.take_terminal.is_none()
        && !options.ignore_sigchld
        // posix_spawn sets the mask through the C library, which leaves out
        // its reserved signals: a caller that blocked them takes the fork path.
        && !options.child_mask.has_reserved()
        && options.join_cgroup.is_none()
        // posix_spawn has no way to set a resource limit in the child, and
        // setting it on pgrun around the spawn would bind pgrun too (a
        // lowered hard limit for good): --rlimit takes the fork path.
        && options.rlimits.is_empty()
        && let Some(defaults) = reserved_signal_defaults()
    {
        match spawn_posix(argv, &options.child_mask, &defaults, options.stdout_stderr)? {
            // posix_spawnp returns once the child has exec'd: this is the
            // first moment its pid is known.
            Ok(pid) => {
                if let Some(created) = options.on_created {
                    created(pid);
                }
                return Ok(pid);
            }
            // Not found is not found either way (the fork path would only
            // search PATH again).
            Err(SpawnError::Exec(e)) if e.raw_os_error() == Some(libc::ENOENT) => return Err(SpawnError::Exec(e)),
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
    // Everything the child touches is prepared before the fork.
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let (read_end, write_end) = cloexec_pipe().map_err(SpawnError::Setup)?;
    let options = *options;

    // SAFETY: pgrun is single-threaded when it forks, so the child may call
    // any async-signal-safe function. `child_after_fork` makes only such
    // calls and never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(SpawnError::Setup(io::Error::last_os_error()));
    }
    if pid == 0 {
        child_after_fork(&ptrs, &options, write_end.as_raw_fd());
    }
    drop(write_end);
    if let Some(created) = options.on_created {
        created(pid);
    }

    // Only EOF with no byte at all means the exec worked (the pipe is
    // close-on-exec). A whole message says which step failed; anything
    // else (a message cut short, a failed read) leaves pgrun not knowing
    // what the child became: it is killed and reaped, and the start failed.
    let mut report = [0u8; REPORT_LEN];
    let got = read_full(&read_end, &mut report);
    drop(read_end);
    let unknown = |what: String| {
        let abandoned = abandon_child(pid);
        let what = match abandoned {
            Ok(()) => what,
            Err(e) => format!("{what} (and the child {pid} could not be stopped and reaped: {e})"),
        };
        Err(SpawnError::Setup(io::Error::other(what)))
    };
    match got {
        Ok(0) => Ok(pid),
        Ok(REPORT_LEN) => {
            let errno = i32::from_ne_bytes([report[1], report[2], report[3], report[4]]);
            if let Some(kind) =
                report[0].checked_sub(RLIMIT_STEP).and_then(|i| super::rlimit::Settings::kind_at(i.into()))
            {
                let err = io::Error::from_raw_os_error(errno);
                let err = match reap_pid(pid) {
                    Ok(()) => err,
                    Err(e) => {
                        io::Error::new(err.kind(), format!("{err} (and the child {pid} could not be reaped: {e})"))
                    }
                };
                return Err(SpawnError::Setup(io::Error::new(
                    err.kind(),
                    format!("setting --rlimit {}: {err}", kind.name()),
                )));
            }
            let Some(step) = ChildStep::from_byte(report[0]) else {
                return unknown(format!("the child reported an unknown step {} (errno {errno})", report[0]));
            };
            // The child failed and is about to _exit: reap it so no zombie
            // is left behind.
            let reaped = reap_pid(pid);
            let err = io::Error::from_raw_os_error(errno);
            let err = match reaped {
                Ok(()) => err,
                Err(e) => io::Error::new(err.kind(), format!("{err} (and the child {pid} could not be reaped: {e})")),
            };
            Err(match step {
                ChildStep::Exec => SpawnError::from_exec(err),
                step => SpawnError::Setup(io::Error::new(err.kind(), format!("{}: {err}", step.what(options.detach)))),
            })
        }
        Ok(n) => unknown(format!("the child's exec-status message was cut short ({n} of {REPORT_LEN} bytes)")),
        Err(e) => unknown(format!("cannot read whether the command was executed: {e}")),
    }
}

/// Kill the forked child, which may or may not have exec'd and made its
/// group, and reap it. Its group id is its pid, which no other group can
/// hold while the child is alive and unreaped; a group that is not there
/// (ESRCH) is the child before its setpgid.
pub fn abandon_child(pid: Pid) -> io::Result<()> {
    signal_raw(-pid, libc::SIGKILL)?;
    signal_raw(pid, libc::SIGKILL)?;
    reap_pid(pid)
}

/// `waitpid(pid, 0)`, retried on EINTR: reap a child known to be ending.
fn reap_pid(pid: Pid) -> io::Result<()> {
    loop {
        match nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
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
    let own_mask = match super::sigmask::current() {
        Ok(mask) => mask,
        Err(e) => return Ok(Err(SpawnError::Setup(e))),
    };
    let spawned = posix_spawnp(&argv[0], &actions, &attr, argv, &environment());
    if let Err(e) = super::sigmask::set_mask(&own_mask) {
        let what = format!("cannot restore pgrun's signal mask after posix_spawn: {e}");
        let what = match spawned.map(|pid| abandon_child(pid.as_raw())) {
            Ok(Err(e)) => format!("{what} (and the child could not be stopped and reaped: {e})"),
            _ => what,
        };
        return Err(SpawnError::Setup(io::Error::new(e.kind(), what)));
    }
    Ok(match spawned {
        Ok(pid) => Ok(pid.as_raw()),
        Err(e) => Err(SpawnError::from_exec(e.into())),
    })
}

/// pgrun's environment exactly as the C library holds it (nix's spawn wants
/// it as a slice): every entry byte for byte, including any without `=`,
/// which `std::env::vars_os` would drop.
#[cfg(any(target_os = "linux", target_os = "freebsd", target_os = "netbsd", target_vendor = "apple"))]
fn environment<'a>() -> Vec<&'a std::ffi::CStr> {
    // SAFETY: this is the C library's `char **environ`, declared as POSIX
    // declares it.
    unsafe extern "C" {
        static environ: *const *const libc::c_char;
    }
    let mut env = Vec::new();
    // SAFETY: environ is null or a NULL-terminated array of NUL-terminated
    // strings. pgrun is single-threaded and does not change its environment
    // while the slice lives (only until the spawn returns).
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            env.push(std::ffi::CStr::from_ptr(*entry));
            entry = entry.add(1);
        }
    }
    env
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

/// The child's side of [`spawn`]. Only async-signal-safe calls; no allocation.
fn child_after_fork(argv: &[*const libc::c_char], options: &SpawnOptions, err_fd: libc::c_int) -> ! {
    // SAFETY (whole function): every call below is async-signal-safe and works
    // on memory that was fully prepared before the fork; `argv` is a
    // NULL-terminated array of valid C strings.
    unsafe {
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
            && super::terminal::take_from(tty, parent_group).is_err()
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
    let e = nix::errno::Errno::last_raw().to_ne_bytes();
    let buf: [u8; REPORT_LEN] = [step, e[0], e[1], e[2], e[3]];
    // SAFETY: write and _exit are async-signal-safe; the pointer and length
    // describe a stack buffer. (Raw libc: the fd is a plain integer.)
    unsafe {
        while libc::write(err_fd, buf.as_ptr().cast(), buf.len()) < 0 && nix::errno::Errno::last_raw() == libc::EINTR {}
        libc::_exit(127);
    }
}

/// `pipe2(O_CLOEXEC)`, or where there is none (macOS), `pipe(2)` then
/// `FD_CLOEXEC` on both ends: pgrun is single-threaded, so setting the flag
/// right after pipe leaves no window for another thread's fork.
pub fn cloexec_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    #[cfg(not(target_vendor = "apple"))]
    return Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?);
    #[cfg(target_vendor = "apple")]
    {
        use nix::fcntl::{FcntlArg, FdFlag, fcntl};
        let (r, w) = nix::unistd::pipe()?;
        fcntl(&r, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
        fcntl(&w, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
        Ok((r, w))
    }
}

/// Read until `buf` is full or EOF; returns the byte count.
fn read_full(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match nix::unistd::read(fd, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(got)
}

/// `kill(-pgid, signal)`. Returns `Ok(false)` if the group no longer exists
/// (ESRCH): "already gone" is not an error.
pub fn signal_group(pgid: Pid, signal: Signal) -> io::Result<bool> {
    assert!(pgid > 1, "refusing to signal process group {pgid}");
    signal_raw(-pgid, signal.0)
}

/// `kill(pid, signal)` for one process; `Ok(false)` on ESRCH.
pub fn signal_process(pid: Pid, signal: Signal) -> io::Result<bool> {
    assert!(pid > 0, "refusing to signal pid {pid}");
    signal_raw(pid, signal.0)
}

fn signal_raw(target: Pid, signal: i32) -> io::Result<bool> {
    // SAFETY: kill takes plain integers; the callers above rule out the
    // broadcast targets 0 and -1.
    if unsafe { libc::kill(target, signal) } == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) { Ok(false) } else { Err(err) }
}

/// Whether any process (zombies included) is left in group `pgid`:
/// `kill(-pgid, 0)` succeeding or failing with EPERM means a member exists;
/// only ESRCH means the group is empty.
pub fn group_exists(pgid: Pid) -> bool {
    assert!(pgid > 1, "refusing to probe process group {pgid}");
    signal_raw(-pgid, 0).unwrap_or(true)
}

/// How a reaped child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildStatus {
    Exited(i32),
    Signaled(i32),
}

/// What a reaped child used: its own CPU time and peak resident set and
/// those of every descendant it reaped itself, or that a reaped descendant
/// of it reaped (the `RUSAGE_CHILDREN` rule), as `wait4(2)` reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChildUsage {
    pub user: std::time::Duration,
    pub system: std::time::Duration,
    /// The largest peak resident set of any one of those processes, in KiB.
    pub max_rss_kb: u64,
}

impl ChildUsage {
    /// Add another reaped child's usage: CPU times add up, the peak is the
    /// larger one.
    pub fn add(&mut self, other: ChildUsage) {
        self.user = self.user.saturating_add(other.user);
        self.system = self.system.saturating_add(other.system);
        self.max_rss_kb = self.max_rss_kb.max(other.max_rss_kb);
    }

    fn from_rusage(ru: &libc::rusage) -> Self {
        let time = |tv: libc::timeval| {
            std::time::Duration::from_secs(u64::try_from(tv.tv_sec).unwrap_or(0))
                + std::time::Duration::from_micros(u64::try_from(tv.tv_usec).unwrap_or(0))
        };
        let max_rss = u64::try_from(ru.ru_maxrss).unwrap_or(0);
        // ru_maxrss is in KiB, except on Apple's systems: bytes.
        let max_rss_kb = if cfg!(target_vendor = "apple") { max_rss / 1024 } else { max_rss };
        ChildUsage { user: time(ru.ru_utime), system: time(ru.ru_stime), max_rss_kb }
    }
}

/// The result of one non-blocking `wait4(-1, WNOHANG | WUNTRACED)`.
pub enum Reaped {
    /// A child ended and has been reaped, with what it used.
    Child(Pid, ChildStatus, ChildUsage),
    /// A child was stopped by this signal (it is still there).
    Stopped(Pid, i32),
    /// Children exist but none has changed state.
    NoneReady,
    /// pgrun has no children at all (ECHILD).
    NoChildren,
}

/// `wait4(-1, &status, WNOHANG | WUNTRACED, &rusage)`: reap one child
/// that has ended, with its resource usage, or report one that has
/// stopped. (`wait4` is `waitpid` with the usage the kernel has anyway.)
pub fn reap_one() -> io::Result<Reaped> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: a zeroed rusage is a valid buffer for wait4 to fill.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `status` and `usage` are writable; WNOHANG makes the call
        // non-blocking.
        let pid = unsafe { libc::wait4(-1, &mut status, libc::WNOHANG | libc::WUNTRACED, &mut usage) };
        if pid > 0 {
            if libc::WIFSTOPPED(status) {
                return Ok(Reaped::Stopped(pid, libc::WSTOPSIG(status)));
            }
            let how = if libc::WIFSIGNALED(status) {
                ChildStatus::Signaled(libc::WTERMSIG(status))
            } else {
                ChildStatus::Exited(libc::WEXITSTATUS(status))
            };
            return Ok(Reaped::Child(pid, how, ChildUsage::from_rusage(&usage)));
        }
        if pid == 0 {
            return Ok(Reaped::NoneReady);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ECHILD) => return Ok(Reaped::NoChildren),
            _ => return Err(err),
        }
    }
}

/// Whether `pid` is still a child of pgrun that pgrun has not reaped:
/// false only where that is proven. `waitid(P_PID, pid, WEXITED | WNOHANG
/// | WNOWAIT)`, which reaps nothing, saying ECHILD is checked once more,
/// against `/proc/PID/stat` where there is a `/proc` (a process that is
/// gone, or whose parent is another, is not pgrun's child; one whose parent
/// is pgrun is, whatever waitid said), else by asking waitid again. Any
/// other error is no proof: true.
pub fn is_child(pid: Pid) -> bool {
    if waitid_has_child(pid) {
        return true;
    }
    #[cfg(linux_strengths)]
    if let Some(ours) = super::proc::is_child_of_self(pid) {
        return ours;
    }
    waitid_has_child(pid)
}

/// Whether child `pid` has exited and waits to be reaped, without reaping
/// it (`waitid(P_PID, pid, WEXITED | WNOHANG | WNOWAIT)`, retried on EINTR).
/// Any failure is no proof of an exit: false.
pub fn exited_unreaped(pid: Pid) -> bool {
    loop {
        // SAFETY: a zeroed siginfo_t is a valid buffer for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid with a valid siginfo pointer; WNOWAIT leaves the
        // child waitable.
        let rc = unsafe {
            libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
        };
        if rc == 0 {
            // SAFETY: waitid filled `info` (si_pid stays 0 if no child
            // has exited); reading si_pid of a SIGCHLD siginfo is valid.
            return unsafe { info.si_pid() } == pid;
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return false;
        }
    }
}

/// One `waitid(P_PID, pid, WEXITED | WNOHANG | WNOWAIT)`, retried on
/// EINTR: false only on ECHILD.
fn waitid_has_child(pid: Pid) -> bool {
    loop {
        // SAFETY: a zeroed siginfo_t is a valid buffer for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid with a valid siginfo pointer; WNOWAIT leaves the
        // child waitable.
        let rc = unsafe {
            libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
        };
        if rc == 0 {
            return true;
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ECHILD) => return false,
            _ => return true,
        }
    }
}

/// Whether a running pgrun of this build is a child subreaper (see
/// [`become_subreaper`]; it refuses to run otherwise): while it lives,
/// every process of its run is one of its descendants.
pub const RUN_PGRUN_IS_SUBREAPER: bool = cfg!(linux_strengths);

/// `prctl(PR_SET_CHILD_SUBREAPER)`: orphaned descendants are reparented to
/// pgrun instead of init, so pgrun can reap their zombies and hears of their
/// deaths. Linux only; elsewhere this does nothing and returns false.
pub fn become_subreaper() -> io::Result<bool> {
    #[cfg(linux_strengths)]
    {
        nix::sys::prctl::set_child_subreaper(true)?;
        Ok(true)
    }
    #[cfg(not(linux_strengths))]
    Ok(false)
}

/// How many processes are in group `pgid`, counted from `/proc` (Linux only;
/// `None` elsewhere or if `/proc` is not mounted).
pub fn count_group_members(pgid: Pid) -> Option<usize> {
    group_census(pgid).map(|c| c.members)
}

/// [`count_group_members`], or where pgrun cannot count, the lower bound
/// that `kill(-pgid, 0)` gives: 1 if the group exists, else 0.
pub fn count_group_members_at_least(pgid: Pid) -> usize {
    count_group_members(pgid).unwrap_or_else(|| usize::from(group_exists(pgid)))
}

/// The members of a process group, and how many of them are zombies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    pub members: usize,
    pub zombies: usize,
    /// Zombies whose parent is the caller: it can reap them itself.
    pub own_zombies: usize,
}

impl Census {
    /// Whether the group holds nothing but zombies that the caller cannot
    /// reap (their parent is someone else): how many, if so.
    pub fn only_foreign_zombies(&self) -> Option<usize> {
        (self.members > 0 && self.zombies == self.members && self.own_zombies == 0).then_some(self.zombies)
    }
}

/// Count group `pgid`'s members from `/proc` (Linux only; `None` elsewhere
/// or if `/proc` is not mounted).
pub fn group_census(pgid: Pid) -> Option<Census> {
    #[cfg(linux_strengths)]
    {
        let pids = super::proc::pids().ok()?;
        let me = super::getpid();
        let mut census = Census::default();
        for pid in pids {
            let Some(stat) = super::proc::stat(pid) else { continue };
            if stat.pgrp == pgid {
                census.members += 1;
                census.zombies += usize::from(stat.state == b'Z');
                census.own_zombies += usize::from(stat.state == b'Z' && stat.ppid == me);
            }
        }
        Some(census)
    }
    #[cfg(not(linux_strengths))]
    {
        let _ = pgid;
        None
    }
}

/// A handle that becomes readable when a process exits: a pidfd on Linux
/// (`pidfd_open(2)`); `None` where the platform has none or the process is
/// already gone.
pub fn pidfd_open(pid: Pid) -> Option<OwnedFd> {
    #[cfg(linux_strengths)]
    {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            return None;
        }
        // SAFETY: the kernel just gave us this fd; pidfds are close-on-exec.
        Some(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
    }
    #[cfg(not(linux_strengths))]
    {
        let _ = pid;
        None
    }
}

/// Whether the process a pidfd refers to has exited (a pidfd becomes
/// readable then; a zombie has exited).
/// A failed poll is no proof of an exit: false, and the caller asks again.
#[cfg(linux_strengths)]
pub fn pidfd_exited(pidfd: std::os::fd::BorrowedFd<'_>) -> bool {
    super::wait_readable(pidfd, Some(std::time::Duration::ZERO)).unwrap_or(false)
}

/// `pidfd_send_signal(2)`: signal the process a pidfd refers to. Unlike
/// `kill(pid)`, this can never reach a process that reused the pid.
/// `Ok(false)` if the process has already exited (ESRCH).
#[cfg(linux_strengths)]
pub fn pidfd_signal(pidfd: std::os::fd::BorrowedFd<'_>, signal: Signal) -> io::Result<bool> {
    // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
    let rc = unsafe {
        libc::syscall(libc::SYS_pidfd_send_signal, pidfd.as_raw_fd(), signal.0, std::ptr::null::<libc::siginfo_t>(), 0)
    };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) { Ok(false) } else { Err(err) }
}

/// The effective uid process `pid` runs as, from `/proc/PID/status` (Linux
/// only; `None` elsewhere, or if the process is gone or hidden).
pub fn effective_uid(pid: Pid) -> Option<u32> {
    #[cfg(linux_strengths)]
    {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
        line.split_ascii_whitespace().nth(1)?.parse().ok()
    }
    #[cfg(not(linux_strengths))]
    {
        let _ = pid;
        None
    }
}

/// How many PID namespaces, from the one `/proc` belongs to down, number
/// process `pid` (the entries of its `NSpid` line, readable by anyone).
#[cfg(target_os = "linux")]
fn nspid_depth(pid: &str) -> Option<usize> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    Some(line.split_ascii_whitespace().count())
}

/// Whether process `pid` lives in the caller's PID namespace, so that the
/// numbers it sees (its group id) name the same processes here. Compares
/// `/proc/self/ns/pid` with `/proc/PID/ns/pid`; where that cannot be read
/// the answer is `false`, the safe side. Off Linux there are no PID
/// namespaces: always `true`.
pub fn in_own_pid_namespace(pid: Pid) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let ns = |p: &str| std::fs::metadata(format!("/proc/{p}/ns/pid")).map(|m| (m.dev(), m.ino()));
        match (ns("self"), ns(&pid.to_string())) {
            (Ok(own), Ok(theirs)) => own == theirs,
            // No /proc at all: nothing can tell namespaces apart, and a
            // system without /proc has none to offer.
            (Err(_), Err(_)) if std::fs::metadata("/proc/self").is_err() => true,
            // Another user's process: its ns link is not ours to read, but
            // its NSpid line is. One entry each means both live in the
            // namespace this /proc belongs to, so in the same one.
            _ => nspid_depth("self") == Some(1) && nspid_depth(&pid.to_string()) == Some(1),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        true
    }
}

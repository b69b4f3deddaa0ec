//! Spawning the command: its process is created, detached into a new group
//! or session, handed to the guard, set up, and exec'd.
//!
//! The spawn is written out here rather than through `std::process::Command`,
//! because std resets the signal mask and SIGPIPE's disposition in the child
//! and pgrun's contract is to pass both through exactly as it received them.
//!
//! Three ways to create the process, one set of steps in it (`child`):
//! - On Linux, where the command's peak resident set is not reported,
//!   `clone(CLONE_VM | CLONE_VFORK)` on a stack of its own
//!   ([`super::platform::shared_spawn`]): no page tables copied, nothing
//!   written copy-on-write, pgrun waits until the exec (as fast as
//!   `posix_spawn`, which does the same). A refused clone (a seccomp
//!   filter) falls back to fork.
//! - `fork` elsewhere, and wherever `--report` asks for the command's peak.
//!   The kernel keeps the high-water mark of the memory a process execs
//!   out of in that process's `ru_maxrss` (`exec_mmap`), so a command
//!   exec'd out of pgrun's own memory would be credited with pgrun's whole
//!   peak (`/bin/true` "used" 1.7 MB, pgrun's release build's resident
//!   set). A forked child execs out of a copy that holds only the pages
//!   pgrun had written and the code the child touched, as a shell's or
//!   `/usr/bin/time`'s child does. It costs about 0.15 ms a start more
//!   than the shared clone (bench/README.md).
//!
//!   In both, the child runs `child`'s steps: raw, async-signal-safe calls
//!   on memory prepared before it exists, writing nothing of pgrun's but
//!   `errno` and the shared exec-status page. Its first step hands the
//!   process to the guard (a pidfd of itself, over the guard's channel),
//!   before its exec: a pgrun SIGKILLed at any moment of the spawn leaves
//!   nothing the guard does not hold.
//! - `posix_spawnp` (`posix`), where nothing is handed over, the plain
//!   new-group case needs none of the other steps, and the command's peak
//!   resident set is not reported; a failure of it for any reason but "not
//!   found" is retried on the fork path, which says which step failed.
//!
//! What the child says goes to the exec-status page (`status_page`), a
//! store into memory shared with pgrun that nothing can make fail; the
//! close-on-exec exec-status pipe only wakes pgrun once the child has
//! exec'd or is gone. A set-up step's failure is pgrun's, 125; the exec's
//! is the command's, 126/127; a failed hand-over is said too, without
//! ending the child; a child gone before its exec without a word is
//! pgrun's failure to create the process.
//!
//! The pipes go through nix. The child stays raw libc (nix's `execvp`
//! allocates its argument array); so do `waitpid` (nix's reports an error
//! *after* reaping a child one of whose real-time signals ended it, losing
//! its status) and `mmap`.

mod child;
mod posix;
mod status_page;

use super::Pid;
use super::sigmask::SigSet;
pub use child::ChildPause;
use child::{ChildStep, RLIMIT_STEP};
use status_page::StatusPage;
use std::ffi::CString;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

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
    /// An error `posix_spawnp` or `execvp` of `argv` returned. They report
    /// a failed fork/clone (process limit, memory) with the same number as
    /// a failed exec; EAGAIN and ENOMEM mean the process could not be made,
    /// so they are set-up failures, not "the command cannot be executed".
    /// So is E2BIG for arguments and environment that no exec refuses as
    /// too long: Linux says it too when it cannot get the pages to copy
    /// them into (a `--memory-max` leaf that refuses them).
    fn from_exec(err: io::Error, argv: &[CString]) -> Self {
        match err.raw_os_error() {
            Some(libc::EAGAIN | libc::ENOMEM) => SpawnError::Setup(err),
            Some(libc::E2BIG) if exec_bytes(argv) < never_too_long() => {
                let what = format!(
                    "exec: out of memory (it said \"{err}\" for {} bytes of arguments and environment, \
                     which no exec refuses as too long)",
                    exec_bytes(argv)
                );
                SpawnError::Setup(io::Error::new(err.kind(), what))
            }
            _ => SpawnError::Exec(err),
        }
    }
}

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
    /// An fd that becomes the command's stdin (`dup2` onto 0;
    /// `--stdin-pipe`); otherwise pgrun's own passes through.
    pub stdin: Option<libc::c_int>,
    /// The caller ignored SIGCHLD: pgrun took the default back for itself,
    /// and the command gets "ignored" again before exec.
    pub ignore_sigchld: bool,
    /// An fd of a cgroup's `cgroup.procs`: the child writes `0` to it before
    /// exec, so the command is born in that cgroup (`--contain cgroup`).
    pub join_cgroup: Option<libc::c_int>,
    /// Called with the child's pid the moment pgrun has it (in the parent,
    /// before it reads the exec's outcome).
    pub on_created: Option<&'a dyn Fn(Pid)>,
    /// `--rlimit`: limits the child sets before exec.
    pub rlimits: super::rlimit::Settings,
    /// The guard's channel, as [`super::guard_channel::for_the_child`]
    /// gives it: the child hands itself over it first thing, before
    /// anything else and before its exec, so that the guard holds the
    /// command whenever pgrun dies.
    pub hand_over: Option<BorrowedFd<'a>>,
    /// The command's peak resident set is reported (`--report`): it must be
    /// its own, so the process is made by fork, never by `posix_spawn`,
    /// which execs it out of pgrun's memory (see the module doc).
    pub own_peak: bool,
    /// Test-only: where the child pauses first thing (see
    /// [`crate::test_hook::child_pause`]).
    pub pause_in_child: Option<&'a ChildPause>,
}

/// The command's process, started.
#[derive(Debug)]
pub struct Spawned {
    pub pid: Pid,
    /// Why the process could not hand itself to the guard, if it was asked
    /// to and could not: the caller does what it can instead.
    pub hand_over_failed: Option<io::Error>,
}

/// Start the command: create its process, hand it to the guard, detach it
/// into a new group or session, take the terminal if asked, set the
/// limits, restore the caller's signal mask, and `execvp(argv[0], argv)`.
///
/// Returns once the child has exec'd (or failed to), so the new group exists
/// before the caller can publish its id: the child's setpgid/setsid happens
/// before its exec closes the close-on-exec pipe the parent waits on.
pub fn spawn(argv: &[CString], options: &SpawnOptions<'_>) -> Result<Spawned, SpawnError> {
    assert!(!argv.is_empty(), "spawn needs a program name");
    if let Some(spawned) = posix::spawn_if_plain(argv, options) {
        return spawned;
    }
    // Everything the child touches is prepared before it exists.
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let status = StatusPage::new().map_err(SpawnError::Setup)?;
    let (read_end, write_end) = cloexec_pipe().map_err(SpawnError::Setup)?;
    let plan = child::Plan { argv: &ptrs, options, status: &status };
    let pid = create(&plan).map_err(SpawnError::Setup)?;
    drop(write_end);
    if let Some(created) = options.on_created {
        created(pid);
    }
    outcome(pid, read_end, &status, argv, options)
}

/// Create the child, which runs `child::run` with `plan`: a clone sharing
/// pgrun's memory until its exec where there is one and the command's peak
/// is not reported (falling back to fork if the clone is refused), else a
/// fork. Returns the child's pid.
fn create(plan: &child::Plan<'_>) -> io::Result<Pid> {
    if !plan.options.own_peak {
        match clone_sharing_memory(plan) {
            Ok(pid) => return Ok(pid),
            // Out of processes or memory: fork would fail alike.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::ENOMEM)) => return Err(e),
            // The portable path: there is none.
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {}
            Err(e) => crate::verbose!("clone(CLONE_VM | CLONE_VFORK) failed ({e}); starting the command with fork"),
        }
    }
    fork_child(plan)
}

/// The child in a clone that shares pgrun's memory until its exec (see
/// [`super::platform::shared_spawn`]); returns once it has exec'd or exited.
fn clone_sharing_memory(plan: &child::Plan<'_>) -> io::Result<Pid> {
    extern "C" fn entry(plan: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `plan` is the `&child::Plan` passed to clone below; pgrun
        // waits (vfork) until this child has exec'd or exited, so it
        // outlives every use here.
        child::run(unsafe { &*plan.cast::<child::Plan<'_>>() })
    }
    // Room for the child's own frames and the C library's `execvp`, which
    // builds each candidate path (at most PATH_MAX plus NAME_MAX bytes) and,
    // for a script without `#!`, a copy of the arguments (`argc` pointers)
    // on the stack; pages never touched cost nothing.
    let stack_len = 256 * 1024 + 2 * plan.argv.len() * size_of::<usize>();
    // SAFETY: `child::run` makes only raw async-signal-safe calls on
    // memory prepared before this call, writes nothing of pgrun's but
    // `errno` and the shared exec-status page, and never returns (it
    // execs or `_exit`s); `plan` lives until this call returns; pgrun
    // installs no signal handler on Linux that could run on the child's
    // stack (its signals are blocked, and taken by signalfd).
    unsafe {
        super::platform::shared_spawn::clone_vfork(entry, (plan as *const child::Plan<'_>).cast_mut().cast(), stack_len)
    }
}

/// Fork the child, which runs `child::run` with `plan`; returns its pid.
fn fork_child(plan: &child::Plan<'_>) -> io::Result<Pid> {
    // SAFETY: pgrun is single-threaded when it forks, so the child may call
    // any async-signal-safe function. `child::run` makes only such calls
    // and never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        child::run(plan);
    }
    Ok(pid)
}

/// What became of child `pid`, once its exec-status pipe is at its end
/// (the pipe is close-on-exec: the child exec'd, or is gone), from what the
/// child said on its exec-status page. The pipe carries no byte: anything
/// read from it, or a failed read, leaves pgrun not knowing what the child
/// became, and so does a step the child named that pgrun does not know:
/// the child is killed and reaped, and the start failed.
fn outcome(
    pid: Pid,
    read_end: OwnedFd,
    status: &StatusPage,
    argv: &[CString],
    options: &SpawnOptions<'_>,
) -> Result<Spawned, SpawnError> {
    let mut stray = [0u8; 1];
    let got = read_full(&read_end, &mut stray);
    drop(read_end);
    let unknown = |what: String| {
        let what = match abandon_child(pid) {
            Ok(()) => what,
            Err(e) => format!("{what} (and the child {pid} could not be stopped and reaped: {e})"),
        };
        Err(SpawnError::Setup(io::Error::other(what)))
    };
    match got {
        Ok(0) => {}
        Ok(_) => return unknown("the child wrote to its exec-status pipe, which carries nothing".to_string()),
        Err(e) => return unknown(format!("cannot read whether the command was executed: {e}")),
    }
    let said = status.said();
    let Some((step, errno)) = said.failed else {
        if said.reached_exec {
            let hand_over_failed = said.hand_over_failed.map(io::Error::from_raw_os_error);
            return Ok(Spawned { pid, hand_over_failed });
        }
        // Gone before its exec, without a word: killed (by an out-of-memory
        // kill where a cgroup's limit refused it a page, say), or dead of a
        // fault. Its end is pgrun's failure to create the process.
        let why = match reap_status(pid) {
            Ok(ended) => format!("its process {pid} {ended} before its exec"),
            Err(e) => format!("its process {pid} ended before its exec (and could not be reaped: {e})"),
        };
        return Err(SpawnError::Setup(io::Error::other(why)));
    };
    let Some(failed) = Failed::from_byte(step) else {
        return unknown(format!("the child reported an unknown step {step} (errno {errno})"));
    };
    // The child failed and is about to _exit: reap it so no zombie is left.
    let err = io::Error::from_raw_os_error(errno);
    let err = match reap_pid(pid) {
        Ok(()) => err,
        Err(e) => io::Error::new(err.kind(), format!("{err} (and the child {pid} could not be reaped: {e})")),
    };
    Err(match failed {
        Failed::Step(ChildStep::Exec) => SpawnError::from_exec(err, argv),
        Failed::Step(step) => {
            SpawnError::Setup(io::Error::new(err.kind(), format!("{}: {err}", step.what(options.detach))))
        }
        Failed::Rlimit(kind) => {
            SpawnError::Setup(io::Error::new(err.kind(), format!("setting --rlimit {}: {err}", kind.name())))
        }
    })
}

/// The step a child said failed.
enum Failed {
    Step(ChildStep),
    Rlimit(super::rlimit::Kind),
}

impl Failed {
    fn from_byte(step: u8) -> Option<Failed> {
        match step.checked_sub(RLIMIT_STEP) {
            Some(slot) => super::rlimit::Settings::kind_at(slot.into()).map(Failed::Rlimit),
            None => ChildStep::from_byte(step).map(Failed::Step),
        }
    }
}

/// The bytes an exec of `argv` with pgrun's environment copies: each
/// string with its NUL, and its pointer.
fn exec_bytes(argv: &[CString]) -> usize {
    let args = argv.iter().map(|a| a.as_bytes_with_nul().len());
    let env = environment().into_iter().map(|e| e.to_bytes_with_nul().len());
    args.chain(env).map(|n| n + size_of::<*const libc::c_char>()).sum()
}

/// A size of arguments and environment (see [`exec_bytes`]) below which
/// no exec refuses them as too long: the system's `ARG_MAX`, capped at 128
/// KiB, the least Linux ever allows (`ARG_MAX` of `linux/limits.h`: the
/// kernel allows the larger of it and a quarter of the stack limit, at
/// most 6 MiB, while `sysconf` says the quarter without that cap), less
/// what an exec copies besides (the program's path, at most `PATH_MAX`,
/// and a script's `#!` line, at most 256 bytes).
fn never_too_long() -> usize {
    // SAFETY: sysconf takes a plain integer; -1 (no answer) is below zero.
    let arg_max = unsafe { libc::sysconf(libc::_SC_ARG_MAX) };
    let arg_max = usize::try_from(arg_max).unwrap_or(0).min(128 * 1024);
    arg_max.saturating_sub(libc::PATH_MAX as usize + 256)
}

/// pgrun's environment exactly as the C library holds it (nix's spawn wants
/// it as a slice; [`exec_bytes`] counts it): every entry byte for byte,
/// including any without `=`, which `std::env::vars_os` would drop.
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

/// Kill the forked child, which may or may not have exec'd and made its
/// group, and reap it. Its group id is its pid, which no other group can
/// hold while the child is alive and unreaped; a group that is not there
/// (ESRCH) is the child before its setpgid.
pub fn abandon_child(pid: Pid) -> io::Result<()> {
    super::process::signal_raw(-pid, libc::SIGKILL)?;
    super::process::signal_raw(pid, libc::SIGKILL)?;
    reap_pid(pid)
}

/// Reap a child known to be ending (see [`reap_status`]).
fn reap_pid(pid: Pid) -> io::Result<()> {
    reap_status(pid).map(drop)
}

/// Reap a child known to be ending (`waitpid(pid, 0)`, raw: nix's would
/// lose the status of a child a real-time signal ended), retried on EINTR,
/// and say how it ended: "was killed by SIGKILL", "exited with status 3".
fn reap_status(pid: Pid) -> io::Result<String> {
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is writable; `pid` is pgrun's unreaped child.
    while unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
    if !libc::WIFSIGNALED(status) {
        return Ok(format!("exited with status {}", libc::WEXITSTATUS(status)));
    }
    let signal = libc::WTERMSIG(status);
    Ok(match super::signals::names().find(|(_, n)| *n == signal) {
        Some((name, _)) => format!("was killed by SIG{name}"),
        None => format!("was killed by signal {signal}"),
    })
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

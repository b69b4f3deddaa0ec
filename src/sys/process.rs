//! Signalling processes and groups, reaping pgrun's children, and asking
//! whether a group or a child still exists.
//!
//! Raw libc for `kill` and the waits: nix's `Signal` names no real-time
//! signal, which pgrun forwards, and nix's `waitpid` reports an error
//! *after* reaping a child one of them ended, losing its status.
//! (Spawning the command: [`super::spawn`]; what `/proc` says about groups:
//! [`super::proc`]; pidfds: [`super::pidfd`]. Being a child subreaper is
//! Linux's: `linux/process.rs`, `posix/process.rs`.)

use super::ids::Pid;
pub use super::platform::process::{RUN_PGRUN_IS_SUBREAPER, become_subreaper};
use super::signals::Signal;
use std::io;

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

pub(super) fn signal_raw(target: Pid, signal: i32) -> io::Result<bool> {
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

/// How many processes are in group `pgid`: counted from `/proc` where pgrun
/// can ([`super::proc::count_group_members`], a read of every process on
/// the machine: never on a stop's way), else the lower bound that
/// `kill(-pgid, 0)` gives: 1 if the group exists, else 0.
pub fn count_group_members_at_least(pgid: Pid) -> usize {
    super::proc::count_group_members(pgid).unwrap_or_else(|| usize::from(group_exists(pgid)))
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
/// against `/proc/PID/stat` where pgrun asks `/proc` (Linux; a process
/// that is gone, or whose parent is another, is not pgrun's child; one
/// whose parent is pgrun is, whatever waitid said), else by asking waitid
/// again. Any other error is no proof: true.
pub fn is_child(pid: Pid) -> bool {
    if waitid_has_child(pid) {
        return true;
    }
    if super::platform::proc::ASKS_PROC
        && let Some(ours) = super::proc::is_child_of_self(pid)
    {
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

//! Tracing pgrun: strace with injected syscall failures, a pgrun stopped
//! by strace with a file open, and a process held in its exit by ptrace.

use super::*;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// `pgrun ARGS...` under `strace -f -qq -e inject=SPEC` (e.g.
/// `unlink:error=EIO:when=1`), so a test can make one syscall fail; with
/// `only_path`, only the calls on that path (`strace -P`). Fails the test
/// with a clear message if strace is not installed.
pub fn pgrun_injected(inject: &str, only_path: Option<&Path>, args: &[&str]) -> Command {
    let found = Command::new("strace").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(found.is_ok_and(|s| s.success()), "this test needs strace (to inject {inject}); install it");
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-o", "/dev/null", "-e", &format!("inject={inject}")]);
    if let Some(path) = only_path {
        cmd.arg("-P").arg(path);
    }
    cmd.arg("--").arg(pgrun_path()).args(args).stdin(Stdio::null());
    default_signals(&mut cmd);
    cmd
}

/// The pgrun that `strace_pid` runs, once strace's injected SIGSTOP has
/// stopped it with `file` open (right after its first read of it).
pub fn stopped_reading(strace_pid: i32, file: &Path) -> i32 {
    let mut pgrun = 0;
    eventually(&format!("pgrun stopped after its first read of {}", file.display()), || {
        pgrun = descendants(strace_pid).first().copied().unwrap_or(0);
        let reading = fs::read_dir(format!("/proc/{pgrun}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| fs::read_link(fd.path()).is_ok_and(|target| target == file));
        pgrun > 0 && reading && state(pgrun).is_some_and(|s| s == "t" || s == "T")
    });
    pgrun
}

/// A process this test traces to hold it in its exit (see [`hold_at_exit`]).
pub struct HeldAtExit {
    pid: i32,
    released: bool,
}

/// Trace process `pid` (a descendant of the test) with `PTRACE_O_TRACEEXIT`:
/// once it is sent its death, it stops in its exit, its KILL still pending,
/// and stays there, neither alive nor gone, until [`HeldAtExit::release`]
/// (or the end of the tracing thread: the test's). What a process dying on
/// a loaded machine looks like, for as long as the test wants. Signals it
/// gets meanwhile stop it too, until its KILL comes.
pub fn hold_at_exit(pid: i32) -> HeldAtExit {
    // SAFETY: PTRACE_SEIZE takes no pointers (options as the data word);
    // `pid` is a process this test started, alive (it wrote its pid).
    let r = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0, libc::PTRACE_O_TRACEEXIT as libc::c_long) };
    assert_eq!(r, 0, "cannot trace process {pid}: {}", std::io::Error::last_os_error());
    HeldAtExit { pid, released: false }
}

impl HeldAtExit {
    /// Let it finish its exit: every stop is waited for and let go on
    /// until it is held in its exit, then it is let go of. Call it once the
    /// process was sent its KILL.
    pub fn release(&mut self) {
        self.released = true;
        let start = Instant::now();
        loop {
            let mut status = 0;
            // SAFETY: waitpid on the tracee with a valid status pointer.
            let r = unsafe { libc::waitpid(self.pid, &mut status, libc::__WALL | libc::WNOHANG) };
            if r < 0 || libc::WIFEXITED(status) && r == self.pid || libc::WIFSIGNALED(status) && r == self.pid {
                return;
            }
            if r == self.pid && libc::WIFSTOPPED(status) {
                let at_exit = status >> 8 == libc::SIGTRAP | (libc::PTRACE_EVENT_EXIT << 8);
                let (request, signal) = if at_exit {
                    (libc::PTRACE_DETACH, 0)
                } else if status >> 16 != 0 {
                    (libc::PTRACE_CONT, 0)
                } else {
                    (libc::PTRACE_CONT, libc::WSTOPSIG(status))
                };
                // SAFETY: a tracee of this thread in a ptrace-stop; no pointers.
                unsafe { libc::ptrace(request, self.pid, 0, signal as libc::c_long) };
                if at_exit {
                    return;
                }
                continue;
            }
            assert!(start.elapsed() < DEADLINE, "process {} was not held in its exit in time", self.pid);
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for HeldAtExit {
    /// A test that failed before it let the process go: kill it, and let
    /// it finish its exit.
    fn drop(&mut self) {
        if !self.released {
            // SAFETY: the tracee cannot be reaped (so its pid reused) while
            // this thread traces it and has not let it go.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            self.release();
        }
    }
}

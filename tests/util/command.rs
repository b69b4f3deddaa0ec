//! Building and running commands: `pgrun ARGS...` with the suite's signal
//! dispositions, a caller's blocked or ignored signals, running as nobody,
//! and running to completion with the suite deadline (exit code, status
//! assertion, stderr).

use super::*;
use std::process::{Command, Output, Stdio};
use std::thread;

/// `pgrun ARGS...` as a std Command, stdio inherited from nothing, and
/// SIGINT and SIGQUIT at their defaults: a suite started in the background
/// of a script or under nohup inherits them ignored, and ignored signals
/// pass on to every command, which would change what the tests see.
pub fn pgrun<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut cmd = Command::new(pgrun_path());
    cmd.args(args).stdin(Stdio::null());
    default_signals(&mut cmd);
    cmd
}

/// Give `cmd` SIGINT and SIGQUIT at their defaults (see [`pgrun`]): the
/// suite's own process takes them at their defaults once, so that every
/// command inherits them so. Not a `pre_exec` of each command: that would
/// make std fork the whole (large, many-threaded) test process for each
/// spawn instead of using posix_spawn, which cost the suite seconds of
/// CPU. A test's own `pre_exec` still runs in the child as before.
pub fn default_signals(cmd: &mut Command) -> &mut Command {
    static DEFAULTS: std::sync::Once = std::sync::Once::new();
    DEFAULTS.call_once(|| {
        // SAFETY: signal(2) with SIG_DFL installs no handler; the suite
        // itself relies on neither signal.
        unsafe {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
        }
    });
    cmd
}

/// Start `cmd` with `signals` blocked, as its caller. pgrun hands its
/// caller's mask on to the command, so a signal sent to the group early
/// stays pending in the command until the command unblocks it, which it does
/// once its handlers are in place: no race between the handlers and a short
/// timeout. (The command must unblock them itself: `signal.pthread_sigmask`
/// in Python.)
pub fn with_blocked<'a>(cmd: &'a mut Command, signals: &'static [i32]) -> &'a mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: sigprocmask is async-signal-safe; the set is on the stack.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &s in signals {
                libc::sigaddset(&mut set, s);
            }
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Ok(())
        })
    }
}

/// Start `cmd` with `signal` ignored, as its caller: ignored signals pass on
/// to the command from its first instruction, so "a command that ignores
/// TERM" needs no trap to race a short timeout.
pub fn with_ignored(cmd: &mut Command, signal: i32) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: signal(2) is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(signal, libc::SIG_IGN);
            Ok(())
        })
    }
}

/// Exit code, or 128+N for death by signal N.
pub fn code_of(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Run to completion with the suite deadline; panics with argv, status,
/// stdout and stderr if it does not end in time.
pub fn run(cmd: &mut Command) -> Output {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn pgrun");
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(out) => out.expect("wait"),
        Err(_) => {
            // What it started is ours too: its descendants first (found from
            // /proc while it still holds them), then the child.
            for descendant in descendants(pid) {
                // SAFETY: kill takes plain integers; a live descendant of our child.
                unsafe { libc::kill(descendant, libc::SIGKILL) };
            }
            // SAFETY: our own child, not yet reaped (the waiter thread is stuck).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{cmd:?} did not finish within {DEADLINE:?}");
        }
    }
}

/// Assert the exit status, showing everything about the run if it differs.
pub fn assert_status(out: &Output, want: i32, what: &str) {
    let got = code_of(out.status);
    assert_eq!(
        got,
        want,
        "{what}: exit {got}, want {want}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Run `cmd` as the unprivileged user nobody (uid and gid 65534, no
/// supplementary groups), through util-linux's setpriv.
pub fn as_nobody(program: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--", program]).args(args).stdin(Stdio::null());
    cmd
}

//! Processes as the sweep sees them: started in a session of their own (so
//! that everything a case started, and only that, can be found and killed
//! by its session id), looked up in /proc, and waited for with a bound.

use std::fs;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::thread;
use std::time::{Duration, Instant};

/// How often a bounded wait looks again. Polling a state with a deadline,
/// not a fixed sleep standing in for a synchronisation.
const POLL: Duration = Duration::from_millis(5);

/// One process of /proc: pid, state letter, session id, command name.
#[derive(Clone, Debug)]
pub struct Proc {
    pub pid: i32,
    pub ppid: i32,
    pub state: char,
    pub session: i32,
    pub comm: String,
}

/// `/proc/PID/stat` of one process, None if it is gone.
pub fn proc_of(pid: i32) -> Option<Proc> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat[open + 1..close].to_string();
    let rest: Vec<&str> = stat[close + 2..].split(' ').collect();
    // After the comm: state ppid pgrp session ...
    Some(Proc {
        pid,
        ppid: rest.get(1)?.parse().ok()?,
        state: rest.first()?.chars().next()?,
        session: rest.get(3)?.parse().ok()?,
        comm,
    })
}

/// Whether `pid` is blocked in poll, ppoll or epoll_wait (x86-64 and
/// aarch64 numbers): pgrun has settled into its supervise loop.
pub fn waiting_in_poll(pid: i32) -> bool {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/syscall")) else { return false };
    let nr = text.split_whitespace().next().and_then(|n| n.parse::<i64>().ok());
    let polls: &[i64] = if cfg!(target_arch = "x86_64") { &[7, 271, 232, 281, 441] } else { &[73, 22, 441] };
    nr.is_some_and(|n| polls.contains(&n))
}

/// Every live (not zombie) process whose session is `session`.
pub fn in_session(session: i32) -> Vec<Proc> {
    let Ok(dir) = fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(proc_of)
        .filter(|p| p.session == session && p.state != 'Z' && p.state != 'X')
        .collect()
}

/// `cmd` as the leader of a new session (its pid is its session id).
pub fn new_session(cmd: &mut Command) -> &mut Command {
    // SAFETY: setsid and signal are async-signal-safe; nothing is allocated.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// Wait for `child` until `deadline`; None if it is still running then.
pub fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(POLL);
    }
}

/// Poll `cond` until it holds or `deadline` passes; whether it held.
pub fn poll_until(deadline: Instant, mut cond: impl FnMut() -> bool) -> bool {
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(POLL);
    }
}

/// SIGKILL `child` (a session leader the sweep started) and every process
/// of its session, until none is left; then reap `child`. Only processes of
/// sessions the sweep created are signalled: a session id is not reused
/// while any process of the session lives.
pub fn kill_session(child: &mut Child) {
    let session = child.id() as i32;
    let _ = child.kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = in_session(session);
        if left.is_empty() || Instant::now() >= deadline {
            break;
        }
        for p in left {
            // SAFETY: kill has no memory effects; p.pid is in our session.
            unsafe { libc::kill(p.pid, libc::SIGKILL) };
        }
        thread::sleep(POLL);
    }
    let _ = child.wait();
}

/// An exit status as a number: the code, or 128+N for signal N (as a
/// shell shows it), and words for the report.
pub fn status_code(status: ExitStatus) -> (i32, String) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => (code, format!("{code}")),
        (None, Some(sig)) => (128 + sig, format!("killed by signal {sig}")),
        _ => (-1, "unknown".to_string()),
    }
}

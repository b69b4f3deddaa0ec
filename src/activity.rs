//! What a live run is doing, for `pgrun status` (`listening`,
//! `blocked_on_input`) and `pgrun wait --ready`: the TCP sockets its
//! processes listen on, and whether one of them sits waiting for input
//! from a stdin that is a terminal or the run's stdin pipe.
//!
//! Only the run's own processes are looked at, never every process on the
//! host: the descendants of the pgrun that holds the pid file's lock (a
//! child subreaper, so everything the run made and orphaned is below it),
//! its guard and what is below that aside; in `--contain group` mode, those
//! of them in the run's group. A listening socket is the run's if one of
//! them has an fd on it (`socket:[INODE]` in `/proc/PID/fd`, the inode
//! listed in state LISTEN by `/proc/PID/net/tcp` or `tcp6`): a socket held
//! by a process outside the run never counts, even on the same port.
//!
//! "Blocked on input" is advisory: a process of the run has on its fd 0 a
//! terminal or the run's own `--stdin-pipe` (the pipe of the inode the
//! supervising pgrun's tag names: [`crate::stdin_pipe::find`]), and
//! sleeps in a call that waits for fd 0 to be readable: `read(2)` on it (a
//! shell's `read`, `cat`, Python's `input()`), or `poll`/`ppoll`,
//! `select`/`pselect6` or an `epoll_wait` with fd 0 (or another fd open
//! on the same file) among the fds it waits to read (an editor on a pty,
//! Node's readline): see [`crate::sys::input_wait`], which
//! reads `/proc/PID/syscall` and needs ptrace access (the run's own user
//! normally has it; not where Yama's `ptrace_scope` is 1 or more, as on
//! Ubuntu, since `pgrun status` is no ancestor of the run: false there). A process that sleeps, computes, or reads a file, a
//! socket, or a pipe that is not the run's stdin pipe is never counted;
//! where the call cannot be read the answer is false. Linux only: the
//! portable path has no `/proc` to read ([`AVAILABLE`]).

use crate::contain::Mode;
use crate::sys::{Pid, input_wait, proc, proc_io};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io;

/// Whether this build can tell what a run is doing (it reads `/proc`).
pub const AVAILABLE: bool = proc_io::AVAILABLE && input_wait::AVAILABLE;

/// A TCP socket a process of the run listens on.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Listening {
    pub port: u16,
    /// The local address, as text (IPv6 in its usual form).
    pub address: String,
    /// The process of the run that holds it (the lowest pid, if several).
    pub pid: Pid,
}

/// What the run is doing: its listening sockets, whether it is blocked on
/// input, and the first process of the run whose fds could not be read
/// (another user's), if any: a socket of its would have been missed.
pub struct Activity {
    pub listening: Vec<Listening>,
    pub blocked_on_input: bool,
    pub unreadable: Option<(Pid, io::Error)>,
}

/// The processes of the run published by the pgrun `holder` (group
/// `pgid`), pgrun itself and its guard aside: see the module doc.
pub fn run_processes(holder: Pid, pgid: Pid) -> Vec<Pid> {
    let group_only = mode_of(holder) == Mode::Group;
    if proc::children_files_exist() {
        // Where pgrun's children cannot be listed, none are found.
        return walk(holder, pgid, group_only).map(|walked| walked.pids).unwrap_or_default();
    }
    // No children files: the group, from a scan of /proc.
    let mut found: Vec<Pid> = proc::scan().into_iter().filter(|(_, s)| s.pgrp == pgid).map(|(pid, _)| pid).collect();
    found.sort_unstable();
    found
}

/// A run counted and looked at in one walk of its processes, for `pgrun
/// status --json`: how many of them are in its group (zombies too, as a
/// group's census counts them), how many live ones have left it, and what
/// they are doing ([`look`]).
pub struct CountedRun {
    pub in_group: usize,
    pub outside_group: usize,
    pub activity: io::Result<Activity>,
}

/// The run published by the pgrun `holder` (group `pgid`) in `mode`,
/// counted and looked at with one walk down from `holder` (each process's
/// stat and children read once, its fd table once): see [`CountedRun`].
/// `None` where that walk cannot be made (no children files, `holder`'s
/// children cannot be listed): the caller counts another way.
pub fn count_and_look(holder: Pid, pgid: Pid, mode: Mode) -> Option<CountedRun> {
    let walked = walk(holder, pgid, mode == Mode::Group)?;
    let activity = look(&walked.pids, Input::Asked { holder });
    Some(CountedRun { in_group: walked.in_group, outside_group: walked.outside_group, activity })
}

/// What one walk down from a run's pgrun found.
struct Walked {
    /// The run's processes (with `group_only`, those in its group), sorted.
    pids: Vec<Pid>,
    in_group: usize,
    outside_group: usize,
}

/// The descendants of `holder`, its guard and what is below that aside,
/// each one's stat and children read once; `None` where the kernel has no
/// children files or `holder`'s children cannot be listed.
fn walk(holder: Pid, pgid: Pid, group_only: bool) -> Option<Walked> {
    if !proc::children_files_exist() {
        return None;
    }
    let mut walked = Walked { pids: Vec::new(), in_group: 0, outside_group: 0 };
    let mut seen = BTreeSet::new();
    let top = proc::children(holder).ok()?;
    // Its guard: the child running pgrun's own executable under the
    // guard's name (a command of the run may bear that name too).
    let mut stack: Vec<Pid> =
        top.into_iter().filter(|&c| !proc::is_named_fork_of(c, holder, crate::guard::NAME)).collect();
    while let Some(pid) = stack.pop() {
        if pid == holder || !seen.insert(pid) {
            continue;
        }
        let Some(stat) = proc::stat(pid) else { continue };
        let in_group = stat.pgrp == pgid;
        walked.in_group += usize::from(in_group);
        walked.outside_group += usize::from(!in_group && stat.state != b'Z');
        if !group_only || in_group {
            walked.pids.push(pid);
        }
        // One thread, not a zombie: its children are all its main
        // thread's (half the reads).
        let children =
            if stat.threads == 1 && stat.state != b'Z' { proc::main_thread_children(pid) } else { proc::children(pid) };
        stack.extend(children.unwrap_or_default());
    }
    walked.pids.sort_unstable();
    Some(walked)
}

/// The `--contain` mode the pgrun `holder` was asked for, read from its
/// own command line (group where that cannot be read).
pub fn mode_of(holder: Pid) -> Mode {
    proc::cmdline(holder).and_then(crate::quick_args::contain_mode_of).unwrap_or(Mode::Group)
}

/// Whether [`look`] is asked about input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// No (`wait --ready`): `blocked_on_input` is false, nothing read for it.
    NotAsked,
    /// Yes, for the run whose pgrun is `holder` (whose stdin pipe counts).
    Asked { holder: Pid },
}

/// What `pids` are doing (see the module doc): one read of each one's fd
/// table; `Unsupported` on the portable path. A process gone meanwhile is
/// passed over.
pub fn look(pids: &[Pid], input: Input) -> io::Result<Activity> {
    let mut owner: BTreeMap<u64, Pid> = BTreeMap::new();
    let mut unreadable = None;
    let mut holders = Vec::new();
    let mut blocked_on_input = false;
    let mut stdins = AnswerableStdins { input, run_pipe: None };
    for &pid in pids {
        let table = match proc_io::fd_table(pid) {
            Ok(table) => table,
            Err(e) if e.kind() == io::ErrorKind::Unsupported => return Err(e),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                unreadable.get_or_insert((pid, e));
                continue;
            }
        };
        if !table.sockets.is_empty() {
            holders.push(pid);
        }
        for inode in table.sockets {
            owner.entry(inode).or_insert(pid);
        }
        // The stdin first: most runs have no terminal or stdin pipe there.
        // What cannot be read is no wait for input (advisory).
        blocked_on_input = blocked_on_input
            || (table.stdin.is_some_and(|target| stdins.answerable(&target.to_string_lossy()))
                && matches!(input_wait::waits_on_stdin(pid), Ok(true)));
    }
    // Each network namespace's table once.
    let mut namespaces = BTreeSet::new();
    let mut listening = Vec::new();
    for pid in holders {
        let Ok(namespace) = proc_io::net_namespace(pid) else { continue };
        if !namespaces.insert(namespace) {
            continue;
        }
        let listeners = match proc_io::tcp_listeners(pid) {
            Ok(listeners) => listeners,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for l in listeners {
            if let Some(&pid) = owner.get(&l.inode) {
                listening.push(Listening { port: l.port, address: l.address.to_string(), pid });
            }
        }
    }
    listening.sort_by(|a, b| (a.port, &a.address, a.pid).cmp(&(b.port, &b.address, b.pid)));
    listening.dedup();
    Ok(Activity { listening, blocked_on_input, unreadable })
}

/// Which stdins the run waits on for an answer: a terminal, or the run's
/// own stdin pipe (looked up once, at the first process whose stdin is a
/// pipe).
struct AnswerableStdins {
    input: Input,
    /// The inode of the run's stdin pipe (`Some(None)`: it has none open,
    /// or its pgrun's fds cannot be read); `None` until looked up.
    run_pipe: Option<Option<u64>>,
}

impl AnswerableStdins {
    /// Whether a stdin open on `target` (its `/proc/PID/fd/0` link) is one
    /// the run waits on for an answer.
    fn answerable(&mut self, target: &str) -> bool {
        let Input::Asked { holder } = self.input else { return false };
        if is_terminal(target) {
            return true;
        }
        let Some(inode) = pipe_inode(target) else { return false };
        let run_pipe = *self.run_pipe.get_or_insert_with(|| match crate::stdin_pipe::find(holder) {
            Ok(crate::stdin_pipe::Found::Open { input: crate::stdin_pipe::PipeAt::Fd { inode, .. }, .. }) => {
                Some(inode)
            }
            _ => None,
        });
        run_pipe == Some(inode)
    }
}

/// The inode of a `pipe:[INODE]` fd link (an unnamed pipe's; a FIFO's
/// link is its path).
fn pipe_inode(target: &str) -> Option<u64> {
    target.strip_prefix("pipe:[")?.strip_suffix(']')?.parse().ok()
}

/// Whether an fd link names a terminal: a pty's slave, a virtual console,
/// a serial line, the console.
fn is_terminal(target: &str) -> bool {
    target.strip_prefix("/dev/pts/").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        || target.starts_with("/dev/tty")
        || target == "/dev/console"
}

#[cfg(test)]
mod tests {
    use super::{is_terminal, pipe_inode};

    #[test]
    fn terminals_are_told_from_other_stdins() {
        assert!(is_terminal("/dev/pts/3"));
        assert!(is_terminal("/dev/tty1"));
        assert!(is_terminal("/dev/ttyS0"));
        assert!(!is_terminal("/dev/pts/ptmx"));
        assert!(!is_terminal("/dev/null"));
        assert!(!is_terminal("pipe:[1234]"));
        assert!(!is_terminal("socket:[1234]"));
        assert!(!is_terminal("/tmp/fifo"));
    }

    #[test]
    fn pipes_are_told_by_their_inode() {
        assert_eq!(pipe_inode("pipe:[1234]"), Some(1234));
        assert_eq!(pipe_inode("socket:[1234]"), None);
        assert_eq!(pipe_inode("/tmp/fifo"), None);
        assert_eq!(pipe_inode("/dev/pts/3"), None);
    }
}

//! What a live run is doing, for `pgrun status` (`listening`,
//! `blocked_on_input`) and `pgrun wait --ready`: the TCP sockets its
//! processes listen on, and whether one of them sits in a read of a
//! terminal on its stdin.
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
//! "Blocked on input" is advisory: a process of the run sleeps in
//! `read(2)` on fd 0 (`/proc/PID/syscall`, which needs ptrace access: the
//! run's own user normally has it) and fd 0 is a terminal. A process that
//! sleeps, computes, or reads a file, a pipe or a socket is never counted;
//! where the call cannot be read the answer is false. Linux only: the
//! portable path has no `/proc` to read ([`AVAILABLE`]).

use crate::contain::Mode;
use crate::sys::{Pid, proc, proc_io};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io;

/// Whether this build can tell what a run is doing (it reads `/proc`).
pub const AVAILABLE: bool = proc_io::AVAILABLE;

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
    Some(CountedRun { in_group: walked.in_group, outside_group: walked.outside_group, activity: look(&walked.pids) })
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
    let mut stack: Vec<Pid> =
        top.into_iter().filter(|&c| proc::comm(c).is_none_or(|name| name != crate::guard::NAME)).collect();
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

/// What `pids` are doing (see the module doc): one read of each one's fd
/// table; `Unsupported` on the portable path. A process gone meanwhile is
/// passed over.
pub fn look(pids: &[Pid]) -> io::Result<Activity> {
    let mut owner: BTreeMap<u64, Pid> = BTreeMap::new();
    let mut unreadable = None;
    let mut holders = Vec::new();
    let mut blocked_on_input = false;
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
        // The stdin first: most runs have no terminal there.
        blocked_on_input = blocked_on_input
            || (table.stdin.is_some_and(|target| answerable_stdin(&target.to_string_lossy()))
                && matches!(proc_io::blocked_reading(pid), Ok(Some(0))));
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

/// Whether a stdin open on `target` (its `/proc/PID/fd/0` link) is one the
/// run waits on for an answer: a terminal. (The run's own stdin pipe, once
/// there is one, is the other case.)
fn answerable_stdin(target: &str) -> bool {
    is_terminal(target)
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
    use super::is_terminal;

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
}

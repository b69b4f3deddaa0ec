//! `--contain tree`: the descendants of pgrun that left the command's
//! group, found by walking pgrun's children.
//!
//! pgrun is a child subreaper, so a descendant orphaned anywhere below it
//! becomes its child: every process of the run is found by walking down
//! from pgrun (`/proc/PID/task/TID/children`, or one `/proc` scan where the
//! kernel has no such files). A process found in a walk is signalled only
//! through a pidfd opened while it was still a descendant: the pidfd is
//! opened first, then its parent is checked to be the process the walk came
//! from, and that process to be still alive (so its pid still names it).
//! If the pid was reused in between, the pidfd names the old, dead process,
//! and the signal reaches nobody. pgrun's own children need no check: their
//! pids cannot be reused before pgrun reaps them.

use crate::signame::Signal;
use crate::sys::pidfd::Pidfd;
use crate::sys::proc::{self, Stat};
use crate::sys::{self, Pid};
use std::collections::{BTreeMap, BTreeSet};

/// Where children lists come from.
enum Source {
    /// `/proc/PID/task/TID/children`.
    Files,
    /// One `/proc` scan: parent to children.
    Scan(BTreeMap<Pid, Vec<Pid>>),
}

impl Source {
    fn new() -> Self {
        if proc::children_files_exist() {
            return Source::Files;
        }
        let mut map: BTreeMap<Pid, Vec<Pid>> = BTreeMap::new();
        for (pid, stat) in proc::scan() {
            map.entry(stat.ppid).or_default().push(pid);
        }
        Source::Scan(map)
    }

    fn children(&self, pid: Pid) -> Vec<Pid> {
        match self {
            Source::Files => proc::children(pid).unwrap_or_default(),
            Source::Scan(map) => map.get(&pid).cloned().unwrap_or_default(),
        }
    }
}

/// A descendant found by a walk, with a pidfd that is safe to signal.
pub struct Found<'a> {
    pub pid: Pid,
    pub stat: Stat,
    pub pidfd: &'a Pidfd,
}

/// Visit every live descendant of pgrun except `skip` (the guard), deepest
/// first (a process's children are listed while it is still alive and
/// their parent), with a pidfd for each.
pub fn walk(skip: Option<Pid>, visit: &mut dyn FnMut(Found<'_>)) {
    let source = Source::new();
    let me = sys::getpid();
    for child in source.children(me) {
        if Some(child) == skip {
            continue;
        }
        // Our own child: its pid is ours until we reap it (and we are not
        // reaping now), so the pidfd names it.
        let Some(fd) = Pidfd::open(child) else { continue };
        let Some(stat) = proc::stat(child) else { continue };
        if stat.ppid == me {
            visit_below(&source, child, stat, fd, visit);
        }
    }
}

fn visit_below(source: &Source, pid: Pid, stat: Stat, fd: Pidfd, visit: &mut dyn FnMut(Found<'_>)) {
    for child in source.children(pid) {
        let Some(child_fd) = Pidfd::open(child) else { continue };
        let Some(child_stat) = proc::stat(child) else { continue };
        // Opened first, checked after: the parent is still `pid`, and `pid`
        // has not exited, so the number `pid` still names our descendant.
        if child_stat.ppid != pid || fd.exited() {
            continue;
        }
        visit_below(source, child, child_stat, child_fd, visit);
    }
    if stat.state != b'Z' {
        visit(Found { pid, stat, pidfd: &fd });
    }
}

/// Send `signal` (and SIGCONT after it if `cont`) to every descendant
/// outside group `pgid` (the guard `skip` aside); `reached` collects their
/// pids. With `members_too` (the group's number is no longer signalled:
/// pgrun took it for gone), the descendants still in the group get it too,
/// through the same pidfds, and are not counted as escaped.
pub fn signal_escapees(
    pgid: Pid,
    skip: Option<Pid>,
    signal: Signal,
    cont: bool,
    members_too: bool,
    reached: &mut BTreeSet<Pid>,
) {
    walk(skip, &mut |found| {
        let member = found.stat.pgrp == pgid;
        if member && !members_too {
            return;
        }
        if let Ok(true) = found.pidfd.signal(signal) {
            if member {
                crate::verbose!("sending {} to process {} (of process group {pgid})", signal, found.pid);
            } else {
                crate::verbose!("sending {} to process {} (it left the group)", signal, found.pid);
                reached.insert(found.pid);
            }
            if cont {
                let _ = found.pidfd.signal(Signal::CONT);
            }
        }
    });
}

/// Whether pgrun has a child other than `skip` (the guard). With the
/// leader reaped and the group gone, a child left means a descendant left.
/// One read: pgrun is single-threaded, so all its children are its main
/// thread's.
pub fn has_children_besides(skip: Option<Pid>) -> bool {
    match proc::own_children() {
        Ok(children) => children.into_iter().any(|c| Some(c) != skip),
        Err(_) => {
            let me = sys::getpid();
            proc::scan().into_iter().any(|(pid, stat)| stat.ppid == me && Some(pid) != skip)
        }
    }
}

/// How many live descendants of `root` are outside group `pgid`, not
/// counting a process named `skip_comm` directly below `root` (its guard).
/// For `pgrun status`, which only reads.
pub fn count_outside(root: Pid, pgid: Pid, skip_comm: &str) -> usize {
    let source = Source::new();
    let mut seen = BTreeSet::new();
    let mut stack: Vec<Pid> =
        source.children(root).into_iter().filter(|&c| proc::comm(c).is_none_or(|name| name != skip_comm)).collect();
    let mut count = 0;
    while let Some(pid) = stack.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if let Some(stat) = proc::stat(pid)
            && stat.state != b'Z'
            && stat.pgrp != pgid
        {
            count += 1;
        }
        stack.extend(source.children(pid));
    }
    count
}

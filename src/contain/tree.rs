//! `--contain tree`: the descendants of pgrun that left the command's
//! group, found by walking pgrun's children.
//!
//! pgrun is a child subreaper, so a descendant orphaned anywhere below it
//! becomes its child: every process of the run is found by walking down
//! from pgrun (`/proc/PID/task/TID/children`, or a `/proc` scan where the
//! kernel has no such files). A process found in a walk is signalled only
//! through a pidfd opened while it was still a descendant: the pidfd is
//! opened first, then its parent is checked to be the process the walk came
//! from, and that process to be still alive (so its pid still names it).
//! If the pid was reused in between, the pidfd names the old, dead process,
//! and the signal reaches nobody. pgrun's own children need no check: their
//! pids cannot be reused before pgrun reaps them.
//!
//! A walk is not a snapshot: processes exit while it goes, and the
//! children of one that exits move up to the nearest subreaper above it
//! (pgrun, or a subreaper of the run's own), whose list the walk may have
//! read already; from the list of the one that exited they are gone. So a
//! step's walk reads a list again whenever something below it exited
//! during its reading (exited, reaped, or found moved away), and takes the
//! children it has not seen yet, up to the top: a process that was in the
//! run when the step began is found where it went. A process gets the step
//! before its children are listed, so a child it makes after that is born
//! after the step (the next step finds it). A list is read at most
//! [`READS_PER_LIST`] times in one walk. What cannot be read or held (a
//! children file or stat that cannot be read, a pidfd that cannot be
//! opened: EMFILE, a seccomp filter) is an error of the step, never taken
//! for a process that is gone.
//!
//! The same walk counts the members of the command's group for the report,
//! `--verbose` and the supervisor's "only zombies left?" ([`members`]), in
//! every mode: it costs what the run has, where a scan of all of `/proc`
//! costs what the machine runs.

use crate::signame::Signal;
use crate::sys::pidfd::Pidfd;
use crate::sys::proc::{self, Stat};
use crate::sys::{self, Pid};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io;

/// How many times one walk reads one children list: again while something
/// below it exited during the last reading. Each exit moves what it leaves
/// up once, so a few readings find everything that was there; the bound
/// is for a run that keeps forking and exiting below a list while it is
/// read (what it makes past the bound, born during the step, gets the
/// next one; the final KILL is repeated until the run is gone).
pub const READS_PER_LIST: usize = 8;

/// Where children lists come from.
enum Source {
    /// `/proc/PID/task/TID/children`.
    Files,
    /// A `/proc` scan: parent to children (scanned again for a list read
    /// again).
    Scan(BTreeMap<Pid, Vec<Pid>>),
}

impl Source {
    fn new() -> Self {
        if proc::children_files_exist() {
            return Source::Files;
        }
        Source::Scan(Self::scan())
    }

    fn scan() -> BTreeMap<Pid, Vec<Pid>> {
        let mut map: BTreeMap<Pid, Vec<Pid>> = BTreeMap::new();
        for (pid, stat) in proc::scan() {
            map.entry(stat.ppid).or_default().push(pid);
        }
        map
    }

    /// The children of `pid` (`again`: read again in this walk, so a scan
    /// is made anew; `stat`: what `pid`'s stat said, if read: a process
    /// with one thread, not a zombie, has its children in its main
    /// thread's file alone); `Ok(None)` if `pid` is gone (reaped).
    fn children(&mut self, pid: Pid, again: bool, stat: Option<&Stat>) -> io::Result<Option<Vec<Pid>>> {
        match self {
            Source::Files => {
                let one_thread = stat.is_some_and(|s| s.threads == 1 && s.state != b'Z');
                let read = if one_thread { proc::main_thread_children(pid) } else { proc::children(pid) };
                match read {
                    Ok(children) => Ok(Some(children)),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(io::Error::new(e.kind(), format!("cannot list the children of process {pid}: {e}"))),
                }
            }
            Source::Scan(map) => {
                if again {
                    *map = Self::scan();
                }
                Ok(Some(map.get(&pid).cloned().unwrap_or_default()))
            }
        }
    }
}

/// A descendant found by a walk, with a pidfd that is safe to signal.
pub struct Found<'a> {
    pub pid: Pid,
    pub stat: Stat,
    pub pidfd: &'a Pidfd,
}

/// Visit every descendant of pgrun except `skip` (the guard) that
/// `wanted` says is to be visited (zombies too, if it wants them), each
/// before its children are listed, with a pidfd for each; the others
/// (which the caller reached before the walk: the group's members, which
/// got the group's signal) are walked through. See the
/// module doc for how processes that move during the walk are found. An
/// error says what could not be read or held (the walk went on past it);
/// the first one is returned. `step`: the walk of a stop step (the
/// `tree-listed` pause of the test hooks is its), not a count.
pub fn walk(
    skip: Option<Pid>,
    step: bool,
    wanted: &dyn Fn(&Stat) -> bool,
    visit: &mut dyn FnMut(Found<'_>),
) -> io::Result<()> {
    let mut walk = Walk { source: Source::new(), skip, step, seen: HashSet::new(), error: None, wanted, visit };
    walk.children_of(sys::getpid(), None, None);
    walk.error.map_or(Ok(()), Err)
}

/// One walk's state.
struct Walk<'v> {
    source: Source,
    skip: Option<Pid>,
    /// A stop step's walk, not a count.
    step: bool,
    /// The processes visited (or found zombies) so far.
    seen: HashSet<Pid>,
    error: Option<io::Error>,
    wanted: &'v dyn Fn(&Stat) -> bool,
    visit: &'v mut dyn FnMut(Found<'_>),
}

impl Walk<'_> {
    fn fail(&mut self, e: io::Error) {
        crate::verbose!("{e}");
        self.error.get_or_insert(e);
    }

    /// Take the children of `parent` not seen yet, each with its own
    /// children; `held` is `parent`'s pidfd (`None`: pgrun itself), `stat`
    /// its stat if read since it got the step (see [`Source::children`]).
    /// The list is read again while something below exited during the
    /// last reading. Returns whether something at or below `parent`
    /// exited during the walk (what it left may have moved above
    /// `parent`).
    fn children_of(&mut self, parent: Pid, held: Option<&Pidfd>, stat: Option<&Stat>) -> bool {
        let mut exited = false;
        for reading in 0..READS_PER_LIST {
            let children = match self.source.children(parent, reading > 0, stat) {
                Ok(Some(children)) => children,
                Ok(None) => return true,
                Err(e) => {
                    self.fail(e);
                    break;
                }
            };
            if held.is_none() && self.step {
                crate::test_hook::pause("tree-listed");
            }
            let mut exited_now = false;
            for child in children {
                if Some(child) != self.skip && !self.seen.contains(&child) {
                    exited_now |= self.child(parent, held, child);
                }
            }
            exited |= exited_now;
            // Nothing below exited: nothing moved here meanwhile. Or
            // `parent` itself exited: its children moved up, not here.
            if !exited_now || held.is_some_and(Pidfd::exited) {
                break;
            }
        }
        exited || held.is_some_and(Pidfd::exited)
    }

    /// Take `child`, listed as `parent`'s (`held`: `parent`'s pidfd), if
    /// it still is, held by a pidfd opened first, then checked: visit it
    /// if wanted, and take its children. Returns whether something exited
    /// (or moved) that may have left processes above `parent`.
    fn child(&mut self, parent: Pid, held: Option<&Pidfd>, child: Pid) -> bool {
        let fd = match Pidfd::hold(child) {
            Ok(Some(fd)) => fd,
            // Reaped since the list was read: it exited meanwhile.
            Ok(None) => return true,
            Err(e) => {
                self.fail(io::Error::new(e.kind(), format!("cannot hold process {child} (a pidfd): {e}")));
                return false;
            }
        };
        let stat = match proc::stat(child) {
            Some(stat) => stat,
            // /proc/PID goes only when the process is reaped, after it exited.
            None if fd.exited() => return true,
            None => {
                self.fail(io::Error::other(format!("cannot read /proc/{child}/stat")));
                return false;
            }
        };
        // Opened first, checked after: still `parent`'s child, and `parent`
        // has not exited, so the number `child` still named our descendant
        // when its pidfd was opened. Otherwise it moved up (its parent
        // exited): it is found where it went.
        if stat.ppid != parent || held.is_some_and(Pidfd::exited) {
            return true;
        }
        self.seen.insert(child);
        let wanted = (self.wanted)(&stat);
        if wanted {
            (self.visit)(Found { pid: child, stat, pidfd: &fd });
        }
        if fd.exited() {
            // It has exited (every thread): its children moved up, none
            // is left to list.
            return true;
        }
        // A process visited now got the step after its stat was read (a
        // thread it made since may have children): listed thread by
        // thread. The others got it before the walk (the group's signal).
        let below = self.children_of(child, Some(&fd), (!wanted).then_some(&stat));
        below || fd.exited()
    }
}

/// Send `signal` (and SIGCONT after it if `cont`) to every descendant
/// outside group `pgid` (the guard `skip` aside); `reached` collects their
/// pids. With `members_too` (the group's number is no longer signalled:
/// pgrun took it for gone), the descendants still in the group get it too,
/// through the same pidfds, and are not counted as escaped. An error says
/// a descendant could not be found, held or signalled (the first such).
pub fn signal_escapees(
    pgid: Pid,
    skip: Option<Pid>,
    signal: Signal,
    cont: bool,
    members_too: bool,
    reached: &mut BTreeSet<Pid>,
) -> io::Result<()> {
    let mut failed: Option<io::Error> = None;
    // A zombie has exited: no signal can reach it.
    let wanted = |stat: &Stat| stat.state != b'Z' && (members_too || stat.pgrp != pgid);
    let walked = walk(skip, true, &wanted, &mut |found| {
        let member = found.stat.pgrp == pgid;
        match found.pidfd.signal(signal) {
            Ok(true) => {
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
            // It exited since it was found.
            Ok(false) => {}
            Err(e) => {
                crate::verbose!("cannot send {} to process {}: {e}", signal, found.pid);
                failed.get_or_insert(e);
            }
        }
    });
    walked.and(failed.map_or(Ok(()), Err))
}

/// The members of a process group found among pgrun's descendants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Members {
    /// Every member found, zombies included.
    pub total: usize,
    pub zombies: usize,
    /// Zombies whose parent is pgrun: it reaps them itself.
    pub own_zombies: usize,
}

impl Members {
    /// Whether a member found is alive, or a zombie pgrun reaps itself:
    /// either way, the group is not held by unreapable zombies alone.
    pub fn any_but_foreign_zombies(&self) -> bool {
        self.total > self.zombies || self.own_zombies > 0
    }
}

/// The members of group `pgid` among pgrun's descendants (the guard
/// `skip` aside), found by a stop step's walk (see the module doc, and
/// [`walk`]): it costs what the run has, never what the machine runs, as
/// a scan of all of `/proc` does (seconds, under load, with thousands of
/// processes on the host). pgrun is a child subreaper, so every process
/// the run made is among them; a member put in the group by a process
/// outside the run is not. What could not be read or held is said
/// (`-v`) and passed over: what is found is there, a lower bound. `None`
/// where no such walk can be made without that scan: on the portable path
/// (no subreaper, no pidfds), on a kernel without children files.
pub fn members(pgid: Pid, skip: Option<Pid>) -> Option<Members> {
    if !sys::CAN_CONTAIN || !proc::children_files_exist() {
        return None;
    }
    let me = sys::getpid();
    let mut found = Members::default();
    let wanted = |stat: &Stat| stat.pgrp == pgid;
    // An error was said by the walk; what it found stands.
    let _ = walk(skip, false, &wanted, &mut |member| {
        let zombie = member.stat.state == b'Z';
        found.total += 1;
        found.zombies += usize::from(zombie);
        found.own_zombies += usize::from(zombie && member.stat.ppid == me);
    });
    Some(found)
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
    count_below(root, pgid, skip_comm).map_or(0, |(_, outside)| outside)
}

/// The run below `root` in one walk, for readers (`pgrun ls`): how many of
/// its descendants are in group `pgid` (zombies too, as a group's census
/// counts them), and how many live ones are outside it ([`count_outside`]),
/// not counting a fork of `root` named `skip_comm` directly below it (its
/// guard) nor what is below that. `None` where `root`'s children cannot be
/// listed.
pub fn count_below(root: Pid, pgid: Pid, skip_comm: &str) -> Option<(usize, usize)> {
    let mut source = Source::new();
    let top = source.children(root, false, None).ok().flatten()?;
    let mut seen = BTreeSet::new();
    let mut stack: Vec<Pid> = top.into_iter().filter(|&c| !proc::is_named_fork_of(c, root, skip_comm)).collect();
    let (mut group, mut outside) = (0, 0);
    while let Some(pid) = stack.pop() {
        if !seen.insert(pid) {
            continue;
        }
        let stat = proc::stat(pid);
        match &stat {
            Some(s) if s.pgrp == pgid => group += 1,
            Some(s) if s.state != b'Z' => outside += 1,
            _ => {}
        }
        // A count for a reader: what cannot be listed counts as no children.
        stack.extend(source.children(pid, false, stat.as_ref()).ok().flatten().unwrap_or_default());
    }
    Some((group, outside))
}

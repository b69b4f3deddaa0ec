//! A process group pgrun does not supervise: `pgrun cancel`'s fallback on
//! a run whose pgrun is gone, and the guard's once its pgrun was killed.
//! Held by pidfds, so that a reused group number reaches nobody (see
//! [`ForeignGroup`]).

use super::group::GroupNumber;
use super::target::Target;
use crate::signame::Signal;
use crate::sys::pidfd::Pidfd;
use crate::sys::{Pid, process};
use std::io;

/// A process group pgrun does not supervise.
///
/// Whoever stops it is not its members' parent, so between two checks the
/// group can end and its number be taken by an unrelated new group: a bare
/// `kill(-pgid)` would then reach a process outside the run. On Linux the
/// members are therefore held by pidfds and signalled only through those.
///
/// Two ways to know the group, by what proves a process is the run's:
/// - [`ForeignGroup::new`] (`cancel`): the group is whatever holds the number at
///   the first look (cancel checked before that the number is the run's);
///   members are found in `/proc`, each held by a pidfd opened while it was
///   in the group, and looked for again while one of them lives; the group
///   is over once every member found has exited. Where no member can be
///   held (no /proc, no pidfd) it falls back to `kill(-pgid)`.
/// - [`ForeignGroup::held`] (the guard): the processes handed over (pidfds pgrun
///   opened while they were its run's) and the members found while one of
///   those is not yet reaped and still in the group: it keeps the group's
///   number in use, so whatever is in the group then is the run's. And,
///   if pgrun never saw the group empty, the group by its number, as pgrun
///   itself used it, until the guard sees it empty (see the guard's module
///   doc for why the number is still the run's then). Once that number is
///   given up and every held process is reaped, nothing more is found.
pub struct ForeignGroup {
    pgid: Pid,
    /// Members found so far, each with a pidfd opened while it was one
    /// (none where there are no pidfds).
    members: Vec<(Pid, Pidfd)>,
    /// Made by [`ForeignGroup::held`].
    held: bool,
    /// For a held group, its number, in use while it is still the run's:
    /// never seen empty, by pgrun nor by the guard.
    number: GroupNumber,
}

impl ForeignGroup {
    pub fn new(pgid: Pid) -> ForeignGroup {
        ForeignGroup { pgid, members: Vec::new(), held: false, number: GroupNumber::new(pgid, false) }
    }

    /// The group `pgid` known through `members`, pidfds of processes known
    /// to be the run's, and through its number while `number` (pgrun never
    /// saw the group empty; see the type's doc).
    pub fn held(pgid: Pid, handed: Vec<(Pid, Pidfd)>, number: bool) -> ForeignGroup {
        let mut members: Vec<(Pid, Pidfd)> = Vec::new();
        for (pid, fd) in handed {
            if !members.iter().any(|(p, _)| *p == pid) {
                members.push((pid, fd));
            }
        }
        ForeignGroup { pgid, members, held: true, number: GroupNumber::new(pgid, number) }
    }

    /// Take hold of the members that can be proven the run's now (see the
    /// type's doc), before anything is signalled.
    pub fn look_for_members(&mut self) {
        self.find_members();
    }

    pub fn pgid(&self) -> Pid {
        self.pgid
    }

    /// Whether at least one member was found and every one has exited.
    fn members_all_exited(&self) -> bool {
        !self.members.is_empty() && self.members.iter().all(|(_, fd)| fd.exited())
    }

    /// Whether a member held is not yet reaped (alive, or a zombie) and
    /// still holds the group's number: the leader (its pid is the number),
    /// or a member still in the group (its group id read while the pidfd
    /// says the pid is still its own).
    fn member_unreaped(&self) -> bool {
        let unreaped = |fd: &Pidfd| fd.signal(Signal::PROBE).unwrap_or(false);
        self.members.iter().any(|(pid, fd)| {
            unreaped(fd)
                && (*pid == self.pgid
                    || (crate::sys::proc::stat(*pid).is_some_and(|s| s.pgrp == self.pgid) && unreaped(fd)))
        })
    }

    /// For a held group whose number is still the run's: whether the group
    /// is empty now, in which case the number is given up for good.
    fn number_given_up(&mut self) -> bool {
        !self.number.exists()
    }

    /// Whether a member found is still a zombie in the group: it holds the
    /// group (and its number) until its parent reaps it, so the group is
    /// not over.
    fn zombie_member_left(&self) -> bool {
        self.members
            .iter()
            .any(|(pid, _)| crate::sys::proc::stat(*pid).is_some_and(|s| s.state == b'Z' && s.pgrp == self.pgid))
    }

    /// Look for members not held yet. Only while the group is known to be
    /// the run's: for a held group, while its number is still the run's or
    /// a held member is unreaped (checked again after the scan: unreaped
    /// then, it kept the number in use all through the scan); else before
    /// any member was found, or while one still lives (a new member is
    /// forked by a live one).
    fn find_members(&mut self) {
        let provable =
            if self.held { !self.number_given_up() || self.member_unreaped() } else { !self.members_all_exited() };
        if !provable {
            return;
        }
        let found = members_of(self.pgid);
        if self.held && !self.member_unreaped() && self.number_given_up() {
            return;
        }
        for (pid, fd) in found {
            if !self.members.iter().any(|(p, _)| *p == pid) {
                self.members.push((pid, fd));
            }
        }
    }

    /// Each member gets the signal once: while a held group's number is
    /// the run's, `kill(-pgid)` reaches every process in the group (held or
    /// born since the look), and the pidfds only the held processes that
    /// are no longer in it; else the pidfds alone. (Sent both ways, a
    /// member got every step twice, and a command that takes a second TERM
    /// for "abort now" would.)
    fn send(&mut self, signal: Signal) {
        self.find_members();
        if self.held || !self.members.is_empty() {
            let by_number = self.held && self.number.in_use() && {
                let sent = matches!(process::signal_group(self.pgid, signal), Ok(true));
                if !sent {
                    self.number_given_up();
                }
                sent
            };
            for (pid, fd) in &self.members {
                if by_number && crate::sys::proc::stat(*pid).is_some_and(|s| s.pgrp == self.pgid) {
                    continue;
                }
                let _ = fd.signal(signal);
            }
            return;
        }
        let _ = process::signal_group(self.pgid, signal);
    }
}

/// Whether `/proc` shows group `pgid` with no process but zombies (false
/// if `/proc` cannot be read: then nothing can be told).
fn only_zombies_in(pgid: Pid) -> bool {
    let table = crate::sys::proc::scan();
    !table.is_empty() && table.iter().all(|(_, stat)| stat.pgrp != pgid || stat.state == b'Z')
}

/// The processes of group `pgid` now, each with a pidfd opened first and
/// then checked to name a member (so the pidfd names that member, whatever
/// happens to the number). None where there are no pidfds.
pub fn members_of(pgid: Pid) -> Vec<(Pid, Pidfd)> {
    if !Pidfd::SUPPORTED {
        return Vec::new();
    }
    let candidates = crate::sys::proc::scan().into_iter().filter(|(_, stat)| stat.pgrp == pgid).map(|(pid, _)| pid);
    held_members(pgid, candidates)
}

/// Pidfds of those of `candidates` that are members of group `pgid`: each
/// opened first, then checked to be in the group (so the pidfd names a
/// member, not a process that took a freed pid).
pub fn held_members(pgid: Pid, candidates: impl IntoIterator<Item = Pid>) -> Vec<(Pid, Pidfd)> {
    let mut found = Vec::new();
    if !Pidfd::SUPPORTED {
        return found;
    }
    for pid in candidates {
        if let Some(fd) = Pidfd::open(pid)
            && crate::sys::proc::stat(pid).is_some_and(|s| s.pgrp == pgid)
        {
            found.push((pid, fd));
        }
    }
    found
}

impl Target for ForeignGroup {
    /// A held group (the guard's) whose held processes have all exited and
    /// whose number, still the run's, holds nothing but zombies (of a
    /// parent outside: pgrun is gone). `pgrun cancel`'s groups say no.
    fn only_zombies(&mut self) -> bool {
        self.held
            && self.number.in_use()
            && self.members.iter().all(|(_, fd)| fd.exited())
            && only_zombies_in(self.pgid)
    }

    /// Every process of the run still there is dying: the members held
    /// that have not exited, and whatever `/proc` finds in the group while
    /// its number is the run's (a held group's, see the type's doc; for
    /// cancel's, only where no member could be held).
    fn dying(&mut self) -> bool {
        self.find_members();
        let mut left: Vec<Pid> = self.members.iter().filter(|(_, fd)| !fd.exited()).map(|(pid, _)| *pid).collect();
        let by_number = if self.held { self.number.in_use() } else { self.members.is_empty() };
        if by_number {
            left.extend(crate::sys::proc::scan().into_iter().filter(|(_, s)| s.pgrp == self.pgid).map(|(pid, _)| pid));
        }
        !left.is_empty() && left.iter().all(|&pid| crate::sys::proc::after_kill(pid) == Some(true))
    }

    fn describe(&self) -> String {
        format!("process group {}", self.pgid)
    }
    /// Every step, the final KILL too, goes to the members held and (while
    /// it is the run's) the number; what could not be sent is not known.
    fn signal(&mut self, signal: Signal, cont: bool, _last: bool) -> io::Result<()> {
        self.send(signal);
        if cont {
            self.send(Signal::CONT);
        }
        Ok(())
    }
    fn signal_leader(&mut self, signal: Signal, cont: bool) -> io::Result<bool> {
        self.find_members();
        let Some((_, fd)) = self.members.iter().find(|(pid, _)| *pid == self.pgid) else { return Ok(false) };
        if fd.exited() || !matches!(fd.signal(signal), Ok(true)) {
            return Ok(false);
        }
        if cont {
            let _ = fd.signal(Signal::CONT);
        }
        Ok(true)
    }
    fn gone(&mut self) -> bool {
        if self.held {
            // Nothing held can be signalled once it has exited.
            self.find_members();
            let held_exited = self.members.iter().all(|(_, fd)| fd.exited());
            // While the number is the run's: until the group is empty (a
            // zombie is still a member: the run is over once it is reaped).
            return held_exited && self.number_given_up();
        }
        if !process::group_exists(self.pgid) {
            return true;
        }
        self.find_members();
        // Every member found has exited and been reaped: what holds the
        // number now is not one of them, so the run's group has ended (and
        // the number may be somebody else's).
        self.members_all_exited() && !self.zombie_member_left()
    }
}

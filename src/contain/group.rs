//! A process group by its number, used only while the number is provably
//! the run's.
//!
//! An empty process group never gains members again, but once its last
//! member is reaped its number can be taken by an unrelated new group. So
//! a run's group is signalled by its number (`kill(-pgid)`) only until the
//! number is first seen empty, and never again after: [`GroupNumber`]
//! holds that rule, for the group pgrun supervises ([`OwnGroup`]) and for
//! the guard's view of it ([`crate::contain::foreign::ForeignGroup`]),
//! which takes over where pgrun left off. One exception, pgrun's own: a
//! leader that left its group (setpgid, setsid) and that pgrun, its parent,
//! has not reaped still holds the number (its pid), so an empty group is
//! not given up then; the leader itself is reached by its pid.

use super::tree;
use crate::signame::Signal;
use crate::sys::proc::Census;
use crate::sys::{Pid, process};
use crate::verbose;
use std::cell::Cell;
use std::io;

/// A group's number, in use until the group is first seen empty.
#[derive(Debug)]
pub struct GroupNumber {
    pgid: Pid,
    /// The group was seen empty once (or the number was never known to be
    /// the run's): gone for good.
    given_up: Cell<bool>,
}

impl GroupNumber {
    /// Group `pgid`, whose number is the run's if `in_use`.
    pub fn new(pgid: Pid, in_use: bool) -> GroupNumber {
        GroupNumber { pgid, given_up: Cell::new(!in_use) }
    }

    pub fn pgid(&self) -> Pid {
        self.pgid
    }

    /// Whether the number is still the run's (not seen empty yet).
    pub fn in_use(&self) -> bool {
        !self.given_up.get()
    }

    /// `kill(-pgid, 0)` while the number is in use: whether the group
    /// exists (zombies count as members). The first time it is empty the
    /// number is given up for good.
    pub fn exists(&self) -> bool {
        if self.given_up.get() {
            return false;
        }
        let exists = process::group_exists(self.pgid);
        if !exists {
            self.give_up();
        }
        exists
    }

    /// The group was seen empty: never use its number again.
    pub fn give_up(&self) {
        self.given_up.set(true);
    }
}

/// The process group of a run pgrun supervises: pgrun is its leader's
/// parent, and so knows while the leader is unreaped that the number is the
/// run's. Everything pgrun sends to its run's group goes through this (the
/// stop sequence, forwarded signals, the terminal's SIGCONTs).
pub struct OwnGroup {
    number: GroupNumber,
    /// The guard's handle, told when the group is gone for good (through
    /// the page it shares with the guard).
    guard: super::SharedGuardian,
    /// pgrun reaped the leader (or it was reaped by someone else): its pid
    /// may name another process from now on.
    leader_reaped: Cell<bool>,
}

impl OwnGroup {
    /// The group of the command pgrun has just started as `pgid`.
    pub fn new(pgid: Pid, guard: super::SharedGuardian) -> OwnGroup {
        OwnGroup { number: GroupNumber::new(pgid, true), guard, leader_reaped: Cell::new(false) }
    }

    pub fn pgid(&self) -> Pid {
        self.number.pgid()
    }

    /// Whether the group was seen empty (gone for good).
    pub fn ended(&self) -> bool {
        !self.number.in_use()
    }

    /// `kill(-pgid, 0)`, until it reports the group empty while nothing
    /// holds its number for the run (see [`OwnGroup::number_held`]); from
    /// then on the group is gone for good, and nothing is sent to its
    /// number.
    pub fn exists(&self) -> bool {
        if !self.number.in_use() {
            return false;
        }
        if process::group_exists(self.pgid()) {
            return true;
        }
        self.empty_now();
        false
    }

    /// `kill(-pgid, signal)` while the group exists (see
    /// [`OwnGroup::exists`]); `Ok(false)` if it is empty. An ESRCH while the
    /// leader is still pgrun's unreaped child is true too: the leader left
    /// the group (setpgid, setsid), which it may; it is reached by its pid
    /// ([`OwnGroup::signal_leader_outside`]).
    pub fn signal(&self, signal: Signal) -> io::Result<bool> {
        if !self.number.in_use() {
            return Ok(false);
        }
        let delivered = process::signal_group(self.pgid(), signal)?;
        if !delivered {
            self.empty_now();
        }
        Ok(delivered)
    }

    /// The group was just seen empty: its number is given up for good,
    /// unless the leader still holds it (see [`OwnGroup::number_held`]).
    fn empty_now(&self) {
        if self.number_held() {
            return;
        }
        self.number.give_up();
        verbose!("process group {} is empty: gone for good", self.pgid());
        self.ended_now();
    }

    /// Whether the group's number is the run's even though the group is
    /// empty: the leader is pgrun's unreaped child, so no other process can
    /// have its pid, and only a process with that pid can make a group of
    /// that number again (setpgid(0, 0) after leaving it).
    fn number_held(&self) -> bool {
        !self.leader_reaped.get() && process::is_child(self.pgid())
    }

    /// The group was seen empty: gone for good, for pgrun, for its panic
    /// hook (which would otherwise SIGKILL the number, perhaps somebody
    /// else's by then, in tree mode long before the run is gone) and (told
    /// through their shared page) for its guard.
    fn ended_now(&self) {
        crate::exit_hooks::forget_group();
        self.guard.group_gone();
    }

    /// pgrun reaped the leader, or learnt that someone else did.
    pub fn leader_reaped(&self) {
        self.leader_reaped.set(true);
    }

    /// Whether the leader is reaped (by pgrun, or lost to someone else):
    /// the run's command is over only then, wherever it moved.
    pub fn leader_gone(&self) -> bool {
        self.leader_reaped.get()
    }

    /// How many processes of the run this group accounts for are left (for
    /// a report: at least one where they cannot be counted): its members
    /// ([`OwnGroup::members`]), and the leader if it left the group and is
    /// not reaped.
    pub fn left(&self) -> usize {
        let leader_outside = !self.leader_reaped.get() && crate::sys::getpgid(self.pgid()) != Some(self.pgid());
        self.members() + usize::from(leader_outside)
    }

    /// How many processes the group holds (zombies included), while its
    /// number is the run's: for the report and `--verbose`, asked during a
    /// stop, which must never wait on a scan of all of `/proc` (its cost is
    /// what the whole machine runs). So they are counted among pgrun's
    /// descendants ([`tree::members`], a walk that costs what the run has):
    /// pgrun is a child subreaper, so that is every process of the run, and
    /// the count is exact for them. A group that exists counts at least 1
    /// ("some"): where pgrun cannot walk so (the portable path, a kernel
    /// without children files), or where what it holds is not pgrun's
    /// descendant (a process outside the run put it there).
    pub fn members(&self) -> usize {
        if !self.exists() {
            return 0;
        }
        let found = tree::members(self.pgid(), self.guard.pid()).map_or(0, |m| m.total);
        found.max(1)
    }

    /// Enough of a census of the group to say whether only zombies that
    /// pgrun cannot reap hold it ([`Census::only_foreign_zombies`]). A
    /// member alive (or a zombie of pgrun's own) among pgrun's descendants
    /// says no at once: those found are the census, from a walk that costs
    /// what the run has ([`tree::members`]). Only when there is none does
    /// pgrun read all of `/proc` (Linux; `None` on the portable path), the
    /// one way to learn of members that are not its descendants: the walk
    /// would stand in for it on every turn of a drain, or of a stop's last
    /// grace, where a scan would cost what the machine runs.
    pub fn census(&self) -> Option<Census> {
        if let Some(found) = tree::members(self.pgid(), self.guard.pid())
            && found.any_but_foreign_zombies()
        {
            return Some(Census { members: found.total, zombies: found.zombies, own_zombies: found.own_zombies });
        }
        crate::sys::proc::group_census(self.pgid())
    }

    /// A stop step for a leader that left its group (the group's signal
    /// missed it): `signal` (then SIGCONT if `cont`) to its pid, which is
    /// the command's while pgrun, its parent, has not reaped it. Not sent
    /// (`Ok(false)`) if the leader is still in the group, has exited, or is
    /// reaped; an error says it could not be sent.
    pub fn signal_leader_outside(&self, signal: Signal, cont: bool) -> io::Result<bool> {
        let pid = self.pgid();
        if !self.leader_reachable() || crate::sys::getpgid(pid) == Some(pid) {
            return Ok(false);
        }
        let sent = process::signal_process(pid, signal);
        match &sent {
            Ok(true) => verbose!("sending {signal} to process {pid} (the command: it left its group)"),
            Ok(false) => {}
            Err(err) => verbose!("cannot send {signal} to process {pid} (the command: it left its group): {err}"),
        }
        if cont && matches!(sent, Ok(true)) {
            let _ = process::signal_process(pid, Signal::CONT);
        }
        sent
    }

    /// A `leader:` step: `signal` to the command's own process alone, then
    /// SIGCONT to it if `cont`. Only while [`OwnGroup::leader_reachable`]
    /// (its pid is the command's only until pgrun, its parent, reaps it):
    /// the caller asks first.
    pub fn signal_leader(&self, signal: Signal, cont: bool) -> io::Result<()> {
        let pid = self.pgid();
        let sent = process::signal_process(pid, signal);
        if let Err(err) = &sent {
            verbose!("cannot send {signal} to process {pid} (the command): {err}");
        }
        if cont {
            let _ = process::signal_process(pid, Signal::CONT);
        }
        sent.map(|_| ())
    }

    /// Whether the leader can be signalled alone: not reaped, and not
    /// exited waiting to be reaped (its SIGCHLD not read yet).
    pub fn leader_reachable(&self) -> bool {
        !self.leader_reaped.get() && !process::exited_unreaped(self.pgid())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn a_number_never_the_runs_is_never_used() {
        // No syscall either: pid 1's group would exist.
        let number = GroupNumber::new(1, false);
        assert!(!number.in_use());
        assert!(!number.exists());
    }

    /// A child that is killed and reaped however the test ends.
    struct Reaped(std::process::Child);

    impl Reaped {
        fn end(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    impl Drop for Reaped {
        fn drop(&mut self) {
            self.end();
        }
    }

    #[test]
    fn a_number_is_given_up_for_good_once_its_group_is_seen_empty() {
        let mut child = Reaped(std::process::Command::new("sleep").arg("30").process_group(0).spawn().unwrap());
        let pgid = child.0.id() as Pid;
        let number = GroupNumber::new(pgid, true);
        assert!(number.exists(), "the group of a live process exists");
        assert!(number.in_use());
        child.end();
        assert!(!number.exists(), "the group is empty once its only member is reaped");
        assert!(!number.in_use(), "an empty group's number is given up");
        assert!(!number.exists(), "and never used again");
    }
}

//! A process group by its number, used only while the number is provably
//! the run's.
//!
//! An empty process group never gains members again, but once its last
//! member is reaped its number can be taken by an unrelated new group. So
//! a run's group is signalled by its number (`kill(-pgid)`) only until the
//! number is first seen empty, and never again after: [`GroupNumber`]
//! holds that rule, for the group pgrun supervises ([`OwnGroup`]) and for
//! the guard's view of it ([`crate::contain::foreign::ForeignGroup`]),
//! which takes over where pgrun left off.

use crate::signame::Signal;
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
    guard: crate::guard::GuardChild,
    /// pgrun reaped the leader (or it was reaped by someone else): its pid
    /// may name another process from now on.
    leader_reaped: Cell<bool>,
}

impl OwnGroup {
    /// The group of the command pgrun has just started as `pgid`.
    pub fn new(pgid: Pid, guard: crate::guard::GuardChild) -> OwnGroup {
        OwnGroup { number: GroupNumber::new(pgid, true), guard, leader_reaped: Cell::new(false) }
    }

    pub fn pgid(&self) -> Pid {
        self.number.pgid()
    }

    /// Whether the group was seen empty (gone for good).
    pub fn ended(&self) -> bool {
        !self.number.in_use()
    }

    /// `kill(-pgid, 0)`, until it first reports the group empty; from then
    /// on the group is gone for good, and nothing is sent to its number.
    pub fn exists(&self) -> bool {
        let was = self.number.in_use();
        let exists = self.number.exists();
        if was && !exists {
            verbose!("process group {} is empty: gone for good", self.pgid());
            self.ended_now();
        }
        exists
    }

    /// `kill(-pgid, signal)` while the group exists (see
    /// [`OwnGroup::exists`]); `Ok(false)` once it is gone. An ESRCH while
    /// the leader is still pgrun's unreaped child cannot be true (the
    /// leader, even as a zombie, holds the group): it is an error, and the
    /// group is not taken for gone.
    pub fn signal(&self, signal: Signal) -> io::Result<bool> {
        if !self.number.in_use() {
            return Ok(false);
        }
        let pgid = self.pgid();
        let delivered = process::signal_group(pgid, signal)?;
        if !delivered && process::is_child(pgid) {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        if !delivered {
            self.number.give_up();
            self.ended_now();
        }
        Ok(delivered)
    }

    /// The group was seen empty: gone for good, for pgrun, for its panic
    /// hook (which would otherwise SIGKILL the number, perhaps somebody
    /// else's by then, in tree mode long before the run is gone) and (told
    /// through their shared page) for its guard.
    fn ended_now(&self) {
        crate::panic_stop::unwatch();
        self.guard.group_gone();
    }

    /// pgrun reaped the leader, or learnt that someone else did.
    pub fn leader_reaped(&self) {
        self.leader_reaped.set(true);
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

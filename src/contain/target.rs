//! What a stop acts on: "signal the run" and "is the run gone", asked of
//! one [`Target`] whatever the run is.
//!
//! Each kind of run answers in its own type:
//! - [`crate::contain::Scope`]: a run pgrun supervises (it is the parent of
//!   the command): its own group ([`crate::contain::group::OwnGroup`]), and
//!   what `--contain tree` or `cgroup` adds;
//! - [`crate::contain::foreign::ForeignGroup`]: a group whose pgrun is not
//!   its parent, held by pidfds (`pgrun cancel`'s fallback, the guard);
//! - [`crate::contain::cgroup::Leaf`]: the guard's view of a cgroup leaf
//!   (with its group).
//!
//! The supervisor drives a [`crate::contain::Scope`] from its event loop;
//! [`crate::stop::unsupervised::stop`] drives any of them from a blocking loop.

use crate::signame::Signal;
use std::io;
use std::os::fd::OwnedFd;

/// What is stopped: the run, as some kind of run defines it.
pub trait Target {
    /// For messages: "process group 4242", "cgroup /sys/fs/cgroup/...".
    fn describe(&self) -> String;

    /// One step of the stop sequence: send `signal` to everything in the
    /// target, and SIGCONT after it if `cont`; `last` is the final KILL. An
    /// error says the signal could not be sent where it had to go (a target
    /// that cannot tell says nothing).
    fn signal(&mut self, signal: Signal, cont: bool, last: bool) -> io::Result<()>;

    /// A `leader:` step: send `signal` (and SIGCONT after it if `cont`) to
    /// the run's leader alone, through a handle that cannot reach another
    /// process. `Ok(false)` if it cannot be sent so (the leader has exited,
    /// or cannot be held): the step is then skipped.
    fn signal_leader(&mut self, _signal: Signal, _cont: bool) -> io::Result<bool> {
        Ok(false)
    }

    /// Whether nothing of the run is left: the group is gone
    /// (`killpg(pgid, 0)` is ESRCH: a zombie is still a member), and what
    /// the target adds is too.
    fn gone(&mut self) -> bool;

    /// Whether what is left of the run is only zombies that nothing here
    /// can reap (their parent is someone else): nothing is left to signal,
    /// and the run is over once their parent reaps them. Asked when the
    /// target is not [`Target::gone`]; a target that cannot tell says no.
    fn only_zombies(&mut self) -> bool {
        false
    }

    /// Whether everything left of the run has been dealt its death and is
    /// on its way out ([`crate::sys::proc::after_kill`]: a KILL pending,
    /// its exit begun, or dead): asked after the final KILL, when nothing
    /// more can be sent, to tell a run still dying (waited for) from one
    /// that survived. A target that cannot tell says no.
    fn dying(&mut self) -> bool {
        false
    }

    /// A fresh fd that signals a change with POLLPRI, if the target has
    /// one (a blocking driver waits on it instead of polling).
    fn events(&self) -> Option<OwnedFd> {
        None
    }
}

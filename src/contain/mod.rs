//! What "the run" is, and so what is stopped and waited for:
//! `--contain group|tree|cgroup|auto`.
//!
//! A process group is not a seal: a descendant can call setsid or setpgid
//! and leave it. [`Scope`] is the run as the mode in force defines it, and
//! the one thing the supervisor asks to signal the run and to say whether
//! it is gone:
//! - `group`: the command's process group (everywhere; the only mode off
//!   Linux);
//! - `tree`: the group plus every descendant of pgrun wherever it moved
//!   (see [`tree`]); gone when the group is gone and pgrun has no child
//!   left but its guard;
//! - `cgroup`: the group plus everything in a cgroup v2 leaf the command
//!   was born in (see [`cgroup`]); gone when the group is gone and the leaf
//!   is not populated;
//! - `auto`: `cgroup` where a leaf can be created, else `tree`.

pub mod cgroup;
pub mod tree;

use crate::signame::Signal;
use crate::sys::{Pid, process};
use crate::verbose;
use anyhow::{Result, bail};
use std::collections::BTreeSet;
use std::os::fd::{BorrowedFd, RawFd};

/// What the run is: the `--contain` values (the command line has its own
/// copy, [`crate::cli::Contain`], so that this module knows nothing of clap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The command's process group only.
    Group,
    /// The group and every descendant of pgrun (Linux).
    Tree,
    /// Everything in a new cgroup v2 leaf (Linux, delegated cgroup2).
    Cgroup,
    /// cgroup where a leaf can be created, else tree.
    Auto,
}

impl Mode {
    /// The default: `tree` where pgrun can walk its descendants (Linux),
    /// `group` elsewhere.
    pub fn default_here() -> Mode {
        if crate::sys::CAN_CONTAIN { Mode::Tree } else { Mode::Group }
    }

    /// The name used on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Group => "group",
            Mode::Tree => "tree",
            Mode::Cgroup => "cgroup",
            Mode::Auto => "auto",
        }
    }
}

/// The run as the mode in force defines it.
pub struct Scope {
    mode: Mode,
    pgid: Pid,
    /// The guard: a child of pgrun that is not part of the run (its pid
    /// while unreaped, as the guard's handle says).
    guard: crate::guard::GuardChild,
    leaf: Option<cgroup::Leaf>,
    /// Processes outside the group that a stop step reached.
    escaped: BTreeSet<Pid>,
    /// The group was seen empty once: gone for good (see
    /// [`Scope::group_exists`]).
    group_ended: std::cell::Cell<bool>,
}

impl Scope {
    /// Settle `requested` into the mode in force, before the command
    /// starts: create the cgroup leaf for `cgroup` (an error if none can be
    /// had) and `auto` (falling back to `tree`).
    pub fn prepare(requested: Mode, limits: &crate::cgroup_limits::CgroupLimits) -> Result<Scope> {
        let linux = crate::sys::CAN_CONTAIN;
        let (mode, leaf) = match requested {
            Mode::Group => (Mode::Group, None),
            Mode::Tree | Mode::Cgroup if !linux => {
                bail!("--contain {} needs Linux; only group is available here", requested.name())
            }
            Mode::Tree => (Mode::Tree, None),
            Mode::Cgroup => match cgroup::Leaf::create(limits) {
                Ok(leaf) => (Mode::Cgroup, Some(leaf)),
                Err(why) => bail!("--contain cgroup: {why}"),
            },
            Mode::Auto if !linux => (Mode::Group, None),
            Mode::Auto => match cgroup::Leaf::create(limits) {
                Ok(leaf) => (Mode::Cgroup, Some(leaf)),
                Err(why) => {
                    verbose!("--contain auto: no cgroup ({why}); using tree");
                    (Mode::Tree, None)
                }
            },
        };
        if let Some(leaf) = &leaf {
            verbose!("created cgroup {}", leaf.dir().display());
        }
        Ok(Scope {
            mode,
            pgid: 0,
            guard: Default::default(),
            leaf,
            escaped: BTreeSet::new(),
            group_ended: Default::default(),
        })
    }

    /// The mode in force.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn leaf(&self) -> Option<&cgroup::Leaf> {
        self.leaf.as_ref()
    }

    /// The fd of `cgroup.procs` the command joins before exec, in cgroup
    /// mode.
    pub fn join_fd(&self) -> Option<RawFd> {
        self.leaf.as_ref().and_then(cgroup::Leaf::procs_fd)
    }

    /// The command has started as group `pgid`.
    pub fn started(&mut self, pgid: Pid) {
        self.pgid = pgid;
    }

    /// pgrun's guard, which is not part of the run.
    pub fn set_guard(&mut self, guard: crate::guard::GuardChild) {
        self.guard = guard;
    }

    /// One step of the stop sequence: `signal` to the group, then to what
    /// the mode adds (SIGCONT after each if `cont`); `last` is the final
    /// KILL, which in cgroup mode is `cgroup.kill`. An error says the
    /// signal could not be sent to the group.
    pub fn signal(&mut self, signal: Signal, cont: bool, last: bool) -> std::io::Result<()> {
        let sent = self.signal_group(signal);
        if let Err(err) = &sent {
            verbose!("cannot send {} to process group {}: {err}", signal, self.pgid);
        }
        if cont {
            let _ = self.signal_group(Signal::CONT);
        }
        match (self.mode, &self.leaf) {
            // Once the group's number is taken for gone (it may be someone
            // else's), whatever of the run is still in the group is reached
            // as a descendant, by pidfd: a false ESRCH spares nothing.
            (Mode::Tree, _) => tree::signal_escapees(
                self.pgid,
                self.guard.pid(),
                signal,
                cont,
                self.group_ended.get(),
                &mut self.escaped,
            ),
            (Mode::Cgroup, Some(leaf)) => {
                // Count the members outside the group before the kill, then
                // kill them all at once.
                leaf.signal_members(
                    Some(self.pgid),
                    if last { Signal::PROBE } else { signal },
                    cont && !last,
                    &mut self.escaped,
                );
                if last && let Err(e) = leaf.kill() {
                    verbose!("cannot write cgroup.kill of {}: {e}", leaf.dir().display());
                    leaf.signal_members(None, signal, false, &mut self.escaped);
                }
            }
            _ => {}
        }
        sent.map(|_| ())
    }

    /// Whether the run is over: the group is gone (`kill(-pgid, 0)` is
    /// ESRCH, which counts zombies as members) and, in tree mode, pgrun has
    /// no child left but its guard, in cgroup mode the leaf is empty. The
    /// caller has reaped every child that has ended.
    pub fn is_gone(&self) -> bool {
        !self.group_exists() && self.is_gone_except_group()
    }

    /// `kill(-pgid, 0)`, until it first reports the group empty. An empty
    /// group never gains members again, but its number can be taken by an
    /// unrelated new group once the leader is reaped: from then on the
    /// group is gone for good, and nothing is sent to its number.
    pub fn group_exists(&self) -> bool {
        if self.group_ended.get() {
            return false;
        }
        let exists = process::group_exists(self.pgid);
        if !exists {
            verbose!("process group {} is empty: gone for good", self.pgid);
            self.end_group();
        }
        exists
    }

    /// `kill(-pgid, signal)` while the group exists (see
    /// [`Scope::group_exists`]); `Ok(false)` once it is gone. An ESRCH
    /// while the leader is still pgrun's unreaped child cannot be true
    /// (the leader, even as a zombie, holds the group): it is an error,
    /// and the group is not taken for gone.
    pub fn signal_group(&self, signal: Signal) -> std::io::Result<bool> {
        if self.group_ended.get() {
            return Ok(false);
        }
        let delivered = process::signal_group(self.pgid, signal)?;
        if !delivered && process::is_child(self.pgid) {
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
        if !delivered {
            self.end_group();
        }
        Ok(delivered)
    }

    /// The group was seen empty: gone for good, for pgrun and (told through
    /// their shared page) for its guard.
    fn end_group(&self) {
        self.group_ended.set(true);
        self.guard.group_gone();
    }

    /// Whether what the mode adds to the group is gone (always, in group
    /// mode).
    pub fn is_gone_except_group(&self) -> bool {
        match (self.mode, &self.leaf) {
            (Mode::Tree, _) => !tree::has_children_besides(self.guard.pid()),
            (Mode::Cgroup, Some(leaf)) => !leaf.populated(),
            _ => true,
        }
    }

    /// An fd whose POLLPRI says the run may have changed (cgroup mode's
    /// `cgroup.events`); `None` while it cannot be read (the caller then
    /// checks on its backoff: a poll that cannot be re-armed would spin).
    pub fn events(&self) -> Option<BorrowedFd<'_>> {
        self.leaf.as_ref().and_then(cgroup::Leaf::events)
    }

    /// Read `cgroup.events` after poll reported a change: that re-arms
    /// the notification, so the next poll sleeps until the next change.
    pub fn rearm_events(&self) {
        if let Some(leaf) = &self.leaf {
            let _ = leaf.populated();
        }
    }

    /// What the cgroup leaf's accounting files say (cgroup mode, while the
    /// leaf is there): read at the end of the run, before it is removed.
    pub fn leaf_accounting(&self) -> Option<crate::sys::cgroup::Accounting> {
        self.leaf.as_ref().and_then(cgroup::Leaf::accounting)
    }

    /// Remove the cgroup leaf (cgroup mode), once the run is gone; the
    /// path left behind if it cannot be removed (said in a warning).
    pub fn remove_leaf(&self) -> Option<std::path::PathBuf> {
        self.leaf.as_ref().and_then(cgroup::Leaf::remove)
    }

    /// How many processes outside the group the stop reached.
    pub fn escaped(&self) -> usize {
        self.escaped.len()
    }

    pub fn pgid(&self) -> Pid {
        self.pgid
    }
}

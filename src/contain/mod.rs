//! What "the run" is, and so what is stopped and waited for:
//! `--contain group|tree|cgroup|auto`; and the one place that answers
//! "signal the run" and "is the run gone", for every kind of run
//! ([`Target`]).
//!
//! A process group is not a seal: a descendant can call setsid or setpgid
//! and leave it. [`Scope`] is a run pgrun supervises, as the mode in force
//! defines it: its own group ([`OwnGroup`], pgrun is the leader's parent)
//! and what the mode adds ([`Beyond`]):
//! - `group`: the command's process group (everywhere; the only mode off
//!   Linux);
//! - `tree`: the group plus every descendant of pgrun wherever it moved
//!   (see [`tree`]); gone when the group is gone and pgrun has no child
//!   left but its guard;
//! - `cgroup`: the group plus everything in a cgroup v2 leaf the command
//!   was born in (see [`cgroup`]); gone when the group is gone and the leaf
//!   is not populated;
//! - `auto`: `cgroup` where a leaf can be created, else `tree`.
//!
//! A run no pgrun supervises (`pgrun cancel`'s fallback, the guard's once
//! pgrun was killed) is a [`ForeignGroup`], held by pidfds, or the guard's
//! cgroup [`cgroup::Leaf`]. A group is used by its number only until it is
//! first seen empty, in either case ([`group::GroupNumber`]).

pub mod cgroup;
pub mod foreign;
pub mod group;
pub mod guardian;
pub mod self_leaf;
pub mod target;
pub mod tree;
pub mod user_scope;

pub use foreign::ForeignGroup;
pub use group::OwnGroup;
pub use guardian::{Guardian, SharedGuardian};
pub use target::Target;

use crate::signame::Signal;
use crate::verbose;
use anyhow::{Result, bail};
use std::collections::BTreeSet;
use std::os::fd::{BorrowedFd, RawFd};

/// What the run is: the `--contain` values (the command line has its own
/// copy, `cli::Contain`, so that this module knows nothing of clap).
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

    /// The mode in force for `asked` (`--contain`, if given) with
    /// `limits`: a cgroup limit makes the default (and `auto`) `cgroup`.
    pub fn resolve(asked: Option<Mode>, limits: &crate::cgroup_limits::CgroupLimits) -> Mode {
        match asked {
            None | Some(Mode::Auto) if limits.any() => Mode::Cgroup,
            Some(mode) => mode,
            None => Mode::default_here(),
        }
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

/// What the mode in force adds to the command's group: one variant per
/// mode (`auto` has settled into one of the others).
pub enum Beyond {
    /// `group`: nothing.
    Nothing,
    /// `tree`: every descendant of pgrun but the guard.
    Tree,
    /// `cgroup`: everything in the leaf.
    Cgroup(cgroup::Leaf),
}

/// The run pgrun supervises, as the mode in force defines it.
pub struct Scope {
    beyond: Beyond,
    /// The command's group, once it has started (see [`Scope::started`]).
    group: Option<OwnGroup>,
    /// The guard: a child of pgrun that is not part of the run (its pid
    /// while unreaped, as the guard's handle says).
    guard: SharedGuardian,
    /// Processes outside the group that a stop step reached.
    escaped: BTreeSet<crate::sys::Pid>,
}

impl Scope {
    /// Settle `requested` into the mode in force, before the command
    /// starts: create the cgroup leaf for `cgroup` (an error if none can be
    /// had) and `auto` (falling back to `tree`).
    ///
    /// With it, pgrun's own leaf if pgrun had to move into one to enable a
    /// limit's controller ([`cgroup::SelfLeaf`]): the caller keeps it until
    /// pgrun's work is over (it is left when dropped).
    pub fn prepare(
        requested: Mode,
        limits: &crate::cgroup_limits::CgroupLimits,
    ) -> Result<(Scope, Option<cgroup::SelfLeaf>)> {
        let linux = crate::sys::CAN_CONTAIN;
        let mut self_leaf = None;
        let mut made = |(leaf, own): (cgroup::Leaf, Option<cgroup::SelfLeaf>)| {
            self_leaf = own;
            Beyond::Cgroup(leaf)
        };
        let beyond = match requested {
            Mode::Group => Beyond::Nothing,
            Mode::Tree | Mode::Cgroup if !linux => {
                bail!("--contain {} needs Linux; only group is available here", requested.name())
            }
            Mode::Tree => Beyond::Tree,
            Mode::Cgroup => match cgroup::Leaf::create(limits) {
                Ok(created) => made(created),
                Err(why) => bail!("{}", crate::cgroup_limits::no_leaf(limits, &why)),
            },
            Mode::Auto if !linux => Beyond::Nothing,
            Mode::Auto => match cgroup::Leaf::create(limits) {
                Ok(created) => made(created),
                Err(why) => {
                    verbose!("--contain auto: no cgroup ({why}); using tree");
                    Beyond::Tree
                }
            },
        };
        if let Beyond::Cgroup(leaf) = &beyond {
            verbose!("created cgroup {}", leaf.dir().display());
        }
        Ok((Scope { beyond, group: None, guard: guardian::none(), escaped: BTreeSet::new() }, self_leaf))
    }

    /// The mode in force.
    pub fn mode(&self) -> Mode {
        match self.beyond {
            Beyond::Nothing => Mode::Group,
            Beyond::Tree => Mode::Tree,
            Beyond::Cgroup(_) => Mode::Cgroup,
        }
    }

    pub fn leaf(&self) -> Option<&cgroup::Leaf> {
        match &self.beyond {
            Beyond::Cgroup(leaf) => Some(leaf),
            _ => None,
        }
    }

    /// The fd of `cgroup.procs` the command joins before exec, in cgroup
    /// mode.
    pub fn join_fd(&self) -> Option<RawFd> {
        self.leaf().and_then(cgroup::Leaf::procs_fd)
    }

    /// pgrun's guard, which is not part of the run.
    pub fn set_guard(&mut self, guard: SharedGuardian) {
        self.guard = guard;
    }

    /// The command has started as group `pgid`.
    pub fn started(&mut self, pgid: crate::sys::Pid) {
        self.group = Some(OwnGroup::new(pgid, self.guard.clone()));
    }

    /// The command's group. Asked only once the command has started: the
    /// supervisor, the stop and the terminal's job control come after.
    pub fn group(&self) -> &OwnGroup {
        self.group.as_ref().expect("the command's group is asked for before the command started")
    }

    pub fn pgid(&self) -> crate::sys::Pid {
        self.group().pgid()
    }

    /// Whether the run is over: the leader is reaped (it may have left the
    /// group), the group is gone (`kill(-pgid, 0)` is ESRCH, which counts
    /// zombies as members) and, in tree mode, pgrun has
    /// no child left but its guard, in cgroup mode the leaf is empty. The
    /// caller has reaped every child that has ended.
    pub fn is_gone(&self) -> bool {
        self.group().leader_gone() && !self.group_exists() && self.is_gone_except_group()
    }

    /// Whether the command's group exists: [`OwnGroup::exists`], which
    /// uses the group's number until it first reports the group empty (an
    /// empty group never gains members again, but its number can be taken
    /// by an unrelated new group once the leader is reaped): from then on
    /// the group is gone for good, and nothing is sent to its number.
    pub fn group_exists(&self) -> bool {
        self.group().exists()
    }

    /// `kill(-pgid, signal)` while the group exists: [`OwnGroup::signal`].
    pub fn signal_group(&self, signal: Signal) -> std::io::Result<bool> {
        self.group().signal(signal)
    }

    /// Whether what the mode adds to the group is gone (always, in group
    /// mode).
    pub fn is_gone_except_group(&self) -> bool {
        match &self.beyond {
            Beyond::Nothing => true,
            Beyond::Tree => !tree::has_children_besides(self.guard.pid()),
            Beyond::Cgroup(leaf) => !leaf.populated(),
        }
    }

    /// An fd whose POLLPRI says the run may have changed (cgroup mode's
    /// `cgroup.events`); `None` while it cannot be read (the caller then
    /// checks on its backoff: a poll that cannot be re-armed would spin).
    pub fn change_fd(&self) -> Option<BorrowedFd<'_>> {
        self.leaf().and_then(cgroup::Leaf::events)
    }

    /// Read `cgroup.events` after poll reported a change: that re-arms
    /// the notification, so the next poll sleeps until the next change.
    pub fn rearm_events(&self) {
        if let Some(leaf) = self.leaf() {
            let _ = leaf.populated();
        }
    }

    /// What the cgroup leaf's accounting files say (cgroup mode, while the
    /// leaf is there): read at the end of the run, before it is removed.
    pub fn leaf_accounting(&self) -> Option<crate::sys::cgroup::Accounting> {
        self.leaf().and_then(cgroup::Leaf::accounting)
    }

    /// Remove the cgroup leaf (cgroup mode), once the run is gone; the
    /// path left behind if it cannot be removed (said in a warning).
    pub fn remove_leaf(&self) -> Option<std::path::PathBuf> {
        self.leaf().and_then(cgroup::Leaf::remove)
    }

    /// How many processes outside the group the stop reached.
    pub fn escaped(&self) -> usize {
        self.escaped.len()
    }
}

/// The supervisor's target: the stop sequence's steps and its question
/// "is the run gone" (the supervisor has reaped what ended).
impl Target for Scope {
    fn describe(&self) -> String {
        format!("process group {}", self.pgid())
    }

    /// One step of the stop sequence: `signal` to the group, then to what
    /// the mode adds (SIGCONT after each if `cont`), and, in every mode, to
    /// the leader by its pid if it left the group and nothing else reached
    /// it (pgrun, its parent, may until it reaps it); `last` is the final
    /// KILL, which in cgroup mode is `cgroup.kill`. An error says the
    /// signal could not be sent to the group, or to the leader outside it,
    /// or (tree mode) that a descendant could not be found, held or
    /// signalled.
    fn signal(&mut self, signal: Signal, cont: bool, last: bool) -> std::io::Result<()> {
        let group = self.group.as_ref().expect("the run is signalled before the command started");
        let pgid = group.pgid();
        let sent = group.signal(signal);
        if let Err(err) = &sent {
            verbose!("cannot send {} to process group {}: {err}", signal, pgid);
        }
        if cont {
            let _ = group.signal(Signal::CONT);
        }
        // What this step reached outside the group.
        let mut reached = BTreeSet::new();
        // Whether the tree's walk reached everything it found.
        let mut walked = Ok(());
        match &self.beyond {
            Beyond::Nothing => {}
            // Once the group's number is taken for gone (it may be someone
            // else's), whatever of the run is still in the group is reached
            // as a descendant, by pidfd: a false ESRCH spares nothing.
            Beyond::Tree => {
                walked = tree::signal_escapees(pgid, self.guard.pid(), signal, cont, group.ended(), &mut reached)
            }
            Beyond::Cgroup(leaf) => {
                // Count the members outside the group before the kill, then
                // kill them all at once.
                leaf.signal_members(Some(pgid), if last { Signal::PROBE } else { signal }, cont && !last, &mut reached);
                if last && let Err(e) = leaf.kill() {
                    verbose!("cannot write cgroup.kill of {}: {e}", leaf.dir().display());
                    leaf.signal_members(None, signal, false, &mut reached);
                }
            }
        }
        let leader = match reached.contains(&pgid) {
            true => Ok(false),
            false => group.signal_leader_outside(signal, cont),
        };
        if let Ok(true) = leader {
            reached.insert(pgid);
        }
        self.escaped.extend(reached);
        sent.and(leader).and(walked.map(|()| true)).map(|_| ())
    }

    /// Through `kill(pid)`: pgrun is the leader's parent, so its pid is the
    /// command's until pgrun reaps it.
    fn signal_leader(&mut self, signal: Signal, cont: bool) -> std::io::Result<bool> {
        let group = self.group();
        if !group.leader_reachable() {
            return Ok(false);
        }
        group.signal_leader(signal, cont).map(|()| true)
    }

    fn gone(&mut self) -> bool {
        self.is_gone()
    }
}

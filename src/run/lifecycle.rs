//! The run's life, in one place: what happens when the command has
//! started, the run is published, a stop starts, the leader is reaped, the
//! run is gone, and it is withdrawn, and which party reacts to each.
//!
//! The parties are the ones that hold something of the run and must hear
//! of it: the run itself ([`Scope`], which knows the group only once the
//! command has started), the terminal's job control ([`Terminal`], which
//! gives the terminal back), the panic stop ([`crate::panic_stop`], which
//! kills the group a panic leaves behind), the guard ([`Guard`], which
//! stops the run and removes its files if pgrun is killed), and the cancel
//! marker (created when a stop starts, so that a marker next to a live pid
//! file means "stopping"; at the end held as pgrun's note until it exits).
//! The run mode ([`crate::run`]) and the supervisor
//! ([`crate::run::supervisor`]) say when each event happens; what it means
//! to each party is said here.
//!
//! [`Lifecycle`] borrows the parties from the run mode for as long as one
//! step needs them: no copies of their state, no thread, no callbacks.

use crate::contain::Scope;
use crate::guard::Guard;
use crate::pidfile;
pub use crate::pidfile::Taken as MarkerTaken;
use crate::sys::Pid;
use crate::terminal::Terminal;
use crate::verbose;
use std::path::Path;

/// The parties that react to the run's events (see the module doc).
pub struct Lifecycle<'a> {
    /// The run, as `--contain` defines it.
    pub scope: &'a mut Scope,
    /// The terminal and its job-control rules (`None` with --setsid).
    pub terminal: Option<&'a Terminal>,
    /// The guard (`None` with --no-guard, or once withdrawn).
    pub guard: &'a mut Option<Guard>,
    /// The cancel marker's path.
    pub marker: Option<&'a Path>,
    /// The marker the run took for its own when it started stopping (its
    /// note, or the request that cancelled it): the only one it removes.
    pub marker_taken: &'a mut Option<MarkerTaken>,
}

impl Lifecycle<'_> {
    /// The command has started as group `pgid`: from now on the run is
    /// that group (and what the mode adds), a panic kills it, and the
    /// terminal is given back from it.
    pub fn started(&mut self, pgid: Pid) {
        self.scope.started(pgid);
        crate::exit_hooks::watch_group(pgid);
        if let Some(terminal) = self.terminal {
            terminal.started(pgid);
        }
    }

    /// The run is published in the pid file `published`: the guard removes
    /// that file (if it is still this one) should pgrun die.
    pub fn published(&self, published: &pidfile::Published) {
        if let Some(guard) = self.guard.as_ref() {
            let (dev, ino) = published.id();
            guard.published(dev, ino);
        }
    }

    /// The pid file is claimed, its record to be is the file `record`
    /// (device and inode): the guard removes the pid file should it name
    /// that record when pgrun dies, from the moment it is in place (before
    /// pgrun has said it is published: see [`Lifecycle::published`]), and
    /// never another file (a stale file the claim found, or a later run's).
    pub fn claimed(&self, (dev, ino): (u64, u64)) {
        if let Some(guard) = self.guard.as_ref() {
            guard.published(dev, ino);
        }
    }

    /// A stop sequence starts: create the marker (so that a marker next to
    /// a live pid file means "stopping") and tell the guard it is ours to
    /// remove; hand the guard the group's members (`leader_unreaped`: the
    /// leader still holds the group's number), unless pgrun already saw
    /// the group empty: its number may be somebody else's by now, and so
    /// may whatever is found by it (the guard knows the group is gone).
    pub fn stopping(&mut self, leader_unreaped: bool) {
        let pgid = self.scope.pgid();
        if let Some(marker) = self.marker {
            match pidfile::create_note(marker, pgid) {
                Ok(note) => {
                    *self.marker_taken = MarkerTaken::at(marker, note);
                    if let Some(guard) = self.guard.as_ref() {
                        guard.marker(marker, note);
                    }
                }
                Err(e) => verbose!("cannot create {}: {e}", marker.display()),
            }
        }
        if let Some(guard) = self.guard.as_ref() {
            guard.hold_members(self.scope.group(), leader_unreaped);
        }
    }

    /// pgrun reaped the leader `pid`: its pid may name another process from
    /// now on, and the guard is handed the members it left behind.
    pub fn leader_reaped(&self, pid: Pid) {
        let group = self.scope.group();
        debug_assert_eq!(group.pgid(), pid, "the leader's pid is its group's id");
        group.leader_reaped();
        if let Some(guard) = self.guard.as_ref() {
            guard.hold_members(group, false);
        }
    }

    /// The leader is gone without pgrun reaping it (someone else did).
    pub fn leader_lost(&self) {
        self.scope.group().leader_reaped();
    }

    /// Whether `pid`, a child pgrun reaped, is the guard; if so, its handle
    /// is told (it never signals or waits for that pid again).
    pub fn guard_reaped(&self, pid: Pid) -> bool {
        let Some(guard) = self.guard.as_ref().filter(|g| g.is(pid)) else { return false };
        guard.reaped();
        true
    }

    /// The run is gone: a later panic must not signal its group's number,
    /// which may be reused (already so since the group was first seen
    /// empty: [`crate::contain::OwnGroup`] unwatches it then).
    pub fn gone(&self) {
        crate::exit_hooks::forget_group();
    }

    /// The run is gone: the marker the run took (its note, or the request
    /// that cancelled it), or for a run that was `published` any request
    /// there (a cancel's for this run), becomes the note pgrun holds until
    /// it exits (see [`pidfile::hold_ending_note`]: a cancel that comes
    /// once the pid file is gone finds the run's end under way and waits
    /// for that exit); a note an earlier run left is removed; never a
    /// request for the next run. Called once the run is marked over (see
    /// [`pidfile::Published::mark_over`]) and before the pid file goes, so
    /// that a reader never finds neither.
    pub fn end_marker(&self, published: bool) -> Option<pidfile::EndingNote> {
        let marker = self.marker?;
        let owner = crate::sys::geteuid();
        let tell_guard = |dev, ino| {
            if let Some(guard) = self.guard.as_ref() {
                guard.ending_note(dev, ino);
            }
        };
        let note =
            pidfile::hold_ending_note(marker, self.scope.pgid(), owner, *self.marker_taken, published, tell_guard)?;
        if let Some(guard) = self.guard.as_ref() {
            guard.marker(marker, true);
        }
        Some(note)
    }

    /// The run is over and withdrawn (its leaf and files removed): release
    /// the guard before the output's last flush, which may wait on a slow
    /// reader as long as it takes (a stalled reader then holds only pgrun),
    /// unless pgrun holds a note at the marker path (`note`): then the
    /// guard stays armed until that note is removed, as pgrun exits (see
    /// [`Withdrawn`]), so that a SIGKILL of pgrun during the flush still
    /// leaves the guard to remove it. Its handle knows whether it died
    /// during the run and was reaped, and then never signals or waits for
    /// its pid again. The guard is returned, to be reaped when dropped.
    pub fn release_guard(self, note: bool) -> Option<Guard> {
        let mut guard = self.guard.take();
        if let Some(guard) = &mut guard
            && !note
        {
            guard.release();
        }
        guard
    }

    /// pgrun ends while the run may not be gone (it could not stop it):
    /// the guard is left armed, to finish the stop once pgrun is gone, and
    /// is neither released nor reaped.
    pub fn leave_guard_on_duty(self) {
        if let Some(guard) = self.guard.take() {
            guard.leave_on_duty();
        }
    }
}

/// What outlives the run's withdrawal until pgrun exits, dropped in this
/// order (after the report and the output's last flush): the note pgrun
/// holds at the marker path (removed first), then the guard (released if
/// it was not yet, and reaped: it was kept armed while the note was held,
/// so a SIGKILL of pgrun never leaves the note), then pgrun's own cgroup
/// leaf, if it had one (left once the guard is reaped: see
/// [`crate::contain::cgroup::SelfLeaf`]). A run that ended before its
/// start keeps the same until its report is written (see
/// [`super::prepare::Early`]).
#[derive(Default)]
pub struct Withdrawn {
    pub ending: Option<pidfile::EndingNote>,
    pub guard: Option<Guard>,
    pub self_leaf: Option<crate::contain::cgroup::SelfLeaf>,
}

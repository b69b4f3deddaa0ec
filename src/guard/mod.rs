//! The guard: a small copy of pgrun that stops the run if pgrun is killed
//! with SIGKILL (by a harness's timeout, the OOM killer, `kill -9`, or a
//! kill of the caller's whole process group).
//!
//! Before the command starts pgrun forks the guard (no exec: it is pgrun's
//! own code, already in memory). The guard moves into a process group of
//! its own, so a kill of the caller's group does not take it, keeps only
//! its end of a socket pair whose other end only pgrun holds
//! (close-on-exec, so the command never inherits it), and blocks until
//! that end hangs up: no CPU, no wake-ups, not even at the spawn. What the
//! guard will need it is handed as it becomes known: the group id and the
//! identity of the pid file and marker pgrun published go into a page
//! shared with the guard (no syscall); on Linux, pidfds go over the socket
//! ([`sys::guard_channel`]; the guard asks to be woken only by a hang-up, so
//! these do not wake it): one of the command's process, which that process
//! sends itself before its exec (so a pgrun SIGKILLed at any moment of the
//! spawn leaves nothing the guard does not hold: the socket cannot hang up
//! before that process has exec'd, since it holds a copy of pgrun's end
//! until then), and those of the members when a stop starts or when the
//! leader is reaped while members live. The socket hangs up when pgrun
//! exits, however it exits. If pgrun
//! marked the page "released" first, it is ending normally: the guard
//! exits, and pgrun reaps it. Otherwise the guard makes sure pgrun is
//! really gone (it was reparented: `getppid()` is no longer pgrun; an
//! error of the wait alone proves nothing, and the guard waits again), then
//! runs the stop sequence on the run (on the cgroup leaf in cgroup mode,
//! then removes the leaf) until the run is gone (a zombie is still a
//! member of its group: once nothing else is left, the guard waits for
//! its new parent to reap it, as long as the sequence's longest grace, at
//! least a second, then gives up and says so), removes every temporary
//! name pgrun had made and not yet placed or removed (the starting name
//! of the pid file, `--report`'s, `--output-file`'s, a note's, and on the
//! portable path `--stdin-pipe`'s folder with what it holds: pgrun
//! records each, before it appears, in memory the guard shares, see
//! [`crate::exit_hooks`]) if it still names the file pgrun made there, the
//! pid file if it is still the run's record (same device and inode, known
//! from the claim on, so also in the instant between its placement and
//! pgrun saying so) and stale (no live run's lock on it: a new run may
//! have published a file with the old inode number), and the marker if it
//! is still what pgrun left there (its own stopping note, or the request
//! that cancelled the run: a cancel may have made a request of the note
//! since, for the next run), and exits.
//!
//! pgrun forks the guard before it names any file of the run but the
//! report's temporary file (which has no name on Linux, see
//! [`crate::atomic_file::TempFile::unnamed`]), and lets it go only once
//! the last of them is placed or removed (see `run::finish`): so a SIGKILL
//! of pgrun at any point leaves nothing of the run's files behind.
//!
//! The guard stops only what is the run's, and never signals a group
//! number that may have been given to somebody else. A number is free
//! for a new process (and so for a new group) only once no process has it
//! as its pid, group or session: while any process of the run's group is
//! left, alive or a zombie, the number is the group's. So:
//! - a held pidfd of a process not yet reaped that is the leader (its pid
//!   is the number) or still in the group proves the number is the run's
//!   (checked again after a look in `/proc`, so the look saw the run's
//!   group);
//! - pgrun itself uses the number until it first sees the group empty
//!   ([`crate::contain::Scope::group_exists`]: gone for good), and says so
//!   in the shared page the moment it does (a store: no syscall, no
//!   wake-up). Until then the number was the run's for as long as pgrun
//!   lived, and the guard goes on from where pgrun was: it uses the number
//!   (`kill(-pgid)`, besides the pidfds it holds) until it sees the group
//!   empty itself, and never again after. This is how it reaches members
//!   born after pgrun last handed pidfds over (a straggler's child, a
//!   `--wait-group` member's), and how it stops the run at all where no
//!   pidfd can be opened (ENOSYS, EPERM from a seccomp filter, EMFILE).
//!   The one window is between pgrun's last look and the guard's first:
//!   the group may have emptied then. If pgrun died with the leader
//!   unreaped, the leader held the number up to pgrun's death, and the
//!   window is only from the moment pgrun's subreaper reaps it to the
//!   guard's look, which follows pgrun's death at once (the hang-up). Even
//!   then a reuse needs the kernel to hand out that very number again,
//!   and pids are allocated in turn: a freed number comes back only after
//!   the counter has gone round all of `pid_max`; pgrun relies on the
//!   same between two of its own looks.
//! - once pgrun saw the group empty, only held pidfds count, and the
//!   members found while one of them is unreaped and in the group.
//!
//! Off Linux (no pidfds) the guard signals the group by number, under the
//! same rule: not once pgrun saw it empty.
//!
//! On pgrun's side, [`Guard`] is the one holder of the guard's state: the
//! supervisor tells it when it reaps the guard's pid, so that nothing
//! signals or waits for that pid afterwards (it may be reused).
//!
//! The guard never returns into the code it was forked from (destructors
//! there would act on pgrun's files): it ends with `_exit`, and a panic in
//! it ends there too (its own panic hook, installed first thing, exits).

use crate::backoff::Backoff;
use crate::contain::cgroup::Leaf;
use crate::contain::foreign::ForeignGroup;
use crate::contain::{Guardian, OwnGroup};
use crate::say;
use crate::signame::Signal;
use crate::stop::sequence::StopSequence;
use crate::stop::unsupervised;
use crate::sys::pidfd::Pidfd;
use crate::sys::{self, Pid, guard_channel, lifetime, process};
use crate::test_hook;
use std::cell::{Cell, RefCell};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use withdraw::{remove_marker_if_ours, remove_pidfile_if_ours, remove_temporaries_left};

mod withdraw;

/// The guard's name in `ps` (`/proc/PID/comm`).
pub const NAME: &str = "pgrun-guard";

/// Slots of the shared page. An identity takes three: device, inode, and
/// a 1 stored after both that says they are valid.
const PGID: usize = 0;
const PIDFILE: usize = 1;
const MARKER: usize = 4;
const RELEASED: usize = 7;
/// 1 once pgrun has seen the run's group empty: gone for good, and its
/// number no longer the run's.
const GROUP_GONE: usize = 8;
/// The note pgrun holds at the marker path at its end ([`Guard::ending_note`]).
const ENDING_NOTE: usize = 9;

/// How many members pgrun hands its guard in one run, at most (one
/// message's worth): see [`Guard::hold_members`].
pub const MEMBERS_HANDED: usize = 32;

/// What the marker's third slot says besides "valid": pgrun's own
/// stopping note, or a request it found (see [`Guard::marker`]).
const MARKER_NOTE: u64 = 1;
const MARKER_REQUEST: u64 = 2;

/// The guard's exit status when it panicked.
const PANICKED: u8 = 70;

/// What the guard must know to stop the run without pgrun.
pub struct Plan {
    pub sequence: StopSequence,
    pub pidfile: Option<PathBuf>,
    pub marker: Option<PathBuf>,
    /// The cgroup leaf, in cgroup mode.
    pub leaf: Option<Leaf>,
    /// pgrun's own cgroup leaf, if it had to move into one: left by the
    /// guard, the last process in it, once the run is gone.
    pub self_leaf: Option<crate::contain::cgroup::SelfLeaf>,
    /// pgrun's stderr is lent by a caller the run may outlive
    /// (`--detach-after`): the guard points its own at `/dev/null`.
    pub quiet: bool,
}

impl Plan {
    /// A guard for pgrun's files alone, with no run to stop: the
    /// temporary names pgrun makes while it holds it (see
    /// [`crate::exit_hooks`]) are removed should pgrun be killed meanwhile.
    /// For a report written while no guard of the run is armed (a failure
    /// before the run's guard was forked; the report written again after
    /// the output's last flush).
    pub fn files_only(sequence: StopSequence) -> Plan {
        Plan { sequence, pidfile: None, marker: None, leaf: None, self_leaf: None, quiet: false }
    }
}

/// The guard's pid for as long as it is pgrun's child and not yet reaped;
/// `None` after. Shared by the [`Guard`] handle and those who must tell the
/// guard apart from the run's processes (the scope, in tree mode): one
/// value, set to `None` once, when the supervisor reaps the guard.
/// Also the way to tell the guard that the run's group was seen empty.
#[derive(Clone, Default)]
pub struct GuardChild(Rc<Cell<Option<Pid>>>, Option<Rc<lifetime::SharedPage>>);

impl crate::contain::Guardian for GuardChild {
    /// The guard's pid, while it is an unreaped child of pgrun (so the
    /// number cannot have been reused).
    fn pid(&self) -> Option<Pid> {
        self.0.get()
    }

    /// pgrun saw the run's group empty: gone for good. From then on the
    /// guard never uses its number (no syscall, no wake-up: a store in the
    /// shared page).
    fn group_gone(&self) {
        if let Some(page) = &self.1 {
            page.slot(GROUP_GONE).store(1, Ordering::Release);
        }
    }
}

/// pgrun's handle on its guard.
pub struct Guard {
    child: GuardChild,
    /// pgrun's end of the tie; closed to wake the guard.
    tie: Option<OwnedFd>,
    shared: Rc<lifetime::SharedPage>,
    /// Told to exit already.
    released: bool,
    /// The members handed over so far (at most [`MEMBERS_HANDED`]).
    handed: RefCell<Vec<Pid>>,
    /// pgrun said that the bound was reached.
    said_bound: Cell<bool>,
}

impl Guard {
    /// Fork the guard. Call before the command starts.
    pub fn start(plan: Plan) -> std::io::Result<Guard> {
        let shared = Rc::new(lifetime::SharedPage::new()?);
        // The record of pgrun's temporary names, shared with the guard:
        // made now at the latest, so that the guard sees what pgrun records
        // there after the fork too.
        crate::exit_hooks::share_temporaries()?;
        let (guard_end, pgrun_end) = guard_channel::pair()?;
        let pgrun = sys::getpid();
        match lifetime::fork()? {
            None => {
                // First thing: a panic from here on ends the guard, and
                // never unwinds into the frames this copy of pgrun was
                // forked from (their destructors would act on pgrun's
                // files), nor runs pgrun's own hook.
                std::panic::set_hook(Box::new(|info| {
                    say::line(format_args!("guard: internal error: {}", info.to_string().replace('\n', " ")));
                    sys::exit_now(PANICKED)
                }));
                drop(pgrun_end);
                guard_main(plan, &shared, guard_end, pgrun)
            }
            Some(pid) => {
                drop(guard_end);
                // Also from this side, so the guard is in its own group
                // before the command starts, whichever runs first.
                let _ = lifetime::setpgid(pid, pid);
                Ok(Guard {
                    child: GuardChild(Rc::new(Cell::new(Some(pid))), Some(shared.clone())),
                    tie: Some(pgrun_end),
                    shared,
                    released: false,
                    handed: RefCell::new(Vec::new()),
                    said_bound: Cell::new(false),
                })
            }
        }
    }

    /// The guard's pid, while it is pgrun's unreaped child.
    pub fn pid(&self) -> Option<Pid> {
        self.child.pid()
    }

    /// The shared view of the guard's pid (see [`GuardChild`]), as the
    /// run's containment holds it.
    pub fn child(&self) -> crate::contain::SharedGuardian {
        Rc::new(self.child.clone())
    }

    /// Whether `pid` is the guard (not yet reaped).
    pub fn is(&self, pid: Pid) -> bool {
        self.child.pid() == Some(pid)
    }

    /// The supervisor reaped the guard (it died): from now on its pid is
    /// never signalled nor waited for.
    pub fn reaped(&self) {
        self.child.0.set(None);
    }

    /// pgrun's end of the guard's channel as the command's process should
    /// get it, to hand itself to the guard before its exec; `None` where
    /// nothing is handed over (no pidfds) or once the guard is released.
    pub fn for_the_child(&self) -> Option<BorrowedFd<'_>> {
        guard_channel::for_the_child(self.tie.as_ref()?.as_fd())
    }

    /// The command's process `pid` (the leader of group `pid`) exists: the
    /// guard learns its group id. Called the moment the spawn has a pid.
    pub fn spawned(&self, pid: Pid) {
        self.shared.slot(PGID).store(pid as u64, Ordering::Release);
    }

    /// The command's process `pid` could not hand itself to the guard
    /// (`why`): pgrun hands a pidfd of it over itself, while it is its
    /// unreaped child, or says it cannot (the guard then has the group by
    /// its number alone).
    pub fn hand_over(&self, pid: Pid, why: &std::io::Error) {
        let Some(tie) = &self.tie else { return };
        match Pidfd::open(pid) {
            Some(fd) => {
                if let Err(e) = guard_channel::send(tie.as_fd(), &[(pid, &fd)]) {
                    say::line(format_args!("cannot hand process {pid} to the guard: {e}"));
                }
            }
            None => say::line(format_args!("cannot open a pidfd of process {pid} for the guard: {why}")),
        }
    }

    /// The process announced with [`Guard::spawned`] failed to run and was
    /// reaped: the guard must not look for its group.
    pub fn spawn_failed(&self) {
        // Reaped, its number is free: never the run's again (the guard may
        // have caught the process itself and know the number that way).
        self.shared.slot(GROUP_GONE).store(1, Ordering::Release);
        self.shared.slot(PGID).store(0, Ordering::Release);
    }

    /// Hand the guard pidfds of the members of `group` now, while pgrun
    /// can tell the group is the run's, so that the guard still reaches
    /// them should they leave the group before pgrun dies (Linux). Called
    /// when a stop sequence starts (`leader_unreaped`: pgrun has not reaped
    /// the leader, so the number is the run's), and when pgrun reaps the
    /// leader and members may be left (the number is still in use if they
    /// are, unless a newcomer numbered like the group took it after the
    /// group ended). Never once pgrun has seen the group empty: the number
    /// is asked through [`OwnGroup::exists`], which says no for good from
    /// then on (and has told the guard the group is gone).
    ///
    /// Only members not handed over yet, and at most [`MEMBERS_HANDED`] in
    /// the whole run: the guard reads the channel only once pgrun is dead,
    /// so what is sent stays in flight (an fd each, counted against the
    /// user's fd limit, in the socket's buffer) for the run's life. Past
    /// the bound the guard reaches the members by the group's number,
    /// which is the run's until pgrun sees the group empty (see the
    /// module's doc), and finds them in `/proc` itself; pgrun says so once
    /// (`-v`). A member that cannot be held or sent is said (a warning).
    pub fn hold_members(&self, group: &OwnGroup, leader_unreaped: bool) {
        let pgid = group.pgid();
        let Some(tie) = &self.tie else { return };
        if !guard_channel::HANDS_OVER || pgid <= 1 || !group.exists() {
            return;
        }
        let mut handed = self.handed.borrow_mut();
        let room = MEMBERS_HANDED.saturating_sub(handed.len());
        if room == 0 {
            if !self.said_bound.replace(true) {
                crate::verbose!(
                    "the guard holds {MEMBERS_HANDED} members of process group {pgid}; \
                     the rest it reaches by the group's number"
                );
            }
            return;
        }
        // The run's processes all descend from pgrun (a subreaper, on
        // Linux, the one place with pidfds): walking down from it costs
        // what the run has, not what the machine has (a `/proc` scan per
        // stop made 200 runs cancelled at once take 10 s); and only as far
        // as it takes to find the members there is room for. The leader
        // handed itself over (or pgrun did, [`Guard::hand_over`]).
        let looked_at = (handed.len() + room) * 4;
        let candidates = match sys::proc::descendants(sys::getpid(), looked_at) {
            Some(below) => below,
            None => sys::proc::scan().into_iter().filter(|(_, stat)| stat.pgrp == pgid).map(|(pid, _)| pid).collect(),
        };
        let mut members = Vec::new();
        let mut more = false;
        for pid in candidates {
            if pid == pgid || Some(pid) == self.pid() || handed.contains(&pid) {
                continue;
            }
            if members.len() == room {
                more = true;
                break;
            }
            // Held first, then checked to be a member: the pidfd names it.
            let fd = match Pidfd::hold(pid) {
                Ok(Some(fd)) => fd,
                // Gone (reaped).
                Ok(None) => continue,
                Err(e) => {
                    say::line(format_args!("warning: cannot hand process {pid} to the guard: {e}"));
                    continue;
                }
            };
            match sys::proc::stat(pid) {
                Some(stat) if stat.pgrp == pgid => members.push((pid, fd)),
                // Not a member; or gone: /proc/PID goes only once it is reaped.
                Some(_) => {}
                None if fd.exited() => {}
                None => say::line(format_args!(
                    "warning: cannot hand process {pid} to the guard: cannot read /proc/{pid}/stat"
                )),
            }
        }
        // Reaped, the leader's number may have been taken by a newcomer
        // meanwhile: what was found by it proves nothing.
        if members.is_empty() || (!leader_unreaped && sys::proc::stat(pgid).is_some()) {
            return;
        }
        let held: Vec<_> = members.iter().map(|(pid, fd)| (*pid, fd)).collect();
        match guard_channel::send(tie.as_fd(), &held) {
            Ok(()) => handed.extend(members.iter().map(|(pid, _)| *pid)),
            Err(e) => say::line(format_args!("cannot hand the members of process group {pgid} to the guard: {e}")),
        }
        if more && handed.len() == MEMBERS_HANDED && !self.said_bound.replace(true) {
            crate::verbose!(
                "the guard holds {MEMBERS_HANDED} members of process group {pgid}; \
                 the rest it reaches by the group's number"
            );
        }
    }

    /// The pid file was published as this inode.
    pub fn published(&self, dev: u64, ino: u64) {
        self.store_identity(PIDFILE, dev, ino, 1);
    }

    /// The marker pgrun created (`note`: its stopping note) or found (a
    /// cancel request, which cancelled this run) when it started stopping.
    pub fn marker(&self, path: &std::path::Path, note: bool) {
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            let kind = if note { MARKER_NOTE } else { MARKER_REQUEST };
            self.store_identity(MARKER, meta.dev(), meta.ino(), kind);
        }
    }

    /// The note pgrun holds at the marker path at its end, told before its
    /// rename into place ([`crate::pidfile::hold_ending_note`]): a SIGKILL
    /// right after it leaves the guard to remove it (if still that note).
    pub fn ending_note(&self, dev: u64, ino: u64) {
        self.store_identity(ENDING_NOTE, dev, ino, 1);
    }

    /// Store (device, inode) at `first` and `first + 1`, then mark them set
    /// with `valid` (not 0).
    fn store_identity(&self, first: usize, dev: u64, ino: u64, valid: u64) {
        self.shared.slot(first + 2).store(0, Ordering::Release);
        self.shared.slot(first).store(dev, Ordering::Release);
        self.shared.slot(first + 1).store(ino, Ordering::Release);
        self.shared.slot(first + 2).store(valid, Ordering::Release);
    }

    /// Whether the guard is there to act should pgrun be killed now: not
    /// told to exit, and not dead (reaped during the run).
    pub fn is_armed(&self) -> bool {
        !self.released && self.child.pid().is_some()
    }

    /// The run is over and withdrawn: tell the guard to exit. It is reaped
    /// when this handle is dropped, so that its exit overlaps pgrun's last
    /// work (the output's last flush).
    pub fn release(&mut self) {
        if !self.released {
            self.shared.slot(RELEASED).store(1, Ordering::Release);
            // The guard wakes on the hang-up and finds the mark.
            self.tie = None;
            self.released = true;
        }
    }
}

impl Guard {
    /// pgrun exits while the run may still be there (it could not stop
    /// it): leave the guard armed. The hang-up without the release mark
    /// tells it what pgrun's death would, so it stops the run and removes
    /// its files once pgrun is gone; it is not reaped (it outlives pgrun on
    /// purpose).
    pub fn leave_on_duty(mut self) {
        self.released = true;
        self.tie = None;
        self.child.0.set(None);
    }
}

impl Drop for Guard {
    /// pgrun ends normally: release the guard and reap it, so nothing of
    /// pgrun outlives pgrun.
    fn drop(&mut self) {
        self.release();
        // Unreaped, so the number is still the guard's: nothing else in
        // pgrun reaps its children once the supervisor is done.
        let Some(pid) = self.child.pid() else { return };
        // Released, it exits at once, unless something stopped it (SIGSTOP):
        // its work is over either way, and pgrun must not wait for it.
        let _ = process::signal_process(pid, Signal::KILL);
        lifetime::wait_for(pid);
        self.reaped();
    }
}

/// The guard's whole life. Never returns.
fn guard_main(plan: Plan, shared: &lifetime::SharedPage, tie: OwnedFd, pgrun: Pid) -> ! {
    lifetime::set_name(c"pgrun-guard");
    let _ = lifetime::setpgid(0, 0);
    let _ = lifetime::detach_stdin_stdout();
    if plan.quiet {
        let _ = crate::sys::session::point_stdout_stderr_at_null();
    }
    // A copy of a caller's stderr that pgrun spoke to (`--detach` before
    // the publication) is closed next: the guard speaks to its own fd 2,
    // never to a number that a file it opens later may take.
    say::speak_to(None);
    lifetime::close_all_but(&[tie.as_raw_fd()]);
    wait_for_hangup(&tie, shared, pgrun);
    // pgrun is ending: it wrote all it will write, and so did the command's
    // process before its exec. Take hold of the run's processes first,
    // while its leader may still be pgrun's unreaped child (once pgrun is
    // gone, whoever inherits it may reap it at once).
    let held = match guard_channel::receive(tie.as_fd()) {
        Ok(held) => held,
        Err(e) => {
            say::line(format_args!("guard: cannot take the processes pgrun handed over: {e}"));
            Vec::new()
        }
    };
    crate::verbose!("guard: pgrun handed over {} process(es)", held.len());
    // The command's process is the leader of its own group: its pid is the
    // group's id, as pgrun stored it, or as the process handed itself over
    // (first on the channel).
    let pgid = match shared.slot(PGID).load(Ordering::Acquire) {
        0 => held.first().map(|(pid, _)| *pid),
        g => Some(g as Pid),
    }
    .filter(|&g| g > 1);
    // Until pgrun saw the group empty, its number is still the run's (see
    // the module's doc): the guard goes on from where pgrun was.
    let number_is_the_runs = shared.slot(GROUP_GONE).load(Ordering::Acquire) == 0;
    let group = pgid.and_then(|pgid| run_group(pgid, held, number_is_the_runs));
    drop(tie);
    confirm_pgrun_gone(shared, pgrun);
    // A request at the marker path now was made while pgrun lived, for
    // its run if the command was spawned (the cancel that made it finds
    // that run): pgrun can no longer take it at its end, so the guard
    // does, once the run is stopped, if the path still names it. A run
    // that had not started leaves it pending, for the next run.
    let request = pgid.and(plan.marker.as_deref()).and_then(crate::pidfile::Taken::request_at);
    let identity = |first: usize| {
        (shared.slot(first + 2).load(Ordering::Acquire) != 0)
            .then(|| (shared.slot(first).load(Ordering::Acquire), shared.slot(first + 1).load(Ordering::Acquire)))
    };
    let what = pgid.map_or_else(|| "its run".to_string(), |g| format!("process group {g}"));
    // The marker pgrun took, the ending note it placed.
    let taken = |slot, note| identity(slot).map(|(dev, ino)| crate::pidfile::Taken { dev, ino, note });
    let note = shared.slot(MARKER + 2).load(Ordering::Acquire) == MARKER_NOTE;
    let stand_in = note_for_request(plan.marker.as_deref(), pgid, [taken(MARKER, note), request], pgrun);
    // In cgroup mode the leaf also reaches the group (members moved out of
    // the leaf); otherwise the group is the target.
    let (mut leaf, mut group) = match plan.leaf {
        Some(mut leaf) => {
            leaf.set_group(group);
            (Some(leaf), None)
        }
        None => (None, group),
    };
    let target: Option<&mut dyn crate::contain::Target> = match (&mut leaf, &mut group) {
        (Some(leaf), _) => Some(leaf),
        (None, Some(group)) => Some(group),
        (None, None) => None,
    };
    // Silent when there is nothing left to stop (pgrun's panic hook may
    // have killed the group already): only zombies are waited for, then
    // the files are withdrawn. The files go only once the run is gone (a
    // zombie still holds its group, and `status` must not say the run is
    // over while it does), or once the guard gave up on it.
    if let Some(target) = target {
        let ended = if target.gone() {
            true
        } else if target.only_zombies() {
            unsupervised::wait_reaped(target, &plan.sequence)
        } else {
            say::line(format_args!("guard: pgrun {pgrun} died; stopping {what}"));
            unsupervised::stop(target, &plan.sequence, None) || unsupervised::wait_dying(target, &plan.sequence)
        };
        if !ended {
            let why = unsupervised::why_given_up(target, &plan.sequence);
            say::line(format_args!("guard: {what} {why}; giving up"));
        }
    }
    if let Some(leaf) = &leaf {
        leaf.remove();
    }
    remove_temporaries_left();
    remove_pidfile_if_ours(plan.pidfile, identity(PIDFILE));
    // The marker pgrun took, the ending note it placed, the request above,
    // the note put in place of a request.
    for marker in [taken(MARKER, note), taken(ENDING_NOTE, true), request, stand_in] {
        remove_marker_if_ours(plan.marker.as_deref(), marker, pgrun);
    }
    if let Some(own) = &plan.self_leaf {
        own.leave();
    }
    sys::exit_now(0)
}

/// A request that was the run's (`requests`: the one that cancelled it,
/// one made while pgrun lived) gives way to pgrun's stopping note while
/// the guard stops the run: the pid file is stale by then, and a run that
/// starts on it meanwhile must not take that request for its own (see
/// [`crate::pidfile::note_in_place_of_request`]). The note placed, if any.
fn note_for_request(
    marker: Option<&std::path::Path>,
    pgid: Option<Pid>,
    requests: [Option<crate::pidfile::Taken>; 2],
    pgrun: Pid,
) -> Option<crate::pidfile::Taken> {
    let (marker, pgid) = (marker?, pgid?);
    requests.into_iter().flatten().find_map(|request| {
        crate::pidfile::note_in_place_of_request(marker, request, pgrun, pgid).unwrap_or_else(|e| {
            let what = crate::say::errno_text(&e);
            say::line(format_args!(
                "guard: warning: cannot put a note in place of cancel marker {}: {what}",
                marker.display()
            ));
            None
        })
    })
}

/// The run's group as the guard can prove it: the processes handed over
/// (the leader, members left after it was reaped), and the group by its
/// number while pgrun never saw it empty (`number_is_the_runs`) until the
/// guard sees it empty itself; where there are no pidfds, the group by its
/// number, under the same condition. `None` if nothing is left that is the
/// run's.
fn run_group(pgid: Pid, held: Vec<(Pid, Pidfd)>, number_is_the_runs: bool) -> Option<ForeignGroup> {
    if !Pidfd::SUPPORTED {
        return number_is_the_runs.then(|| ForeignGroup::new(pgid));
    }
    let mut group = ForeignGroup::held(pgid, held, number_is_the_runs);
    group.look_for_members();
    Some(group)
}

/// Return once the tie hangs up (pgrun closed its end: it released the
/// guard, or it is exiting, which closes its files a moment before it
/// reparents its children), or once pgrun is proven gone after the wait
/// failed. An error of the wait says nothing about pgrun: the guard checks
/// on pgrun and waits again, after a pause that grows, so that a wait that
/// keeps failing costs little. Exits at once if pgrun released the guard.
fn wait_for_hangup(tie: &OwnedFd, shared: &lifetime::SharedPage, pgrun: Pid) {
    let mut failures = 0u32;
    // 2 ms after the first failure, doubling up to about a second.
    let mut pauses = Backoff::between(Duration::from_millis(2), Duration::from_millis(1024));
    let mut fail_first = test_hook::active(test_hook::GUARD_WAIT_FAILS);
    loop {
        let waited = if std::mem::take(&mut fail_first) {
            Err(std::io::Error::from_raw_os_error(libc::EIO))
        } else {
            guard_channel::wait_hangup(tie.as_fd())
        };
        match waited {
            Ok(()) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                exit_if_released(shared);
                if sys::getppid() != pgrun {
                    return;
                }
                failures += 1;
                if failures == 1 {
                    say::line(format_args!("warning: guard: cannot wait for pgrun {pgrun}: {e}; waiting again"));
                }
                std::thread::sleep(pauses.next_pause());
            }
        }
    }
    exit_if_released(shared);
}

/// Return once pgrun is gone: the guard was reparented (`getppid()` is no
/// longer pgrun's pid). Exits at once if pgrun released the guard.
fn confirm_pgrun_gone(shared: &lifetime::SharedPage, pgrun: Pid) {
    let mut pauses = Backoff::up_to(Duration::from_millis(100));
    loop {
        exit_if_released(shared);
        if sys::getppid() != pgrun {
            return;
        }
        std::thread::sleep(pauses.next_pause());
    }
}

/// pgrun released the guard: its run is over and withdrawn.
fn exit_if_released(shared: &lifetime::SharedPage) {
    if shared.slot(RELEASED).load(Ordering::Acquire) == 1 {
        sys::exit_now(0);
    }
}

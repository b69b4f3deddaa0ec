//! The guard: a small copy of pgrun that stops the run if pgrun is killed
//! with SIGKILL (by a harness's timeout, the OOM killer, `kill -9`, or a
//! kill of the caller's whole process group).
//!
//! Before the command starts pgrun forks the guard (no exec: it is pgrun's
//! own code, already in memory). The guard moves into a process group of
//! its own, so a kill of the caller's group does not take it, keeps only
//! the read end of a pipe whose write end only pgrun holds
//! (close-on-exec, so the command never inherits it), and blocks reading
//! it: no CPU, no wake-ups. What the guard will need, pgrun stores as it
//! learns it (the group id, the identity of the pid file and marker it
//! published) in a page shared with the guard: no syscall, no wake-up, so
//! the guard costs little more than its fork. The pipe closes when pgrun
//! exits, however it exits. If pgrun marked the page "released" first, it
//! is ending normally: the guard exits, and pgrun reaps it. Otherwise pgrun
//! died: the guard runs the stop sequence on the group (on the cgroup leaf
//! in cgroup mode, then removes the leaf), removes the pid file and the
//! marker if they are still the ones pgrun published (same device and
//! inode), and exits.
//!
//! The guard never returns into the code it was forked from (destructors
//! there would act on pgrun's files): it ends with `_exit`, and a panic in
//! it ends there too (its own panic hook, installed first thing, exits).

use crate::contain::cgroup::LeafTarget;
use crate::say;
use crate::stop_sequence::StopSequence;
use crate::sys::{self, Pid, lifetime, process};
use crate::unsupervised;
use std::cell::Cell;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::Ordering;

/// The guard's name in `ps` (`/proc/PID/comm`).
pub const NAME: &str = "pgrun-guard";

/// Slots of the shared page. An identity takes three: device, inode, and
/// a 1 stored after both that says they are valid.
const PGID: usize = 0;
const PIDFILE: usize = 1;
const MARKER: usize = 4;
const RELEASED: usize = 7;

/// The guard's exit status when it panicked.
const PANICKED: u8 = 70;

/// What the guard must know to stop the run without pgrun.
pub struct Plan {
    pub sequence: StopSequence,
    pub pidfile: Option<PathBuf>,
    pub marker: Option<PathBuf>,
    /// The cgroup leaf, in cgroup mode.
    pub leaf: Option<LeafTarget>,
}

/// The guard's pid for as long as it is pgrun's child and not yet reaped;
/// `None` after. Shared by the [`Guard`] handle and those who must tell the
/// guard apart from the run's processes (the scope, in tree mode): one
/// value, set to `None` once, when the supervisor reaps the guard.
#[derive(Clone, Default)]
pub struct GuardChild(Rc<Cell<Option<Pid>>>);

impl GuardChild {
    /// The guard's pid, while it is an unreaped child of pgrun (so the
    /// number cannot have been reused).
    pub fn pid(&self) -> Option<Pid> {
        self.0.get()
    }
}

/// pgrun's handle on its guard, and the one holder of its state.
pub struct Guard {
    child: GuardChild,
    /// The pipe's write end; closed to wake the guard.
    tx: Option<OwnedFd>,
    shared: lifetime::SharedPage,
    /// Told to exit already.
    released: bool,
}

impl Guard {
    /// Fork the guard. Call before the command starts.
    pub fn start(plan: Plan) -> std::io::Result<Guard> {
        let shared = lifetime::SharedPage::new()?;
        let (rx, tx) = process::cloexec_pipe()?;
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
                drop(tx);
                guard_main(plan, &shared, rx)
            }
            Some(pid) => {
                drop(rx);
                // Also from this side, so the guard is in its own group
                // before the command starts, whichever runs first.
                let _ = lifetime::setpgid(pid, pid);
                Ok(Guard { child: GuardChild(Rc::new(Cell::new(Some(pid)))), tx: Some(tx), shared, released: false })
            }
        }
    }

    /// The guard's pid, while it is pgrun's unreaped child.
    pub fn pid(&self) -> Option<Pid> {
        self.child.pid()
    }

    /// The shared view of the guard's pid (see [`GuardChild`]).
    pub fn child(&self) -> GuardChild {
        self.child.clone()
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

    /// The command runs as group `pgid`.
    pub fn spawned(&self, pgid: Pid) {
        self.shared.slot(PGID).store(pgid as u64, Ordering::Release);
    }

    /// The pid file was published as this inode.
    pub fn published(&self, dev: u64, ino: u64) {
        self.store_identity(PIDFILE, dev, ino);
    }

    /// The marker pgrun created (or found) when it started stopping.
    pub fn marker(&self, path: &std::path::Path) {
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            self.store_identity(MARKER, meta.dev(), meta.ino());
        }
    }

    /// Store (device, inode) at `first` and `first + 1`, then mark them set.
    fn store_identity(&self, first: usize, dev: u64, ino: u64) {
        self.shared.slot(first + 2).store(0, Ordering::Release);
        self.shared.slot(first).store(dev, Ordering::Release);
        self.shared.slot(first + 1).store(ino, Ordering::Release);
        self.shared.slot(first + 2).store(1, Ordering::Release);
    }

    /// The run is over and withdrawn: tell the guard to exit. It is reaped
    /// when this handle is dropped, so that its exit overlaps pgrun's last
    /// work (the report).
    pub fn release(&mut self) {
        if !self.released {
            self.shared.slot(RELEASED).store(1, Ordering::Release);
            // The guard wakes on end of file and finds the mark.
            self.tx = None;
            self.released = true;
        }
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
        let _ = crate::sys::process::signal_process(pid, crate::signame::Signal::KILL);
        lifetime::wait_for(pid);
        self.reaped();
    }
}

/// The guard's whole life. Never returns.
fn guard_main(plan: Plan, shared: &lifetime::SharedPage, rx: OwnedFd) -> ! {
    lifetime::set_name(c"pgrun-guard");
    let _ = lifetime::setpgid(0, 0);
    let _ = lifetime::detach_stdin_stdout();
    lifetime::close_all_but(&[rx.as_raw_fd()]);
    let pgrun = sys::getppid();
    lifetime::block_until_closed(rx.as_raw_fd());
    if shared.slot(RELEASED).load(Ordering::Acquire) == 1 {
        sys::exit_now(0);
    }
    // End of file without a release: pgrun is dead.
    let pgid = match shared.slot(PGID).load(Ordering::Acquire) {
        0 => None,
        g => Some(g as Pid),
    };
    let identity = |first: usize| {
        (shared.slot(first + 2).load(Ordering::Acquire) == 1)
            .then(|| (shared.slot(first).load(Ordering::Acquire), shared.slot(first + 1).load(Ordering::Acquire)))
    };
    let what = pgid.map_or_else(|| "its run".to_string(), |g| format!("process group {g}"));
    let mut leaf = plan.leaf.map(|leaf| with_group(leaf, pgid));
    let mut group = pgid.filter(|&g| g > 1).map(unsupervised::Group::new);
    let target: Option<&mut dyn unsupervised::Target> = match (&mut leaf, &mut group) {
        (Some(leaf), _) => Some(leaf),
        (None, Some(group)) => Some(group),
        (None, None) => None,
    };
    // Silent when there is nothing left to stop (pgrun's panic hook may
    // have killed the group already): only the files are withdrawn.
    if let Some(target) = target
        && !target.gone()
    {
        say::line(format_args!("guard: pgrun {pgrun} died; stopping {what}"));
        if !unsupervised::stop(target, &plan.sequence, None) {
            say::line(format_args!("guard: {what} is still there 1s after SIGKILL; giving up"));
        }
    }
    if let Some(leaf) = &leaf {
        leaf.remove();
    }
    remove_if_same(plan.pidfile, identity(PIDFILE));
    remove_if_same(plan.marker, identity(MARKER));
    sys::exit_now(0)
}

fn with_group(mut leaf: LeafTarget, pgid: Option<Pid>) -> LeafTarget {
    leaf.set_group(pgid);
    leaf
}

/// Remove `path` if it is still the file (device, inode) pgrun made.
fn remove_if_same(path: Option<PathBuf>, id: Option<(u64, u64)>) {
    if let (Some(path), Some((dev, ino))) = (path, id)
        && let Ok(meta) = std::fs::symlink_metadata(&path)
        && meta.dev() == dev
        && meta.ino() == ino
    {
        let _ = std::fs::remove_file(&path);
    }
}

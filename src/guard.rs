//! The guard: a small copy of pgrun that stops the run if pgrun is killed
//! with SIGKILL (by a harness's timeout, the OOM killer, `kill -9`, or a
//! kill of the caller's whole process group).
//!
//! Before the command starts pgrun forks the guard (no exec: it is pgrun's
//! own code, already in memory). The guard moves into a process group of
//! its own, so a kill of the caller's group does not take it, keeps only
//! the read end of a pipe whose write end only pgrun holds
//! (close-on-exec, so the command never inherits it), and blocks reading
//! it: no CPU, no wake-ups. pgrun writes what the guard will need as it
//! learns it (the group id, the identity of the pid file and marker it
//! published) as fixed-size records. A `Release` record means pgrun is
//! ending normally: the guard exits, and pgrun reaps it. End of file
//! without `Release` means pgrun died: the guard runs the stop sequence on
//! the group (on the cgroup leaf in cgroup mode, then removes the leaf),
//! removes the pid file and the marker if they are still the ones pgrun
//! published (same device and inode), and exits.
//!
//! The guard never returns into the code it was forked from (destructors
//! there would act on pgrun's files): it ends with `_exit`.

use crate::contain::cgroup::LeafTarget;
use crate::stop_sequence::StopSequence;
use crate::sys::{self, Pid, lifetime, process};
use crate::unsupervised;
use crate::{say, verbose};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// The guard's name in `ps` (`/proc/PID/comm`).
pub const NAME: &str = "pgrun-guard";

const SPAWNED: u8 = 1;
const PUBLISHED: u8 = 2;
const MARKER: u8 = 3;
const RELEASE: u8 = 4;
const RECORD: usize = 17;

/// What the guard must know to stop the run without pgrun.
pub struct Plan {
    pub sequence: StopSequence,
    pub pidfile: Option<PathBuf>,
    pub marker: Option<PathBuf>,
    /// The cgroup leaf, in cgroup mode.
    pub leaf: Option<LeafTarget>,
}

/// pgrun's handle on its guard.
pub struct Guard {
    pid: Pid,
    tx: OwnedFd,
    /// Already reaped (it died during the run): never wait for it again.
    reaped: bool,
}

impl Guard {
    /// Fork the guard. Call before the command starts.
    pub fn start(plan: Plan) -> std::io::Result<Guard> {
        let (rx, tx) = process::cloexec_pipe()?;
        match lifetime::fork()? {
            None => {
                drop(tx);
                guard_main(plan, rx.as_raw_fd())
            }
            Some(pid) => {
                drop(rx);
                // Also from this side, so the guard is in its own group
                // before the command starts, whichever runs first.
                let _ = lifetime::setpgid(pid, pid);
                Ok(Guard { pid, tx, reaped: false })
            }
        }
    }

    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The command runs as group `pgid`.
    pub fn spawned(&self, pgid: Pid) {
        self.tell(SPAWNED, pgid as u64, 0);
    }

    /// The pid file was published as this inode.
    pub fn published(&self, dev: u64, ino: u64) {
        self.tell(PUBLISHED, dev, ino);
    }

    /// The marker pgrun created (or found) when it started stopping.
    pub fn marker(&self, path: &std::path::Path) {
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            self.tell(MARKER, meta.dev(), meta.ino());
        }
    }

    /// The supervisor reaped the guard (it died): it is not waited for.
    pub fn reaped(&mut self) {
        self.reaped = true;
    }

    fn tell(&self, kind: u8, a: u64, b: u64) {
        let mut record = [0u8; RECORD];
        record[0] = kind;
        record[1..9].copy_from_slice(&a.to_le_bytes());
        record[9..17].copy_from_slice(&b.to_le_bytes());
        if !lifetime::write_record(self.tx.as_raw_fd(), &record) {
            verbose!("the guard {} is gone", self.pid);
        }
    }
}

impl Drop for Guard {
    /// pgrun ends normally: release the guard and reap it, so nothing of
    /// pgrun outlives pgrun.
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        self.tell(RELEASE, 0, 0);
        lifetime::wait_for(self.pid);
    }
}

/// The guard's whole life. Never returns.
fn guard_main(plan: Plan, rx: RawFd) -> ! {
    lifetime::set_name(c"pgrun-guard");
    let _ = lifetime::setpgid(0, 0);
    lifetime::detach_stdin_stdout();
    let rx = lifetime::close_all_but(rx);
    let pgrun = sys::getppid();
    let mut pgid: Option<Pid> = None;
    let mut pidfile_id = None;
    let mut marker_id = None;
    let mut record = [0u8; RECORD];
    while lifetime::read_record(rx, &mut record) {
        let a = u64::from_le_bytes(record[1..9].try_into().unwrap_or_default());
        let b = u64::from_le_bytes(record[9..17].try_into().unwrap_or_default());
        match record[0] {
            SPAWNED => pgid = Some(a as Pid),
            PUBLISHED => pidfile_id = Some((a, b)),
            MARKER => marker_id = Some((a, b)),
            RELEASE => lifetime::exit_now(0),
            _ => {}
        }
    }
    // End of file without a release: pgrun is dead.
    let what = pgid.map_or_else(|| "its run".to_string(), |g| format!("process group {g}"));
    say::line(format_args!("guard: pgrun {pgrun} died; stopping {what}"));
    let gone = match (plan.leaf, pgid) {
        (Some(leaf), _) => {
            let mut target = with_group(leaf, pgid);
            let gone = unsupervised::stop(&mut target, &plan.sequence, None);
            target.remove();
            gone
        }
        (None, Some(pgid)) if pgid > 1 => unsupervised::stop(&mut unsupervised::Group(pgid), &plan.sequence, None),
        (None, _) => true,
    };
    if !gone {
        say::line(format_args!("guard: {what} is still there 1s after SIGKILL; giving up"));
    }
    remove_if_same(plan.pidfile, pidfile_id);
    remove_if_same(plan.marker, marker_id);
    lifetime::exit_now(0)
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

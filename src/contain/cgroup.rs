//! `--contain cgroup`: a cgroup v2 leaf the command is born in.
//!
//! The leaf is created under pgrun's own cgroup and named after pgrun's pid
//! (`pgrun-PID`), before the command starts; the command's child process
//! writes itself into `cgroup.procs` (through an fd opened before the fork)
//! before it execs, so nothing of the command ever runs outside it. A step
//! of the stop sequence signals every member (through a pidfd, checked to be
//! in the leaf after it is opened), the last step is `cgroup.kill`, and the
//! run is over when `cgroup.events` says `populated 0`: the supervisor
//! polls that file's fd for the change, it does not poll in ticks. The leaf
//! is removed when this value is dropped (pgrun's exit) or by the guard.

use crate::signame::Signal;
use crate::sys::{self, Pid, cgroup, process};
use crate::unsupervised::{Group, Target};
use std::collections::HashSet;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// A leaf created for this run.
pub struct Leaf {
    dir: PathBuf,
    /// The leaf's path as `/proc/PID/cgroup` names it.
    rel: String,
    procs: OwnedFd,
    events: OwnedFd,
}

impl Leaf {
    /// Create `pgrun-PID` under pgrun's own cgroup and open its files.
    /// `Err` says why no leaf can be had here, in words for the user.
    pub fn create() -> Result<Leaf, String> {
        let mount = cgroup::find_mount().ok_or("no cgroup2 file system is mounted (see /proc/self/mountinfo)")?;
        let own =
            sys::proc::cgroup_path(0).ok_or("pgrun's cgroup v2 is unknown (/proc/self/cgroup has no 0:: line)")?;
        let parent = cgroup::folder(&mount, &own).ok_or_else(|| {
            format!("pgrun's cgroup {own} is not visible under the cgroup2 mount {}", mount.point.display())
        })?;
        let name = format!("pgrun-{}", sys::getpid());
        let dir = parent.join(&name);
        if let Err(e) = cgroup::create(&dir) {
            // A leaf of an earlier pgrun with our pid that was SIGKILLed
            // without a guard: take it over if it is empty.
            if e.kind() != std::io::ErrorKind::AlreadyExists
                || cgroup::remove(&dir).is_err()
                || cgroup::create(&dir).is_err()
            {
                return Err(why_not(&mount.point, &parent, &dir, &e));
            }
        }
        let opened =
            cgroup::open_write(&dir, "cgroup.procs").and_then(|p| Ok((p, cgroup::open_read(&dir, "cgroup.events")?)));
        let (procs, events) = match opened {
            Ok(fds) => fds,
            Err(e) => {
                let _ = cgroup::remove(&dir);
                return Err(format!("cannot open the files of cgroup {}: {e}", dir.display()));
            }
        };
        let rel = format!("{}/{name}", own.trim_end_matches('/'));
        Ok(Leaf { dir, rel, procs, events })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The leaf's path as `/proc/PID/cgroup` names it.
    pub fn rel(&self) -> &str {
        &self.rel
    }

    /// The fd of `cgroup.procs` the command's process writes itself to.
    pub fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// `cgroup.events`, to poll for a change (POLLPRI).
    pub fn events(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }

    /// Whether any process is left in the leaf (or below it). Also re-arms
    /// the poll notification.
    pub fn populated(&self) -> bool {
        cgroup::populated(self.events.as_fd()).unwrap_or(true)
    }

    /// What the guard needs to stop this leaf once pgrun is gone.
    pub fn target(&self, pgid: Option<Pid>) -> LeafTarget {
        LeafTarget { dir: self.dir.clone(), rel: self.rel.clone(), pgid, group: pgid.map(Group::new) }
    }
}

impl Drop for Leaf {
    /// Remove the leaf; it can only go once nothing lives in it.
    fn drop(&mut self) {
        if let Err(e) = cgroup::remove(&self.dir) {
            crate::verbose!("cannot remove cgroup {}: {e}", self.dir.display());
        }
    }
}

fn why_not(mount: &Path, parent: &Path, dir: &Path, e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EROFS) => format!("the cgroup2 hierarchy at {} is read-only", mount.display()),
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "cgroup {} is not delegated to uid {} (cannot create {}: {e})",
            parent.display(),
            sys::geteuid(),
            dir.display()
        ),
        _ => format!("cannot create cgroup {}: {e}", dir.display()),
    }
}

/// Signal every process in cgroup `dir` (`rel`) outside group `pgid` (the
/// group itself is signalled with killpg), through pidfds checked to be in
/// the cgroup once opened; `reached` collects their pids.
pub fn signal_members(
    dir: &Path,
    rel: &str,
    pgid: Option<Pid>,
    signal: Signal,
    cont: bool,
    reached: &mut HashSet<Pid>,
) {
    for pid in cgroup::members(dir) {
        if pgid.is_some() && sys::proc::stat(pid).map(|s| s.pgrp) == pgid {
            continue;
        }
        let Some(fd) = process::pidfd_open(pid) else { continue };
        if !cgroup::process_in(pid, rel) {
            continue;
        }
        #[cfg(linux_strengths)]
        if let Ok(true) = process::pidfd_signal(fd.as_fd(), signal) {
            reached.insert(pid);
            if cont {
                let _ = process::pidfd_signal(fd.as_fd(), Signal::CONT);
            }
        }
        #[cfg(not(linux_strengths))]
        let _ = (fd, signal, cont, &reached);
    }
}

/// A leaf stopped from outside the supervisor (by the guard, after pgrun
/// died): every step signals the group and every member, the last is
/// `cgroup.kill`, and gone is `populated 0` with the group gone.
pub struct LeafTarget {
    dir: PathBuf,
    rel: String,
    pgid: Option<Pid>,
    /// The command's group, signalled through its members' pidfds (a
    /// member moved out of the leaf is still reached; a number reused
    /// after the group ended is not).
    group: Option<Group>,
}

impl LeafTarget {
    /// The command's group, once it is known (as the guard holds it).
    pub fn set_group(&mut self, group: Option<Group>) {
        self.pgid = group.as_ref().map(Group::pgid);
        self.group = group;
    }

    /// Remove the leaf, once it is empty.
    pub fn remove(&self) {
        let _ = cgroup::remove(&self.dir);
    }
}

impl Target for LeafTarget {
    fn describe(&self) -> String {
        format!("cgroup {}", self.dir.display())
    }

    fn signal(&mut self, signal: Signal, cont: bool) {
        if let Some(group) = &mut self.group {
            group.signal(signal, false);
        }
        if signal == Signal::KILL && cgroup::kill(&self.dir).is_ok() {
            return;
        }
        signal_members(&self.dir, &self.rel, self.pgid, signal, cont, &mut HashSet::new());
        if cont && let Some(group) = &mut self.group {
            group.signal(Signal::CONT, false);
        }
    }

    fn events(&self) -> Option<OwnedFd> {
        cgroup::open_read(&self.dir, "cgroup.events").ok()
    }

    fn gone(&mut self) -> bool {
        !cgroup::populated_at(&self.dir).unwrap_or(false) && self.group.as_mut().is_none_or(|g| g.gone())
    }
}

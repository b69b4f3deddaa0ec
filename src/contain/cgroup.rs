//! `--contain cgroup`: a cgroup v2 leaf the command is born in, and the one
//! type that stops and watches it, for the supervisor and the guard alike.
//!
//! The leaf is created under pgrun's own cgroup, before the command starts,
//! as `pgrun-PID-RANDOM`: the mkdir is the creation, and a name that is
//! taken (another PID namespace sharing the cgroup has a pgrun with the same
//! pid) is never adopted: another name is tried. The leaf's folder is held
//! open from its creation and everything in it is reached through that fd,
//! so another cgroup that later gets its name is never touched; the guard's
//! copy, which cannot keep fds, checks the folder's inode number (a
//! cgroup's identity) before it acts. The command's child process writes
//! itself into `cgroup.procs` (through an fd opened before the fork) before
//! it execs, so nothing of the command ever runs outside it. A step of the
//! stop sequence signals every member (through a pidfd, checked to be in
//! the leaf after it is opened), the last step is `cgroup.kill`, and the
//! run is over when `cgroup.events` says `populated 0`: the supervisor
//! polls that file's fd for the change, it does not poll in ticks.
//!
//! One rule says whether the leaf is empty: `cgroup.events`; where that
//! cannot be read, the members listed in `cgroup.procs`; where those cannot
//! be read either, "populated" unless the leaf was removed (a cgroup can
//! only be removed once it is empty). A file that cannot be read is not
//! polled again (its notification cannot be re-armed: poll would return at
//! once, forever); the run is then checked on the caller's backoff.
//!
//! The leaf is removed once the run is gone (by pgrun, or by the guard), a
//! refusal with EBUSY tried again for a while; a leaf that cannot be removed
//! is named in a warning and in the report.

use super::foreign::ForeignGroup;
pub use super::self_leaf::SelfLeaf;
use super::self_leaf::enable_controllers;
use super::target::Target;
use crate::backoff::Backoff;
use crate::cgroup_limits::CgroupLimits;
use crate::signame::Signal;
use crate::sys::{self, Pid, cgroup};
use crate::{say, verbose};
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How many names are tried before giving up (each a fresh random one).
const NAME_TRIES: usize = 16;

/// How long a removal refused with EBUSY (the last member being freed) is
/// tried again.
const REMOVE_PATIENCE: Duration = Duration::from_secs(1);

/// The leaf's folder, as this copy of the leaf holds it.
enum Folder {
    /// Not opened yet: the guard's copy until it first acts.
    Unopened,
    Open(OwnedFd),
    /// Removed (by pgrun, the guard, or someone else).
    Removed,
}

/// The files pgrun's own leaf keeps open from its creation.
struct Files {
    procs: OwnedFd,
    events: OwnedFd,
}

/// A leaf created for this run: pgrun's own (made by [`Leaf::create`]), or
/// the guard's copy of it ([`Leaf::handed`]).
pub struct Leaf {
    dir: PathBuf,
    /// The leaf's path as `/proc/PID/cgroup` names it.
    rel: String,
    /// The folder's inode number when it was created: its identity.
    ino: u64,
    folder: RefCell<Folder>,
    /// pgrun's own leaf only (the guard's copy has none).
    files: Option<Files>,
    /// `cgroup.events` was read the last time it was tried: it may be
    /// polled.
    pollable: Cell<bool>,
    /// Said already that the leaf was removed from outside.
    removal_said: Cell<bool>,
    /// Removed (or tried) already: dropping it does nothing more.
    removal_done: Cell<bool>,
    /// The command's group (the guard's copy): signalled through its
    /// members' pidfds, so that a member moved out of the leaf is still
    /// reached and a number reused after the group ended is not.
    pgid: Option<Pid>,
    group: Option<ForeignGroup>,
    /// Where the cgroup came from, for the report.
    via: Via,
}

/// Where a run's cgroup came from (the report's `cgroup_via`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// A leaf made under pgrun's own cgroup, delegated to the user.
    Delegated,
    /// A scope the user's systemd made for pgrun ([`super::user_scope`]).
    UserSystemd,
}

impl Via {
    /// The report's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Via::Delegated => "delegated",
            Via::UserSystemd => "user-systemd",
        }
    }
}

impl Leaf {
    /// Create a new leaf under pgrun's own cgroup, open its files, and
    /// set `limits` in it (see [`enable_controllers`] for the controllers
    /// they need). `Err` says why no leaf can be had here, in words for the
    /// user.
    /// With it, pgrun's own leaf if pgrun had to move into one
    /// ([`SelfLeaf`]).
    ///
    /// Where pgrun's own cgroup cannot give one, pgrun asks the user's
    /// systemd for a scope of its own ([`super::user_scope`]) and makes
    /// the leaf there; `Err` then names both reasons.
    pub fn create(limits: &CgroupLimits) -> Result<(Leaf, Option<SelfLeaf>), String> {
        let here = if crate::test_hook::active(crate::test_hook::OWN_CGROUP_REFUSED) {
            Err(NoLeafHere::refused("test hook: pgrun's own cgroup gives no leaf".to_string()))
        } else {
            Leaf::create_here(limits)
        };
        let why_here = match here {
            Ok(made) => return Ok(made),
            // pgrun may make cgroups here, but not this one: a scope of
            // the user's systemd would not be where the user asked for it.
            Err(NoLeafHere { why, refused: false }) => return Err(why),
            Err(NoLeafHere { why, refused: true }) => why,
        };
        verbose!("no cgroup under pgrun's own ({why_here}); asking the user's systemd for a scope");
        // The advice goes last, after both reasons.
        let advice = crate::cgroup_limits::what_to_do(limits);
        let cannot = |why: String| match why_here.strip_suffix(&format!("; {advice}")) {
            Some(base) => format!("{base}; and {why}; {advice}"),
            None => format!("{why_here}; and {why}"),
        };
        let scope = super::user_scope::enter().map_err(cannot)?;
        let (mut leaf, self_leaf) = Leaf::create_here(limits)
            .map_err(|no| format!("in the user's systemd scope {}: {}", scope.unit, no.why))?;
        leaf.via = Via::UserSystemd;
        Ok((leaf, self_leaf))
    }

    /// [`Leaf::create`] under pgrun's own cgroup as it is. The leaf is made
    /// first, so that a cgroup pgrun may not write to is told from one
    /// that cannot serve (a controller missing, other processes in it):
    /// only the first is a refusal ([`NoLeafHere::refused`]). The
    /// controllers the limits need are enabled once the leaf is made.
    fn create_here(limits: &CgroupLimits) -> Result<(Leaf, Option<SelfLeaf>), NoLeafHere> {
        let mount = cgroup::find_mount()
            .map_err(|e| NoLeafHere::other(format!("cannot read /proc/self/mountinfo: {e}")))?
            .ok_or_else(|| {
                NoLeafHere::refused("no cgroup2 file system is mounted (see /proc/self/mountinfo)".to_string())
            })?;
        let own = sys::proc::read_cgroup_path(0)
            .map_err(|e| NoLeafHere::other(format!("cannot read /proc/self/cgroup: {e}")))?
            .ok_or_else(|| {
                NoLeafHere::other("pgrun's cgroup v2 is unknown (/proc/self/cgroup has no 0:: line)".into())
            })?;
        let parent = cgroup::folder(&mount, &own).ok_or_else(|| {
            NoLeafHere::other(format!(
                "pgrun's cgroup {own} is not visible under the cgroup2 mount {}",
                mount.point.display()
            ))
        })?;
        for attempt in 0..NAME_TRIES {
            let name = leaf_name(attempt);
            let dir = parent.join(&name);
            match cgroup::create(&dir) {
                Ok(()) => {
                    let self_leaf = if limits.any() {
                        match enable_controllers(&parent, limits) {
                            Ok(self_leaf) => self_leaf,
                            Err(why) => {
                                remove_unused(&dir);
                                return Err(NoLeafHere::other(why));
                            }
                        }
                    } else {
                        None
                    };
                    let rel = format!("{}/{name}", own.trim_end_matches('/'));
                    let leaf = Leaf::open_created(dir, rel, limits).map_err(NoLeafHere::other)?;
                    return Ok((leaf, self_leaf));
                }
                // Somebody else's: never adopted, another name is tried.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    verbose!("cgroup {} exists already; trying another name", dir.display())
                }
                Err(e) => return Err(why_not(&mount.point, &parent, &dir, &e, limits)),
            }
        }
        Err(NoLeafHere::other(format!(
            "cannot create a cgroup under {}: {NAME_TRIES} new names were all taken",
            parent.display()
        )))
    }

    /// Open the files of the leaf just created at `dir`; remove it again if
    /// they cannot be had.
    fn open_created(dir: PathBuf, rel: String, limits: &CgroupLimits) -> Result<Leaf, String> {
        let opened = cgroup::open_folder(&dir)
            .map_err(|e| format!("cannot open the files of cgroup {}: {e}", dir.display()))
            .and_then(|folder| {
                let ino = cgroup::inode_of(folder.as_fd())
                    .map_err(|e| format!("cannot open the files of cgroup {}: {e}", dir.display()))?;
                let here = cgroup::through(folder.as_fd());
                let files = cgroup::open_write(&here, "cgroup.procs")
                    .and_then(|procs| Ok(Files { procs, events: cgroup::open_read(&here, "cgroup.events")? }));
                let files = files.map_err(|e| format!("cannot open the files of cgroup {}: {e}", dir.display()))?;
                for (name, value, optional) in limits.files() {
                    match cgroup::write_file(&here, name, &value) {
                        Ok(()) => verbose!("set {name} = {value} in {}", dir.display()),
                        Err(e) if optional && e.raw_os_error() == Some(libc::ENOENT) => {
                            verbose!("{} has no {name}: not set", dir.display())
                        }
                        Err(e) => return Err(format!("cannot set {name} = {value} in cgroup {}: {e}", dir.display())),
                    }
                }
                Ok((folder, ino, files))
            });
        match opened {
            Ok((folder, ino, files)) => Ok(Leaf {
                dir,
                rel,
                ino,
                folder: RefCell::new(Folder::Open(folder)),
                files: Some(files),
                pollable: Cell::new(true),
                removal_said: Cell::new(false),
                removal_done: Cell::new(false),
                pgid: None,
                group: None,
                via: Via::Delegated,
            }),
            Err(why) => {
                remove_unused(&dir);
                Err(why)
            }
        }
    }

    /// The copy of this leaf the guard gets before the command starts: it
    /// names the leaf by path and identity (the guard keeps no fd of
    /// pgrun's), checked when it first acts.
    pub fn handed(&self) -> Leaf {
        Leaf {
            dir: self.dir.clone(),
            rel: self.rel.clone(),
            ino: self.ino,
            folder: RefCell::new(Folder::Unopened),
            files: None,
            pollable: Cell::new(true),
            removal_said: Cell::new(false),
            removal_done: Cell::new(false),
            pgid: None,
            group: None,
            via: self.via,
        }
    }

    /// Where the cgroup came from.
    pub fn via(&self) -> Via {
        self.via
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The leaf's path as `/proc/PID/cgroup` names it.
    pub fn rel(&self) -> &str {
        &self.rel
    }

    /// The fd of `cgroup.procs` the command's process writes itself to
    /// (pgrun's own leaf).
    pub fn procs_fd(&self) -> Option<RawFd> {
        self.files.as_ref().map(|f| f.procs.as_raw_fd())
    }

    /// `cgroup.events`, to poll for a change (POLLPRI); `None` while it
    /// cannot be read (its notification could not be re-armed).
    pub fn events(&self) -> Option<BorrowedFd<'_>> {
        self.files.as_ref().filter(|_| self.pollable.get()).map(|f| f.events.as_fd())
    }

    /// A path that reaches into this very leaf (through its open folder);
    /// `Ok(None)` once it is known removed. The guard's copy opens the
    /// folder here, the first time, and checks that it is the leaf it was
    /// handed.
    fn here(&self) -> io::Result<Option<PathBuf>> {
        let mut folder = self.folder.borrow_mut();
        if let Folder::Unopened = *folder {
            *folder = match cgroup::open_folder(&self.dir) {
                Ok(fd) if cgroup::inode_of(fd.as_fd())? == self.ino => Folder::Open(fd),
                // Another cgroup has its name: this one was removed.
                Ok(_) => Folder::Removed,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => Folder::Removed,
                Err(e) => return Err(e),
            };
        }
        Ok(match &*folder {
            Folder::Open(fd) => Some(cgroup::through(fd.as_fd())),
            _ => None,
        })
    }

    /// Proof that the leaf is gone: its path names nothing, or another
    /// cgroup (cgroup2 cannot rename one, so it was removed).
    fn is_removed(&self) -> bool {
        matches!(*self.folder.borrow(), Folder::Removed)
            || cgroup::inode_at(&self.dir).is_ok_and(|ino| ino != Some(self.ino))
    }

    fn read_events(&self) -> io::Result<bool> {
        if let Some(files) = &self.files {
            return cgroup::populated(files.events.as_fd());
        }
        let here = self.here()?.ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        cgroup::populated(cgroup::open_read(&here, "cgroup.events")?.as_fd())
    }

    /// Whether any process is left in the leaf (or below it). Never "empty"
    /// without proof: `cgroup.events`, else `cgroup.procs`, else removed.
    /// Reading `cgroup.events` also re-arms its poll notification.
    pub fn populated(&self) -> bool {
        let why = match self.read_events() {
            Ok(populated) => {
                self.pollable.set(true);
                return populated;
            }
            Err(e) => e,
        };
        let first = self.pollable.replace(false);
        let members = match self.here() {
            Ok(Some(here)) => cgroup::members(&here),
            Ok(None) => Err(io::Error::from_raw_os_error(libc::ENOENT)),
            Err(e) => Err(e),
        };
        match members {
            Ok(members) => {
                if first {
                    verbose!("cannot read cgroup.events of {}: {why}; reading cgroup.procs instead", self.describe());
                }
                !members.is_empty()
            }
            Err(_) if self.is_removed() => {
                if !self.removal_said.replace(true) {
                    say::line(format_args!(
                        "warning: cgroup {} was removed during the run (so nothing was left in it)",
                        self.dir.display()
                    ));
                }
                false
            }
            Err(e) => {
                verbose!(
                    "cannot tell whether {} is empty ({why}; cgroup.procs: {e}): taken as populated",
                    self.describe()
                );
                true
            }
        }
    }

    /// Signal every process in the leaf outside group `except` (which is
    /// signalled with the group), through pidfds checked to be in the leaf
    /// once opened; `reached` collects their pids.
    pub fn signal_members(&self, except: Option<Pid>, signal: Signal, cont: bool, reached: &mut BTreeSet<Pid>) {
        let members = match self.here() {
            Ok(Some(here)) => cgroup::members(&here),
            Ok(None) => return,
            Err(e) => Err(e),
        };
        let members = members.unwrap_or_else(|e| {
            verbose!("cannot list the members of {}: {e}", self.describe());
            Vec::new()
        });
        for pid in members {
            if except.is_some() && sys::proc::stat(pid).map(|s| s.pgrp) == except {
                continue;
            }
            let Some(fd) = crate::sys::pidfd::Pidfd::open(pid) else { continue };
            if !cgroup::process_in(pid, &self.rel) {
                continue;
            }
            if let Ok(true) = fd.signal(signal) {
                reached.insert(pid);
                if cont {
                    let _ = fd.signal(Signal::CONT);
                }
            }
        }
    }

    /// What the leaf's accounting files say (`cpu.stat`, `memory.peak`,
    /// `pids.peak`, `memory.events`...), read through its open folder;
    /// `None` once the leaf is removed. A file that cannot be read is left
    /// out, said with --verbose.
    pub fn accounting(&self) -> Option<cgroup::Accounting> {
        let here = match self.here() {
            Ok(Some(here)) => here,
            Ok(None) => return None,
            Err(e) => {
                verbose!("cannot read the accounting of {}: {e}", self.describe());
                return None;
            }
        };
        let mut failed = |file: &str, e: io::Error| verbose!("cannot read {file} of {}: {e}", self.describe());
        Some(cgroup::accounting(&here, &mut failed))
    }

    /// `cgroup.kill`: SIGKILL everything in the leaf at once. Nothing to do
    /// once the leaf is removed.
    pub fn kill(&self) -> io::Result<()> {
        match self.here()? {
            Some(here) => cgroup::kill(&here),
            None => Ok(()),
        }
    }

    /// The command's group, once it is known (as the guard holds it).
    pub fn set_group(&mut self, group: Option<ForeignGroup>) {
        self.pgid = group.as_ref().map(ForeignGroup::pgid);
        self.group = group;
    }

    /// Remove the leaf (and any cgroup below it), once it is empty; EBUSY
    /// is tried again for a while. Returns the path left behind, after one
    /// warning line naming it and the error; `None` if nothing is left.
    /// Only the leaf this value names is removed: if its path is gone or
    /// names another cgroup, it was removed already.
    pub fn remove(&self) -> Option<PathBuf> {
        if self.removal_done.replace(true) {
            return None;
        }
        let until = Instant::now() + REMOVE_PATIENCE;
        let mut backoff = Backoff::default();
        loop {
            match self.try_remove() {
                Ok(()) => return None,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && backoff.pause_until(Some(until)) => {}
                Err(e) => {
                    let errno = e.raw_os_error().map(|n| format!(" ({:?})", nix::errno::Errno::from_raw(n)));
                    say::line(format_args!(
                        "warning: cannot remove cgroup {}: {e}{}",
                        self.dir.display(),
                        errno.unwrap_or_default()
                    ));
                    return Some(self.dir.clone());
                }
            }
        }
    }

    /// One try; an error once the leaf is gone anyway (removed by someone
    /// else meanwhile) is no error.
    fn try_remove(&self) -> io::Result<()> {
        match self.remove_folder() {
            Err(_) if self.is_removed() => Ok(()),
            result => result,
        }
    }

    fn remove_folder(&self) -> io::Result<()> {
        let Some(here) = self.here()? else { return Ok(()) };
        cgroup::remove_below(&here)?;
        if cgroup::inode_at(&self.dir)? != Some(self.ino) {
            return Ok(());
        }
        match cgroup::remove_one(&self.dir) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Ok(()) => {
                *self.folder.borrow_mut() = Folder::Removed;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

impl Drop for Leaf {
    /// pgrun's own leaf is removed on every way out (the guard's copy is
    /// removed by the guard, explicitly).
    fn drop(&mut self) {
        if self.files.is_some() {
            self.remove();
        }
    }
}

/// The name of the `attempt`th try: pgrun's pid (for people reading the
/// hierarchy) and 64 random bits (the pid alone is not unique across PID
/// namespaces). Debug builds take the first name from the test hook, if
/// set.
fn leaf_name(attempt: usize) -> String {
    if attempt == 0
        && let Some(name) = crate::test_hook::leaf_name()
    {
        return name;
    }
    format!("pgrun-{}-{:016x}", sys::getpid(), sys::random_bits())
}

/// Why pgrun's own cgroup gave no leaf ([`Leaf::create_here`]).
#[derive(Debug)]
struct NoLeafHere {
    /// In words for the user.
    why: String,
    /// pgrun may not make a cgroup there (EACCES, EPERM, EROFS), or there
    /// is no cgroup2 hierarchy at all: the case the user's systemd is asked
    /// for a scope. Anything else (a controller missing, processes sharing
    /// the cgroup, an error) is said as it is.
    refused: bool,
}

impl NoLeafHere {
    fn refused(why: String) -> Self {
        NoLeafHere { why, refused: true }
    }
    fn other(why: String) -> Self {
        NoLeafHere { why, refused: false }
    }
}

/// Remove the leaf at `dir`, just made by this run with nobody in it, that
/// will not be used; a failure is said.
fn remove_unused(dir: &Path) {
    if let Err(e) = cgroup::remove_one(dir) {
        say::line(format_args!("warning: cannot remove cgroup {}: {e}", dir.display()));
    }
}

fn why_not(mount: &Path, parent: &Path, dir: &Path, e: &io::Error, limits: &CgroupLimits) -> NoLeafHere {
    match e.raw_os_error() {
        Some(libc::EROFS) => NoLeafHere::refused(format!("the cgroup2 hierarchy at {} is read-only", mount.display())),
        Some(libc::EACCES) | Some(libc::EPERM) => NoLeafHere::refused(format!(
            "cgroup {} is not delegated to uid {} (cannot create {}: {e}); {}",
            parent.display(),
            sys::geteuid(),
            dir.display(),
            crate::cgroup_limits::what_to_do(limits)
        )),
        _ => NoLeafHere::other(format!("cannot create cgroup {}: {e}", dir.display())),
    }
}

/// The guard's view: every step signals the group and every member, the
/// last is `cgroup.kill`, and gone is the leaf empty with the group gone.
impl Target for Leaf {
    fn describe(&self) -> String {
        format!("cgroup {}", self.dir.display())
    }

    fn signal(&mut self, signal: Signal, cont: bool, _last: bool) -> io::Result<()> {
        if let Some(group) = &mut self.group {
            let _ = group.signal(signal, false, false);
        }
        if signal == Signal::KILL && self.kill().is_ok() {
            return Ok(());
        }
        self.signal_members(self.pgid, signal, cont, &mut BTreeSet::new());
        if cont && let Some(group) = &mut self.group {
            let _ = group.signal(Signal::CONT, false, false);
        }
        Ok(())
    }

    /// A `leader:` step goes to the group's leader through the group's
    /// pidfds (see [`ForeignGroup`]), or is skipped.
    fn signal_leader(&mut self, signal: Signal, cont: bool) -> io::Result<bool> {
        self.group.as_mut().map_or(Ok(false), |group| group.signal_leader(signal, cont))
    }

    /// `cgroup.events`, read once to arm it; `None` if it cannot be read
    /// (the caller then checks on its backoff).
    fn events(&self) -> Option<OwnedFd> {
        let here = self.here().ok()??;
        let fd = cgroup::open_read(&here, "cgroup.events").ok()?;
        cgroup::populated(fd.as_fd()).ok()?;
        Some(fd)
    }

    fn gone(&mut self) -> bool {
        !self.populated() && self.group.as_mut().is_none_or(|g| g.gone())
    }
    /// Every process listed in the leaf, and what is left of its group,
    /// is dying (see [`Target::dying`]); a leaf whose members cannot be
    /// listed says no.
    fn dying(&mut self) -> bool {
        let Ok(Some(here)) = self.here() else { return false };
        let Ok(members) = cgroup::members(&here) else { return false };
        let group_dying = self.group.as_mut().is_none_or(|g| g.gone() || g.dying());
        members.iter().all(|&pid| sys::proc::after_kill(pid) == Some(true)) && group_dying
    }
    /// The leaf is empty (zombies are not counted in it) and its group
    /// holds only zombies.
    fn only_zombies(&mut self) -> bool {
        !self.populated() && self.group.as_mut().is_some_and(|g| g.only_zombies())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a cgroup pgrun may not write to is a refusal, the case the
    /// user's systemd is asked for a scope; any other failure to make the
    /// leaf is said as it is.
    #[test]
    fn only_a_refusal_to_create_the_leaf_asks_the_user_manager() {
        let limits = CgroupLimits::default();
        let (mount, parent, dir) = (Path::new("/sys/fs/cgroup"), Path::new("/sys/fs/cgroup/a"), Path::new("/x/a/l"));
        for errno in [libc::EACCES, libc::EPERM, libc::EROFS] {
            let no = why_not(mount, parent, dir, &io::Error::from_raw_os_error(errno), &limits);
            assert!(no.refused, "errno {errno}: {}", no.why);
        }
        for errno in [libc::ENOSPC, libc::ENOENT, libc::EBUSY, libc::ENOMEM, libc::EINVAL, libc::EIO] {
            let no = why_not(mount, parent, dir, &io::Error::from_raw_os_error(errno), &limits);
            assert!(!no.refused, "errno {errno} taken as a refusal: {}", no.why);
            assert!(no.why.starts_with("cannot create cgroup /x/a/l: "), "{}", no.why);
        }
    }
}

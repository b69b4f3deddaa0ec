//! The pid file protocol and the cancel marker, for the run that publishes
//! and for the readers (`cancel`, `status`) that look at it, in one file
//! per role: `claim.rs` (a starting run takes the path and publishes its
//! record), `record.rs` (a pid file as readers find it, and what its locks
//! say), `marker.rs` (the cancel marker: requests and stopping notes),
//! `seen.rs` (the pgrun a reader saw holding either, held by a handle).
//!
//! A published run holds a write lock from byte 0 of its pid file (see
//! [`lock`](crate::sys::lock)); held by a process running as the file's
//! owner, that lock is what "alive" means, and nothing else is (not a read
//! lock, not another user's lock, not a starting run's claim).

mod claim;
mod marker;
mod record;
mod seen;

pub use claim::*;
pub use marker::*;
pub use record::*;
pub use seen::*;

use crate::atomic_file::folder_of;
use crate::sys;
use anyhow::{Result, bail};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Fail unless the folder of `path` exists and `path` is not a symlink or a
/// directory. `what` names the file in the message ("pid file", "report").
pub fn check_target(path: &Path, what: &str) -> Result<()> {
    check_folder(path, what)?;
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => bail!("refusing {what} {}: it is a symlink", path.display()),
        Ok(m) if m.is_dir() => bail!("{what} {} is a directory", path.display()),
        _ => Ok(()),
    }
}

/// Fail unless the folder of `path` exists and is a directory.
pub fn check_folder(path: &Path, what: &str) -> Result<()> {
    let folder = folder_of(path);
    match fs::metadata(folder) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => bail!("{what} folder {} is not a directory", folder.display()),
        Err(e) => bail!("{what} folder {}: {e}", folder.display()),
    }
}

/// `path` as an absolute name, its folder resolved (symlinks, `..`), the
/// way a report names its run's pid file and a reader compares it: the
/// same file by any spelling of its folder gives the same name. A folder
/// that cannot be resolved (gone) leaves the path only made absolute.
pub fn absolute_name(path: &Path) -> std::path::PathBuf {
    let resolved = path.file_name().and_then(|name| Some(fs::canonicalize(folder_of(path)).ok()?.join(name)));
    resolved.or_else(|| std::path::absolute(path).ok()).unwrap_or_else(|| path.to_path_buf())
}

/// What `--report` said of the run at a pid file where no run was found.
#[derive(Clone, Copy)]
pub enum ReportSaid<'a> {
    /// The report does not name the pid file: it could not say the run
    /// was over.
    NotNamed(&'a Path),
    /// It names the pid file, but a stale pid file was found there: the
    /// report is an earlier run's (a run given `--report R` removes an old
    /// R before it publishes, and writes R only once its pid file is
    /// withdrawn), and says nothing of that one.
    Earlier(&'a Path),
}

/// What `wait` and `cancel` say when no run was found at `path` (`note`:
/// what they found instead) within `--wait-start` (`waited`): how long
/// they waited, and how to skip that (with a report: why it could not say
/// the run was over).
pub fn say_no_run(path: &Path, note: &str, waited: std::time::Duration, report: Option<ReportSaid<'_>>) {
    let waited = crate::duration::describe(waited);
    let path = path.display();
    match report {
        None => crate::say::line(format_args!(
            "no run at {path}{note} (waited {waited} for one to start; --wait-start 0 if it may be over already)"
        )),
        Some(ReportSaid::NotNamed(report)) => crate::say::line(format_args!(
            "no run at {path}{note} (waited {waited} for one to start, and report {} does not name it)",
            report.display()
        )),
        Some(ReportSaid::Earlier(report)) => crate::say::line(format_args!(
            "no run at {path}{note} (waited {waited} for one to start; report {} is an earlier run's: \
             the stale pid file's run wrote none there)",
            report.display()
        )),
    }
}

/// The error of a failed look at the lock of pid file `path`.
pub fn lock_error(path: &Path, e: std::io::Error) -> anyhow::Error {
    anyhow::anyhow!("cannot read the lock of pid file {}: {e}", path.display())
}

/// Whether `path` still names the file `meta` describes.
fn names(path: &Path, meta: &fs::Metadata) -> bool {
    fs::symlink_metadata(path).is_ok_and(|now| now.dev() == meta.dev() && now.ino() == meta.ino())
}

/// Refuse a pid file whose lock holder `holder` is itself in the process
/// group the file names: pgrun never is in its run's group (the command
/// gets a group of its own), so such a file is no pgrun run's: a daemon's
/// own pid file, say, which the daemon locks as pgrun locks its own.
/// Taking that daemon for a run's pgrun would signal it as one (cancel), or
/// say a run lives there (status, wait). Only where the holder is in our
/// PID namespace: from another one the file's number names another group
/// here.
pub fn check_holder(path: &Path, record: &Record, holder: sys::Pid) -> Result<()> {
    if holder > 0 && sys::proc::in_own_pid_namespace(holder) && sys::getpgid(holder) == Some(record.pgid) {
        bail!(
            "refusing pid file {}: its lock holder, process {holder}, is in process group {} itself, \
             which pgrun never is: not a pgrun run's pid file",
            path.display(),
            record.pgid
        );
    }
    Ok(())
}

/// Refuse pid files that someone else could have planted, and group ids
/// whose signalling would hit more than one run (`pgrun wait` applies the
/// same refusals).
pub fn check_safe(path: &Path, record: &Record) -> Result<()> {
    let me = sys::geteuid();
    let owner = record.meta.uid();
    if owner != me {
        bail!("refusing pid file {}: owned by uid {owner}, not {me}", path.display());
    }
    if record.meta.permissions().mode() & 0o002 != 0 {
        bail!("refusing pid file {}: it is world-writable", path.display());
    }
    let pgid = record.pgid;
    if pgid <= 1 {
        bail!("refusing pid file {}: unsafe process-group id {pgid}", path.display());
    }
    if pgid == sys::getpgrp() {
        bail!("refusing pid file {}: process group {pgid} is cancel's own", path.display());
    }
    if sys::getpgid(sys::getppid()) == Some(pgid) {
        bail!("refusing pid file {}: process group {pgid} is cancel's caller's", path.display());
    }
    Ok(())
}

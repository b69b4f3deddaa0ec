//! `pgrun cancel PIDFILE`: stop a run from another process.
//!
//! The order closes the publication race from the canceller's side: the
//! marker is dropped *before* the pid file is read, so a run that has not
//! published yet finds the marker when it checks right after publishing (or
//! before starting), and a run that has published is found here. A live run
//! is asked to stop by SIGTERM to the pgrun that holds the lock, so it runs
//! its own stop sequence; cancel then waits, on a pidfd where there is one,
//! until that pgrun has exited and the group is gone. Nothing is reported
//! gone before it is.

use crate::cli::CancelArgs;
use crate::pidfile::{self, Record, RecordError};
use crate::signame::Signal;
use crate::stop_sequence::StopSequence;
use crate::sys::{self, Pid, lock, process};
use crate::{say, verbose};
use anyhow::{Result, anyhow, bail};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

/// Exit statuses of `pgrun cancel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelExit {
    /// 0: the run is gone (stopped, or kept from starting).
    Gone,
    /// 1: no live run was found (also: left pending with --keep-pending).
    NoRun,
    /// 2: the group was still alive 1 s after the SIGKILL --timeout led to.
    Survived,
    /// 125: an error; nothing was signalled.
    Failed,
}

impl CancelExit {
    pub fn code(self) -> u8 {
        match self {
            CancelExit::Gone => 0,
            CancelExit::NoRun => 1,
            CancelExit::Survived => 2,
            CancelExit::Failed => 125,
        }
    }
}

/// How long a group gets to vanish after a SIGKILL before cancel gives up.
const AFTER_KILL: Duration = Duration::from_secs(1);

pub fn cancel(args: &CancelArgs) -> CancelExit {
    say::set_verbose(args.verbose);
    let marker = args.cancel_file.clone().unwrap_or_else(|| pidfile::default_marker(&args.pidfile));
    let created = match pidfile::create_marker(&marker) {
        Ok(created) => created,
        Err(e) => {
            say::line(format_args!("cannot create cancel marker {}: {e}", marker.display()));
            return CancelExit::Failed;
        }
    };
    let started = Instant::now();
    let deadline = args.timeout.filter(|t| !t.is_zero()).and_then(|t| started.checked_add(t));
    let c = Canceller { args, marker, created, deadline };
    match c.run(started) {
        Ok(exit) => exit,
        Err(err) => {
            if c.created {
                pidfile::take_marker(&c.marker);
            }
            say::line(format_args!("{err:#}"));
            CancelExit::Failed
        }
    }
}

struct Canceller<'a> {
    args: &'a CancelArgs,
    marker: PathBuf,
    /// Whether this cancel created the marker (and so may remove it).
    created: bool,
    /// `--timeout`: past it, SIGKILL the group.
    deadline: Option<Instant>,
}

impl Canceller<'_> {
    fn run(&self, started: Instant) -> Result<CancelExit> {
        let path = &self.args.pidfile;
        let Some(record) = self.wait_for_record(started)? else {
            return Ok(self.no_run_appeared());
        };
        self.check_safe(path, &record)?;
        match lock::lock_holder(&record.file) {
            // Its holder lives in another PID namespace: we cannot name it.
            Ok(Some(holder)) if holder <= 0 => {
                bail!("cannot tell which pgrun holds pid file {} (another PID namespace?)", path.display())
            }
            Ok(Some(holder)) => self.stop_live_run(&record, holder),
            Ok(None) if !pidfile::still_names(path, &record) && !process::group_exists(record.pgid) => {
                // Its pgrun removed it and exited while we looked: the run is
                // over (it found our marker, or ended on its own).
                verbose!("the run ended while cancel looked at it");
                Ok(CancelExit::Gone)
            }
            Ok(None) => self.stale(path, &record),
            Err(e) => bail!("cannot read the lock of pid file {}: {e}", path.display()),
        }
    }

    /// Look for the pid file until `--wait-start` has passed. `Ok(None)`: no
    /// run appeared, or a starting run took the marker (then we are done).
    fn wait_for_record(&self, started: Instant) -> Result<Option<Record>> {
        let path = &self.args.pidfile;
        let until = started.checked_add(self.args.wait_start);
        let mut pause = Duration::from_millis(1);
        loop {
            match pidfile::read_record(path, true) {
                Ok(record) => return Ok(Some(record)),
                Err(RecordError::Missing) => {}
                Err(e) => bail!("cannot use pid file {}: {e}", path.display()),
            }
            if !pidfile::marker_present(&self.marker) {
                // A starting run removed it: it will not start (or has ended).
                return Ok(None);
            }
            let now = Instant::now();
            if until.is_none_or(|u| now >= u) {
                return Ok(None);
            }
            thread::sleep(pause.min(until.map_or(pause, |u| u - now)));
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    fn no_run_appeared(&self) -> CancelExit {
        let path = self.args.pidfile.display();
        if !pidfile::marker_present(&self.marker) {
            say::line(format_args!("a starting run at {path} took the cancel marker: it did not start"));
            return CancelExit::Gone;
        }
        if self.args.keep_pending {
            say::line(format_args!("no run at {path}; cancel left pending at {}", self.marker.display()));
        } else {
            if self.created {
                pidfile::take_marker(&self.marker);
            }
            say::line(format_args!("no run at {path}"));
        }
        CancelExit::NoRun
    }

    /// Refuse pid files that someone else could have planted, and group ids
    /// whose signalling would hit more than one run.
    fn check_safe(&self, path: &Path, record: &Record) -> Result<()> {
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

    fn stop_live_run(&self, record: &Record, holder: Pid) -> Result<CancelExit> {
        let pgid = record.pgid;
        // Open the handle first, then make sure the lock still names the
        // same pgrun, so a recycled pid can never be signalled.
        let exit_handle = process::pidfd_open(holder);
        if lock::lock_holder(&record.file).ok().flatten() != Some(holder) {
            verbose!("the run ended while cancel looked at it");
            return Ok(if process::group_exists(pgid) { self.stop_group(pgid) } else { CancelExit::Gone });
        }
        verbose!("sending TERM to pgrun {holder} (process group {pgid})");
        if !process::signal_process(holder, libc::SIGTERM).map_err(|e| anyhow!("cannot signal pgrun {holder}: {e}"))? {
            verbose!("pgrun {holder} had already exited");
        }
        if self.args.no_wait {
            return Ok(CancelExit::Gone);
        }
        if !self.wait_run_exit(record, holder, exit_handle) {
            return Ok(self.kill_group(pgid));
        }
        verbose!("pgrun {holder} has exited");
        if process::group_exists(pgid) {
            // pgrun died without cleaning up (SIGKILL): finish its job.
            verbose!("process group {pgid} outlived its pgrun; stopping it");
            return Ok(self.stop_group(pgid));
        }
        Ok(CancelExit::Gone)
    }

    /// Wait for the pgrun holding the lock to exit; false if the deadline
    /// passed first. The lock is released at exit even if the process lingers
    /// as a zombie, so it is the portable signal; a pidfd makes it an event.
    fn wait_run_exit(&self, record: &Record, holder: Pid, exit_handle: Option<std::os::fd::OwnedFd>) -> bool {
        let mut pause = Duration::from_millis(1);
        loop {
            if lock::lock_holder(&record.file).ok().flatten() != Some(holder) {
                return true;
            }
            let now = Instant::now();
            if self.deadline.is_some_and(|d| now >= d) {
                return false;
            }
            let until_deadline = self.deadline.map(|d| d - now);
            match &exit_handle {
                Some(fd) => {
                    let _ = sys::wait_readable(fd.as_fd(), until_deadline);
                }
                None => {
                    thread::sleep(until_deadline.map_or(pause, |d| d.min(pause)));
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
            }
        }
    }

    /// A pid file nobody holds: remove it; with --force, stop its group.
    fn stale(&self, path: &Path, record: &Record) -> Result<CancelExit> {
        let pgid = record.pgid;
        let removed = pidfile::remove_if_stale(path, record);
        if self.created {
            pidfile::take_marker(&self.marker);
        }
        if !removed {
            // Someone locked it meanwhile: a run is starting on this path.
            say::line(format_args!("pid file {} was taken by a starting run; cancel again", path.display()));
            return Ok(CancelExit::NoRun);
        }
        if self.args.force {
            if !process::group_exists(pgid) {
                verbose!("stale pid file removed; process group {pgid} is already gone");
                return Ok(CancelExit::Gone);
            }
            verbose!("stale pid file removed; --force: stopping process group {pgid}");
            return Ok(self.stop_group(pgid));
        }
        say::line(format_args!(
            "stale pid file {} (no live run) removed; process group {pgid} not signalled",
            path.display()
        ));
        Ok(CancelExit::NoRun)
    }

    /// Run the default stop sequence on a group pgrun no longer watches.
    fn stop_group(&self, pgid: Pid) -> CancelExit {
        for step in StopSequence::default().steps() {
            if step.signal == Signal::KILL {
                break;
            }
            verbose!("sending {} to process group {pgid}", step.signal);
            let _ = process::signal_group(pgid, step.signal.0);
            let _ = process::signal_group(pgid, libc::SIGCONT);
            let step_end = Instant::now() + step.grace;
            let until = self.deadline.map_or(step_end, |d| d.min(step_end));
            if wait_group_gone_until(pgid, Some(until)) {
                return CancelExit::Gone;
            }
        }
        self.kill_group(pgid)
    }

    /// SIGKILL the group; 2 if it is still there a second later.
    fn kill_group(&self, pgid: Pid) -> CancelExit {
        verbose!("sending KILL to process group {pgid}");
        let _ = process::signal_group(pgid, libc::SIGKILL);
        if wait_group_gone_until(pgid, Some(Instant::now() + AFTER_KILL)) {
            CancelExit::Gone
        } else {
            say::line(format_args!("process group {pgid} is still alive 1s after SIGKILL"));
            CancelExit::Survived
        }
    }
}

/// Poll `kill(-pgid, 0)` with backoff until ESRCH or `until`. cancel is not
/// the group's parent, so no event tells it; the backoff keeps this cheap.
fn wait_group_gone_until(pgid: Pid, until: Option<Instant>) -> bool {
    let mut pause = Duration::from_millis(1);
    loop {
        if !process::group_exists(pgid) {
            return true;
        }
        let now = Instant::now();
        if until.is_some_and(|u| now >= u) {
            return false;
        }
        thread::sleep(until.map_or(pause, |u| (u - now).min(pause)));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

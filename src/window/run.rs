//! `--pidfile P`: whether the run that writes the file is still published,
//! and its end as an event. The run is the one published at P when output
//! first looks; it is over once P no longer names that pid file (removed,
//! or replaced by another run's) or nobody holds its lock as a live run
//! (see [`crate::pidfile`]): a pgrun removes its pid file, then lets go of
//! the lock; a pgrun that was killed lets go of it at once. Its release is
//! waited for as `pgrun wait` waits for it ([`pidfile::ReleaseWatch`]), its
//! removal as a change to the file ([`crate::sys::watch`]). Only read: no
//! lock is held but the instant's read lock of that wait, nothing is
//! signalled.

use crate::pidfile::{self, Liveness, Record, RecordError, ReleaseWatch};
use anyhow::{Result, anyhow, bail};
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

/// The run published at `--pidfile`, as output follows it.
pub struct Run {
    path: PathBuf,
    /// Its pid file, while the run was live when first looked at.
    record: Option<Record>,
    /// The release of its lock, once asked for and until it came.
    release: Option<ReleaseWatch>,
}

impl Run {
    /// The run published at `path` now (none: it is over already).
    pub fn find(path: &Path) -> Result<Run> {
        let record = match pidfile::read_record(path, false) {
            Ok(record) => Some(record),
            Err(RecordError::Missing) => None,
            Err(e) => bail!("cannot use pid file {}: {e}", path.display()),
        };
        let mut run = Run { path: path.to_path_buf(), record, release: None };
        if let Some(record) = &run.record
            && !matches!(liveness(path, record)?, Liveness::Live(_))
        {
            run.record = None;
        }
        crate::test_hook::pause("output-found");
        Ok(run)
    }

    /// Whether the run is over: never published, its pid file gone from
    /// the path, or its lock let go of.
    pub fn over(&self) -> Result<bool> {
        let Some(record) = &self.record else { return Ok(true) };
        let names = pidfile::still_names(&self.path, record)
            .map_err(|e| anyhow!("cannot look at pid file {}: {e}", self.path.display()))?;
        if !names {
            return Ok(true);
        }
        Ok(!matches!(liveness(&self.path, record)?, Liveness::Live(_)))
    }

    /// Wait for the run's end as events from now on: a change to its pid
    /// file (watched by the caller, at [`Run::path`]) and the release of
    /// its lock (the fd of [`Run::release_fd`]).
    pub fn watch_release(&mut self) -> Result<()> {
        if let Some(record) = &self.record {
            let watch = record
                .watch_release()
                .map_err(|e| anyhow!("cannot wait for the lock of pid file {}: {e}", self.path.display()))?;
            self.release = Some(watch);
        }
        Ok(())
    }

    /// The pid file to watch for changes, while the run is live.
    pub fn path(&self) -> Option<&Path> {
        self.record.as_ref().map(|_| self.path.as_path())
    }

    /// Readable once the lock was let go of; `None` once that was taken.
    pub fn release_fd(&self) -> Option<BorrowedFd<'_>> {
        self.release.as_ref().map(ReleaseWatch::fd)
    }

    /// The release came ([`Run::release_fd`] is readable): take it. An
    /// error ended the wait for it, not the run: said as an error.
    pub fn take_release(&mut self) -> Result<()> {
        if let Some(release) = self.release.take() {
            release
                .outcome()
                .map_err(|e| anyhow!("cannot wait for the lock of pid file {}: {e}", self.path.display()))?;
        }
        Ok(())
    }
}

fn liveness(path: &Path, record: &Record) -> Result<Liveness> {
    record.liveness().map_err(|e| anyhow!("cannot read the lock of pid file {}: {e}", path.display()))
}

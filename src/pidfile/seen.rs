//! A pgrun a reader saw with a run: holding a pid file's lock (its run
//! live), or holding its note at the marker path (its run withdrawn, itself
//! not exited), together with a handle on it that no reuse of its pid can
//! redirect. So a `cancel` that finds the run over by the time it looks
//! again can still wait until that pgrun has exited.
//!
//! The proof that the handle is that pgrun's is the lock: the pidfd is
//! opened first, then the lock is seen still held by the same pid, and a
//! lock goes with its holder's exit, so that pid was not reused when the
//! handle was opened. Where there are no pidfds, only a held note tells of
//! the exit (its lock goes with pgrun's last steps); a pid is never waited
//! for by its number.

use super::{EndingRun, Liveness, Record, RecordError};
use crate::sys::Pid;
use crate::sys::pidfd::Pidfd;
use std::io;
use std::path::Path;

/// A pgrun seen holding a run, and a handle proven to be it.
pub struct SeenPgrun {
    pgrun: Pid,
    /// Its pidfd (none without pidfds, or if one could not be opened).
    handle: Option<Pidfd>,
    held: Held,
}

/// What the pgrun was seen holding.
enum Held {
    /// A pid file's lock: its run was live.
    Record(Box<Record>),
    /// Its note at the marker path: its run was withdrawn.
    Note(EndingRun),
}

impl SeenPgrun {
    /// The pgrun `holder` that was just read holding `record`'s lock:
    /// `None` unless it still holds it once its handle is open (nor for a
    /// holder in a PID namespace the reader cannot see).
    pub fn holding(record: Record, holder: Pid) -> Option<SeenPgrun> {
        if holder <= 0 {
            return None;
        }
        let handle = Pidfd::open(holder);
        match record.liveness() {
            Ok(Liveness::Live(now)) if now == holder => {
                Some(SeenPgrun { pgrun: holder, handle, held: Held::Record(Box::new(record)) })
            }
            _ => None,
        }
    }

    /// The pgrun ending its run (see [`super::ending_run`]): `None` unless
    /// it still holds its note once its handle is open.
    pub fn ending(run: EndingRun) -> Option<SeenPgrun> {
        let pgrun = run.pgrun();
        let handle = Pidfd::open(pgrun);
        run.held().ok()?.then_some(SeenPgrun { pgrun, handle, held: Held::Note(run) })
    }

    /// What `cancel` sees before it makes its marker: the pgrun holding
    /// the pid file `path`'s lock, or, with no pid file, the pgrun holding
    /// its note at `marker` (see [`super::ending_run`]), each held by a
    /// handle proven to be it. Only seen, never acted on: a file cancel
    /// would refuse counts for nothing, and anything that cannot be read is
    /// nothing seen (the looks after the marker decide).
    pub fn glance(path: &Path, marker: &Path) -> Option<SeenPgrun> {
        match super::read_record(path, false) {
            Ok(record) if super::check_safe(path, &record).is_ok() => match record.liveness() {
                Ok(Liveness::Live(holder)) => SeenPgrun::holding(record, holder),
                _ => None,
            },
            Err(RecordError::Missing) => super::ending_run(marker, crate::sys::geteuid()).and_then(SeenPgrun::ending),
            _ => None,
        }
    }

    /// Its pid.
    pub fn pgrun(&self) -> Pid {
        self.pgrun
    }

    /// Its pidfd, if there is one.
    pub fn handle(&self) -> Option<&Pidfd> {
        self.handle.as_ref()
    }

    /// The note it was seen holding, whose lock it lets go of as it exits.
    pub fn note(&self) -> Option<&EndingRun> {
        match &self.held {
            Held::Note(note) => Some(note),
            Held::Record(_) => None,
        }
    }

    /// Whether its exit can be waited for here: a pidfd, or a held note.
    pub fn can_wait(&self) -> bool {
        self.handle.is_some() || self.note().is_some()
    }

    /// Whether it has let go of the run it was seen holding: of the
    /// record's lock (it withdrew the run, or died), or of the run already
    /// when it was seen holding its note. An error proves nothing either
    /// way: it is returned.
    pub fn let_go_of_run(&self) -> io::Result<bool> {
        match &self.held {
            Held::Record(record) => Ok(record.liveness()? != Liveness::Live(self.pgrun)),
            Held::Note(_) => Ok(true),
        }
    }
}

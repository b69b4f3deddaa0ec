//! `pgrun cancel PIDFILE`: stop a run from another process.
//!
//! The order closes the publication race from the canceller's side: the
//! marker is dropped *before* the pid file is read, so a run that has not
//! published yet finds the marker when it checks right after publishing (or
//! before starting), and a run that has published is found here. A live run
//! is asked to stop by SIGTERM to the pgrun that holds the lock, so it runs
//! its own stop sequence; cancel then waits, on a pidfd where there is one,
//! until that pgrun has exited and the group is gone. Nothing is reported
//! gone before it is: a run found ending, or over, while cancel looks
//! (its lock let go of as cancel found it, or the marker taken and the pid
//! file gone) is waited for until the pgrun that held it has exited. Which
//! pgrun that is, cancel learns from a first look before it makes its
//! marker (the lock holder, or the pgrun holding its note at the marker
//! path, each held by a handle proven to be it: see [`pidfile::SeenPgrun`]),
//! or from that note as it looks; the first look acts on nothing.

use crate::backoff::Backoff;
use crate::contain::ForeignGroup;
use crate::contain::group::GroupNumber;
use crate::exit::CancelExit;
use crate::pidfile::{self, Liveness, Marker, Record, RecordError, SeenPgrun, check_safe, lock_error};
use crate::signame::Signal;
use crate::stop::sequence::StopSequence;
use crate::stop::unsupervised;
use crate::sys::pidfd::Pidfd;
use crate::sys::{self, Pid, process};
use crate::test_hook;
use crate::{say, verbose};
use anyhow::{Result, anyhow, bail};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What `pgrun cancel` was asked to do (resolved from its command line by the
/// entry point, so that this module reads no command line).
#[derive(Debug, Clone)]
pub struct Options {
    /// The pid file of the run to stop.
    pub pidfile: PathBuf,
    /// `--cancel-file`: the marker, if not PIDFILE.cancel.
    pub cancel_file: Option<PathBuf>,
    /// `--wait-start`: how long to wait for a run to publish.
    pub wait_start: Duration,
    /// `--timeout`: past it, SIGKILL the group.
    pub timeout: Option<Duration>,
    /// `--keep-pending`: leave the marker for a run that has not started.
    pub keep_pending: bool,
    /// `--no-wait`: return once the request is delivered.
    pub no_wait: bool,
    /// `--force`: stop a stale file's group.
    pub force: bool,
    /// `--report`: the run's report, which says at once that it is over.
    pub report: Option<PathBuf>,
    pub verbose: bool,
}

/// `pgrun cancel`: stop the run, or say the one error; the exit status.
pub fn cancel(args: &Options) -> CancelExit {
    say::set_verbose(args.verbose);
    if args.report.as_deref().is_some_and(|report| crate::report::said_over(&args.pidfile, report)) {
        return CancelExit::NoRun;
    }
    match Canceller::arm(args).and_then(|c| c.finish()) {
        Ok(exit) => exit,
        Err(err) => {
            say::line(format_args!("{err:#}"));
            CancelExit::Failed
        }
    }
}

struct Canceller<'a> {
    args: &'a Options,
    marker: PathBuf,
    /// Whether this cancel created the marker (and so may remove it).
    created: bool,
    /// The marker this cancel created, as it was then (see
    /// [`Canceller::withdraw_own_request`]).
    request: Option<pidfile::Taken>,
    /// Why the marker could not be created, if it could not.
    marker_error: Option<std::io::Error>,
    /// `--timeout`: past it, SIGKILL the group.
    deadline: Option<Instant>,
    /// When cancel started: `--wait-start` counts from here.
    started: Instant,
    /// The pgrun cancel saw holding the run (or ending it) before it made
    /// its marker, held by a handle: a run over by the time cancel looks
    /// again is waited for until that pgrun has exited.
    seen: Option<SeenPgrun>,
}

/// How the wait for the pgrun cancel asked to stop came out.
enum Waited {
    /// That pgrun has exited.
    Exited,
    /// It let go of its lock; whether it has exited cannot be told here
    /// (no pidfd, no ending note).
    Withdrawn,
    /// It let go of its lock but was still running at --timeout.
    StillFinishing,
    /// --timeout passed while it still held the lock.
    TimedOut,
}

/// The longest pause between two looks at the group while cancel waits
/// with a --timeout (the supervisor's own fallback check goes up to this).
const WATCH_LONGEST: Duration = Duration::from_millis(100);

/// What cancel found of a stale pid file it removed.
struct StaleRemoved {
    pgid: Pid,
    /// With --force: how stopping its group went.
    forced: Option<CancelExit>,
}

impl<'a> Canceller<'a> {
    /// Check the arguments and drop the marker (step 1 of the contract).
    fn arm(args: &'a Options) -> Result<Canceller<'a>> {
        let marker = args.cancel_file.clone().unwrap_or_else(|| pidfile::default_marker(&args.pidfile));
        if pidfile::same_file(&marker, &args.pidfile) {
            bail!("--cancel-file {} names the pid file itself", marker.display());
        }
        let seen = SeenPgrun::glance(&args.pidfile, &marker);
        // Without a marker a live run can still be stopped through its lock
        // holder; only a run that has not published would be missed.
        let (created, marker_error) = match pidfile::create_marker(&marker) {
            Ok(false) if let Marker::Foreign(uid) = pidfile::marker(&marker, sys::geteuid()) => {
                // Somebody else's file holds the path: runs ignore it, so it
                // cancels nothing, and ours cannot be put there.
                verbose!(
                    "cancel marker path {} is taken by uid {uid}'s file; looking for a live run",
                    marker.display()
                );
                (false, Some(std::io::Error::other(format!("a file of uid {uid} is there"))))
            }
            Ok(created) => {
                verbose!("cancel marker {} {}", marker.display(), if created { "created" } else { "already there" });
                (created, None)
            }
            Err(e) => {
                verbose!("cannot create cancel marker {}: {e}; looking for a live run", marker.display());
                (false, Some(e))
            }
        };
        let started = Instant::now();
        let deadline = args.timeout.filter(|t| !t.is_zero()).and_then(|t| started.checked_add(t));
        let request = created.then(|| pidfile::Taken::at(&marker, false)).flatten();
        Ok(Canceller { args, marker, created, request, marker_error, deadline, started, seen })
    }

    /// Find the run and stop it; on an error, withdraw the marker this
    /// cancel created (one that was already there is somebody else's).
    fn finish(self) -> Result<CancelExit> {
        let result = self.run(self.started);
        if result.is_err() {
            self.withdraw_marker();
        }
        result
    }
}

impl Canceller<'_> {
    /// Look for a published run until `--wait-start` has passed (a value
    /// too large to represent waits forever). A stale pid file is removed
    /// on the way (its group stopped only with --force) and the wait goes
    /// on: a run may be starting. A file a starting run has claimed is not
    /// published yet: its content is not trusted, its claimant not touched.
    fn run(&self, started: Instant) -> Result<CancelExit> {
        test_hook::pause("cancel-marked");
        let path = &self.args.pidfile;
        let until = started.checked_add(self.args.wait_start);
        let mut stale: Option<StaleRemoved> = None;
        let mut said_claimed = false;
        let mut backoff = Backoff::default();
        loop {
            match pidfile::read_record(path, true) {
                Ok(record) => {
                    check_safe(path, &record)?;
                    match record.liveness().map_err(|e| lock_error(path, e))? {
                        Liveness::Live(holder) => {
                            let exit = self.stop_live_run(&record, holder);
                            // A run not over yet takes this cancel's request
                            // at its end; one over (by now, without
                            // --no-wait) takes none: withdrawn here.
                            if !self.args.no_wait || record.run_over(holder).map_err(|e| lock_error(path, e))? {
                                self.withdraw_own_request();
                            }
                            return exit;
                        }
                        Liveness::Claimed => {
                            if !said_claimed {
                                verbose!("a run is starting on {}; waiting for it to publish", path.display());
                                said_claimed = true;
                            }
                        }
                        Liveness::Stale => {
                            if stale.is_none() && pidfile::remove_if_stale(path, &record).unwrap_or(false) {
                                stale = Some(self.removed_stale(record.pgid));
                            }
                        }
                    }
                }
                Err(RecordError::Missing) => {
                    // Withdrawn already, by a pgrun that has not exited yet:
                    // the run is being stopped, by another cancel or by
                    // itself. Its end is this cancel's too.
                    if let Some(ending) = pidfile::ending_run(&self.marker, sys::geteuid()) {
                        return self.wait_ending(ending);
                    }
                    // The run seen before the marker was made has ended
                    // since, its record withdrawn (its group gone): it was
                    // this cancel's to stop, and it is over. It took no
                    // request made once it was over, nor does the next run
                    // get this one.
                    if let Some(seen) = &self.seen
                        && seen.let_go_of_run().map_err(|e| lock_error(path, e))?
                    {
                        verbose!("the run at {} ended while cancel looked at it", path.display());
                        self.withdraw_own_request();
                        self.wait_for_exit_of(seen)?;
                        return Ok(stale.and_then(|s| s.forced).unwrap_or(CancelExit::Gone));
                    }
                }
                Err(e) => bail!("cannot use pid file {}: {e}", path.display()),
            }
            if self.marker_error.is_none() && self.marker_gone()? {
                // A starting run consumed it (and will not start), or the run
                // ended and withdrew it: either way, no run is left. The
                // pgrun seen holding the run, if it has let go of it since,
                // is ending it: its end is this cancel's.
                say::line(format_args!(
                    "the run at {} took the cancel marker: it did not start, or it has ended",
                    path.display()
                ));
                if let Some(seen) = &self.seen
                    && seen.let_go_of_run().map_err(|e| lock_error(path, e))?
                {
                    self.wait_for_exit_of(seen)?;
                }
                return Ok(stale.and_then(|s| s.forced).unwrap_or(CancelExit::Gone));
            }
            if !backoff.pause_until(until) {
                if let Some(e) = &self.marker_error {
                    // Without a marker, a run that has not published cannot
                    // be reached: only a live one could have been stopped.
                    bail!(
                        "cannot create cancel marker {}: {e}; no live run at {}",
                        self.marker.display(),
                        path.display()
                    );
                }
                return Ok(self.no_run_appeared(stale));
            }
        }
    }

    /// A stale pid file was removed: say so; with --force, stop its group.
    fn removed_stale(&self, pgid: Pid) -> StaleRemoved {
        let path = self.args.pidfile.display();
        if !self.args.force {
            verbose!("stale pid file {path} removed; process group {pgid} not signalled (no --force)");
            return StaleRemoved { pgid, forced: None };
        }
        let forced = if process::group_exists(pgid) {
            verbose!("stale pid file {path} removed; --force: stopping process group {pgid}");
            self.stop_group(pgid)
        } else {
            verbose!("stale pid file {path} removed; process group {pgid} is already gone");
            CancelExit::Gone
        };
        StaleRemoved { pgid, forced: Some(forced) }
    }

    fn no_run_appeared(&self, stale: Option<StaleRemoved>) -> CancelExit {
        let path = self.args.pidfile.display();
        if !self.args.keep_pending {
            self.withdraw_marker();
        }
        if let Some(StaleRemoved { forced: Some(exit), pgid }) = stale {
            verbose!("no run appeared at {path}; the stale run's process group {pgid} was stopped");
            return exit;
        }
        let found_stale = stale.is_some();
        let stale_note = stale.map_or(String::new(), |s| {
            format!(" (a stale pid file was removed; process group {} not signalled)", s.pgid)
        });
        if self.args.keep_pending {
            // The marker we found may have been a stopping run's, withdrawn
            // as it ended: put ours there, so the cancel is really pending.
            if let Err(e) = pidfile::create_marker(&self.marker) {
                say::line(format_args!("no run at {path}{stale_note}; cannot leave the cancel pending: {e}"));
                return CancelExit::Failed;
            }
            say::line(format_args!("no run at {path}{stale_note}; cancel left pending at {}", self.marker.display()));
        } else {
            let report = self.args.report.as_deref().map(|report| {
                match found_stale && crate::report::names(report, &self.args.pidfile) {
                    true => pidfile::ReportSaid::Earlier(report),
                    false => pidfile::ReportSaid::NotNamed(report),
                }
            });
            pidfile::say_no_run(&self.args.pidfile, &stale_note, self.args.wait_start, report);
        }
        CancelExit::NoRun
    }

    /// The run this cancel found has ended, or is over: remove the request
    /// this cancel made if it is still there as it was made (same file,
    /// still a request; never another's). A run that was already over when
    /// the request came (see [`Record::run_over`]) did not take it: left
    /// there, the request would cancel the next run on this pid file.
    fn withdraw_own_request(&self) {
        if let Some(request) = self.request
            && let Err(e) = pidfile::remove_if_still_taken(&self.marker, request, 0, sys::geteuid())
        {
            say::line(format_args!(
                "warning: cannot remove cancel marker {}: {}",
                self.marker.display(),
                say::errno_text(&e)
            ));
        }
    }

    /// Remove the marker if this cancel created it; one that was already
    /// there is somebody else's request.
    fn withdraw_marker(&self) {
        if self.created {
            pidfile::consume_marker(&self.marker, sys::geteuid());
        }
    }

    /// Ask the pgrun holding the lock to stop (SIGTERM through a pidfd where
    /// there is one), and wait for it. The group id in the file is used
    /// only if that pgrun lives in our PID namespace: in another one the
    /// number names a different group here.
    fn stop_live_run(&self, record: &Record, holder: Pid) -> Result<CancelExit> {
        let path = &self.args.pidfile;
        if holder <= 0 {
            bail!("cannot tell which pgrun holds pid file {} (it runs in another PID namespace)", path.display());
        }
        pidfile::check_holder(path, record, holder)?;
        let pgid = record.pgid;
        test_hook::pause("cancel-found");
        // Open the handle and look at the namespace first, then make sure
        // the lock still names the same pgrun: so both describe that pgrun,
        // and a recycled pid is never signalled.
        // A pidfd that could not be opened here (no fd left, say) is made
        // up for by the one cancel opened on this pgrun when it first saw it
        // holding the run: proven then by the lock, which the same pid still
        // holds (checked below). Without either, a let-go lock would leave
        // its exit untold (the note at the marker path cannot be opened
        // either), and cancel would say "gone" with it alive: an error,
        // before anything is signalled. Where no pidfd can be had at all
        // (ENOSYS, a seccomp filter), the lock and the note are what there is.
        let seen_handle = self.seen_as(holder).and_then(SeenPgrun::handle);
        let opened = match Pidfd::hold(holder) {
            Ok(opened) => opened,
            Err(e)
                if seen_handle.is_none()
                    && matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM)) =>
            {
                bail!("cannot open a pidfd for pgrun {holder} (holding pid file {}): {e}", path.display())
            }
            Err(_) => None,
        };
        let handle = opened.as_ref().or(seen_handle);
        let own_namespace = crate::sys::proc::in_own_pid_namespace(holder);
        if record.liveness().map_err(|e| lock_error(path, e))? != Liveness::Live(holder) {
            verbose!("the run ended while cancel looked at it");
            self.wait_let_go(holder)?;
            return self.after_holder_exit(record, holder, own_namespace);
        }
        if !own_namespace {
            verbose!("pgrun {holder} runs in another PID namespace: acting only through it, not on group {pgid}");
        }
        // Whether the group is still the run's, asked while its pgrun lives
        // (and so can tell): a pgrun may be finishing after its group ended,
        // and the number be somebody else's already. If that pgrun exited
        // while we looked, the answer proves nothing: the number is trusted,
        // as before. From here on the number is the run's until the group
        // is seen empty (see `wait_run_exit`).
        let group_was_the_runs = own_namespace
            && (pidfile::group_holds_run_of(holder, pgid)
                || record.liveness().map_err(|e| lock_error(path, e))? != Liveness::Live(holder));
        let number = GroupNumber::new(pgid, group_was_the_runs);
        verbose!("sending TERM to pgrun {holder} (process group {pgid})");
        let delivered = self.signal_holder(record, holder, handle, Signal::TERM)?;
        if delivered {
            // A pgrun stopped as a job (Ctrl-Z, or waiting in the background
            // for the terminal) acts on the TERM only once continued.
            let _ = self.signal_holder(record, holder, handle, Signal::CONT);
        } else {
            verbose!("pgrun {holder} had already exited");
        }
        if self.args.no_wait {
            return Ok(CancelExit::Gone);
        }
        test_hook::pause("cancel-signalled");
        match self.wait_run_exit(record, holder, handle, &number)? {
            Waited::Exited => verbose!("pgrun {holder} has exited"),
            Waited::Withdrawn => {
                // pgrun let go of the lock: it withdraws its record only
                // once its group is gone, and it has, or it died.
                verbose!("pgrun {holder} let go of its lock; when it exits cannot be told here")
            }
            Waited::StillFinishing => {
                verbose!("pgrun {holder} withdrew its run but is still finishing after --timeout (its output, say)");
            }
            Waited::TimedOut if own_namespace => {
                test_hook::pause("cancel-timed-out");
                // The group is the run's while it holds a process of the
                // run, or while its number has been in use since cancel
                // found it the run's (a member the run cannot stop, say a
                // zombie whose parent is outside the run, keeps it). A group
                // that holds neither took the number after the run's group
                // ended, while its pgrun was still finishing.
                if !pidfile::group_holds_run_of(holder, pgid) && !number.exists() {
                    verbose!("process group {pgid} holds no process of pgrun {holder}'s run any more; not signalled");
                    return Ok(CancelExit::Gone);
                }
                return Ok(self.kill_group(pgid));
            }
            Waited::TimedOut => {
                say::line(format_args!(
                    "pgrun {holder} is still stopping its run after --timeout; its process group is in another PID namespace and was not signalled"
                ));
                return Ok(CancelExit::Survived);
            }
        }
        self.after_holder_exit(record, holder, group_was_the_runs)
    }

    /// A pgrun that withdrew its run and has not exited yet (see
    /// [`pidfile::ending_run`]): the run is being stopped, by another cancel
    /// or by itself, and its end is this cancel's. Wait for that pgrun to
    /// exit: on its pidfd (opened while the note's lock proved the pid
    /// that pgrun's), else on the note's lock, which it lets go of in its
    /// last steps; a note let go of before the handle was open leaves the
    /// pgrun seen before the marker was made, if it is that one. Its group
    /// is gone (withdrawn), so --timeout has nothing left to kill: past it,
    /// cancel stops waiting.
    fn wait_ending(&self, ending: pidfile::EndingRun) -> Result<CancelExit> {
        let pgrun = ending.pgrun();
        verbose!("pgrun {pgrun} has withdrawn the run at {} and is ending", self.args.pidfile.display());
        // A note let go of before its handle was open: that pgrun is in
        // its last steps, still held if it is the one seen before.
        match SeenPgrun::ending(ending) {
            Some(seen) => self.wait_for_exit_of(&seen)?,
            None => match self.seen_as(pgrun) {
                Some(seen) => self.wait_for_exit_of(seen)?,
                None => verbose!("pgrun {pgrun} has let go of its note: it has exited, or is about to"),
            },
        }
        Ok(CancelExit::Gone)
    }

    /// The pgrun ending its run at the marker path, where the answer
    /// decides: a look that failed (no fd left, an I/O error) is an error,
    /// never "no note" (which would let cancel say the run is gone).
    fn ending_run(&self) -> Result<Option<pidfile::EndingRun>> {
        pidfile::ending_run_checked(&self.marker, sys::geteuid())
            .map_err(|e| anyhow!("cannot look at the note at {}: {}", self.marker.display(), say::errno_text(&e)))
    }

    /// The pgrun `holder` let go of the run's lock while cancel looked:
    /// wait for it to exit. The handle cancel opened on it came after the
    /// lock was last seen held, so it proves nothing; what does is the
    /// pgrun seen before the marker was made (the same pid, held since
    /// then), or the note that pgrun holds at the marker path, still held
    /// once a handle on it is open.
    fn wait_let_go(&self, holder: Pid) -> Result<()> {
        if let Some(seen) = self.seen_as(holder) {
            return self.wait_for_exit_of(seen);
        }
        let noted =
            self.ending_run()?.filter(|e| e.pgrun() == holder).and_then(SeenPgrun::ending).filter(SeenPgrun::can_wait);
        match noted {
            Some(seen) => self.wait_for_exit_of(&seen),
            None => {
                verbose!("pgrun {holder} let go of its lock as cancel looked; when it exits cannot be told here");
                Ok(())
            }
        }
    }

    /// The pgrun seen before the marker was made, if it is `pgrun` and its
    /// exit can be waited for here.
    fn seen_as(&self, pgrun: Pid) -> Option<&SeenPgrun> {
        self.seen.as_ref().filter(|s| s.pgrun() == pgrun && s.can_wait())
    }

    /// The run is over, or ending, and `seen` is its pgrun: wait until that
    /// pgrun has exited (on its pidfd, else on its note's lock), or
    /// `--timeout` passes; its group is gone (its run withdrawn), so there
    /// is nothing left to kill then. Not with `--no-wait`.
    fn wait_for_exit_of(&self, seen: &SeenPgrun) -> Result<()> {
        let pgrun = seen.pgrun();
        if self.args.no_wait {
            return Ok(());
        }
        let exited = match (seen.handle(), seen.note()) {
            (Some(fd), _) => {
                verbose!("waiting for pgrun {pgrun} to exit");
                self.wait_pidfd(fd, None)?
            }
            (None, Some(note)) => {
                verbose!("waiting for pgrun {pgrun} to exit");
                self.wait_note_released(note)?
            }
            (None, None) => {
                verbose!("pgrun {pgrun} is ending its run; when it exits cannot be told here");
                return Ok(());
            }
        };
        if exited {
            verbose!("pgrun {pgrun} has exited");
        } else {
            verbose!("pgrun {pgrun} is still finishing after --timeout; its run is over");
        }
        Ok(())
    }

    /// Whether nothing is at the marker path (a run took it, or withdrew
    /// it). A path that cannot be looked at proves nothing: an error.
    fn marker_gone(&self) -> Result<bool> {
        match std::fs::symlink_metadata(&self.marker) {
            Ok(_) => Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
            Err(e) => bail!("cannot look at cancel marker {}: {e}", self.marker.display()),
        }
    }

    /// Wait until `holder`, whose lock was just seen held, has exited, or
    /// `--timeout` passes. On Linux its pidfd says when it exits; without
    /// one, its lock is polled (with backoff) until let go of, and then, if
    /// it holds its ending note (see [`pidfile::ending_run`]), that note's
    /// lock. While the wait lasts and `number` is the run's, the group is
    /// looked at with the same backoff: once seen empty, its number is
    /// given up for good (it may be another group's by the time --timeout
    /// passes).
    fn wait_run_exit(
        &self,
        record: &Record,
        holder: Pid,
        handle: Option<&Pidfd>,
        number: &GroupNumber,
    ) -> Result<Waited> {
        let path = &self.args.pidfile;
        verbose!("waiting for pgrun {holder} to exit");
        let live = || record.liveness().map(|l| l == Liveness::Live(holder)).map_err(|e| lock_error(path, e));
        if let Some(fd) = handle {
            if self.wait_pidfd(fd, Some(number))? {
                return Ok(Waited::Exited);
            }
            return Ok(if live()? { Waited::TimedOut } else { Waited::StillFinishing });
        }
        let mut backoff = Backoff::up_to(WATCH_LONGEST);
        while live()? {
            self.watch(Some(number));
            if !backoff.pause_until(self.deadline) {
                return Ok(if live()? { Waited::TimedOut } else { Waited::StillFinishing });
            }
        }
        match self.ending_run()?.filter(|e| e.pgrun() == holder) {
            Some(ending) if self.wait_note_released(&ending)? => Ok(Waited::Exited),
            Some(_) => Ok(Waited::StillFinishing),
            None => Ok(Waited::Withdrawn),
        }
    }

    /// Wait on a pidfd until its process exits (true) or `--timeout`
    /// passes (false), looking at the group `number` meanwhile (see
    /// [`Canceller::watch`]).
    fn wait_pidfd(&self, fd: &Pidfd, number: Option<&GroupNumber>) -> Result<bool> {
        let mut backoff = Backoff::up_to(WATCH_LONGEST);
        loop {
            self.watch(number);
            let now = Instant::now();
            let left = self.deadline.map(|d| d.saturating_duration_since(now));
            if left.is_some_and(|l| l.is_zero()) {
                return Ok(fd.exited());
            }
            // Only while the number matters (a --timeout may kill by it)
            // does the wait wake up to look at it.
            let pause = self.watching(number).then(|| backoff.next_pause());
            let wait = match (left, pause) {
                (Some(l), Some(p)) => Some(l.min(p)),
                (l, p) => l.or(p),
            };
            if fd.wait_exited(wait).map_err(|e| anyhow!("cannot wait for pgrun to exit: {e}"))? {
                return Ok(true);
            }
        }
    }

    /// Wait until the ending note's lock is let go of (its pgrun exited:
    /// true) or `--timeout` passes (false), with backoff.
    fn wait_note_released(&self, ending: &pidfile::EndingRun) -> Result<bool> {
        let held = || {
            ending.held().map_err(|e| anyhow!("cannot read the lock of cancel marker {}: {e}", self.marker.display()))
        };
        let mut backoff = Backoff::default();
        while held()? {
            if !backoff.pause_until(self.deadline) {
                return Ok(!held()?);
            }
        }
        Ok(true)
    }

    /// While the group's number is the run's and a --timeout may kill by
    /// it: whether the group still exists (the first time it does not, the
    /// number is given up for good).
    fn watch(&self, number: Option<&GroupNumber>) {
        if let Some(number) = number.filter(|n| self.watching(Some(n)))
            && !number.exists()
        {
            verbose!("process group {} is empty: its number is no longer the run's", number.pgid());
        }
    }

    /// Whether the group's number is to be watched: it is the run's, and a
    /// --timeout may kill by it.
    fn watching(&self, number: Option<&GroupNumber>) -> bool {
        self.deadline.is_some() && number.is_some_and(GroupNumber::in_use)
    }

    /// Send `signal` to the pgrun holding the lock, through its pidfd where
    /// there is one. False only if that pgrun is gone: an ESRCH is believed
    /// only once the lock agrees. A lock is released when its holder exits,
    /// so while `holder` still holds it, that pid is still that pgrun, and
    /// the signal goes by pid instead (the lock checked right before).
    fn signal_holder(&self, record: &Record, holder: Pid, handle: Option<&Pidfd>, signal: Signal) -> Result<bool> {
        let cannot = |e: std::io::Error| anyhow!("cannot send {signal} to pgrun {holder}: {e}");
        let Some(fd) = handle else {
            return process::signal_process(holder, signal).map_err(cannot);
        };
        if fd.signal(signal).map_err(cannot)? {
            return Ok(true);
        }
        if record.liveness().map_err(|e| lock_error(&self.args.pidfile, e))? != Liveness::Live(holder) {
            return Ok(false);
        }
        verbose!("pgrun {holder} holds the lock but its pidfd said it had exited; sending {signal} by pid");
        process::signal_process(holder, signal).map_err(cannot)
    }

    /// The pgrun that held the record has exited: what is left to do.
    ///
    /// pgrun withdraws its record (removes the pid file) only once its group
    /// is gone. So if the path no longer names the file that was locked, the
    /// run ended (or its guard finished it): the group is over, and a group
    /// now holding the number is somebody else's, never adopted. Only a
    /// record left in place means pgrun died without cleaning up (SIGKILL);
    /// then cancel finishes its job on the group, if `group_may_be_the_runs`:
    /// only in its own PID namespace (in another one the number names a
    /// different group here), and not if the group was seen to be over
    /// while that pgrun still lived.
    fn after_holder_exit(&self, record: &Record, holder: Pid, group_may_be_the_runs: bool) -> Result<CancelExit> {
        let pgid = record.pgid;
        let path = &self.args.pidfile;
        // A path that cannot be looked at proves nothing either way.
        if !pidfile::still_names(path, record).map_err(|e| anyhow!("cannot use pid file {}: {e}", path.display()))? {
            verbose!("pgrun {holder} withdrew its record: process group {pgid} is over");
            return Ok(CancelExit::Gone);
        }
        if !process::group_exists(pgid) {
            return Ok(CancelExit::Gone);
        }
        if !group_may_be_the_runs {
            verbose!(
                "pgrun {holder} died without withdrawing its record; process group {pgid} is not known to be its run's: not signalled"
            );
            return Ok(CancelExit::Gone);
        }
        verbose!("pgrun {holder} died without withdrawing its record; stopping process group {pgid}");
        Ok(self.stop_group(pgid))
    }

    /// Run the default stop sequence on a group pgrun no longer watches
    /// (the loop the guard runs too); past --timeout, straight to KILL.
    fn stop_group(&self, pgid: Pid) -> CancelExit {
        let gone = unsupervised::stop(&mut ForeignGroup::new(pgid), &StopSequence::default(), self.deadline);
        Self::outcome(pgid, gone)
    }

    /// SIGKILL the group; 2 if it is still there a second later.
    fn kill_group(&self, pgid: Pid) -> CancelExit {
        let kill = StopSequence::simple(Signal::KILL, Duration::ZERO);
        Self::outcome(pgid, unsupervised::stop(&mut ForeignGroup::new(pgid), &kill, None))
    }

    fn outcome(pgid: Pid, gone: bool) -> CancelExit {
        if gone {
            return CancelExit::Gone;
        }
        say::line(format_args!("process group {pgid} is still alive 1s after SIGKILL"));
        CancelExit::Survived
    }
}

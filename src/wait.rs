//! `pgrun wait PIDFILE`: wait, from another process, for a run to be over.
//!
//! wait only looks: it signals nothing, creates or removes no file, and
//! holds no lock but a read lock of byte 0 for an instant once the run's
//! own is let go of (a read lock never makes a file look live), so any
//! number of waiters can wait on one run and none changes what a starting
//! run, `cancel` or `status` sees. Like cancel, it
//! waits up to `--wait-start` for a run to publish, and refuses the pid
//! files cancel refuses (a file found unlocked is stale only while the path
//! still names it: a run that ends cleanly removes its pid file before it
//! lets go of the lock, so a file gone from the path is a run over). A
//! live run is then waited for by events: the
//! release of its lock (a thread blocks on a read lock of byte 0, and says
//! when it gets it: see [`pidfile::ReleaseWatch`]) and, where there is one,
//! a pidfd of the pgrun holding the lock. pgrun lets go of the lock once
//! the run is gone and it has removed the pid file, and writes the report
//! right after, before any output it still owes a slow reader: so the
//! lock let go of with the file withdrawn is the run's end, however long
//! pgrun then writes, with or without a guard. A pgrun ends only once its
//! run is gone, so its exit is the run's end too, unless it died (SIGKILL):
//! then the pid file is still in place, and wait goes on waiting for its
//! guard (a child of that pgrun found when the run was found, on its
//! pidfd) and for the group itself, which no event announces (a backoff).
//! The file's group number is used only when the pgrun holding the lock
//! shares our PID namespace. Unless pgrun was seen to exit, the report may
//! still be on its way when the lock is let go of: wait gives it a moment.

use crate::backoff::{self, Backoff};
use crate::exit::WaitExit;
use crate::pidfile::{self, Liveness, Record, RecordError, check_safe, lock_error};
use crate::sys::{self, Pid, process};
use crate::{report, say, verbose};
use anyhow::{Context, Result, anyhow, bail};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long wait gives a pgrun that released its lock (and guard) to
/// write its report (it does so right after).
const REPORT_SETTLE: Duration = Duration::from_secs(5);

/// What `pgrun wait` was asked to do (resolved from its command line by the
/// entry point, so that this module reads no command line).
#[derive(Debug, Clone)]
pub struct Options {
    /// The pid file of the run to wait for.
    pub pidfile: PathBuf,
    /// `--wait-start`: how long to wait for a run to publish.
    pub wait_start: Duration,
    /// `--timeout`: past it, wait exits 124 and leaves the run alone.
    pub timeout: Option<Duration>,
    /// `--report`: the run's report, whose exit status wait exits with.
    pub report: Option<PathBuf>,
    /// `--ready`: wait for the run to be ready (see [`crate::ready`]), not
    /// for its end.
    pub ready: Option<crate::ready::Target>,
    pub verbose: bool,
}

/// `pgrun wait`: wait for the run, or say the one error; the exit status.
pub fn wait(args: &Options) -> WaitExit {
    say::set_verbose(args.verbose);
    let started = Instant::now();
    let deadline = args.timeout.filter(|t| !t.is_zero()).and_then(|t| started.checked_add(t));
    let waiter = Waiter { args, started, deadline };
    let found = match args.ready {
        Some(_) => crate::ready::check_available().and_then(|()| waiter.find_and_wait()),
        None => waiter.find_and_wait(),
    };
    match found {
        Ok(exit) => exit,
        Err(err) => {
            say::line(format_args!("{err:#}"));
            WaitExit::Failed
        }
    }
}

struct Waiter<'a> {
    args: &'a Options,
    started: Instant,
    /// `--timeout`: past it, the run is left alone and wait exits 124.
    deadline: Option<Instant>,
}

/// The earlier of two optional instants (`None`: no limit).
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

impl Waiter<'_> {
    /// Look for a published run until `--wait-start` has passed (or
    /// `--timeout`, if sooner), then wait for it.
    fn find_and_wait(&self) -> Result<WaitExit> {
        let path = &self.args.pidfile;
        let until = earliest(self.started.checked_add(self.args.wait_start), self.deadline);
        let mut backoff = Backoff::default();
        let mut said_claimed = false;
        loop {
            match pidfile::read_record(path, false) {
                Ok(record) => {
                    check_safe(path, &record)?;
                    match record.liveness().map_err(|e| lock_error(path, e))? {
                        Liveness::Live(holder) => {
                            pidfile::check_holder(path, &record, holder)?;
                            return match self.args.ready {
                                Some(target) => self.wait_ready(&record, holder, target),
                                None => self.wait_for_run(&record, holder),
                            };
                        }
                        Liveness::Claimed => {
                            if !said_claimed {
                                verbose!("a run is starting on {}; waiting for it to publish", path.display());
                                said_claimed = true;
                            }
                        }
                        Liveness::Stale => {
                            // A run that ended cleanly removed its pid file
                            // before letting go of the lock: if the path no
                            // longer names the file read, that run is over.
                            let named = pidfile::still_names(path, &record)
                                .map_err(|e| anyhow!("cannot use pid file {}: {e}", path.display()))?;
                            if !named {
                                verbose!("the run at {} ended as wait looked at it", path.display());
                                if let Some(target) = self.args.ready {
                                    return Ok(self.over_before_ready(target, None));
                                }
                                return self.over(&record, false);
                            }
                            say::line(format_args!(
                                "no live run at {}: the pid file is stale (left in place)",
                                path.display()
                            ));
                            return Ok(WaitExit::NoRun);
                        }
                    }
                }
                Err(RecordError::Missing) => {
                    // No run published: one whose report names this pid
                    // file is over (see `report::over_at`).
                    if let Some(written) = self.args.report.as_deref().and_then(|r| report::over_at(path, r)) {
                        verbose!("no run at {}; its report says it is over", path.display());
                        return Ok(WaitExit::RunStatus(written.exit_code));
                    }
                }
                Err(e) => bail!("cannot use pid file {}: {e}", path.display()),
            }
            if !backoff.pause_until(until) {
                // --timeout may have ended the wait for a start first.
                let waited = self
                    .args
                    .timeout
                    .filter(|t| !t.is_zero())
                    .map_or(self.args.wait_start, |t| t.min(self.args.wait_start));
                pidfile::say_no_run(path, "", waited, self.args.report.as_deref().map(pidfile::ReportSaid::NotNamed));
                return Ok(WaitExit::NoRun);
            }
        }
    }

    /// The run published in `record` is live, its lock held by `holder`:
    /// wait until it is over, then give its status.
    fn wait_for_run(&self, record: &Record, holder: Pid) -> Result<WaitExit> {
        let path = &self.args.pidfile;
        // Handles first, then make sure the lock still names the same
        // pgrun: so they name that pgrun (and its guard), never a process
        // that reused a pid.
        let holder_fd = (holder > 0).then(|| crate::sys::pidfd::pidfd_open(holder)).flatten();
        let own_namespace = holder > 0 && crate::sys::proc::in_own_pid_namespace(holder);
        let guard_fd = holder_fd.as_ref().and_then(|fd| find_guard(holder, fd.as_fd()));
        let still_live = record.liveness().map_err(|e| lock_error(path, e))? == Liveness::Live(holder);
        let holder_fd = holder_fd.filter(|_| still_live);
        let guard_fd = guard_fd.filter(|_| still_live);
        let pgid = own_namespace.then_some(record.pgid);
        if !own_namespace {
            verbose!("pgrun {holder} runs in another PID namespace: waiting only for it, not on group {}", record.pgid);
        }
        verbose!("waiting for pgrun {holder} (process group {})", record.pgid);

        // 1. The pgrun holding the lock lets go of it (the run is over and
        //    withdrawn; pgrun may still be writing its output), or exits.
        //    A thread blocked on the lock says when it is let go of; the
        //    pidfd, when pgrun exits.
        let holder_exited = if still_live {
            let release = record
                .watch_release()
                .map_err(|e| anyhow!("cannot wait for the lock of pid file {}: {e}", path.display()))?;
            match self.wait_for_holder(holder_fd.as_ref().map(AsFd::as_fd), &release)? {
                None => return Ok(self.timed_out()),
                Some(exited) => exited,
            }
        } else {
            false
        };
        // 2. A pgrun that ended normally removed its pid file first, with
        //    its run gone. One whose file is still in place died: its
        //    guard, if it has one, is stopping the run.
        if !withdrawn(path, record) {
            if let Some(fd) = &guard_fd {
                verbose!("pgrun {holder} died; waiting for its guard to stop the run");
                if !self.wait_readable(fd.as_fd()).context("cannot wait for the guard")? {
                    return Ok(self.timed_out());
                }
            }
            if let Some(pgid) = pgid {
                verbose!("waiting for process group {pgid} to be gone");
                if !backoff::poll_until(self.deadline, || !process::group_exists(pgid)) {
                    return Ok(self.timed_out());
                }
            }
        }
        verbose!("the run at {} is over", path.display());

        // 3. Its own status, if asked for.
        self.over(record, holder_exited)
    }

    /// The run published in `record` is over: its own status from the
    /// report, if asked for. Unless its pgrun was seen to exit
    /// (`holder_exited`), the report may still be on its way.
    fn over(&self, record: &Record, holder_exited: bool) -> Result<WaitExit> {
        match &self.args.report {
            None => Ok(WaitExit::Over),
            Some(report) if holder_exited => read_report(report, record.pgid).map(WaitExit::RunStatus),
            Some(report) => {
                // pgrun did not exit (yet): the report may still be on its
                // way. The run is over: --timeout no longer applies.
                let until = Some(Instant::now() + REPORT_SETTLE);
                let mut found = read_report(report, record.pgid);
                let mut backoff = Backoff::default();
                while found.is_err() && backoff.pause_until(until) {
                    found = read_report(report, record.pgid);
                }
                found.map(WaitExit::RunStatus)
            }
        }
    }

    /// Wait until the lock is let go of (`release`) or pgrun `holder` (its
    /// pidfd, where there is one) exits. `Some(true)`: pgrun exited;
    /// `Some(false)`: the lock was let go of; `None`: the deadline passed
    /// first.
    fn wait_for_holder(&self, holder: Option<BorrowedFd<'_>>, release: &pidfile::ReleaseWatch) -> Result<Option<bool>> {
        loop {
            let mut set = [sys::PollFd::read(release.fd()); 2];
            let n = match holder {
                Some(fd) => {
                    set[1] = sys::PollFd::read(fd);
                    2
                }
                None => 1,
            };
            let left = self.deadline.map(|d| d.saturating_duration_since(Instant::now()));
            sys::poll(&mut set[..n], left).context("cannot wait for pgrun")?;
            if n == 2 && set[1].ready {
                return Ok(Some(true));
            }
            if set[0].ready {
                release.outcome().context("cannot wait for the lock of the pid file")?;
                return Ok(Some(false));
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
        }
    }

    /// Wait until `fd` is readable (its process exited); false if the
    /// deadline passed first.
    fn wait_readable(&self, fd: BorrowedFd<'_>) -> std::io::Result<bool> {
        loop {
            let now = Instant::now();
            let left = match self.deadline {
                Some(d) if now >= d => return sys::wait_readable(fd, Some(Duration::ZERO)),
                Some(d) => Some(d - now),
                None => None,
            };
            if sys::wait_readable(fd, left)? {
                return Ok(true);
            }
        }
    }

    /// `--ready`: the run published in `record` is live, its lock held by
    /// `holder`: wait until it is ready as `target` says (0), it is over
    /// (1), or `--timeout` passes (124).
    fn wait_ready(&self, record: &Record, holder: Pid, target: crate::ready::Target) -> Result<WaitExit> {
        use crate::ready::Outcome;
        if holder <= 0 || !crate::sys::proc::in_own_pid_namespace(holder) {
            bail!(
                "cannot wait for the run at {} to be ready: its pgrun runs in another PID namespace",
                self.args.pidfile.display()
            );
        }
        verbose!("waiting until a process of the run of pgrun {holder} {target}");
        let waited = crate::ready::wait_until_ready(record, holder, target, self.deadline)?;
        Ok(match waited.outcome {
            Outcome::Ready(found) => {
                verbose!("process {} listens on {} port {}", found.pid, found.address, found.port);
                WaitExit::Over
            }
            Outcome::Over => self.over_before_ready(target, waited.unreadable),
            Outcome::TimedOut => {
                let why = waited.unreadable.map(|u| format!(" ({u})")).unwrap_or_default();
                say::line(format_args!(
                    "no process of the run at {} {target} after --timeout{why}",
                    self.args.pidfile.display()
                ));
                WaitExit::TimedOut
            }
        })
    }

    /// `--ready`: the run was over before it was ready (1).
    fn over_before_ready(&self, target: crate::ready::Target, unreadable: Option<String>) -> WaitExit {
        let why = unreadable.map(|u| format!(" ({u})")).unwrap_or_default();
        say::line(format_args!(
            "the run at {} was over before a process of it {target}{why}",
            self.args.pidfile.display()
        ));
        WaitExit::NoRun
    }

    fn timed_out(&self) -> WaitExit {
        say::line(format_args!("the run at {} is still running after --timeout", self.args.pidfile.display()));
        WaitExit::TimedOut
    }
}

/// Whether the pid file `record` was read from is gone from `path` (or
/// replaced by another run's). A path that cannot be looked at proves
/// nothing: not withdrawn, so wait goes on to wait for the group.
fn withdrawn(path: &Path, record: &Record) -> bool {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(now) => now.dev() != record.meta.dev() || now.ino() != record.meta.ino(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// The guard of pgrun `holder`: its child named [`crate::guard::NAME`]
/// running pgrun's own executable,
/// with a pidfd opened while it was still that child (and `holder` still
/// alive, so the pid could not have been reused).
fn find_guard(holder: Pid, holder_fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    let children = sys::proc::children(holder).ok()?;
    let named = |pid: Pid| sys::proc::is_named_fork_of(pid, holder, crate::guard::NAME);
    children.into_iter().filter(|&pid| named(pid)).find_map(|pid| {
        let fd = crate::sys::pidfd::pidfd_open(pid)?;
        let alive = !sys::wait_readable(holder_fd, Some(Duration::ZERO)).unwrap_or(true);
        let still_child = sys::proc::stat(pid).is_some_and(|s| s.ppid == holder);
        (alive && still_child && named(pid)).then_some(fd)
    })
}

/// The run's own exit status from the report at `path`, which must be the
/// report of the run of group `pgid`.
fn read_report(path: &Path, pgid: Pid) -> Result<u8> {
    let written = report::read(path)?;
    if written.pgid != Some(pgid) {
        bail!("report {} is not the run's: it names another process group than {pgid}", path.display());
    }
    Ok(written.exit_code)
}

//! What a bug in pgrun does: a panic must not leave the command's group
//! running unsupervised, nor end pgrun with a signal, nor leave files behind.
//!
//! The release build aborts on panic (`panic = "abort"`), so nothing can be
//! caught or unwound. Instead a panic hook, which runs before the abort (and
//! before any unwinding in a debug build), prints one `pgrun: ` line, sends
//! SIGKILL to the group the run mode recorded in [`crate::exit_hooks`], reaps until the group is
//! gone (bounded: a panic path must end), writes the `--report` held here
//! (reason `error`: once the report path is accepted, every exit writes
//! it), removes the temporary files not yet placed, and `_exit`s with 125.
//!
//! The report and the temporary files are pgrun's own: a forked guard
//! inherits this module's state, and its panics must not touch them
//! ([`crate::exit_hooks::is_owner`]).

use crate::backoff::Backoff;
use crate::exit::RunExit;
use crate::exit_hooks;
use crate::report::{Contents, Outcome, Reason, ReportTarget};
use crate::signame::Signal;
use crate::sys::process::{self, ChildStatus, Reaped};
use crate::sys::{self, Pid};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The report to write if a panic ends the run.
static REPORT: Mutex<Option<PanicReport>> = Mutex::new(None);

/// How long the hook waits for the killed group to be gone.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// What the hook needs to write the report.
pub struct PanicReport {
    pub target: ReportTarget,
    /// When pgrun started: the report's duration counts from here.
    pub started: Instant,
    /// The `--contain` mode asked for.
    pub contain: crate::contain::Mode,
    /// The output went through pgrun (`--max-output`, `--output-file`,
    /// `--idle-timeout`): the report's `output` is an object.
    pub max_output: bool,
    /// `--output-file`, for the report.
    pub output_file: Option<std::path::PathBuf>,
}

/// Install the hook; call once, first thing.
pub fn install() {
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_string());
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        let what = format!("internal error{at}: {}", what.replace('\n', " "));
        let pgid = exit_hooks::take_group();
        let mut status = None;
        if let Some(pgid) = pgid {
            crate::say::line(format_args!("{what}; killing process group {pgid}"));
            status = kill_and_reap(pgid);
        } else {
            crate::say::line(format_args!("{what}"));
        }
        if exit_hooks::is_owner() {
            write_report(&what, pgid, status);
            remove_temporary_files();
        }
        sys::exit_now(crate::exit::FAILURE);
    }));
}

/// Hold the report for the hook, until [`take_report`].
pub fn hold_report(report: PanicReport) {
    exit_hooks::own();
    *lock(&REPORT) = Some(report);
}

/// The report held, back for the normal exit.
pub fn take_report() -> Option<ReportTarget> {
    lock(&REPORT).take().map(|r| r.target)
}

/// A lock that a panic elsewhere (poisoning) does not take away.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The hook's side: never blocks (the panic may have come while the lock
/// was held).
fn try_take<T>(mutex: &Mutex<T>, take: impl FnOnce(&mut T) -> Option<T>) -> Option<T> {
    match mutex.try_lock() {
        Ok(mut guard) => take(&mut guard),
        Err(std::sync::TryLockError::Poisoned(e)) => take(&mut e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

fn write_report(what: &str, pgid: Option<Pid>, status: Option<ChildStatus>) {
    let Some(Some(report)) = try_take(&REPORT, |r| Some(r.take())) else { return };
    let outcome = Outcome {
        status,
        pgid,
        error: Some(anyhow::Error::msg(what.to_string())),
        // The supervisor's count is out of reach of a panic: none is given.
        ..Outcome::new(RunExit::Failed, Reason::Error)
    };
    let contents = Contents {
        outcome: &outcome,
        exit_code: crate::exit::FAILURE,
        relays_output: report.max_output,
        output_file: report.output_file.as_deref(),
        contain_requested: report.contain,
        duration: report.started.elapsed(),
    };
    if let Err(err) = report.target.write(&contents) {
        crate::say::line(format_args!("{err:#}"));
    }
}

fn remove_temporary_files() {
    for named in exit_hooks::take_temporaries() {
        let removed = match named.folder {
            true => crate::sys::fifo_folder::remove_left(&named.path, named.id, &crate::stdin_pipe::ENTRIES).map(drop),
            false => std::fs::remove_file(&named.path),
        };
        match removed {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                crate::say::line(format_args!("cannot remove {}: {e}", named.path.display()));
            }
            _ => {}
        }
    }
}

/// SIGKILL the group and reap until it is gone (bounded); the leader's
/// status, if it was reaped here.
fn kill_and_reap(pgid: Pid) -> Option<ChildStatus> {
    let until = Instant::now().checked_add(KILL_WAIT);
    let mut backoff = Backoff::default();
    let mut status = None;
    loop {
        // Best effort on a path that must end: an error here leaves only
        // the bounded wait below, and the line already printed says what
        // pgrun tried.
        let _ = process::signal_group(pgid, Signal::KILL);
        loop {
            match process::reap_one() {
                Ok(Reaped::Child(pid, how, _)) if pid == pgid => status = Some(how),
                Ok(Reaped::Child(..) | Reaped::Stopped(..)) => {}
                _ => break,
            }
        }
        if !process::group_exists(pgid) || !backoff.pause_until(until) {
            return status;
        }
    }
}

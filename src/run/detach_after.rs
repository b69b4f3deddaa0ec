//! `--detach-after DUR`: an ordinary attached run until DUR, then, if the
//! command still runs, a detached one, and the caller's process returns.
//!
//! The caller's process forks at once, as for `--detach` (see
//! [`super::detach`]). The child becomes the supervising pgrun: a session
//! of its own (no signal to the caller's group, no hang-up of the caller's
//! terminal reaches it), stdin on `/dev/null`, and no fd of the caller's
//! but its stdout and stderr, which stay its fds 1 and 2: until the
//! hand-off it relays the command's output there itself (and to the
//! output file), at the relay's usual speed, and its own lines go there
//! as any run's do. It then runs the ordinary run mode, with the
//! hand-off's pipes given to the relay (see [`crate::output::handoff`]);
//! the guard it forks points its own stderr at `/dev/null`, so that it
//! holds nothing of the caller's either.
//!
//! The caller's process waits for the supervising pgrun's end, passing on
//! every signal pgrun acts on (a TERM cancels the run, an INT is forwarded
//! to it, as for any run), until DUR has passed since pgrun started. It
//! then asks the relay to let go, reads N back, says `pgrun: still running
//! after DUR: pid file P, output F from byte N` on a line of its own (after
//! a newline where the relay answers that the caller's stderr ends
//! mid-line) and exits 122. A TERM it
//! passed on is a cancel under way, which it waits out as any run's pgrun
//! does (no hand-off at DUR; an answer that comes after it is none
//! either); an answer ready with a signal is read first, and the signal,
//! come at the hand-off, is not passed on. A run that
//! ends first (before DUR, or before it let go) ends the supervising
//! pgrun, whose status is the caller's: the ordinary run's, its output
//! relayed and its report written before it exits.

use super::detach::{failed_status, pass_on, status_of};
use super::plan::RunPlan;
use crate::duration::describe;
use crate::output::handoff::{self, Answer, HandOff, LET_GO};
use crate::say;
use crate::signal_policy;
use crate::sys::lifetime;
use crate::sys::session;
use crate::sys::sigmask::{self, SigSet};
use crate::sys::wakeup::SignalSource;
use crate::sys::{Pid, PollFd};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Which side of the fork this is.
pub enum Left {
    /// The caller's process, done: its exit status.
    Caller(u8),
    /// The supervising pgrun: it runs the run, and gives the relay this.
    Supervisor(HandOff),
}

/// Fork; the caller's process keeps an eye on the run until `after` has
/// passed since `started`, the child supervises it.
pub fn keep_an_eye(plan: &RunPlan, after: Duration, started: Instant) -> Left {
    let pipes = crate::sys::spawn::cloexec_pipe().and_then(|ask| Ok((ask, crate::sys::spawn::cloexec_pipe()?)));
    let ((ask_read, ask_write), (answer_read, answer_write)) = match pipes {
        Ok(pipes) => pipes,
        Err(e) => return Left::Caller(failed_status(format_args!("cannot create the hand-off's pipes: {e}"))),
    };
    let handled = signal_policy::handled();
    if let Err(e) = sigmask::block(&handled) {
        return Left::Caller(failed_status(format_args!("cannot block signals: {e}")));
    }
    match lifetime::fork() {
        Err(e) => Left::Caller(failed_status(format_args!("cannot fork the supervising pgrun: {e}"))),
        Ok(Some(supervisor)) => {
            drop((ask_read, answer_write));
            let eye = Eye { plan, after, supervisor, ask: ask_write, answer: answer_read };
            Left::Caller(eye.watch(started, &handled))
        }
        Ok(None) => {
            drop((ask_write, answer_read));
            let keep = [ask_read.as_raw_fd(), answer_write.as_raw_fd()];
            if let Err(e) = session::new_session() {
                return Left::Caller(failed_status(format_args!("cannot start a new session for the run: {e}")));
            }
            if let Err(e) = session::point_stdin_at_null() {
                return Left::Caller(failed_status(format_args!("cannot point stdin at /dev/null: {e}")));
            }
            lifetime::close_all_but(&keep);
            Left::Supervisor(HandOff::new(ask_read, answer_write))
        }
    }
}

/// What the caller says of a supervising pgrun killed by a signal: the
/// run may have started, and its guard then stops it.
const KILLED: &str = " (its guard stops the run, if it started)";

/// The caller's process, watching.
struct Eye<'a> {
    plan: &'a RunPlan,
    after: Duration,
    supervisor: Pid,
    ask: OwnedFd,
    answer: OwnedFd,
}

impl Eye<'_> {
    /// Wait for the supervising pgrun's end, or DUR; returns the exit
    /// status.
    fn watch(self, started: Instant, handled: &SigSet) -> u8 {
        let signals = match SignalSource::new(handled)
            .and_then(|signals| signals.activate(handled, &signal_policy::absorbed()).map(|()| signals))
        {
            Ok(signals) => signals,
            Err(e) => return self.lost(&e),
        };
        let due = started.checked_add(self.after);
        // Until the answer is read, signals pass on as for any run. A
        // TERM passed on is a cancel under way, which the caller waits out
        // (its status is the run's): it asks nothing at DUR, and an answer
        // that comes after it is no hand-off. An answer ready with a
        // signal is read first: the run was handed off, and the signal,
        // not passed on, stops nothing it then says is still running.
        let mut past_due = false;
        let mut cancelled = false;
        loop {
            let wait = match due {
                Some(due) if !past_due => Some(due.saturating_duration_since(Instant::now())),
                _ => None,
            };
            if wait == Some(Duration::ZERO) {
                past_due = true;
                if cancelled {
                    crate::verbose!("no hand-off after {}: the run is being cancelled", describe(self.after));
                    continue;
                }
                crate::test_hook::pause("let-go");
                // A supervising pgrun already gone (EPIPE) says so by the
                // answer pipe's end.
                let _ = crate::sys::pipe::write(self.ask.as_fd(), &[LET_GO]);
                crate::test_hook::pause("let-go-asked");
                continue;
            }
            let mut set = [PollFd::read(self.answer.as_fd()), PollFd::read(signals.as_fd())];
            if let Err(e) = crate::sys::poll(&mut set, wait) {
                return self.lost(&e);
            }
            if set[0].ready {
                return match handoff::read_answer(self.answer.as_fd()) {
                    Ok(Some(_)) if cancelled => {
                        crate::verbose!("the run was cancelled as it was handed off: waiting for its end");
                        status_of(self.supervisor, KILLED)
                    }
                    Ok(Some(answer)) => self.handed_off(answer),
                    Ok(None) => status_of(self.supervisor, KILLED),
                    Err(e) => self.lost(&e),
                };
            }
            if set[1].ready {
                match pass_on(&signals, self.supervisor) {
                    Ok(cancel) => cancelled |= cancel,
                    Err(e) => return self.lost(&e),
                }
            }
        }
    }

    /// The run goes on detached: say where, on a line of its own (after a
    /// newline where the caller's stderr ends mid-line), exit 122.
    fn handed_off(&self, answer: Answer) -> u8 {
        let path = |p: Option<&std::path::Path>| p.map_or_else(String::new, |p| p.display().to_string());
        let say = if answer.mid_line { say::line_after_newline } else { say::line };
        say(format_args!(
            "still running after {}: pid file {}, output {} from byte {}",
            describe(self.after),
            path(self.plan.pidfile.as_deref()),
            path(self.plan.output_file()),
            answer.n,
        ));
        crate::exit::HANDED_OFF
    }

    /// This process can no longer tell what becomes of the run, which goes
    /// on under the supervising pgrun.
    fn lost(&self, e: &std::io::Error) -> u8 {
        failed_status(format_args!("cannot keep an eye on the supervising pgrun {}: {e}", self.supervisor))
    }
}

//! `--detach`: a run that outlives the process that started it.
//!
//! The caller's process forks at once. The child becomes the supervising
//! pgrun: it starts a session of its own (no signal to the caller's group,
//! no hang-up of the caller's terminal reaches it), points fds 0, 1 and 2
//! at the detached run's destinations (see [`Destinations`]), closes every
//! other fd it inherited, and then runs the ordinary run mode, which claims
//! the pid file (its lock belongs to the process that lives on), forks the
//! guard and starts the command ([`leave_caller`] returns to the run's
//! checklist in the supervising pgrun). Until the run is published its error
//! lines go to the caller's stderr, through a close-on-exec copy held apart
//! (see [`crate::say::speak_to`]).
//!
//! The caller's process only waits on a close-on-exec pipe: one byte when
//! the run is published (it exits 0, having written nothing), or the end
//! of the pipe when the supervising pgrun ended first; it then exits with
//! that pgrun's own status, which is the status the run would have had
//! without `--detach` (125, 126, 127, 143...), its reason already written
//! to the caller's stderr, and nothing left behind (the run mode undid it
//! all before exiting). Meanwhile it passes every signal pgrun handles on
//! to the supervising pgrun, which acts on it as on its own: a TERM before
//! the start still means 143 and no run. (The handled signals are blocked
//! before the fork, so that none is lost in between or kills either side
//! by its default action.)

use super::plan::RunPlan;
use crate::exit::RunExit;
use crate::say;
use crate::signal_policy;
use crate::sys::lifetime;
use crate::sys::process::{self, ChildStatus};
use crate::sys::session;
use crate::sys::sigmask::{self, SigSet};
use crate::sys::wakeup::SignalSource;
use crate::sys::{Pid, PollFd};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// The byte that says "published".
const PUBLISHED: u8 = b'P';

/// Which side of the fork this is.
pub enum Left {
    /// The caller's process, done: its exit status.
    Caller(u8),
    /// The supervising pgrun, out of the caller's session and fds: it runs
    /// the run, and keeps this promise once the run is published.
    Supervisor(Publication),
}

/// Leave the caller: fork, and in the child leave its session and fds.
/// The caller's process waits for the publication (or the child's end).
pub fn leave_caller(plan: &RunPlan) -> Left {
    let (ready, announce) = match crate::sys::spawn::cloexec_pipe() {
        Ok(pipe) => pipe,
        Err(e) => return failed(format_args!("cannot create the pipe a detached run reports on: {e}")),
    };
    let handled = signal_policy::handled();
    if let Err(e) = sigmask::block(&handled) {
        return failed(format_args!("cannot block signals: {e}"));
    }
    let caller_stderr = match session::dup_cloexec(std::io::stderr().as_fd()) {
        Ok(fd) => fd,
        Err(e) => return failed(format_args!("cannot keep a copy of stderr: {e}")),
    };
    match lifetime::fork() {
        Err(e) => failed(format_args!("cannot fork the detached pgrun: {e}")),
        Ok(Some(supervisor)) => {
            drop(announce);
            drop(caller_stderr);
            Left::Caller(wait_for_publication(ready, supervisor, &handled))
        }
        Ok(None) => {
            drop(ready);
            match become_detached(plan, announce, caller_stderr) {
                Ok(publication) => Left::Supervisor(publication),
                Err(status) => Left::Caller(status),
            }
        }
    }
}

fn failed(what: std::fmt::Arguments<'_>) -> Left {
    Left::Caller(failed_status(what))
}

pub(super) fn failed_status(what: std::fmt::Arguments<'_>) -> u8 {
    say::line(what);
    RunExit::Failed.code()
}

/// In the caller's process: exit 0 once the run is published, else with
/// the status the supervising pgrun exited with.
fn wait_for_publication(ready: OwnedFd, supervisor: Pid, handled: &SigSet) -> u8 {
    if let Err(e) = pass_signals_on_until_ready(&ready, supervisor, handled) {
        // The supervising pgrun goes on alone; this process can no longer
        // tell what became of it.
        return failed_status(format_args!("cannot wait for the detached pgrun {supervisor}: {e}"));
    }
    let mut byte = [0u8];
    match crate::sys::pipe::read(ready.as_fd(), &mut byte) {
        Ok(1) if byte[0] == PUBLISHED => return 0,
        Ok(_) => {}
        Err(e) => return failed_status(format_args!("cannot read whether the detached run started: {e}")),
    }
    // The pipe's end: the supervising pgrun has ended, or is ending.
    status_of(supervisor, " before the run was published")
}

/// The supervising pgrun has ended, or is ending: the status it exits
/// with, which is the run's (a death by a signal is pgrun's failure,
/// said with `when`).
pub(super) fn status_of(supervisor: Pid, when: &str) -> u8 {
    match session::wait_status(supervisor) {
        Ok(ChildStatus::Exited(code)) => code as u8,
        Ok(ChildStatus::Signaled(signal)) => failed_status(format_args!(
            "the detached pgrun {supervisor} was killed by signal {}{when}",
            crate::signame::Signal(signal)
        )),
        Err(e) => failed_status(format_args!("cannot wait for the detached pgrun {supervisor}: {e}")),
    }
}

/// Until `ready` can be read, send every signal this process gets that
/// pgrun acts on (a cancel, one it forwards) to the supervising pgrun: our
/// own child, not reaped, so its pid names no other process.
fn pass_signals_on_until_ready(ready: &OwnedFd, supervisor: Pid, handled: &SigSet) -> std::io::Result<()> {
    let signals = SignalSource::new(handled)?;
    signals.activate(handled, &signal_policy::absorbed())?;
    loop {
        let mut set = [PollFd::read(ready.as_fd()), PollFd::read(signals.as_fd())];
        crate::sys::poll(&mut set, None)?;
        if set[1].ready {
            pass_on(&signals, supervisor)?;
        }
        if set[0].ready {
            return Ok(());
        }
    }
}

/// Send the signals `signals` holds that pgrun acts on (a cancel, one it
/// forwards) to the supervising pgrun: our own child, not reaped, so its
/// pid names no other process. True if a cancel (TERM) was among them.
pub(super) fn pass_on(signals: &SignalSource, supervisor: Pid) -> std::io::Result<bool> {
    let mut cancel = false;
    for signal in signals.drain()? {
        cancel |= signal_policy::handling(signal) == Some(signal_policy::Handling::Cancel);
        if signal_policy::passed_to_a_detached_run(signal)
            && let Err(e) = process::signal_process(supervisor, crate::sys::Signal(signal))
        {
            let name = crate::sys::Signal(signal);
            say::line(format_args!("cannot pass {name} on to the detached pgrun {supervisor}: {e}"));
        }
    }
    Ok(cancel)
}

/// Where the supervising pgrun's fds 0, 1 and 2 point, and so the
/// command's unless the relay stands in between: the one place that
/// chooses a detached run's streams. The command reads `/dev/null`; its
/// stdout and stderr, and pgrun's own lines once the run is published, go
/// to `/dev/null` too.
///
/// With `--output-file` the command's streams go through the relay, which
/// writes the file: the file is their only destination, since the relay's
/// copy to pgrun's own stdout and stderr lands in the `/dev/null` chosen
/// here.
struct Destinations {
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
}

impl Destinations {
    fn for_run(_plan: &RunPlan) -> std::io::Result<Destinations> {
        let null = session::open_null()?;
        Ok(Destinations { stdin: null.try_clone()?, stdout: null.try_clone()?, stderr: null })
    }

    fn install(self) -> std::io::Result<()> {
        session::point_standard_fds(self.stdin.as_fd(), self.stdout.as_fd(), self.stderr.as_fd())
    }
}

/// In the supervising pgrun: leave the caller's session and fds; then the
/// run goes on (or this pgrun exits with the status returned).
fn become_detached(plan: &RunPlan, announce: OwnedFd, caller_stderr: OwnedFd) -> Result<Publication, u8> {
    // From here on, pgrun's lines reach the caller only through this copy.
    let keep = [announce.as_raw_fd(), caller_stderr.as_raw_fd()];
    say::speak_to(Some(caller_stderr));
    if let Err(e) = session::new_session() {
        return Err(failed_status(format_args!("cannot start a new session for the detached run: {e}")));
    }
    if let Err(e) = Destinations::for_run(plan).and_then(Destinations::install) {
        return Err(failed_status(format_args!("cannot point stdin, stdout and stderr at /dev/null: {e}")));
    }
    lifetime::close_all_but(&keep);
    Ok(Publication { announce })
}

/// The supervising pgrun's promise to tell the caller's process when the
/// run is published; dropped unkept, it tells that the run never was.
pub struct Publication {
    announce: OwnedFd,
}

impl Publication {
    /// The run is published: stop speaking to the caller's stderr, then let
    /// the caller's process exit 0. A caller already gone changes nothing.
    pub fn announce(self) {
        say::speak_to(None);
        let _ = crate::sys::pipe::write(self.announce.as_fd(), &[PUBLISHED]);
    }
}

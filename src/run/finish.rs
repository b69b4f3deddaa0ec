//! The one way a run that started ends: whatever ended it (the run gone, a
//! failure to publish it, a failure to supervise it), [`finish`] takes it
//! from there, in the contract's order:
//!
//! 1. What the run came to: the supervisor's account, or, if supervising
//!    failed, a SIGKILL to everything the mode reaches until the run is
//!    gone (bounded); the leaf's accounting is read while it exists.
//! 2. Reading stops (what the output pipes still hold is read once).
//! 3. The run's own files go, the pid file last: the cgroup leaf, then the
//!    run is marked over in its pid file (it takes no cancel request from
//!    then on, see [`pidfile::Published::mark_over`]) and the cancel marker
//!    handled (only the one this run took, or a published run's requests,
//!    which becomes the note pgrun holds until it exits, see
//!    [`super::lifecycle::Lifecycle::end_marker`]), then the report is
//!    written, then the pid file is withdrawn (so a report is in place when
//!    no run is published any more), then `--stdin-pipe`'s folder (the
//!    portable path's: a sender that finds none finds no live run either),
//!    and only then is the guard let go (a
//!    SIGKILL before that leaves the guard to finish the clean-up), unless
//!    pgrun holds that note: the guard then stays armed until the note is
//!    removed as pgrun exits (see [`Withdrawn`]).
//! 4. The output still held is written, which waits for its readers as
//!    long as they take (a stalled reader holds only pgrun, and its guard
//!    while it holds a note); a write of it that fails (other than EPIPE)
//!    has the report written again, with the error, under a guard of its
//!    own if the run's was let go ([`super::report::cover`]). The note at
//!    the marker path goes when pgrun exits (see [`Withdrawn`]).
//!
//! So no file of the run is ever named while no guard is armed: a SIGKILL
//! of pgrun at any point leaves the guard to remove what is there.
//!
//! A run pgrun could not end (supervising failed and SIGKILL did not end
//! it) keeps its pid file and its guard armed: the guard stops it once
//! pgrun is gone, then removes the files.

use super::lifecycle::Withdrawn;
use super::plan::RunPlan;
use super::prepare::Prepared;
use super::report::write_report;
use super::supervisor::{GroupEnd, StopReason};
use crate::backoff::Backoff;
use crate::contain::Target;
use crate::exit::RunExit;
use crate::guard::Guard;
use crate::output::relay::Relay;
use crate::pidfile;
use crate::report::{Outcome, Reason};
use crate::resources::Resources;
use crate::signame::Signal;
use crate::sys::Pid;
use crate::sys::process::{self, ChildStatus, Reaped};
use crate::verbose;
use anyhow::anyhow;
use std::time::{Duration, Instant};

/// How a started run got to its end.
pub struct Ending {
    /// The command's group.
    pub pgid: Pid,
    /// The pid file, if the run was published.
    pub published: Option<pidfile::Published>,
    /// The supervisor's account of the run, or why supervising failed.
    pub ended: std::io::Result<GroupEnd>,
    /// pgrun's own failure that ended the run before its time (publishing
    /// it failed): the run was stopped as if cancelled, and pgrun exits 125.
    pub failure: Option<anyhow::Error>,
}

/// End the run (see the module doc): what it came to, and what outlives
/// it until pgrun exits (see [`Withdrawn`]: the note pgrun holds at the
/// marker path, removed first; the guard, reaped when dropped; pgrun's
/// own cgroup leaf, left after that).
pub fn finish(plan: &RunPlan, started: Instant, mut run: Prepared, ending: Ending) -> (Outcome, Withdrawn) {
    let Ending { pgid, published, ended, failure } = ending;
    let (mut outcome, gone) = match ended {
        Ok(ended) => {
            // The leaf's accounting is read here, before it is removed.
            let resources = resources_of(&run, &ended);
            (Outcome { resources, ..outcome_of(ended, pgid) }, true)
        }
        Err(e) => {
            // The loop itself failed (poll or waitpid returned an error no
            // run should see). Do not leave the run behind unwatched.
            let gone = kill_unsupervised(&mut run);
            let end = if gone { "stopped it with SIGKILL" } else { "SIGKILL did not end it; the guard goes on" };
            let err = anyhow!("cannot supervise process group {pgid}: {e}; {end}");
            (Outcome { pgid: Some(pgid), error: Some(err), ..Outcome::new(RunExit::Failed, Reason::Error) }, gone)
        }
    };
    if let Some(err) = failure {
        // What the stop found stays (the command's status, the signals,
        // stragglers, escapees), under pgrun's failure: why the run ended.
        outcome.exit = RunExit::Failed;
        outcome.reason = Reason::Error;
        outcome.error = Some(match outcome.error.take() {
            Some(also) => anyhow!("{err:#}; {also:#}"),
            None => err,
        });
    }
    if oom_killed(&outcome) {
        verbose!("the command was killed by the kernel's out-of-memory killer");
        outcome.reason = Reason::Oom;
    }
    outcome.contain = Some(run.scope.mode());
    outcome.cgroup_via = run.scope.leaf().map(|leaf| leaf.via());
    if let Some(relay) = &mut run.relay {
        relay.close();
    }
    let held_note = match gone {
        true => {
            outcome.cgroup_left = run.scope.remove_leaf();
            // Over first, then the marker: a cancel's request made before
            // the run is over is taken here; one made after, its cancel
            // withdraws (see `pidfile::Record::run_over`).
            if let Some(published) = &published
                && let Err(e) = published.mark_over()
            {
                verbose!("cannot mark the run over in its pid file: {e}");
            }
            let note = run.life().end_marker(published.is_some());
            crate::test_hook::pause("marker-handled");
            note
        }
        false => None,
    };
    let relay = run.relay.take();
    let before_flush = relay.as_ref().map(Relay::end_so_far);
    outcome.take_relay_end(before_flush);
    let reported = crate::panic_stop::take_report().map(|target| write_report(target, plan, started, &outcome));
    let guard = match gone {
        true => {
            if let Some(published) = published {
                published.remove();
            }
            // The stdin pipe's folder (the portable path's), under the guard.
            run.stdin_pipe = None;
            crate::test_hook::pause("withdrawn");
            run.life().release_guard(held_note.is_some())
        }
        false => {
            // The pid file stays published (its lock goes with pgrun): the
            // guard removes it once the run is gone.
            drop(published);
            run.life().leave_guard_on_duty();
            None
        }
    };
    if let Some(relay) = relay {
        let end = relay.flush_rest(&run.signals);
        outcome.take_relay_end(Some(end));
        if reported.is_some() && Some(end) != before_flush {
            let _cover = (!guard.as_ref().is_some_and(Guard::is_armed)).then(|| super::report::cover(plan));
            super::report::write_again(plan, started, &outcome);
        }
    }
    (outcome, Withdrawn { ending: held_note, guard, self_leaf: run.self_leaf.take() })
}

/// Whether the kernel's OOM killer ended the run: the leaf counted an OOM
/// kill and the command died of a SIGKILL that pgrun did not send.
fn oom_killed(outcome: &Outcome) -> bool {
    outcome.reason == Reason::Signaled
        && outcome.status == Some(ChildStatus::Signaled(libc::SIGKILL))
        && outcome.resources.oom_kills.is_some_and(|n| n > 0)
        && !outcome.signals.iter().any(|s| s.signal == Signal::KILL)
}

/// What the run used: the usage of the processes pgrun reaped, and in
/// cgroup mode what the leaf says (read now, while it is still there).
fn resources_of(run: &Prepared, ended: &GroupEnd) -> Resources {
    let reaped = Resources::reaped(ended.usage);
    run.scope.leaf_accounting().map_or(reaped, |leaf| reaped.with_leaf(&leaf))
}

/// How long pgrun goes on killing a run whose supervision failed.
const KILL_UNSUPERVISED_FOR: Duration = Duration::from_secs(5);

/// The supervise loop failed: stop the run without it, as far as pgrun
/// still can, so that the invariant holds on this path too: SIGKILL to
/// everything the mode reaches (`cgroup.kill` in cgroup mode), reaping what
/// ends (the guard's handle is told if it is among them), until the run is
/// gone or [`KILL_UNSUPERVISED_FOR`] has passed. True if it is gone.
fn kill_unsupervised(run: &mut Prepared) -> bool {
    let life = run.life();
    let until = Instant::now().checked_add(KILL_UNSUPERVISED_FOR);
    let mut backoff = Backoff::default();
    loop {
        let _ = life.scope.signal(Signal::KILL, false, true);
        while let Ok(reaped @ (Reaped::Child(..) | Reaped::Stopped(..))) = process::reap_one() {
            if let Reaped::Child(pid, _, _) = reaped
                && !life.guard_reaped(pid)
                && pid == life.scope.group().pgid()
            {
                // The group is over only with its leader reaped: say so,
                // or the run is never seen gone.
                life.leader_reaped(pid);
            }
        }
        if life.scope.gone() {
            return true;
        }
        if !backoff.pause_until(until) {
            return false;
        }
    }
}

/// What the supervisor's account says the run came to.
fn outcome_of(ended: GroupEnd, pgid: Pid) -> Outcome {
    let known = |outcome: Outcome| Outcome {
        pgid: Some(pgid),
        signals: ended.signals.clone(),
        stragglers: ended.stragglers,
        unreaped: ended.unreaped,
        unstopped: ended.unstopped.as_ref().map_or(0, |u| u.left),
        escaped: ended.escaped,
        ..outcome
    };
    let failed = |err: anyhow::Error| Outcome { error: Some(err), ..Outcome::new(RunExit::Failed, Reason::Error) };
    if let Some(unstopped) = &ended.unstopped {
        // pgrun could not end the run: its own failure, whatever the
        // command did.
        let err = anyhow!(
            "cannot send KILL to process group {pgid}: {}; gave up after {} tries, leaving {} process(es) running",
            unstopped.error,
            crate::stop::plan::REFUSED_KILLS,
            unstopped.left
        );
        return known(Outcome { status: ended.status, ..failed(err) });
    }
    let Some(status) = ended.status else {
        // The command's status was lost (see the supervisor): pgrun cannot
        // say how the command ended, which is its own failure.
        let err = anyhow!("lost the exit status of process group {pgid}'s leader: it was reaped by someone else");
        return known(failed(err));
    };
    let (exit, reason) = match (ended.stop_reason, status) {
        (Some(StopReason::Timeout), _) => (RunExit::Timeout, Reason::Timeout),
        (Some(StopReason::IdleTimeout), _) => (RunExit::Timeout, Reason::IdleTimeout),
        (Some(StopReason::Cancel), status) => (RunExit::Command(status), Reason::Cancelled),
        (_, status @ ChildStatus::Exited(_)) => (RunExit::Command(status), Reason::Exited),
        (_, status @ ChildStatus::Signaled(_)) => (RunExit::Command(status), Reason::Signaled),
    };
    known(Outcome { status: Some(status), ..Outcome::new(exit, reason) })
}

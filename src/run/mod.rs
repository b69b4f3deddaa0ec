//! The run mode, `pgrun [OPTIONS] [--] COMMAND`, as a checklist:
//! plan → prepare → spawn → publish → supervise → finish.
//!
//! - [`plan`]: the command line resolved once into a [`RunPlan`];
//! - [`detach`]: `--detach` leaves the caller first (its process returns
//!   once the run is published); [`detach_after`]: `--detach-after` leaves
//!   its session and fds but its stdout and stderr (its process returns
//!   when the run ends, or hands it off after DUR);
//! - the report path is checked before anything else (once it is accepted,
//!   every exit writes the report: [`report`]);
//! - [`prepare`]: everything that can fail, before the spawn (signals
//!   blocked, containment, the guard, the pid file claimed, a marker left
//!   before the start honoured, the relay), so bad input never half-runs a
//!   command;
//! - [`start`]: the spawn, then the publication of the group id and a look
//!   at the marker right after it;
//! - [`supervisor`]: the one event loop, until the run is gone;
//! - [`finish`]: the one way a started run ends, published or not.
//!
//! What each of these events means to the parties that hold something of
//! the run (the scope, the terminal, the panic stop, the guard, the
//! marker) is [`lifecycle`]'s.

pub mod detach;
pub mod detach_after;
pub mod finish;
pub mod lifecycle;
pub mod plan;
pub mod prepare;
pub mod report;
pub mod start;
pub mod supervisor;

pub use plan::RunPlan;

use crate::output::handoff::HandOff;
use crate::report::{Outcome, ReportTarget};
use crate::sys::Pid;
use crate::{say, test_hook};
use detach::Publication;
use finish::Ending;
use lifecycle::Withdrawn;
use prepare::{Early, Prepared};
use std::time::Instant;
use supervisor::{GroupEnd, StopReason, Supervised};

/// Run the command as `plan` says; returns pgrun's exit status (with
/// `--detach`, the caller's process returns the caller's).
pub fn run(plan: &RunPlan, started: Instant) -> u8 {
    say::set_verbose(plan.verbose);
    let publication = match plan.detach {
        false => None,
        true => match detach::leave_caller(plan) {
            detach::Left::Caller(status) => return status,
            detach::Left::Supervisor(publication) => Some(publication),
        },
    };
    let hand_off = match plan.detach_after {
        None => None,
        Some(after) => match detach_after::keep_an_eye(plan, after, started) {
            detach_after::Left::Caller(status) => return status,
            detach_after::Left::Supervisor(hand_off) => Some(hand_off),
        },
    };
    // The parent to watch with --die-with-parent, before anything else, so
    // that a death before the watch is armed is still seen.
    let parent = crate::sys::getppid();
    let report = match plan.report.as_deref().map(|r| ReportTarget::prepare(r, plan.pidfile.as_deref())).transpose() {
        Ok(report) => report,
        Err(err) => {
            say::line(format_args!("{err:#}"));
            return crate::exit::RunExit::Failed.code();
        }
    };
    if let Some(target) = report {
        report::hold_for_panic(target, plan, started);
    }
    // What outlives the run until pgrun exits (the note at the marker
    // path, the guard), dropped last, after the report and the output's
    // last flush (see `Withdrawn`).
    let (outcome, withdrawn) = execute(plan, started, parent, Leaving { publication, hand_off });
    let exit = report::exit_of(plan, &outcome);
    if let Some(err) = &outcome.error {
        say::line(format_args!("{err:#}"));
    }
    if outcome.exit == crate::exit::RunExit::NotFound
        && let Some(hint) = crate::timeout_hint::for_missing_command(&plan.command)
    {
        say::line(format_args!("{hint}"));
    }
    // Unless written already (a started run writes it in finish): under
    // the run's guard, still armed, or, if there is none (never forked, or
    // dead), one of its own.
    if let Some(target) = crate::panic_stop::take_report() {
        let _cover =
            (!withdrawn.guard.as_ref().is_some_and(crate::guard::Guard::is_armed)).then(|| report::cover(plan));
        report::write_report(target, plan, started, &outcome);
    }
    test_hook::pause("exit");
    drop(withdrawn);
    exit.code()
}

/// The checklist, top to bottom: what the run came to, and, once the run
/// was withdrawn, what outlives that until pgrun exits (its guard, reaped
/// when dropped; the note at the marker path). A run that ends before its
/// start keeps its guard armed until the report is written; the rest of
/// what was prepared goes at once.
fn execute(plan: &RunPlan, started: Instant, parent: Pid, leaving: Leaving) -> (Outcome, Withdrawn) {
    let Leaving { publication, hand_off } = leaving;
    let mut run = match prepare::prepare(plan, parent) {
        Ok(prepared) => prepared,
        Err(early) => {
            let Early { end, kept } = *early;
            return (end.into(), kept);
        }
    };
    let pgid = match start::spawn_command(plan, &mut run) {
        Ok(pgid) => pgid,
        Err(early) => {
            let (contain, cgroup_via) = (Some(run.scope.mode()), run.scope.leaf().map(|leaf| leaf.via()));
            let kept = run.keep_for_the_report();
            return (Outcome { contain, cgroup_via, ..early.into() }, kept);
        }
    };
    // The command has started: --output-file takes its place.
    if let Some(relay) = &mut run.relay {
        relay.command_started();
        if let Some(hand_off) = hand_off {
            relay.hand_off_on(hand_off);
        }
    }
    let (published, failure) = match start::publish(&mut run, pgid) {
        Ok(published) => (published, None),
        Err(err) => (None, Some(err)),
    };
    // A run that cannot be published must not run unsupervised: it is
    // stopped at once, and pgrun fails (125).
    let stop_now = match &failure {
        Some(_) => Some(StopReason::Cancel),
        None => {
            if let Some(publication) = publication {
                publication.announce();
            }
            start::marker_after_publishing(run.marker.as_deref())
        }
    };
    let ended = supervise(plan, &mut run, started, stop_now);
    test_hook::pause("run-gone");
    finish::finish(plan, started, run, Ending { pgid, published, ended, failure })
}

/// How the run leaves its caller, if it does: `--detach`'s promise to say
/// when it is published, `--detach-after`'s hand-off.
struct Leaving {
    publication: Option<Publication>,
    hand_off: Option<HandOff>,
}

/// Hand the running run to the supervisor until it is gone.
fn supervise(
    plan: &RunPlan,
    run: &mut Prepared,
    started: Instant,
    stop_now: Option<StopReason>,
) -> std::io::Result<GroupEnd> {
    let count_stragglers = plan.report.is_some() || plan.verbose;
    let Prepared { signals, relay, stdin_pipe, parent_watch, scope, terminal, guard, marker, marker_taken, .. } = run;
    let supervised = Supervised {
        life: lifecycle::Lifecycle {
            scope,
            terminal: terminal.as_ref(),
            guard,
            marker: marker.as_deref(),
            marker_taken,
        },
        sequence: &plan.sequence,
        timeout: plan.timeout,
        idle_timeout: plan.idle_timeout,
        wait_group: plan.wait_group,
        signals,
        started,
        count_stragglers,
        relay: relay.as_mut(),
        stdin_pipe: stdin_pipe.as_mut(),
        parent: *parent_watch,
    };
    supervisor::supervise(supervised, stop_now)
}

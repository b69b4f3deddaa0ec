//! The run's report (`--report`) and exit status from its [`Outcome`]:
//! the one builder of the report's contents, for every way a run ends
//! (the panic hook writes its own from what it holds, see
//! [`crate::panic_stop`]).

use super::plan::RunPlan;
use crate::exit::RunExit;
use crate::guard::{self, Guard};
use crate::output::RelayEnd;
use crate::report::{Contents, Outcome, ReportTarget};
use crate::say;
use std::time::Instant;

/// How pgrun exits for `outcome` (`--preserve-status` applied).
pub fn exit_of(plan: &RunPlan, outcome: &Outcome) -> RunExit {
    match outcome.exit {
        RunExit::Timeout if plan.preserve_status => outcome.status.map_or(RunExit::Timeout, RunExit::Command),
        exit => exit,
    }
}

/// Write the report of `outcome` to `target`; a failure is said.
pub fn write_report(target: ReportTarget, plan: &RunPlan, started: Instant, outcome: &Outcome) {
    let contents = Contents {
        outcome,
        exit_code: exit_of(plan, outcome).code(),
        relays_output: plan.relays_output(),
        output_file: plan.output_file(),
        contain_requested: plan.contain,
        duration: started.elapsed(),
    };
    if let Err(err) = target.write(&contents) {
        say::line(format_args!("{err:#}"));
    }
}

/// Write the report once more (the output's last flush changed what it
/// says: a write error).
pub fn write_again(plan: &RunPlan, started: Instant, outcome: &Outcome) {
    let Some(path) = plan.report.as_deref() else { return };
    match ReportTarget::again(path, plan.pidfile.as_deref()) {
        Ok(target) => write_report(target, plan, started, outcome),
        Err(err) => say::line(format_args!("{err:#}")),
    }
}

/// A guard for pgrun's files alone (see [`guard::Plan::files_only`]), to
/// hold while a report is written with no guard of the run armed (a
/// failure before that guard was forked; the report written again after
/// the output's last flush, the guard let go): a SIGKILL of pgrun
/// meanwhile leaves it to remove the report's temporary file. `None` with
/// `--no-guard`, or if it cannot be forked (said under `--verbose`: the
/// report is written all the same). Released and reaped when dropped.
pub fn cover(plan: &RunPlan) -> Option<Guard> {
    if !plan.guard {
        return None;
    }
    Guard::start(guard::Plan::files_only(plan.sequence.clone()))
        .inspect_err(|e| crate::verbose!("cannot start a guard for the report: {e}"))
        .ok()
}

/// Hold the report where the panic hook can write it too, until the run
/// takes it back to write it ([`crate::panic_stop::take_report`]).
pub fn hold_for_panic(target: ReportTarget, plan: &RunPlan, started: Instant) {
    crate::panic_stop::hold_report(crate::panic_stop::PanicReport {
        target,
        started,
        contain: plan.contain,
        max_output: plan.relays_output(),
        output_file: plan.output_file().map(std::path::Path::to_path_buf),
    });
}

impl Outcome {
    /// What the relay came to, if there was one.
    pub(super) fn take_relay_end(&mut self, end: Option<RelayEnd>) {
        if let Some(end) = end {
            self.output = Some(end.streams);
            self.file_error = end.file_error;
        }
    }
}

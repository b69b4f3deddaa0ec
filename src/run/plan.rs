//! The run's settings, resolved once from the parsed command line: the
//! one place in the run mode that reads [`crate::cli`]. Everything below
//! takes plain values from a [`RunPlan`] (the stop sequence, the
//! containment mode, the limits, the files, the deadlines), so a setting
//! is computed once and no step carries the command line around.

use crate::cgroup_limits::CgroupLimits;
use crate::cli::{Contain, RunArgs};
use crate::contain::Mode;
use crate::rlimit::RlimitArg;
use crate::signame::Signal;
use crate::stop::sequence::{self, StepSignal, StopSequence};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// What a run does, as the command line asked for it.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// COMMAND and its arguments.
    pub command: Vec<OsString>,
    /// How the run is stopped, whatever stops it (`-s`/`-k`, `--escalate`).
    pub sequence: StopSequence,
    /// `--timeout` (none for 0).
    pub timeout: Option<Duration>,
    /// `--idle-timeout` (none for 0).
    pub idle_timeout: Option<Duration>,
    pub preserve_status: bool,
    pub wait_group: bool,
    pub pidfile: Option<PathBuf>,
    /// `--cancel-file` as given (the default, PIDFILE.cancel, is settled
    /// with the checks of the marker's path).
    pub cancel_file: Option<PathBuf>,
    pub report: Option<PathBuf>,
    /// Whether stdout and stderr go through pgrun, and how.
    pub output: Option<OutputPlan>,
    /// The `--contain` mode asked for (a cgroup limit makes it `cgroup`).
    pub contain: Mode,
    pub cgroup_limits: CgroupLimits,
    pub rlimits: Vec<RlimitArg>,
    /// Fork the guard (not `--no-guard`).
    pub guard: bool,
    pub die_with_parent: bool,
    pub detach: bool,
    /// `--detach-after`: when the caller's process lets go of the run.
    pub detach_after: Option<Duration>,
    /// `--stdin-pipe`: the command reads a pipe this pgrun holds open.
    pub stdin_pipe: bool,
    pub setsid: bool,
    pub verbose: bool,
}

/// The command's stdout and stderr go through pgrun (`--max-output`,
/// `--output-file`, `--idle-timeout`).
#[derive(Debug, Clone, Default)]
pub struct OutputPlan {
    /// `--max-output`: each stream's budget.
    pub max_output: Option<u64>,
    /// `--output-file`.
    pub file: Option<PathBuf>,
}

impl RunPlan {
    /// Resolve the parsed arguments; never fails (what can fail is checked
    /// by the run's preparation, after the report path is accepted).
    pub fn new(args: &RunArgs) -> RunPlan {
        let cgroup_limits =
            CgroupLimits { memory_max: args.memory_max, pids_max: args.pids_max, cpu_quota_us: args.cpus };
        let contain = Mode::resolve(args.contain.map(Contain::mode), &cgroup_limits);
        let idle_timeout = args.idle_timeout.filter(|t| !t.is_zero());
        let relays = args.max_output.is_some() || args.output_file.is_some() || idle_timeout.is_some();
        let output = relays.then(|| OutputPlan { max_output: args.max_output, file: args.output_file.clone() });
        RunPlan {
            command: args.command.clone(),
            sequence: sequence_of(args),
            timeout: args.timeout.filter(|t| !t.is_zero()),
            idle_timeout,
            preserve_status: args.preserve_status,
            wait_group: args.wait_group,
            pidfile: args.pidfile.clone(),
            cancel_file: args.cancel_file.clone(),
            report: args.report.clone(),
            output,
            contain,
            cgroup_limits,
            rlimits: args.rlimit.clone(),
            guard: !args.no_guard,
            die_with_parent: args.die_with_parent,
            detach: args.detach,
            detach_after: args.detach_after,
            stdin_pipe: args.stdin_pipe,
            setsid: args.setsid,
            verbose: args.verbose,
        }
    }

    /// Whether the streams go through pgrun.
    pub fn relays_output(&self) -> bool {
        self.output.is_some()
    }

    /// `--output-file`, if given.
    pub fn output_file(&self) -> Option<&std::path::Path> {
        self.output.as_ref().and_then(|o| o.file.as_deref())
    }
}

/// `--escalate`, or `-s SIG` then KILL after `-k DUR`.
fn sequence_of(args: &RunArgs) -> StopSequence {
    match &args.escalate {
        Some(seq) => seq.clone(),
        None => StopSequence::first_then_kill(
            args.signal.unwrap_or(StepSignal { signal: Signal::TERM, leader: false }),
            args.kill_after.unwrap_or(sequence::DEFAULT_GRACE),
        ),
    }
}

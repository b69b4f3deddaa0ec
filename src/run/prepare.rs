//! Everything a run prepares before its command starts, in the contract's
//! order: the command line, `--rlimit`, the cgroup limits' mode, the cancel
//! marker's path, the handled signals blocked, the subreaper, what the run
//! is (`--contain`), `--die-with-parent`, the terminal, the guard, then the
//! pid file claimed, a marker left before the start honoured, a
//! termination signal received by then honoured, and the output relay. Whatever can fail fails here, so bad input never half-runs
//! a command; what was prepared is undone by dropping [`Prepared`].
//!
//! The guard comes before the claim, so that every file the run names
//! from then on (the starting name, `--output-file`'s temporary file) is
//! one the guard removes should pgrun be killed ([`crate::exit_hooks`]);
//! it cannot come earlier, since it must be forked after pgrun moved into
//! its own cgroup leaf, if it needs one (the guard must be in it too). A
//! run that ends before its start keeps the guard armed until its report
//! is written ([`Early`]).

use super::lifecycle::{Lifecycle, MarkerTaken, Withdrawn};
use super::plan::RunPlan;
use crate::contain::cgroup::SelfLeaf;
use crate::contain::{Mode, Scope};
use crate::exit::RunExit;
use crate::guard::{self, Guard};
use crate::output::Limit;
use crate::output::file::OutputFile;
use crate::output::relay::{ChildEnds, Relay};
use crate::parent_death::ParentWatch;
use crate::pidfile::{self, Claimed};
use crate::report::{Outcome, Reason};
use crate::signal_policy;
use crate::sys::Pid;
use crate::sys::process;
use crate::sys::sigmask::{self, SigSet};
use crate::sys::wakeup::SignalSource;
use crate::terminal::Terminal;
use crate::{say, test_hook, verbose};
use anyhow::anyhow;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Why a run ends before it is supervised: pgrun itself failed (with the
/// status it exits with), or the run was cancelled before the command
/// started (by the marker, a signal, or the parent's death).
pub enum EarlyEnd {
    Failed(RunExit, anyhow::Error),
    CancelledBeforeStart(i32),
}

/// A step of the run's checklist: its result, or why the run ends there.
pub type Step<T> = Result<T, EarlyEnd>;

/// pgrun's own failure (125) with this error.
pub fn failure(err: anyhow::Error) -> EarlyEnd {
    EarlyEnd::Failed(RunExit::Failed, err)
}

impl From<EarlyEnd> for Outcome {
    fn from(early: EarlyEnd) -> Outcome {
        match early {
            EarlyEnd::Failed(exit, err) => Outcome { error: Some(err), ..Outcome::new(exit, Reason::Error) },
            EarlyEnd::CancelledBeforeStart(signal) => {
                verbose!("cancelled before the command started");
                Outcome::new(RunExit::CancelledBeforeStart(signal), Reason::CancelledBeforeStart)
            }
        }
    }
}

/// Everything the run prepares before the command starts: whatever can
/// fail has failed by the time this exists. Dropping it undoes what needs
/// undoing (the terminal is given back, the guard released and reaped).
pub struct Prepared {
    pub argv: Vec<CString>,
    /// `--rlimit`, checked: set in the command's process before exec.
    pub rlimits: crate::sys::rlimit::Settings,
    pub marker: Option<PathBuf>,
    /// The marker this run took for its own once it started stopping (its
    /// note, or the request that cancelled it): the only one it removes.
    pub marker_taken: Option<MarkerTaken>,
    pub handled: SigSet,
    pub inherited: sigmask::Inherited,
    pub signals: SignalSource,
    pub claim: Option<pidfile::Claim>,
    pub scope: Scope,
    pub parent_watch: Option<ParentWatch>,
    pub terminal: Option<Terminal>,
    pub relay: Option<Relay>,
    pub child_ends: Option<ChildEnds>,
    /// `--stdin-pipe`: the pipe the command reads, held open by this pgrun.
    pub stdin_pipe: Option<crate::stdin_pipe::StdinPipe>,
    pub guard: Option<Guard>,
    /// pgrun's own cgroup leaf, if it had to move into one: left after the
    /// guard is reaped (so dropped after it, here and in
    /// [`super::lifecycle::Withdrawn`]).
    pub self_leaf: Option<SelfLeaf>,
}

impl Prepared {
    /// The parties that react to the run's events (see
    /// [`super::lifecycle`]), borrowed for one event.
    pub fn life(&mut self) -> Lifecycle<'_> {
        Lifecycle {
            scope: &mut self.scope,
            terminal: self.terminal.as_ref(),
            guard: &mut self.guard,
            marker: self.marker.as_deref(),
            marker_taken: &mut self.marker_taken,
        }
    }
}

/// A run that ends before its start: why, and what is kept until its
/// report is written (the guard, still armed, so that a SIGKILL of pgrun
/// while it writes the report leaves nothing behind; pgrun's own leaf,
/// left once the guard is reaped).
pub struct Early {
    pub end: EarlyEnd,
    pub kept: Withdrawn,
}

impl Prepared {
    /// The run ends before its start: keep the guard (armed) and pgrun's
    /// own leaf until the report is written; the rest goes with `self`.
    pub fn keep_for_the_report(&mut self) -> Withdrawn {
        Withdrawn { ending: None, guard: self.guard.take(), self_leaf: self.self_leaf.take() }
    }
}

/// Everything before the spawn, in the contract's order. `parent`: the
/// process to watch with `--die-with-parent`.
pub fn prepare(plan: &RunPlan, parent: Pid) -> Result<Prepared, Box<Early>> {
    let mut run = guarded(plan, parent).map_err(|end| Box::new(Early { end, kept: Withdrawn::default() }))?;
    match claim_and_relay(plan, &mut run) {
        Ok(()) => Ok(run),
        Err(end) => Err(Box::new(Early { end, kept: run.keep_for_the_report() })),
    }
}

/// Up to the guard: the command line, `--rlimit`, the limits' mode, the
/// marker's path, the signals, the subreaper, the scope, the parent watch,
/// the terminal, and the guard.
fn guarded(plan: &RunPlan, parent: Pid) -> Step<Prepared> {
    let argv = command_line(plan)?;
    let rlimits = crate::rlimit::resolve(&plan.rlimits).map_err(|e| failure(anyhow!("{e}")))?;
    cgroup_limits_need_a_leaf(plan)?;
    let marker = marker_path(plan)?;
    let (handled, inherited, signals) = block_signals()?;
    process::become_subreaper().map_err(|e| failure(anyhow!("cannot become a child subreaper: {e}")))?;
    let (mut scope, self_leaf) = Scope::prepare(plan.contain, &plan.cgroup_limits).map_err(failure)?;
    let parent_watch = watch_parent(plan, parent)?;
    // Given back when dropped, on every way out, a failed spawn included.
    let terminal = Terminal::new(plan.setsid);
    let guard = start_guard(plan, &scope, self_leaf.as_ref(), marker.as_deref()).map_err(failure)?;
    if let Some(guard) = &guard {
        scope.set_guard(guard.child());
    }
    Ok(Prepared {
        argv,
        rlimits,
        marker,
        marker_taken: None,
        handled,
        inherited,
        signals,
        claim: None,
        scope,
        parent_watch,
        terminal,
        relay: None,
        child_ends: None,
        stdin_pipe: None,
        guard,
        self_leaf,
    })
}

/// With the guard armed: the pid file claimed (the guard told which
/// record is the run's), a marker left before the start honoured, a
/// termination signal received by now honoured, and the output relay.
fn claim_and_relay(plan: &RunPlan, run: &mut Prepared) -> Step<()> {
    run.claim = claim_pid_file(plan)?;
    if let Some(record) = run.claim.as_ref().and_then(pidfile::Claim::record_id) {
        run.life().claimed(record);
    }
    take_marker_before_start(run.marker.as_deref())?;
    test_hook::pause("marker-checked");
    if let Some(signal) = termination_pending() {
        let _ = run.signals.drain();
        return Err(EarlyEnd::CancelledBeforeStart(signal));
    }
    (run.relay, run.child_ends) = start_relay(plan, run.marker.as_deref())?.unzip();
    // After the guard's fork: only this pgrun holds the write end.
    // On the portable path its folder beside the pid file, which the
    // guard now removes should pgrun be killed.
    if let (true, Some(pidfile)) = (plan.stdin_pipe, plan.pidfile.as_deref()) {
        let pipe = crate::stdin_pipe::StdinPipe::new(pidfile)
            .map_err(|e| failure(anyhow!("cannot create the command's stdin pipe (--stdin-pipe): {e}")))?;
        run.stdin_pipe = Some(pipe);
    }
    test_hook::pause("guard-started");
    Ok(())
}

/// The output relay, if the streams go through pgrun: `--max-output`
/// bounds them, `--output-file` copies them (prepared beside its path only
/// now, once the pid file is claimed, and put in place only once the
/// command has started). The file may not be one of the run's own files.
fn start_relay(plan: &RunPlan, marker: Option<&Path>) -> Step<Option<(Relay, ChildEnds)>> {
    let Some(output) = &plan.output else { return Ok(None) };
    if let Some(path) = &output.file {
        let own = [
            ("the pid file", plan.pidfile.as_deref()),
            ("the cancel marker", marker),
            ("the report", plan.report.as_deref()),
        ];
        if let Some((what, _)) = own.iter().find(|(_, p)| p.is_some_and(|p| pidfile::same_file(path, p))) {
            return Err(failure(anyhow!("--output-file {} names {what}", path.display())));
        }
    }
    let file = output.file.as_deref().map(OutputFile::open).transpose().map_err(failure)?;
    let limit = output.max_output.map_or(Limit::None, Limit::Bytes);
    Relay::new(limit, file).map(Some).map_err(failure)
}

/// `--memory-max`, `--pids-max` and `--cpus` limit the run's cgroup leaf:
/// with `--contain group` or `tree` there is none (a usage error).
fn cgroup_limits_need_a_leaf(plan: &RunPlan) -> Step<()> {
    let limits = &plan.cgroup_limits;
    if !limits.any() || plan.contain == Mode::Cgroup {
        return Ok(());
    }
    let given = [
        ("--memory-max", limits.memory_max.is_some()),
        ("--pids-max", limits.pids_max.is_some()),
        ("--cpus", limits.cpu_quota_us.is_some()),
    ];
    let option = given.iter().find(|(_, on)| *on).map_or("--memory-max", |(o, _)| *o);
    let mode = plan.contain.name();
    Err(failure(anyhow!("{option} limits the run's cgroup: it needs --contain cgroup, not --contain {mode}")))
}

/// COMMAND and its arguments as C strings.
fn command_line(plan: &RunPlan) -> Step<Vec<CString>> {
    plan.command
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| failure(anyhow!("an argument of COMMAND contains a NUL byte")))
}

/// The cancel marker's path: `--cancel-file`, or PIDFILE.cancel. It must
/// not be the pid file, and its folder must exist: a marker that could
/// never be created could never cancel this run.
fn marker_path(plan: &RunPlan) -> Step<Option<PathBuf>> {
    let marker = plan.cancel_file.clone().or_else(|| plan.pidfile.as_deref().map(pidfile::default_marker));
    if let (Some(pidfile), Some(marker)) = (&plan.pidfile, &marker)
        && pidfile::same_file(marker, pidfile)
    {
        return Err(failure(anyhow!("--cancel-file {} names the pid file itself", marker.display())));
    }
    // The pid file's own folder first: a missing one is its problem first.
    if let Some(pidfile) = &plan.pidfile {
        pidfile::check_folder(pidfile, "pid file").map_err(failure)?;
    }
    if let Some(marker) = &marker {
        pidfile::check_folder(marker, "cancel marker").map_err(failure)?;
    }
    Ok(marker)
}

/// Block the handled signals before touching the pid file, so that no
/// signal is lost or acts asynchronously from here on, and open the fd the
/// loop reads them from. The command gets the caller's mask and
/// dispositions (from before pgrun blocked SIGPIPE).
fn block_signals() -> Step<(SigSet, sigmask::Inherited, SignalSource)> {
    let handled = signal_policy::handled();
    let inherited = sigmask::inherited().map_err(|e| failure(anyhow!("{e}")))?;
    sigmask::block(&handled).map_err(|e| failure(anyhow!("cannot block signals: {e}")))?;
    let signals = SignalSource::new(&handled).map_err(|e| failure(anyhow!("cannot watch signals: {e}")))?;
    Ok((handled, inherited, signals))
}

/// Claim `--pidfile` (see [`pidfile::claim`]); a termination signal while
/// waiting for another starting run ends this one before it begins.
fn claim_pid_file(plan: &RunPlan) -> Step<Option<pidfile::Claim>> {
    match plan.pidfile.as_deref().map(|path| pidfile::claim(path, &mut termination_pending)).transpose() {
        Ok(Some(Claimed::Claim(claim))) => Ok(Some(claim)),
        Ok(Some(Claimed::Interrupted(signal))) => Err(EarlyEnd::CancelledBeforeStart(signal)),
        Ok(None) => Ok(None),
        Err(err) => Err(failure(err)),
    }
}

/// A marker present before the start: consume it and end the run (143).
fn take_marker_before_start(marker: Option<&Path>) -> Step<()> {
    match marker {
        Some(marker) if pidfile::consume_marker(marker, crate::sys::geteuid()) => {
            say::line(format_args!(
                "cancelled before it started: a cancel was pending (cancel marker {})",
                marker.display()
            ));
            Err(EarlyEnd::CancelledBeforeStart(libc::SIGTERM))
        }
        _ => Ok(()),
    }
}

/// `--die-with-parent`: armed before the spawn; a parent already gone is a
/// cancel before the start.
fn watch_parent(plan: &RunPlan, parent: Pid) -> Step<Option<ParentWatch>> {
    let watch = plan
        .die_with_parent
        .then(|| ParentWatch::arm(parent))
        .transpose()
        .map_err(|e| failure(anyhow!("cannot watch the parent process: {e}")))?;
    if watch.is_some_and(|w| w.parent_gone()) {
        verbose!("parent process {parent} died before the command started");
        return Err(EarlyEnd::CancelledBeforeStart(libc::SIGTERM));
    }
    Ok(watch)
}

/// Fork the guard (unless `--no-guard`), with what it needs to stop the
/// run if pgrun is killed.
fn start_guard(
    plan: &RunPlan,
    scope: &Scope,
    self_leaf: Option<&SelfLeaf>,
    marker: Option<&Path>,
) -> anyhow::Result<Option<Guard>> {
    if !plan.guard {
        return Ok(None);
    }
    let guard_plan = guard::Plan {
        sequence: plan.sequence.clone(),
        pidfile: plan.pidfile.clone(),
        marker: marker.map(Path::to_path_buf),
        leaf: scope.leaf().map(|leaf| leaf.handed()),
        self_leaf: self_leaf.map(SelfLeaf::handed),
        quiet: plan.detach_after.is_some(),
    };
    let guard = Guard::start(guard_plan).map_err(|e| anyhow!("cannot start the guard: {e}"))?;
    verbose!("guard {} started", guard.pid().unwrap_or(0));
    Ok(Some(guard))
}

/// A signal that asks pgrun to end (TERM, INT, HUP, QUIT), pending before
/// the command has started: such a run ends before it begins.
///
/// Should `sigpending` fail, nothing is taken as pending: such a signal
/// stays blocked and pending, and the supervisor reads it at once from its
/// signal fd, so the run is stopped right after the start instead.
fn termination_pending() -> Option<i32> {
    let pending = sigmask::pending().ok()?;
    (1..=crate::signame::max_signal()).find(|&s| signal_policy::ends_the_run(s) && pending.contains(s))
}

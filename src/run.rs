//! The run mode from start to finish: `pgrun [OPTIONS] [--] COMMAND`.
//!
//! The order is the contract's: check the report path, block the handled
//! signals, claim the pid file, honour a cancel marker left before the
//! start, settle what the run is (`--contain`, see [`crate::contain`]), arm
//! `--die-with-parent`, start the output relay, fork the guard, spawn the
//! command into its new group, publish the group id (and tell a detached
//! run's caller, see [`crate::detach`]), check the marker again, supervise
//! until the run is gone, then remove the pid file and the marker, release
//! the guard, remove the cgroup leaf, write the report, then the output
//! still held (`--max-output`, `--output-file`; should a write of it fail,
//! the report again). Every refusal comes before the spawn, so bad input
//! never half-runs a command. What each of these events means to the
//! parties that hold something of the run is [`crate::lifecycle`]'s.

use crate::backoff::Backoff;
use crate::cli::RunArgs;
use crate::contain::{Mode, Scope, Target};
use crate::detach::Publication;
use crate::exit::RunExit;
use crate::guard::{self, Guard};
use crate::lifecycle::Lifecycle;
use crate::output::file::OutputFile;
use crate::output::relay::{ChildEnds, Relay};
use crate::output::{Limit, RelayEnd};
use crate::parent_death::ParentWatch;
use crate::pidfile::{self, Claimed, Marker};
use crate::report::{Contents, Outcome, Reason, ReportTarget};
use crate::resources::Resources;
use crate::signal_policy;
use crate::signame::Signal;
use crate::supervisor::{self, GroupEnd, StopReason, Supervised};
use crate::sys::Pid;
use crate::sys::process::{self, ChildStatus, ChildUsage, Reaped};
use crate::sys::sigmask::{self, SigSet};
use crate::sys::spawn::{Detach, SpawnError, SpawnOptions};
use crate::sys::wakeup::SignalSource;
use crate::terminal::Terminal;
use crate::test_hook;
use crate::{say, verbose};
use anyhow::anyhow;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

impl Outcome {
    /// What the relay came to, if there was one.
    fn take_relay_end(&mut self, end: Option<RelayEnd>) {
        if let Some(end) = end {
            self.output = Some(end.streams);
            self.file_error = end.file_error;
        }
    }

    fn failed(exit: RunExit, error: anyhow::Error, pgid: Option<Pid>) -> Self {
        Outcome { pgid, error: Some(error), ..Outcome::new(exit, Reason::Error) }
    }

    /// A cancel (the marker, or `signal` sent to pgrun) before the command
    /// started: exit 128+N (143 for TERM and the marker).
    fn interrupted_before_start(signal: i32) -> Self {
        verbose!("cancelled before the command started");
        Outcome::new(RunExit::CancelledBeforeStart(signal), Reason::CancelledBeforeStart)
    }
}

/// Run the command; returns pgrun's exit status.
///
/// `publication`: a detached run's promise to tell its caller once the run
/// is published (see [`crate::detach`]).
pub fn run(args: &RunArgs, started: Instant, publication: Option<Publication>) -> u8 {
    // First thing: the parent to watch with --die-with-parent, so that a
    // death before the watch is armed is still seen.
    let parent = crate::sys::getppid();
    say::set_verbose(args.verbose);
    let report = match args.report.as_deref().map(ReportTarget::prepare).transpose() {
        Ok(report) => report,
        Err(err) => {
            say::line(format_args!("{err:#}"));
            return RunExit::Failed.code();
        }
    };
    // Its temporary file, for the guard to remove should pgrun be killed.
    let report_temp = report.as_ref().and_then(ReportTarget::temp_identity);
    // Held where the panic hook can write it too.
    if let Some(target) = report {
        let contain = args.contain_mode();
        let max_output = args.relays_output();
        let output_file = args.output_file.clone();
        crate::panic_stop::hold_report(crate::panic_stop::PanicReport {
            target,
            started,
            contain,
            max_output,
            output_file,
        });
    }
    // The guard, released once the run is withdrawn, is reaped when it is
    // dropped, after the report is written.
    let (outcome, _released_guard) = execute(args, started, parent, publication, report_temp);
    let exit = exit_of(args, &outcome);
    if let Some(err) = &outcome.error {
        say::line(format_args!("{err:#}"));
    }
    if outcome.exit == RunExit::NotFound
        && let Some(hint) = crate::timeout_hint::for_missing_command(&args.command)
    {
        say::line(format_args!("{hint}"));
    }
    // Unless written already, before the output's last flush (clean_up).
    if let Some(report) = crate::panic_stop::take_report() {
        write_report(report, args, started, &outcome);
    }
    test_hook::pause("exit");
    exit.code()
}

/// How pgrun exits for `outcome` (`--preserve-status` applied).
fn exit_of(args: &RunArgs, outcome: &Outcome) -> RunExit {
    match outcome.exit {
        RunExit::Timeout if args.preserve_status => outcome.status.map_or(RunExit::Timeout, RunExit::Command),
        exit => exit,
    }
}

/// Write the report of `outcome` to `target`; a failure is said.
fn write_report(target: ReportTarget, args: &RunArgs, started: Instant, outcome: &Outcome) {
    let contents = Contents {
        outcome,
        exit_code: exit_of(args, outcome).code(),
        relays_output: args.relays_output(),
        output_file: args.output_file.as_deref(),
        contain_requested: args.contain_mode(),
        duration: started.elapsed(),
    };
    if let Err(err) = target.write(&contents) {
        say::line(format_args!("{err:#}"));
    }
}

/// Why a run ends before it is supervised: pgrun itself failed (with the
/// status it exits with), or the run was cancelled before the command
/// started (by the marker, a signal, or the parent's death).
enum EarlyEnd {
    Failed(RunExit, anyhow::Error),
    CancelledBeforeStart(i32),
}

/// A step of the run's checklist: its result, or why the run ends there.
type Step<T> = Result<T, EarlyEnd>;

/// pgrun's own failure (125) with this error.
fn failure(err: anyhow::Error) -> EarlyEnd {
    EarlyEnd::Failed(RunExit::Failed, err)
}

impl From<EarlyEnd> for Outcome {
    fn from(early: EarlyEnd) -> Outcome {
        match early {
            EarlyEnd::Failed(exit, err) => Outcome::failed(exit, err, None),
            EarlyEnd::CancelledBeforeStart(signal) => Outcome::interrupted_before_start(signal),
        }
    }
}

/// Everything the run prepares before the command starts: whatever can
/// fail has failed by the time this exists. Dropping it undoes what needs
/// undoing (the terminal is given back, the guard released and reaped).
struct Prepared {
    argv: Vec<CString>,
    /// `--rlimit`, checked: set in the command's process before exec.
    rlimits: crate::sys::rlimit::Settings,
    marker: Option<PathBuf>,
    handled: SigSet,
    inherited: sigmask::Inherited,
    signals: SignalSource,
    claim: Option<pidfile::Claim>,
    scope: Scope,
    parent_watch: Option<ParentWatch>,
    terminal: Option<Terminal>,
    relay: Option<Relay>,
    child_ends: Option<ChildEnds>,
    guard: Option<Guard>,
}

impl Prepared {
    /// The parties that react to the run's events (see
    /// [`crate::lifecycle`]), borrowed for one event.
    fn life(&mut self) -> Lifecycle<'_> {
        Lifecycle {
            scope: &mut self.scope,
            terminal: self.terminal.as_ref(),
            guard: &mut self.guard,
            marker: self.marker.as_deref(),
        }
    }
}

/// The run mode's checklist, top to bottom: what the run came to, and,
/// once the run was withdrawn, its released guard (reaped when dropped,
/// after the report). Before that, the guard goes with the rest of what
/// was prepared.
fn execute(
    args: &RunArgs,
    started: Instant,
    parent: Pid,
    publication: Option<Publication>,
    report_temp: Option<crate::atomic_file::Identity>,
) -> (Outcome, Option<Guard>) {
    let mut run = match prepare(args, parent, report_temp) {
        Ok(prepared) => prepared,
        Err(early) => return (early.into(), None),
    };
    let pgid = match spawn_command(args, &mut run) {
        Ok(pgid) => pgid,
        Err(early) => return (Outcome { contain: Some(run.scope.mode()), ..early.into() }, None),
    };
    if let Some(relay) = &mut run.relay {
        relay.command_started();
    }
    let published = match publish(&mut run, pgid) {
        Ok(published) => published,
        Err(err) => return stop_unpublished(args, run, started, pgid, err),
    };
    if let Some(publication) = publication {
        publication.announce();
    }
    let stop_now = marker_after_publishing(run.marker.as_deref());
    let ended = supervise(args, &mut run, started, stop_now);
    test_hook::pause("run-gone");
    clean_up(args, started, run, published, ended, pgid)
}

/// Everything before the spawn, in the contract's order.
fn prepare(args: &RunArgs, parent: Pid, report_temp: Option<crate::atomic_file::Identity>) -> Step<Prepared> {
    let argv = command_line(args)?;
    let rlimits = crate::rlimit::resolve(&args.rlimit).map_err(|e| failure(anyhow!("{e}")))?;
    cgroup_limits_need_a_leaf(args)?;
    let marker = marker_path(args)?;
    let (handled, inherited, signals) = block_signals()?;
    let claim = claim_pid_file(args)?;
    take_marker_before_start(marker.as_deref())?;
    test_hook::pause("marker-checked");
    process::become_subreaper().map_err(|e| failure(anyhow!("cannot become a child subreaper: {e}")))?;
    let mut scope = Scope::prepare(args.contain_mode(), &args.cgroup_limits()).map_err(failure)?;
    let parent_watch = watch_parent(args, parent)?;
    if let Some(signal) = termination_pending() {
        let _ = signals.drain();
        return Err(EarlyEnd::CancelledBeforeStart(signal));
    }
    // Given back when dropped, on every way out, a failed spawn included.
    let terminal = Terminal::new(args.setsid);
    let (relay, child_ends) = start_relay(args, marker.as_deref())?.unzip();
    let temps = report_temp.into_iter().chain(relay.as_ref().and_then(Relay::file_temp)).collect();
    let guard = start_guard(args, &scope, marker.as_deref(), temps).map_err(failure)?;
    test_hook::pause("guard-started");
    if let Some(guard) = &guard {
        scope.set_guard(guard.child());
    }
    Ok(Prepared {
        argv,
        rlimits,
        marker,
        handled,
        inherited,
        signals,
        claim,
        scope,
        parent_watch,
        terminal,
        relay,
        child_ends,
        guard,
    })
}

/// The output relay, if the streams go through pgrun: `--max-output`
/// bounds them, `--output-file` copies them (prepared beside its path only
/// now, once the pid file is claimed, and put in place only once the
/// command has started). The file may not be one of the run's own files.
fn start_relay(args: &RunArgs, marker: Option<&Path>) -> Step<Option<(Relay, ChildEnds)>> {
    if !args.relays_output() {
        return Ok(None);
    }
    if let Some(path) = &args.output_file {
        let own = [
            ("the pid file", args.pidfile.as_deref()),
            ("the cancel marker", marker),
            ("the report", args.report.as_deref()),
        ];
        if let Some((what, _)) = own.iter().find(|(_, p)| p.is_some_and(|p| pidfile::same_file(path, p))) {
            return Err(failure(anyhow!("--output-file {} names {what}", path.display())));
        }
    }
    let file = args.output_file.as_deref().map(OutputFile::open).transpose().map_err(failure)?;
    let limit = args.max_output.map_or(Limit::None, Limit::Bytes);
    Relay::new(limit, file).map(Some).map_err(failure)
}

/// `--memory-max`, `--pids-max` and `--cpus` limit the run's cgroup leaf:
/// with `--contain group` or `tree` there is none (a usage error).
fn cgroup_limits_need_a_leaf(args: &RunArgs) -> Step<()> {
    let limits = args.cgroup_limits();
    let mode = args.contain_mode();
    if !limits.any() || mode == Mode::Cgroup {
        return Ok(());
    }
    let given = [
        ("--memory-max", limits.memory_max.is_some()),
        ("--pids-max", limits.pids_max.is_some()),
        ("--cpus", limits.cpu_quota_us.is_some()),
    ];
    let option = given.iter().find(|(_, on)| *on).map_or("--memory-max", |(o, _)| *o);
    Err(failure(anyhow!("{option} limits the run's cgroup: it needs --contain cgroup, not --contain {}", mode.name())))
}

/// COMMAND and its arguments as C strings.
fn command_line(args: &RunArgs) -> Step<Vec<CString>> {
    args.command
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| failure(anyhow!("an argument of COMMAND contains a NUL byte")))
}

/// The cancel marker's path: `--cancel-file`, or PIDFILE.cancel. It must
/// not be the pid file, and its folder must exist: a marker that could
/// never be created could never cancel this run.
fn marker_path(args: &RunArgs) -> Step<Option<PathBuf>> {
    let marker = args.cancel_file.clone().or_else(|| args.pidfile.as_deref().map(pidfile::default_marker));
    if let (Some(pidfile), Some(marker)) = (&args.pidfile, &marker)
        && pidfile::same_file(marker, pidfile)
    {
        return Err(failure(anyhow!("--cancel-file {} names the pid file itself", marker.display())));
    }
    // The pid file's own folder first: a missing one is its problem first.
    if let Some(pidfile) = &args.pidfile {
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
fn claim_pid_file(args: &RunArgs) -> Step<Option<pidfile::Claim>> {
    match args.pidfile.as_deref().map(|path| pidfile::claim(path, &mut termination_pending)).transpose() {
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
            Err(EarlyEnd::CancelledBeforeStart(libc::SIGTERM))
        }
        _ => Ok(()),
    }
}

/// `--die-with-parent`: armed before the spawn; a parent already gone is a
/// cancel before the start.
fn watch_parent(args: &RunArgs, parent: Pid) -> Step<Option<ParentWatch>> {
    let watch = args
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

/// Start the command in its new group (or session), then tell everyone who
/// needs the group id, and start reading signals.
fn spawn_command(args: &RunArgs, run: &mut Prepared) -> Step<Pid> {
    // The guard holds the command from the moment it exists, before its
    // exec: the process hands itself over first thing (see the guard), so a
    // pgrun killed at any moment of the spawn leaves nothing running.
    let guard = run.guard.as_ref();
    let created = |pid: Pid| {
        test_hook::pause("forked");
        if let Some(guard) = guard {
            guard.spawned(pid);
        }
        test_hook::pause("created");
    };
    let pause_in_child = test_hook::child_pause("child-created");
    let options = SpawnOptions {
        detach: if args.setsid { Detach::Session } else { Detach::Group },
        child_mask: run.inherited.mask,
        ignore_sigchld: run.inherited.sigchld_ignored,
        take_terminal: run.terminal.as_ref().and_then(Terminal::hand_off_at_start),
        stdout_stderr: run.child_ends.as_ref().map(|ends| ends.raw()),
        join_cgroup: run.scope.join_fd(),
        on_created: Some(&created),
        rlimits: run.rlimits,
        hand_over: guard.and_then(Guard::for_the_child),
        pause_in_child: pause_in_child.as_ref(),
    };
    let program = args.command[0].to_string_lossy();
    assert!(!test_hook::active(test_hook::PANIC_BEFORE_SPAWN), "test hook: panic before the spawn");
    let spawned = crate::sys::spawn::spawn(&run.argv, &options);
    // Only the command holds the write ends now: its exit is the pipes' end.
    run.child_ends = None;
    if spawned.is_err()
        && let Some(guard) = &run.guard
    {
        guard.spawn_failed();
    }
    let pgid = match spawned {
        Ok(spawned) => {
            if let (Some(guard), Some(why)) = (&run.guard, &spawned.hand_over_failed) {
                guard.hand_over(spawned.pid, why);
            }
            spawned.pid
        }
        Err(SpawnError::Exec(e)) => {
            let exit = if e.raw_os_error() == Some(libc::ENOENT) { RunExit::NotFound } else { RunExit::CannotExecute };
            return Err(EarlyEnd::Failed(exit, anyhow!("cannot run '{program}': {e}")));
        }
        Err(SpawnError::Setup(e)) => return Err(failure(anyhow!("cannot start '{program}': {e}"))),
    };
    verbose!("started '{program}' as process group {pgid}");
    run.life().started(pgid);
    if let Err(e) = run.signals.activate(&run.handled, &signal_policy::absorbed()) {
        // Without its handlers (the portable build's self-pipe) pgrun hears
        // of no signal, SIGCHLD included: it cannot supervise the command,
        // which has only just started. Stop it and fail.
        crate::panic_stop::unwatch();
        let stopped = match crate::sys::spawn::abandon_child(pgid) {
            Ok(()) => "stopped it".to_string(),
            Err(stop) => format!("and cannot stop process group {pgid}: {stop}"),
        };
        return Err(failure(anyhow!("cannot install signal handlers: {e}; {stopped}")));
    }
    test_hook::pause("spawned");
    Ok(pgid)
}

/// Publish the group id (the claim was prepared before the spawn), and
/// tell the guard which file is ours to remove if pgrun dies.
fn publish(run: &mut Prepared, pgid: Pid) -> anyhow::Result<Option<pidfile::Published>> {
    let Some(claim) = run.claim.take() else { return Ok(None) };
    let published = claim.publish(pgid)?;
    run.life().published(&published);
    Ok(Some(published))
}

/// The command runs but cannot be published: stop it (it must not run
/// unsupervised) and report pgrun's failure.
fn stop_unpublished(
    args: &RunArgs,
    mut run: Prepared,
    started: Instant,
    pgid: Pid,
    err: anyhow::Error,
) -> (Outcome, Option<Guard>) {
    let stopped = supervise(args, &mut run, started, Some(StopReason::Cancel));
    // What the stop found (the command's status, the signals, stragglers,
    // escapees), under pgrun's failure: the reason the run ended.
    let mut outcome = match stopped {
        Ok(ended) => {
            let resources = resources_of(&run.scope, ended.usage);
            Outcome { resources, ..outcome_of(ended, pgid) }
        }
        Err(_) => Outcome::new(RunExit::Failed, Reason::Error),
    };
    outcome.exit = RunExit::Failed;
    outcome.reason = Reason::Error;
    outcome.pgid = Some(pgid);
    outcome.error = Some(err);
    outcome.contain = Some(run.scope.mode());
    if let Some(relay) = &mut run.relay {
        relay.close();
    }
    let guard = run.life().withdrawn();
    outcome.cgroup_left = run.scope.remove_leaf();
    outcome.take_relay_end(run.relay.take().map(|relay| relay.flush_rest(&run.signals)));
    (outcome, guard)
}

/// A marker present right after publishing: stop the run as if cancelled.
fn marker_after_publishing(marker: Option<&Path>) -> Option<StopReason> {
    let marker = marker.filter(|m| pidfile::marker(m, crate::sys::geteuid()) == Marker::Request)?;
    verbose!("cancel marker {} found right after publishing", marker.display());
    Some(StopReason::Cancel)
}

/// Hand the running run to the supervisor until it is gone.
fn supervise(
    args: &RunArgs,
    run: &mut Prepared,
    started: Instant,
    stop_now: Option<StopReason>,
) -> std::io::Result<GroupEnd> {
    let sequence = args.stop_sequence();
    let supervised = Supervised {
        life: Lifecycle {
            scope: &mut run.scope,
            terminal: run.terminal.as_ref(),
            guard: &mut run.guard,
            marker: run.marker.as_deref(),
        },
        sequence: &sequence,
        timeout: args.timeout.filter(|t| !t.is_zero()),
        idle_timeout: args.idle_timeout(),
        wait_group: args.wait_group,
        signals: &run.signals,
        started,
        count_stragglers: args.report.is_some() || args.verbose,
        relay: run.relay.as_mut(),
        parent: run.parent_watch,
    };
    supervisor::supervise(supervised, stop_now)
}

/// The run is gone (or pgrun cannot watch it any more). Its record goes
/// first: read what the output pipes still hold, withdraw the pid file,
/// consume the marker, release the guard; then the report is written
/// (`pgrun wait` returns once the run is withdrawn, and reads it then).
/// Only then is the held output written, which waits for its readers as
/// long as they take (see [`Relay::flush_rest`]): meanwhile nothing
/// advertises a run that is over, `cancel` finds nothing to stop, and a
/// SIGKILL of pgrun leaves the guard nothing to act on (the group's number
/// may be another group's by then). A write of that output that fails
/// (other than EPIPE) has the report written again, with the error.
fn clean_up(
    args: &RunArgs,
    started: Instant,
    mut run: Prepared,
    published: Option<pidfile::Published>,
    ended: std::io::Result<GroupEnd>,
    pgid: Pid,
) -> (Outcome, Option<Guard>) {
    let mut outcome = match ended {
        // The leaf's accounting is read here, before it is removed below.
        Ok(ended) => Outcome { resources: resources_of(&run.scope, ended.usage), ..outcome_of(ended, pgid) },
        Err(e) => {
            // The loop itself failed (poll or waitpid returned an error no
            // run should see). Do not leave the run behind unwatched.
            let end = match kill_unsupervised(&mut run.life()) {
                true => "stopped it with SIGKILL",
                false => "SIGKILL did not end it",
            };
            let err = anyhow!("cannot supervise process group {pgid}: {e}; {end}");
            Outcome::failed(RunExit::Failed, err, Some(pgid))
        }
    };
    if oom_killed(&outcome) {
        verbose!("the command was killed by the kernel's out-of-memory killer");
        outcome.reason = Reason::Oom;
    }
    if let Some(relay) = &mut run.relay {
        relay.close();
    }
    if let Some(published) = published {
        published.remove();
    }
    let guard = run.life().withdrawn();
    // The leaf is empty: removed before a flush that may wait on a reader.
    outcome.cgroup_left = run.scope.remove_leaf();
    outcome.contain = Some(run.scope.mode());
    let relay = run.relay.take();
    let before_flush = relay.as_ref().map(Relay::end_so_far);
    outcome.take_relay_end(before_flush);
    // The report now, not after a flush that may wait as long as a reader
    // does: `pgrun wait --report` returns once the run is withdrawn and
    // reads it then. Only a write error in the flush comes later: the
    // report is then written again.
    let reported = crate::panic_stop::take_report().map(|target| write_report(target, args, started, &outcome));
    if let Some(relay) = relay {
        let end = relay.flush_rest(&run.signals);
        outcome.take_relay_end(Some(end));
        if reported.is_some()
            && Some(end) != before_flush
            && let Some(path) = args.report.as_deref()
        {
            match ReportTarget::prepare(path) {
                Ok(target) => write_report(target, args, started, &outcome),
                Err(err) => say::line(format_args!("{err:#}")),
            }
        }
    }
    (outcome, guard)
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
fn resources_of(scope: &Scope, usage: ChildUsage) -> Resources {
    let reaped = Resources::reaped(usage);
    scope.leaf_accounting().map_or(reaped, |leaf| reaped.with_leaf(&leaf))
}

/// How long pgrun goes on killing a run whose supervision failed.
const KILL_UNSUPERVISED_FOR: Duration = Duration::from_secs(5);

/// The supervise loop failed: stop the run without it, as far as pgrun
/// still can, so that the invariant holds on this path too: SIGKILL to
/// everything the mode reaches (`cgroup.kill` in cgroup mode), reaping what
/// ends (the guard's handle is told if it is among them), until the run is
/// gone or [`KILL_UNSUPERVISED_FOR`] has passed. True if it is gone.
fn kill_unsupervised(life: &mut Lifecycle<'_>) -> bool {
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

/// Fork the guard (unless `--no-guard`), with what it needs to stop the
/// run if pgrun is killed.
fn start_guard(
    args: &RunArgs,
    scope: &Scope,
    marker: Option<&std::path::Path>,
    temps: Vec<crate::atomic_file::Identity>,
) -> anyhow::Result<Option<Guard>> {
    if args.no_guard {
        return Ok(None);
    }
    let plan = guard::Plan {
        sequence: args.stop_sequence(),
        pidfile: args.pidfile.clone(),
        marker: marker.map(std::path::Path::to_path_buf),
        leaf: scope.leaf().map(|leaf| leaf.handed()),
        temps,
    };
    let guard = Guard::start(plan).map_err(|e| anyhow!("cannot start the guard: {e}"))?;
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
    if let Some(unstopped) = &ended.unstopped {
        // pgrun could not end the run: its own failure, whatever the
        // command did.
        let err = anyhow!(
            "cannot send KILL to process group {pgid}: {}; gave up after {} tries, leaving {} process(es) running",
            unstopped.error,
            crate::stop_plan::REFUSED_KILLS,
            unstopped.left
        );
        return known(Outcome { status: ended.status, ..Outcome::failed(RunExit::Failed, err, Some(pgid)) });
    }
    let Some(status) = ended.status else {
        // The command's status was lost (see the supervisor): pgrun cannot
        // say how the command ended, which is its own failure.
        let err = anyhow!("lost the exit status of process group {pgid}'s leader: it was reaped by someone else");
        return known(Outcome::failed(RunExit::Failed, err, Some(pgid)));
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

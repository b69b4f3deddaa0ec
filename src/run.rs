//! The run mode from start to finish: `pgrun [OPTIONS] [--] COMMAND`.
//!
//! The order is the contract's: check the report path, claim the pid file,
//! honour a cancel marker left before the start, block the handled signals,
//! settle what the run is (`--contain`, see [`crate::contain`]), arm
//! `--die-with-parent`, fork the guard, spawn the command into its new
//! group, publish the group id, check the marker again, supervise until the
//! run is gone, then remove the pid file and the marker, release the guard
//! and write the report. Every refusal comes before the spawn,
//! so bad input never half-runs a command.

use crate::cli::RunArgs;
use crate::contain::{Mode, Scope};
use crate::exit::RunExit;
use crate::guard::{self, Guard};
use crate::output::StreamStats;
use crate::output::relay::Relay;
use crate::parent_death::ParentWatch;
use crate::pidfile::{self, Claimed, Marker};
use crate::report::{Facts, Reason, ReportTarget};
use crate::signal_policy;
use crate::supervisor::{self, Ended, SentSignal, StopReason, Watch};
use crate::sys::Pid;
use crate::sys::process::{self, ChildStatus, Detach, SpawnError, SpawnOptions};
use crate::sys::sigmask;
use crate::sys::wakeup::SignalSource;
use crate::terminal::Terminal;
use crate::test_hook;
use crate::{say, verbose};
use anyhow::{Context, anyhow};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Instant;

/// What a run came to, for the exit status and the report.
struct Finish {
    exit: RunExit,
    reason: Reason,
    status: Option<ChildStatus>,
    pgid: Option<Pid>,
    signals: Vec<SentSignal>,
    /// Members left when the command exited; 0 when it never ran.
    stragglers: usize,
    /// Zombies pgrun could not reap and stopped waiting for.
    unreaped: usize,
    error: Option<anyhow::Error>,
    /// `--max-output`: what became of stdout and stderr, once relayed.
    output: Option<[StreamStats; 2]>,
    /// The `--contain` mode in force (the one asked for, if the run ended
    /// before it was settled).
    contain: Option<Mode>,
    escaped: usize,
    /// The guard, released once the run is withdrawn; reaped when this is
    /// dropped, after the report is written.
    guard: Option<Guard>,
}

impl Finish {
    fn failed(exit: RunExit, error: anyhow::Error, pgid: Option<Pid>) -> Self {
        Finish {
            exit,
            reason: Reason::Error,
            status: None,
            pgid,
            signals: Vec::new(),
            stragglers: 0,
            unreaped: 0,
            error: Some(error),
            output: None,
            contain: None,
            escaped: 0,
            guard: None,
        }
    }

    fn cancelled_before_start() -> Self {
        Self::interrupted_before_start(libc::SIGTERM)
    }

    /// A cancel (the marker, or `signal` sent to pgrun) before the command
    /// started: exit 128+N (143 for TERM and the marker).
    fn interrupted_before_start(signal: i32) -> Self {
        verbose!("cancelled before the command started");
        Finish {
            exit: RunExit::CancelledBeforeStart(signal),
            reason: Reason::CancelledBeforeStart,
            status: None,
            pgid: None,
            signals: Vec::new(),
            stragglers: 0,
            unreaped: 0,
            error: None,
            output: None,
            contain: None,
            escaped: 0,
            guard: None,
        }
    }
}

/// Run the command; returns pgrun's exit status.
pub fn run(args: &RunArgs, started: Instant) -> u8 {
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
    let finish = execute(args, started, parent);
    let exit = match finish.exit {
        RunExit::Timeout if args.preserve_status => finish.status.map_or(RunExit::Timeout, RunExit::Command),
        exit => exit,
    };
    if let Some(err) = &finish.error {
        say::line(format_args!("{err:#}"));
    }
    if let Some(report) = report {
        let message = finish.error.as_ref().map(say::error_text);
        let facts = Facts {
            exit_code: exit.code(),
            reason: finish.reason,
            status: finish.status,
            pgid: finish.pgid,
            signals: &finish.signals,
            stragglers: finish.stragglers,
            output: args.max_output.map(|_| finish.output.unwrap_or_default()),
            contain: finish.contain.unwrap_or_else(|| args.contain_mode()).name(),
            escaped: finish.escaped,
            unreaped: finish.unreaped,
            duration: started.elapsed(),
            error: message.as_deref(),
        };
        if let Err(err) = report.write(&facts) {
            say::line(format_args!("{err:#}"));
        }
    }
    test_hook::pause("exit");
    exit.code()
}

fn execute(args: &RunArgs, started: Instant, parent: crate::sys::Pid) -> Finish {
    let argv: Vec<CString> = match args.command.iter().map(|a| CString::new(a.as_bytes())).collect::<Result<_, _>>() {
        Ok(argv) => argv,
        Err(_) => return Finish::failed(RunExit::Failed, anyhow!("an argument of COMMAND contains a NUL byte"), None),
    };
    let marker: Option<PathBuf> =
        args.cancel_file.clone().or_else(|| args.pidfile.as_deref().map(pidfile::default_marker));
    if let (Some(pidfile), Some(marker)) = (&args.pidfile, &marker)
        && pidfile::same_file(marker, pidfile)
    {
        let err = anyhow!("--cancel-file {} names the pid file itself", marker.display());
        return Finish::failed(RunExit::Failed, err, None);
    }
    // A marker that could never be created could never cancel this run.
    if let Some(Err(err)) = marker.as_deref().map(|m| pidfile::check_folder(m, "cancel marker")) {
        return Finish::failed(RunExit::Failed, err, None);
    }

    // Block the handled signals before touching the pid file, so that no
    // signal is lost or acts asynchronously from here on; the child gets
    // the mask pgrun was started with.
    let handled = signal_policy::handled();
    // The mask to hand on is the caller's, from before pgrun blocked SIGPIPE.
    let inherited = sigmask::inherited();
    if let Err(e) = sigmask::block(&handled) {
        return Finish::failed(RunExit::Failed, anyhow!("cannot block signals: {e}"), None);
    }
    let signals = match SignalSource::new(&handled) {
        Ok(s) => s,
        Err(e) => return Finish::failed(RunExit::Failed, anyhow!("cannot watch signals: {e}"), None),
    };

    let claim = match args.pidfile.as_deref().map(|path| pidfile::claim(path, &mut termination_pending)).transpose() {
        Ok(Some(Claimed::Claim(claim))) => Some(claim),
        Ok(Some(Claimed::Interrupted(signal))) => return Finish::interrupted_before_start(signal),
        Ok(None) => None,
        Err(err) => return Finish::failed(RunExit::Failed, err, None),
    };
    let me = crate::sys::geteuid();
    if let Some(marker) = &marker
        && pidfile::consume_marker(marker, me)
    {
        return Finish::cancelled_before_start();
    }
    test_hook::pause("marker-checked");
    if let Err(e) = process::become_subreaper() {
        return Finish::failed(RunExit::Failed, anyhow!("cannot become a child subreaper: {e}"), None);
    }
    let mut scope = match Scope::prepare(args.contain_mode()) {
        Ok(scope) => scope,
        Err(err) => return Finish::failed(RunExit::Failed, err, None),
    };
    let parent_watch = match args.die_with_parent.then(|| ParentWatch::arm(parent)).transpose() {
        Ok(watch) => watch,
        Err(e) => return Finish::failed(RunExit::Failed, anyhow!("cannot watch the parent process: {e}"), None),
    };
    if parent_watch.is_some_and(|w| w.parent_gone()) {
        verbose!("parent process {parent} died before the command started");
        return Finish::cancelled_before_start();
    }
    if let Some(signal) = termination_pending() {
        let _ = signals.drain();
        return Finish::interrupted_before_start(signal);
    }

    // Dropped on every way out of here, a failed spawn included: it gives
    // the terminal back.
    let terminal = Terminal::new(args.setsid);
    let (mut relay, child_ends) = match args.max_output.map(Relay::new).transpose() {
        Ok(made) => made.unzip(),
        Err(err) => return Finish::failed(RunExit::Failed, err, None),
    };
    // Dropped (released and reaped) on every way out of here, after the
    // pid file and marker are withdrawn.
    let guard = match start_guard(args, &scope, marker.as_deref()) {
        Ok(guard) => guard,
        Err(err) => return Finish::failed(RunExit::Failed, err, None),
    };
    scope.set_guard(guard.as_ref().map(Guard::pid));
    let options = SpawnOptions {
        detach: if args.setsid { Detach::Session } else { Detach::Group },
        child_mask: inherited.mask,
        ignore_sigchld: inherited.sigchld_ignored,
        take_terminal: terminal.as_ref().and_then(Terminal::hand_off_at_start),
        stdout_stderr: child_ends.as_ref().map(|ends| ends.raw()),
        join_cgroup: scope.join_fd(),
    };
    let program = args.command[0].to_string_lossy();
    let spawned = process::spawn(&argv, &options);
    // Only the command holds the write ends now: its exit is the pipes' end.
    drop(child_ends);
    let pgid = match spawned {
        Ok(pid) => pid,
        Err(SpawnError::Exec(e)) => {
            let exit = if e.raw_os_error() == Some(libc::ENOENT) { RunExit::NotFound } else { RunExit::CannotExecute };
            return Finish::failed(exit, anyhow!("cannot run '{program}': {e}"), None);
        }
        Err(SpawnError::Setup(e)) => {
            return Finish::failed(RunExit::Failed, anyhow!("cannot start '{program}': {e}"), None);
        }
    };
    verbose!("started '{program}' as process group {pgid}");
    scope.started(pgid);
    if let Some(guard) = &guard {
        guard.spawned(pgid);
    }
    crate::panic_stop::watch(pgid);
    if let Some(terminal) = &terminal {
        terminal.started(pgid);
    }
    let ctx = Supervision {
        signals: &signals,
        started,
        marker: marker.as_deref(),
        terminal: terminal.as_ref(),
        guard: guard.as_ref(),
        parent: parent_watch,
    };
    if let Err(e) = signals.activate(&handled, &signal_policy::absorbed()) {
        verbose!("cannot install signal handlers: {e}");
    }
    test_hook::pause("spawned");

    let published = match claim.map(|c| c.publish(pgid)).transpose() {
        Ok(p) => {
            if let (Some(guard), Some(published)) = (&guard, &p) {
                let (dev, ino) = published.id();
                guard.published(dev, ino);
            }
            p
        }
        Err(err) => {
            // The command is running but cannot be published: stop it (it
            // must not run unsupervised) and report the failure.
            let stopped = supervise(args, &ctx, &mut scope, Some(StopReason::Cancel), relay.as_mut());
            if let Some(marker) = &marker {
                pidfile::consume_marker(marker, me);
            }
            let mut finish = Finish::failed(RunExit::Failed, err, Some(pgid));
            finish.output = relay.map(Relay::finish);
            if let Ok(ended) = stopped {
                finish.status = ended.status;
                finish.signals = ended.signals;
            }
            return finish;
        }
    };
    let stop_now = marker.as_deref().filter(|m| pidfile::marker(m, me) == Marker::Present).map(|_| {
        verbose!("cancel marker found right after publishing");
        StopReason::Cancel
    });

    let ended = supervise(args, &ctx, &mut scope, stop_now, relay.as_mut());
    // The group is gone (or pgrun cannot watch it any more): write what is
    // left of its output, withdraw the record, then the marker.
    let output = relay.map(Relay::finish);
    if let Some(published) = published {
        published.remove();
    }
    if let Some(marker) = &marker {
        pidfile::consume_marker(marker, me);
    }
    let mut guard = guard;
    if let Some(guard) = &mut guard {
        if ended.as_ref().is_ok_and(|e| e.guard_reaped) {
            guard.reaped();
        }
        guard.release();
    }
    let mut finish = match ended {
        Ok(ended) => finish_from(ended, pgid),
        Err(e) => {
            // The loop itself failed (poll or waitpid returned an error no
            // run should see). Do not leave the group running unwatched.
            let _ = process::signal_group(pgid, libc::SIGKILL);
            Finish::failed(RunExit::Failed, anyhow!("cannot supervise process group {pgid}: {e}"), Some(pgid))
        }
    };
    finish.output = output;
    finish.contain = Some(scope.mode());
    finish.guard = guard;
    finish
}

/// Fork the guard (unless `--no-guard`), with what it needs to stop the
/// run if pgrun is killed.
fn start_guard(args: &RunArgs, scope: &Scope, marker: Option<&std::path::Path>) -> anyhow::Result<Option<Guard>> {
    if args.no_guard {
        return Ok(None);
    }
    let plan = guard::Plan {
        sequence: args.stop_sequence(),
        pidfile: args.pidfile.clone(),
        marker: marker.map(std::path::Path::to_path_buf),
        leaf: scope.leaf().map(|leaf| leaf.target(None)),
    };
    let guard = Guard::start(plan).map_err(|e| anyhow!("cannot start the guard: {e}"))?;
    verbose!("guard {} started", guard.pid());
    Ok(Some(guard))
}

/// A signal that asks pgrun to end (TERM, INT, HUP, QUIT), pending before
/// the command has started: such a run ends before it begins.
fn termination_pending() -> Option<i32> {
    let pending = sigmask::pending();
    (1..=crate::signame::max_signal()).find(|&s| signal_policy::ends_the_run(s) && pending.contains(s))
}

/// What the supervisor needs besides the options.
struct Supervision<'a> {
    signals: &'a SignalSource,
    started: Instant,
    marker: Option<&'a std::path::Path>,
    terminal: Option<&'a Terminal>,
    guard: Option<&'a Guard>,
    parent: Option<ParentWatch>,
}

fn supervise(
    args: &RunArgs,
    ctx: &Supervision<'_>,
    scope: &mut Scope,
    stop_now: Option<StopReason>,
    relay: Option<&mut Relay>,
) -> std::io::Result<Ended> {
    let Supervision { signals, started, marker, guard, .. } = *ctx;
    let sequence = args.stop_sequence();
    // A marker next to a live pid file always means "stopping".
    let mut on_stop = || {
        if let Some(marker) = marker
            && let Err(e) =
                pidfile::create_marker(marker).with_context(|| format!("cannot create {}", marker.display()))
        {
            verbose!("{e:#}");
        }
        // The guard removes this marker if pgrun dies while stopping.
        if let (Some(marker), Some(guard)) = (marker, guard) {
            guard.marker(marker);
        }
    };
    let watch = Watch {
        scope,
        sequence: &sequence,
        timeout: args.timeout.filter(|t| !t.is_zero()),
        wait_group: args.wait_group,
        signals,
        started,
        on_stop: &mut on_stop,
        terminal: ctx.terminal,
        count_stragglers: args.report.is_some() || args.verbose,
        relay,
        parent: ctx.parent,
    };
    supervisor::supervise(watch, stop_now)
}

fn finish_from(ended: Ended, pgid: Pid) -> Finish {
    let Some(status) = ended.status else {
        // The command's status was lost (see the supervisor): pgrun cannot
        // say how the command ended, which is its own failure.
        let mut finish = Finish::failed(
            RunExit::Failed,
            anyhow!("lost the exit status of process group {pgid}'s leader: it was reaped by someone else"),
            Some(pgid),
        );
        finish.signals = ended.signals;
        finish.stragglers = ended.stragglers;
        finish.unreaped = ended.unreaped;
        finish.escaped = ended.escaped;
        return finish;
    };
    let (exit, reason) = match (ended.stop_reason, status) {
        (Some(StopReason::Timeout), _) => (RunExit::Timeout, Reason::Timeout),
        (Some(StopReason::Cancel), status) => (RunExit::Command(status), Reason::Cancelled),
        (_, status @ ChildStatus::Exited(_)) => (RunExit::Command(status), Reason::Exited),
        (_, status @ ChildStatus::Signaled(_)) => (RunExit::Command(status), Reason::Signaled),
    };
    Finish {
        exit,
        reason,
        status: Some(status),
        pgid: Some(pgid),
        signals: ended.signals,
        stragglers: ended.stragglers,
        unreaped: ended.unreaped,
        error: None,
        output: None,
        contain: None,
        escaped: ended.escaped,
        guard: None,
    }
}

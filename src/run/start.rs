//! The command's start: spawn it into its new group (or session) with the
//! guard holding it from the first instant, tell every party the group's
//! id, publish the run in the pid file, and look at the cancel marker once
//! more right after publishing.

use super::plan::RunPlan;
use super::prepare::{EarlyEnd, Prepared, Step, failure};
use super::supervisor::StopReason;
use crate::exit::RunExit;
use crate::guard::Guard;
use crate::pidfile::{self, Marker};
use crate::signal_policy;
use crate::sys::Pid;
use crate::sys::spawn::{Detach, SpawnError, SpawnOptions};
use crate::terminal::Terminal;
use crate::{test_hook, verbose};
use anyhow::anyhow;
use std::path::Path;

/// Start the command in its new group (or session), then tell everyone who
/// needs the group id, and start reading signals.
pub fn spawn_command(plan: &RunPlan, run: &mut Prepared) -> Step<Pid> {
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
        detach: if plan.setsid { Detach::Session } else { Detach::Group },
        child_mask: run.inherited.mask,
        ignore_sigchld: run.inherited.sigchld_ignored,
        take_terminal: run.terminal.as_ref().and_then(Terminal::hand_off_at_start),
        stdout_stderr: run.child_ends.as_ref().map(|ends| ends.raw()),
        stdin: run.stdin_pipe.as_ref().and_then(crate::stdin_pipe::StdinPipe::for_the_child),
        join_cgroup: run.scope.join_fd(),
        on_created: Some(&created),
        rlimits: run.rlimits,
        hand_over: guard.and_then(Guard::for_the_child),
        pause_in_child: pause_in_child.as_ref(),
        own_peak: plan.report.is_some(),
    };
    let program = plan.command[0].to_string_lossy();
    assert!(!test_hook::active(test_hook::PANIC_BEFORE_SPAWN), "test hook: panic before the spawn");
    test_hook::raise_peak_if_asked();
    let spawned = crate::sys::spawn::spawn(&run.argv, &options);
    // Only the command holds the write ends now: its exit is the pipes' end.
    run.child_ends = None;
    if let Some(pipe) = &mut run.stdin_pipe {
        pipe.started();
    }
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
        crate::exit_hooks::forget_group();
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
pub fn publish(run: &mut Prepared, pgid: Pid) -> anyhow::Result<Option<pidfile::Published>> {
    let Some(claim) = run.claim.take() else { return Ok(None) };
    if test_hook::active(test_hook::PUBLISH_FAILS) {
        anyhow::bail!("cannot publish the run (test hook {})", test_hook::PUBLISH_FAILS);
    }
    let published = claim.publish(pgid)?;
    run.life().published(&published);
    Ok(Some(published))
}

/// A marker present right after publishing: stop the run as if cancelled.
pub fn marker_after_publishing(marker: Option<&Path>) -> Option<StopReason> {
    let marker = marker.filter(|m| pidfile::marker(m, crate::sys::geteuid()) == Marker::Request)?;
    verbose!("cancel marker {} found right after publishing", marker.display());
    Some(StopReason::Cancel)
}

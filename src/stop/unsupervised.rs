//! The stop sequence run on a run that no pgrun supervises: by `pgrun
//! cancel` on a group whose pgrun is gone (`--force`, `--timeout`), and by
//! the guard once its pgrun was killed. One loop for both.
//!
//! Whoever runs it is not the parent of what it stops, so no SIGCHLD says
//! when the run is gone: it checks with the [`Backoff`], or waits on the
//! target's own event fd where it has one (a cgroup's `cgroup.events`).
//! What to send and when is the [`StopPlan`]'s to say; what the run is,
//! and so how it is signalled and when it is gone, the [`Target`]'s (a
//! [`ForeignGroup`](crate::contain::ForeignGroup) held by pidfds, or the guard's cgroup leaf).
//!
//! A zombie is a member of its group until its parent reaps it, so the run
//! is not gone while one is left. Where what is left is only zombies that
//! the driver cannot reap (the guard's run, once pgrun is dead: their new
//! parent reaps them), no step can do more: the driver waits for their
//! reaping instead, at most [`zombie_wait`] ([`wait_reaped`]).
//!
//! A `leader:` step is sent only through a pidfd held on the leader (the
//! member whose pid is the group's id, found in the group while the group
//! was the run's), never with `kill(pid)`: whoever runs this is not the
//! leader's parent, so the pid may have been reaped and reused. Where no
//! such pidfd can be held (off Linux, no pidfd, the leader has exited) the
//! step is skipped, as it is for a leader that has exited.

use crate::backoff::Backoff;
use crate::stop::plan::{Action, AfterKill, StopPlan};
use crate::stop::sequence::StopSequence;
use crate::sys;
use crate::verbose;
use std::time::{Duration, Instant};

use crate::contain::Target;

/// Longest wait on a target's event fd before it is checked anyway.
const EVENTS_CHECK: Duration = Duration::from_millis(100);

/// How long a run left with only zombies is waited for (their parent, not
/// the driver, reaps them; an init may take a second or more) before the
/// driver gives up on it: as long as the sequence lets a step wait (its
/// longest grace), at least [`crate::stop::plan::KILL_GRACE`].
pub fn zombie_wait(sequence: &StopSequence) -> Duration {
    let steps = sequence.steps();
    let graces = steps[..steps.len() - 1].iter().map(|step| step.grace);
    graces.fold(crate::stop::plan::KILL_GRACE, Duration::max)
}

/// How a wait for the target to be gone ended.
enum Waited {
    Gone,
    /// Nothing but zombies that the driver cannot reap is left.
    OnlyZombies,
    /// The deadline passed.
    Due,
}

/// Run `sequence` on `target` as a [`StopPlan`] says: each step signals
/// it (then SIGCONT, see [`crate::stop::plan::needs_cont`]) and waits up to
/// its grace for it to be gone; once `until` has passed, the remaining
/// steps are skipped for the final KILL, which waits
/// [`crate::stop::plan::KILL_GRACE`] and is not repeated. Once nothing but
/// zombies the driver cannot reap is left, the steps left are pointless:
/// [`wait_reaped`] instead. True if the target is gone.
pub fn stop(target: &mut dyn Target, sequence: &StopSequence, until: Option<Instant>) -> bool {
    let mut plan = StopPlan::new(sequence, AfterKill::GiveUp, until);
    loop {
        match plan.next(Instant::now()) {
            Action::Send(send) if send.leader => {
                if let Ok(true) = target.signal_leader(send.signal, send.cont) {
                    verbose!("sent {} to the leader of {} alone", send.signal, target.describe());
                } else {
                    verbose!(
                        "the leader of {} cannot be reached alone: skipping leader:{}",
                        target.describe(),
                        send.signal
                    );
                    plan.skip(Instant::now());
                }
            }
            Action::Send(send) => {
                verbose!("sending {} to {}", send.signal, target.describe());
                let _ = target.signal(send.signal, send.cont, send.last);
            }
            Action::WaitUntil(until) => match wait_gone(target, until) {
                Waited::Gone => return true,
                Waited::OnlyZombies => return wait_reaped(target, sequence),
                Waited::Due => {}
            },
            Action::GiveUp(_) => return false,
        }
    }
}

/// What is left of `target` is only zombies the caller cannot reap
/// ([`Target::only_zombies`]): wait for their parent to reap them, at most
/// [`zombie_wait`] of `sequence`. True if the target is gone by then;
/// false is a give-up (the caller says so).
pub fn wait_reaped(target: &mut dyn Target, sequence: &StopSequence) -> bool {
    verbose!("only zombies are left of {}: waiting for their parent to reap them", target.describe());
    crate::test_hook::pause("zombies-left");
    // A grace too long to represent: no bound but the zombies' reaping.
    let until = Instant::now().checked_add(zombie_wait(sequence));
    let mut backoff = Backoff::default();
    loop {
        if target.gone() {
            return true;
        }
        if !backoff.pause_until(until) {
            return target.gone();
        }
    }
}

/// How long what is left of a run once the final KILL found it dying
/// ([`Target::dying`]) is waited for before the driver gives up on it. A
/// process sent KILL on a loaded machine may not run for seconds, and
/// one in its exit may be held there (by a tracer, or while the kernel
/// releases its memory): it is not a process that survived KILL.
pub const DYING_WAIT: Duration = Duration::from_secs(30);

/// The final KILL's grace passed with the run still there (a [`stop`]
/// that returned false): if everything left of it is dying
/// ([`Target::dying`]), wait for it to be gone, at most [`DYING_WAIT`]
/// (and for the reaping of what turns into zombies the driver cannot
/// reap, as [`wait_reaped`] does). Dying is for good: a process with its
/// KILL pending never runs its own code again, so it forks nothing, and
/// is not asked again. True if the target is gone by then; false is a
/// give-up (the caller says so).
pub fn wait_dying(target: &mut dyn Target, sequence: &StopSequence) -> bool {
    // Only zombies: [`stop`] has waited for their reaping already.
    if target.only_zombies() || !target.dying() {
        return false;
    }
    verbose!("what is left of {} has its KILL and is dying: waiting for it to be gone", target.describe());
    crate::test_hook::pause("dying");
    let until = Instant::now().checked_add(DYING_WAIT);
    let mut backoff = Backoff::default();
    loop {
        if target.gone() {
            return true;
        }
        if target.only_zombies() {
            return wait_reaped(target, sequence);
        }
        if !backoff.pause_until(until) {
            return target.gone();
        }
    }
}

/// What a driver that gave up on `target` (a [`stop`], [`wait_reaped`] or
/// [`wait_dying`] that returned false) says of it, after its name: only
/// zombies left, what is left dying, or a survivor of the KILL.
pub fn why_given_up(target: &mut dyn Target, sequence: &StopSequence) -> String {
    if target.only_zombies() {
        let waited = crate::duration::describe(zombie_wait(sequence));
        format!("still holds zombies {waited} after it was stopped (their parent has not reaped them)")
    } else if target.dying() {
        format!("is still dying {} after SIGKILL", crate::duration::describe(DYING_WAIT))
    } else {
        "is still there 1s after SIGKILL".to_string()
    }
}

/// Wait until `target` is gone, holds only zombies the caller cannot reap,
/// or `until` passes (`None`: no deadline): on the target's event fd where
/// it has one, else with a [`Backoff`].
fn wait_gone(target: &mut dyn Target, until: Option<Instant>) -> Waited {
    let events = target.events();
    let mut backoff = Backoff::default();
    loop {
        if target.gone() {
            return Waited::Gone;
        }
        if target.only_zombies() {
            return Waited::OnlyZombies;
        }
        let now = Instant::now();
        if until.is_some_and(|u| now >= u) {
            return Waited::Due;
        }
        match &events {
            Some(fd) => {
                use std::os::fd::AsFd;
                let left = until.map_or(EVENTS_CHECK, |u| (u - now).min(EVENTS_CHECK));
                let mut set = [sys::PollFd::priority(fd.as_fd())];
                let _ = sys::poll(&mut set, Some(left));
                // Reading the file re-arms its notification; one that
                // cannot be read is not re-armed (poll would return at once
                // again): back off instead.
                if sys::cgroup::populated(fd.as_fd()).is_err() {
                    backoff.pause_until(until);
                }
            }
            None => {
                backoff.pause_until(until);
            }
        }
    }
}

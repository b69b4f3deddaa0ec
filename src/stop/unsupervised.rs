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

/// Run `sequence` on `target` as a [`StopPlan`] says: each step signals
/// it (then SIGCONT, see [`crate::stop::plan::needs_cont`]) and waits up to
/// its grace for it to be gone; once `until` has passed, the remaining
/// steps are skipped for the final KILL, which waits
/// [`crate::stop::plan::KILL_GRACE`] and is not repeated. True if the
/// target is gone.
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
            Action::WaitUntil(until) => {
                if wait_gone(target, until) {
                    return true;
                }
            }
            Action::GiveUp(_) => return false,
        }
    }
}

/// Wait until `target` is gone or `until` passes (`None`: until it is
/// gone): on the target's event fd where it has one, else with a
/// [`Backoff`].
fn wait_gone(target: &mut dyn Target, until: Option<Instant>) -> bool {
    let events = target.events();
    let mut backoff = Backoff::default();
    loop {
        if target.gone() {
            return true;
        }
        let now = Instant::now();
        if until.is_some_and(|u| now >= u) {
            return false;
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

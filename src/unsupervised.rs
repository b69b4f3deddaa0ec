//! The stop sequence run on a run that no pgrun supervises: by `pgrun
//! cancel` on a group whose pgrun is gone (`--force`, `--timeout`), and by
//! the guard once its pgrun was killed. One loop for both.
//!
//! Whoever runs it is not the parent of what it stops, so no SIGCHLD says
//! when the run is gone: it checks with a backoff (1 ms doubling to 20 ms),
//! or waits on the target's own event fd where it has one (a cgroup's
//! `cgroup.events`).

use crate::signame::Signal;
use crate::stop_sequence::StopSequence;
use crate::sys::{self, Pid, process};
use crate::verbose;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

/// How long a run gets to vanish after the final SIGKILL.
pub const AFTER_KILL: Duration = Duration::from_secs(1);

/// What is stopped: a process group, or a cgroup leaf.
pub trait Target {
    /// For messages: "process group 4242".
    fn describe(&self) -> String;
    /// Send `signal` to everything in the target, and SIGCONT after it if
    /// `cont`.
    fn signal(&mut self, signal: Signal, cont: bool);
    /// Whether nothing is left.
    fn gone(&mut self) -> bool;
    /// An fd that signals a change with POLLPRI, if the target has one.
    fn events(&self) -> Option<OwnedFd> {
        None
    }
}

/// A process group, checked with `kill(-pgid, 0)`.
pub struct Group(pub Pid);

impl Target for Group {
    fn describe(&self) -> String {
        format!("process group {}", self.0)
    }
    fn signal(&mut self, signal: Signal, cont: bool) {
        let _ = process::signal_group(self.0, signal);
        if cont {
            let _ = process::signal_group(self.0, Signal::CONT);
        }
    }
    fn gone(&mut self) -> bool {
        !process::group_exists(self.0)
    }
}

/// Run `sequence` on `target`: each step signals it (then SIGCONT, unless
/// the signal is KILL or CONT) and waits up to its grace for it to be gone;
/// once `until` has passed, the remaining steps are skipped for the final
/// KILL. After the KILL it waits [`AFTER_KILL`]. True if the target is gone.
pub fn stop(target: &mut dyn Target, sequence: &StopSequence, until: Option<Instant>) -> bool {
    let steps = sequence.steps();
    let mut i = 0;
    while i < steps.len() {
        let step = steps[i];
        let last = i + 1 == steps.len();
        verbose!("sending {} to {}", step.signal, target.describe());
        target.signal(step.signal, step.signal != Signal::KILL && step.signal != Signal::CONT);
        let wait_until = if last {
            Instant::now() + AFTER_KILL
        } else {
            let step_end = Instant::now().checked_add(step.grace);
            match (step_end, until) {
                (Some(e), Some(u)) => Some(e.min(u)),
                (e, u) => e.or(u),
            }
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(u32::MAX as u64))
        };
        if wait_gone(target, wait_until) {
            return true;
        }
        i = if until.is_some_and(|u| Instant::now() >= u) { steps.len() - 1 } else { i + 1 };
        if last {
            break;
        }
    }
    false
}

/// Wait until `target` is gone or `until` passes.
pub fn wait_gone(target: &mut dyn Target, until: Instant) -> bool {
    let events = target.events();
    let mut pause = Duration::from_millis(1);
    loop {
        if target.gone() {
            return true;
        }
        let now = Instant::now();
        if now >= until {
            return false;
        }
        let left = until - now;
        match &events {
            Some(fd) => {
                use std::os::fd::AsFd;
                let mut set = [sys::PollFd::priority(fd.as_fd())];
                let _ = sys::poll(&mut set, Some(left.min(Duration::from_millis(100))));
                // Reading the file re-arms its notification.
                let _ = sys::cgroup::populated(fd.as_fd());
            }
            None => {
                std::thread::sleep(left.min(pause));
                pause = (pause * 2).min(Duration::from_millis(20));
            }
        }
    }
}

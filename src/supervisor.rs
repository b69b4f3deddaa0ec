//! The event loop that watches a running group and stops it.
//!
//! It owns the run's state machine:
//!
//! ```text
//! Running ──command exits──▶ Draining (--wait-group) ──group gone──▶ done
//!    │                          │
//!    │ timeout, SIGTERM,        │ timeout, SIGTERM
//!    │ stragglers, marker       ▼
//!    └────────────────────▶ Stopping { step, deadline } ──group gone──▶ done
//! ```
//!
//! Every wake-up comes from a signal read from the [`SignalSource`] (SIGCHLD,
//! SIGTERM, forwarded signals) or from a deadline (the timeout, a step's
//! grace). While the command simply runs, nothing else wakes pgrun. The loop
//! ends only when the leader has been reaped *and* the run is gone as the
//! `--contain` mode defines it ([`Scope::is_gone`]): `kill(-pgid, 0)`
//! reports ESRCH (a zombie leader would still hold the group, so reaping
//! comes first), and in tree mode no descendant is left, in cgroup mode the
//! leaf is empty. Once the command has exited (draining, stopping), the
//! loop also checks on a backoff of up to 100 ms, because members that are
//! not pgrun's children end without a SIGCHLD to pgrun.
//!
//! A group held only by zombies pgrun cannot reap is not waited for
//! forever (see [`crate::contain::zombies`]): while draining it counts as
//! ended, and after the final KILL it gets one more grace.

use crate::contain::{Scope, zombies};
use crate::output::relay::Relay;
use crate::parent_death::{self, ParentWatch};
use crate::signame::Signal;
use crate::stop_sequence::StopSequence;
use crate::sys::process::{self, ChildStatus, Reaped};
use crate::sys::wakeup::SignalSource;
use crate::sys::{self, Pid, PollFd};
use crate::terminal::{self, RunState, Terminal};
use crate::{say, verbose};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// Why a stop sequence was started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    Timeout,
    Cancel,
    /// The command exited and left members behind.
    Stragglers,
}

/// A stop-sequence signal pgrun sent, and when.
#[derive(Clone, Copy, Debug)]
pub struct SentSignal {
    pub signal: Signal,
    pub at: Duration,
}

/// What happened to the group, once it is gone.
#[derive(Debug)]
pub struct Ended {
    /// How the command (the group leader) ended.
    pub status: ChildStatus,
    /// The first reason a stop sequence was started, if any.
    pub stop_reason: Option<StopReason>,
    pub signals: Vec<SentSignal>,
    /// Members still alive when the command exited (`None`: unknown here).
    pub stragglers: Option<usize>,
    /// Processes outside the group the stop reached (tree, cgroup).
    pub escaped: usize,
    /// Zombies left in the group that pgrun could not reap.
    pub unreaped: usize,
    /// The guard died during the run and was reaped here.
    pub guard_reaped: bool,
}

/// Signals pgrun forwards to the group as they are.
pub fn is_forwarded(signal: i32) -> bool {
    const FORWARDED: [i32; 8] = [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGWINCH,
        libc::SIGCONT,
    ];
    FORWARDED.contains(&signal) || crate::signame::realtime_range().is_some_and(|(lo, hi)| (lo..=hi).contains(&signal))
}

#[derive(Clone, Copy, Debug)]
enum Phase {
    Running,
    Draining,
    Stopping { step: usize, deadline: Option<Instant> },
}

/// Settings of one supervised run.
pub struct Watch<'a> {
    /// The run as `--contain` defines it; it knows the group id.
    pub scope: &'a mut Scope,
    pub sequence: &'a StopSequence,
    pub timeout: Option<Duration>,
    pub wait_group: bool,
    pub signals: &'a SignalSource,
    /// When pgrun started: report times count from here.
    pub started: Instant,
    /// Called once, when the first stop sequence starts (creates the marker).
    pub on_stop: &'a mut dyn FnMut(),
    /// The terminal and its job-control rules (`None` with --setsid).
    pub terminal: Option<&'a Terminal>,
    /// Whether to count the members left when the command exits (for the
    /// report and --verbose). It scans /proc, which is worth skipping when
    /// hundreds of runs end at once and nobody reads the number.
    pub count_stragglers: bool,
    /// `--max-output`: the relay of the command's output, whose fds this
    /// loop polls along with the signals.
    pub relay: Option<&'a mut Relay>,
    /// `--die-with-parent`.
    pub parent: Option<ParentWatch>,
}

/// Longest pause between group checks when no event can announce the end.
const MAX_POLL: Duration = Duration::from_millis(100);

struct Supervisor<'a> {
    w: Watch<'a>,
    phase: Phase,
    leader: Option<ChildStatus>,
    timeout_at: Option<Instant>,
    stop_reason: Option<StopReason>,
    sent: Vec<SentSignal>,
    stragglers: Option<usize>,
    unreaped: Option<usize>,
    guard_reaped: bool,
    pgid: Pid,
    /// Current pause of the fallback group check, doubled each time.
    poll_backoff: Duration,
    /// When to look at the parent next, where no signal says it died.
    parent_check_at: Option<Instant>,
}

/// Supervise the group until it is gone. `stop_now` starts the stop
/// sequence at once (a cancel marker found right after publishing).
pub fn supervise(w: Watch<'_>, stop_now: Option<StopReason>) -> std::io::Result<Ended> {
    let timeout_at = w.timeout.and_then(|t| Instant::now().checked_add(t));
    let pgid = w.scope.pgid();
    let parent_check_at = w.parent.and_then(|p| p.check_every()).and_then(|every| Instant::now().checked_add(every));
    let mut s = Supervisor {
        w,
        phase: Phase::Running,
        leader: None,
        timeout_at,
        stop_reason: None,
        sent: Vec::new(),
        stragglers: None,
        unreaped: None,
        guard_reaped: false,
        pgid,
        poll_backoff: Duration::from_millis(1),
        parent_check_at,
    };
    if let Some(reason) = stop_now {
        s.start_stop(reason);
    }
    s.run()
}

impl Supervisor<'_> {
    fn run(mut self) -> std::io::Result<Ended> {
        loop {
            let leader_exited_now = self.reap_children()?;
            if let Some(status) = self.leader {
                if self.unreaped.is_some() || self.w.scope.is_gone() {
                    verbose!("process group {} is gone", self.pgid);
                    if leader_exited_now {
                        self.stragglers = Some(0);
                    }
                    return Ok(Ended {
                        status,
                        stop_reason: self.stop_reason,
                        signals: self.sent,
                        stragglers: self.stragglers,
                        escaped: self.w.scope.escaped(),
                        unreaped: self.unreaped.unwrap_or(0),
                        guard_reaped: self.guard_reaped,
                    });
                }
                if let Phase::Draining = self.phase
                    && let Some(zombies) = self.only_unreapable_left()
                {
                    // Nothing of the run is alive any more: the rest are
                    // zombies of parents outside pgrun's reach.
                    self.give_up_on(zombies);
                    continue;
                }
                if leader_exited_now {
                    self.on_stragglers();
                }
            }
            self.on_deadlines();
            let wait = self.next_wake().map(|at| at.saturating_duration_since(Instant::now()));
            self.wait_for_events(wait)?;
        }
    }

    /// Sleep until a signal arrives, an fd of the output relay is ready, or
    /// `wait` has passed; then act on what came.
    fn wait_for_events(&mut self, wait: Option<Duration>) -> std::io::Result<()> {
        let mut set = [PollFd::read(self.w.signals.as_fd()); sys::POLL_MAX];
        let mut n = 1;
        // The cgroup leaf's cgroup.events: a change may be the run's end.
        // Only once the command has exited: until then SIGCHLD says it.
        let events = if self.leader.is_some() { self.w.scope.events() } else { None };
        if let Some(fd) = events {
            set[1] = PollFd::priority(fd);
            n += 1;
        }
        let first_relay = n;
        if let Some(relay) = &self.w.relay {
            n += relay.interest(&mut set[first_relay..]);
        }
        sys::poll(&mut set[..n], wait)?;
        if let Some(relay) = &mut self.w.relay {
            relay.on_ready(&set[first_relay..n]);
        }
        if events.is_some() && set[1].ready {
            // Reading cgroup.events re-arms its notification (the run's end
            // itself is checked by the loop).
            self.w.scope.rearm_events();
        }
        if set[0].ready {
            for signal in self.w.signals.drain()? {
                self.on_signal(signal);
            }
        }
        Ok(())
    }

    /// Reap every child that has ended and note the leader's status; true if
    /// the leader was among them.
    fn reap_children(&mut self) -> std::io::Result<bool> {
        let mut leader_exited = false;
        loop {
            match process::reap_one()? {
                Reaped::Child(pid, _) if Some(pid) == self.w.scope.guard() => {
                    verbose!("the guard {pid} died; the run goes on without it");
                    self.w.scope.guard_gone();
                    self.guard_reaped = true;
                }
                Reaped::Child(pid, status) if pid == self.pgid => {
                    match status {
                        ChildStatus::Exited(code) => verbose!("command exited with status {code}"),
                        ChildStatus::Signaled(sig) => verbose!("command was ended by signal {}", Signal(sig)),
                    }
                    self.leader = Some(status);
                    leader_exited = true;
                }
                Reaped::Child(..) => {}
                Reaped::Stopped(pid, signal) => self.on_stopped(pid, signal),
                Reaped::NoneReady => return Ok(leader_exited),
                Reaped::NoChildren => return Ok(leader_exited),
            }
        }
    }

    /// The command exited and left members behind: stop them, or with
    /// --wait-group wait for them.
    fn on_stragglers(&mut self) {
        if self.w.count_stragglers {
            self.stragglers = process::count_group_members(self.pgid);
        }
        if let Phase::Running = self.phase {
            let left = match self.stragglers {
                Some(0) => format!("nothing left in process group {}, but the run goes on", self.pgid),
                Some(n) => format!("{n} process(es) left in process group {}", self.pgid),
                None => format!("processes left in process group {}", self.pgid),
            };
            if self.w.wait_group {
                verbose!("{left}; waiting for them");
                self.phase = Phase::Draining;
            } else {
                verbose!("{left}; stopping them");
                self.start_stop(StopReason::Stragglers);
            }
        }
    }

    /// A child was stopped: job control, see [`crate::terminal`]. The
    /// timeout keeps counting meanwhile: its deadline is on the monotonic
    /// clock.
    fn on_stopped(&mut self, pid: Pid, signal: i32) {
        if let Some(terminal) = self.w.terminal {
            let stopping = matches!(self.phase, Phase::Stopping { .. });
            terminal.on_stopped(pid, signal, RunState { stopping, timed: self.timeout_at.is_some() });
        }
    }

    fn on_signal(&mut self, signal: i32) {
        match signal {
            libc::SIGCHLD | libc::SIGPIPE | libc::SIGTTOU => {}
            libc::SIGTERM => {
                verbose!("received TERM: cancelling");
                self.start_stop(StopReason::Cancel);
            }
            parent_death::SIGNAL if self.w.parent.is_some() => self.check_parent(),
            s if is_forwarded(s) => {
                verbose!("forwarding {} to process group {}", Signal(s), self.pgid);
                self.send(Signal(s));
                if terminal::continue_after_forwarding(s) {
                    self.send(Signal::CONT);
                }
            }
            _ => {}
        }
    }

    /// `--die-with-parent`: if the parent process is gone, cancel. The
    /// parent-death signal also comes when only the parent *thread* exited;
    /// then pgrun's parent is unchanged and the run goes on.
    fn check_parent(&mut self) {
        let Some(watch) = self.w.parent else { return };
        if watch.parent_gone() {
            verbose!("parent process {} died: cancelling", watch.parent());
            self.start_stop(StopReason::Cancel);
        } else {
            verbose!("parent thread exited; parent process {} lives on: carrying on", watch.parent());
        }
    }

    /// If nothing of the run is alive any more but zombies in the group
    /// that pgrun cannot reap, how many.
    fn only_unreapable_left(&self) -> Option<usize> {
        if !self.w.scope.is_gone_except_group() {
            return None;
        }
        let after_kill = matches!(self.phase, Phase::Stopping { .. });
        zombies::only_zombies_left(self.pgid, after_kill)
    }

    fn give_up_on(&mut self, zombies: usize) {
        say::line(format_args!(
            "warning: process group {} still holds {zombies} zombie process(es) that pgrun cannot reap \
             (their parent is outside the run); not waiting for them",
            self.pgid
        ));
        self.unreaped = Some(zombies);
    }

    /// Act on the timeout and on an expired step grace.
    fn on_deadlines(&mut self) {
        let now = Instant::now();
        if let Some(every) = self.w.parent.and_then(|p| p.check_every())
            && self.parent_check_at.is_some_and(|at| now >= at)
        {
            self.parent_check_at = now.checked_add(every);
            if !matches!(self.phase, Phase::Stopping { .. }) {
                self.check_parent();
            }
        }
        if let Phase::Running | Phase::Draining = self.phase
            && self.timeout_at.is_some_and(|at| now >= at)
        {
            verbose!("timeout: stopping process group {}", self.pgid);
            self.start_stop(StopReason::Timeout);
        }
        if let Phase::Stopping { step, deadline: Some(at) } = self.phase
            && now >= at
        {
            let last = self.w.sequence.steps().len() - 1;
            if step < last {
                self.enter_step(step + 1);
            } else if self.leader.is_some()
                && let Some(zombies) = self.only_unreapable_left()
            {
                // The KILL's grace has passed and only zombies pgrun cannot
                // reap hold the group: report them, do not wait forever.
                self.give_up_on(zombies);
            } else {
                // After the final KILL something is still there (a member
                // we may not signal, or one that forked in the meantime):
                // send KILL again, each grace, until the group is gone.
                verbose!("process group {} survived KILL; sending it again", self.pgid);
                self.w.scope.signal(libc::SIGKILL, false, true);
                self.phase = Phase::Stopping { step, deadline: now.checked_add(Duration::from_secs(1)) };
            }
        }
    }

    /// Start the stop sequence; the first reason is the one reported.
    fn start_stop(&mut self, reason: StopReason) {
        if let Phase::Stopping { .. } = self.phase {
            return;
        }
        self.stop_reason.get_or_insert(reason);
        verbose!("stop sequence {} for process group {}", self.w.sequence.describe(), self.pgid);
        (self.w.on_stop)();
        self.enter_step(0);
    }

    fn enter_step(&mut self, step: usize) {
        let Some(&current) = self.w.sequence.steps().get(step) else { return };
        let at = self.w.started.elapsed();
        self.sent.push(SentSignal { signal: current.signal, at });
        verbose!("sending {} to process group {}", current.signal, self.pgid);
        // A stopped member cannot act on the signal until it is continued.
        let cont = current.signal != Signal::KILL && current.signal != Signal::CONT;
        let last = step + 1 == self.w.sequence.steps().len();
        self.w.scope.signal(current.signal.0, cont, last);
        let grace = if current.signal == Signal::KILL { Duration::from_secs(1) } else { current.grace };
        self.phase = Phase::Stopping { step, deadline: Instant::now().checked_add(grace) };
        self.poll_backoff = Duration::from_millis(1);
    }

    fn send(&self, signal: Signal) {
        if let Err(err) = process::signal_group(self.pgid, signal.0) {
            verbose!("cannot send {signal} to process group {}: {err}", self.pgid);
        }
    }

    /// The next moment the loop must wake without an event, if any.
    fn next_wake(&mut self) -> Option<Instant> {
        let deadline = match self.phase {
            Phase::Running | Phase::Draining => self.timeout_at,
            Phase::Stopping { deadline, .. } => deadline,
        };
        let deadline = match (deadline, self.parent_check_at) {
            (Some(d), Some(p)) => Some(d.min(p)),
            (d, p) => d.or(p),
        };
        // Once the command has exited, members that are not pgrun's
        // children (zombies of parents outside the run, processes that
        // moved away from pgrun) end without a SIGCHLD to pgrun: check the
        // run on a backoff of up to 100 ms. Never while the command simply
        // runs.
        if let Phase::Running = self.phase {
            return deadline;
        }
        let check = Instant::now() + self.poll_backoff;
        self.poll_backoff = (self.poll_backoff * 2).min(MAX_POLL);
        Some(deadline.map_or(check, |d| d.min(check)))
    }
}

//! The event loop that watches a running group and stops it.
//!
//! It owns the run's state machine:
//!
//! ```text
//! Running ──command exits──▶ Draining (--wait-group) ──group gone──▶ done
//!    │                          │
//!    │ timeout, SIGTERM,        │ timeout, SIGTERM
//!    │ stragglers, marker       ▼
//!    └────────────────────▶ Stopping (StopPlan) ──group gone──▶ done
//! ```
//!
//! Every wake-up comes from a signal read from the [`SignalSource`] (SIGCHLD,
//! SIGTERM, forwarded signals), from the output relay's fds, or from a
//! deadline (the timeout, the idle timeout, a step's grace). The idle timeout
//! is one deadline, moved each time the relay reads output. While the command
//! simply runs, nothing else wakes pgrun. The loop ends only when the leader
//! has been reaped *and* the run is gone as the `--contain` mode defines it
//! ([`crate::contain::Scope::is_gone`]): `kill(-pgid, 0)` reports ESRCH (a
//! zombie leader would still hold the group, so reaping comes first), and in
//! tree mode no descendant is left, in cgroup mode the leaf is empty. Once
//! the command has exited (draining, stopping), the loop also checks on a
//! backoff of up to 100 ms, because members that are not pgrun's children
//! end without a SIGCHLD to pgrun.
//!
//! Two ways out never wait forever: a leader whose status is lost (reaped by
//! someone else) ends the wait for it, and a group that outlives the final
//! KILL only because of zombies pgrun cannot reap (their parent is outside
//! the run, or there is no subreaper) is given one more grace, then reported
//! as `unreaped`; while draining, a group left with nothing but such zombies
//! is over at once (where /proc can tell).
//!
//! Nothing on the way of a stop waits on a scan of all of `/proc` (its cost
//! is the whole machine's: seconds under load) while the loop neither reaps
//! nor watches: members are counted, and a live one found, among pgrun's
//! descendants ([`crate::contain::OwnGroup::members`], [`crate::contain::OwnGroup::census`]).
//! After anything that takes a moment (a count), the loop reaps and looks
//! at the run again before it acts on a deadline that passed meanwhile.

mod stop_steps;

use super::lifecycle::Lifecycle;
use crate::backoff::Backoff;
use crate::output::relay::Relay;
use crate::parent_death::ParentWatch;
use crate::signal_policy::{self, Handling};
use crate::signame::Signal;
use crate::stdin_pipe::StdinPipe;
use crate::stop::plan::{SentSignal, StopPlan};
use crate::stop::sequence::StopSequence;
use crate::sys::process::{self, ChildStatus, ChildUsage, Reaped};
use crate::sys::wakeup::SignalSource;
use crate::sys::{self, Pid, PollFd};
use crate::terminal::RunState;
use crate::{say, verbose};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// Why a stop sequence was started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    Timeout,
    /// `--idle-timeout`: no output for that long.
    IdleTimeout,
    Cancel,
    /// The command exited and left members behind.
    Stragglers,
}

/// What happened to the group, once it is gone.
#[derive(Debug)]
pub struct GroupEnd {
    /// How the command (the group leader) ended; `None` if its status was
    /// lost (it was reaped by someone else, which no run should see).
    pub status: Option<ChildStatus>,
    /// The first reason a stop sequence was started, if any.
    pub stop_reason: Option<StopReason>,
    pub signals: Vec<SentSignal>,
    /// Members still alive when the command exited (off Linux, where they
    /// cannot be counted, 1 stands for "some").
    pub stragglers: usize,
    /// Zombies left in the group that pgrun could not reap and stopped
    /// waiting for (0 when the group is really gone).
    pub unreaped: usize,
    /// Processes outside the group the stop reached (tree, cgroup; the
    /// leader, in every mode, if it left its group).
    pub escaped: usize,
    /// Set when pgrun gave up on a run that refused every KILL.
    pub unstopped: Option<Unstopped>,
    /// What the processes of the run that pgrun reaped used (with what
    /// they reaped themselves); never the guard's.
    pub usage: ChildUsage,
}

/// A run pgrun gave up stopping: [`crate::stop::plan::REFUSED_KILLS`] KILLs
/// in a row could not be sent (a member pgrun may not signal).
#[derive(Debug)]
pub struct Unstopped {
    /// Processes left in the group (off Linux, 1 stands for "some").
    pub left: usize,
    /// Why the last KILL could not be sent.
    pub error: std::io::Error,
}

#[derive(Debug)]
enum Phase {
    Running,
    Draining,
    Stopping(StopPlan),
}

/// The running run, handed to the supervisor: what it watches, how it
/// stops it, and what it must update when it does.
pub struct Supervised<'a> {
    /// The run (as `--contain` defines it; it knows the group id) and the
    /// parties told of its events: the stop starting (the cancel marker,
    /// the guard), the leader reaped, the guard's own death, the run gone.
    pub life: Lifecycle<'a>,
    pub sequence: &'a StopSequence,
    pub timeout: Option<Duration>,
    /// `--idle-timeout`: stop when the relay has read nothing for this long
    /// (needs `relay`).
    pub idle_timeout: Option<Duration>,
    pub wait_group: bool,
    pub signals: &'a SignalSource,
    /// When pgrun started: report times count from here.
    pub started: Instant,
    /// Whether to count the members left when the command exits (for the
    /// report and --verbose). It scans /proc, which is worth skipping when
    /// hundreds of runs end at once and nobody reads the number.
    pub count_stragglers: bool,
    /// `--max-output`: the relay of the command's output, whose fds this
    /// loop polls along with the signals.
    pub relay: Option<&'a mut Relay>,
    /// `--stdin-pipe`: its requests pipe is polled along with the rest.
    pub stdin_pipe: Option<&'a mut StdinPipe>,
    /// `--die-with-parent`.
    pub parent: Option<ParentWatch>,
}

/// Longest pause between group checks when no event can announce the end.
const MAX_POLL: Duration = Duration::from_millis(100);

/// What the leader is known to be.
#[derive(Clone, Copy, Debug)]
enum Leader {
    Running,
    GroupEnd(ChildStatus),
    /// Gone without pgrun learning its status.
    Lost,
}

struct Supervisor<'a> {
    w: Supervised<'a>,
    phase: Phase,
    leader: Leader,
    timeout_at: Option<Instant>,
    /// The idle deadline: the last read of the command's output (or the
    /// start) plus `--idle-timeout`; moved on each read.
    idle_at: Option<Instant>,
    stop_reason: Option<StopReason>,
    sent: Vec<SentSignal>,
    stragglers: usize,
    /// Set when pgrun stops waiting for zombies it cannot reap: their count.
    unreaped: Option<usize>,
    /// Set when pgrun gives up on a run that refuses every KILL.
    unstopped: Option<Unstopped>,
    /// Why the last signal of the stop sequence could not be sent.
    send_error: Option<std::io::Error>,
    /// Test-only: panic on SIGUSR1 (see `test_hook`).
    panic_on_usr1: bool,
    /// Test-only: the first wait for events fails (see `test_hook`).
    fail_wait: bool,
    /// What the run's reaped processes used, so far.
    usage: ChildUsage,
    pgid: Pid,
    /// A SIGCHLD arrived (or the loop just started): reap on the next turn.
    reap_due: bool,
    /// Pauses of the fallback check of the run, restarted at each step.
    poll_backoff: Backoff,
    /// When to look at the parent next, where no signal says it died.
    parent_check_at: Option<Instant>,
    /// When to say that stragglers outlive the first signal (see
    /// [`crate::stop::straggler_note`]).
    straggler_note_at: Option<Instant>,
}

/// Supervise the group until it is gone. `stop_now` starts the stop
/// sequence at once (a cancel marker found right after publishing).
pub fn supervise(w: Supervised<'_>, stop_now: Option<StopReason>) -> std::io::Result<GroupEnd> {
    let timeout_at = w.timeout.and_then(|t| Instant::now().checked_add(t));
    let idle_at = w.idle_timeout.and_then(|t| Instant::now().checked_add(t));
    let pgid = w.life.scope.pgid();
    let parent_check_at = w.parent.and_then(|p| p.check_every()).and_then(|every| Instant::now().checked_add(every));
    crate::test_hook::pause_full_scans();
    let mut s = Supervisor {
        w,
        phase: Phase::Running,
        leader: Leader::Running,
        timeout_at,
        idle_at,
        stop_reason: None,
        sent: Vec::new(),
        stragglers: 0,
        unreaped: None,
        unstopped: None,
        send_error: None,
        panic_on_usr1: crate::test_hook::active(crate::test_hook::PANIC_ON_USR1),
        fail_wait: crate::test_hook::active(crate::test_hook::SUPERVISE_FAILS),
        usage: ChildUsage::default(),
        pgid,
        poll_backoff: Backoff::up_to(MAX_POLL),
        reap_due: true,
        parent_check_at,
        straggler_note_at: None,
    };
    if let Some(reason) = stop_now {
        s.start_stop(reason);
    }
    s.run()
}

impl Supervisor<'_> {
    fn run(mut self) -> std::io::Result<GroupEnd> {
        loop {
            // While the command runs, only a SIGCHLD says a child changed
            // state: no waitpid on every turn (output relaying turns often).
            let leader_exited_now = if self.reap_due || !matches!(self.phase, Phase::Running) {
                self.reap_due = false;
                self.reap_children()?
            } else {
                false
            };
            if self.unstopped.is_some() {
                return Ok(self.end());
            }
            if !matches!(self.leader, Leader::Running) {
                let gone = self.w.life.scope.is_gone();
                if gone || self.unreaped.is_some() {
                    if gone {
                        verbose!("process group {} is gone", self.pgid);
                        self.w.life.gone();
                    }
                    if leader_exited_now && gone {
                        self.stragglers = 0;
                    }
                    return Ok(self.end());
                }
                if leader_exited_now {
                    self.on_stragglers();
                    // Counting took a moment: reap and look at the run
                    // again before acting on a deadline that passed
                    // meanwhile (a KILL to what TERM ended).
                    continue;
                }
            }
            self.on_deadlines();
            if self.unreaped.is_some() || self.unstopped.is_some() {
                continue;
            }
            // After the deadlines: a timeout due while draining is not
            // held up by the census.
            if let Phase::Draining = self.phase
                && let Some(zombies) = self.only_zombies_left()
            {
                // Nothing of the run is alive any more: the rest are
                // zombies of parents outside pgrun's reach.
                self.give_up_on(zombies);
                continue;
            }
            if let Some(terminal) = self.w.life.terminal {
                terminal.poll_waiting(self.w.life.scope.group());
            }
            let wait = self.next_wake().map(|at| at.saturating_duration_since(Instant::now()));
            self.wait_for_events(wait)?;
        }
    }

    fn end(self) -> GroupEnd {
        GroupEnd {
            status: match self.leader {
                Leader::GroupEnd(status) => Some(status),
                _ => None,
            },
            stop_reason: self.stop_reason,
            signals: self.sent,
            stragglers: self.stragglers,
            unreaped: self.unreaped.unwrap_or(0),
            escaped: self.w.life.scope.escaped(),
            unstopped: self.unstopped,
            usage: self.usage,
        }
    }

    /// Sleep until a signal arrives, an fd of the output relay is ready, or
    /// `wait` has passed; then act on what came.
    fn wait_for_events(&mut self, wait: Option<Duration>) -> std::io::Result<()> {
        if std::mem::take(&mut self.fail_wait) {
            return Err(std::io::Error::from_raw_os_error(libc::EIO));
        }
        let mut set = [PollFd::read(self.w.signals.as_fd()); sys::POLL_MAX];
        let mut n = 1;
        // The cgroup leaf's cgroup.events: a change may be the run's end.
        // Only once the command has exited: until then SIGCHLD says it.
        let events = if matches!(self.leader, Leader::Running) { None } else { self.w.life.scope.change_fd() };
        if let Some(fd) = events {
            set[1] = PollFd::priority(fd);
            n += 1;
        }
        let first_relay = n;
        if let Some(relay) = &self.w.relay {
            n += relay.interest(&mut set[first_relay..]);
        }
        let relay_end = n;
        if let Some(pipe) = &self.w.stdin_pipe {
            n += pipe.interest(&mut set[relay_end..]);
        }
        sys::poll(&mut set[..n], wait)?;
        if let Some(pipe) = &mut self.w.stdin_pipe {
            pipe.on_ready(&set[relay_end..n])?;
        }
        if let Some(relay) = &mut self.w.relay
            && relay.on_ready(&set[first_relay..relay_end])
            && let Some(idle) = self.w.idle_timeout
        {
            // Output came: the one idle deadline moves (no tick does).
            self.idle_at = Instant::now().checked_add(idle);
        }
        if events.is_some() && set[1].ready {
            // Reading cgroup.events re-arms its notification (the run's end
            // itself is checked by the loop).
            self.w.life.scope.rearm_events();
        }
        let caller_left = self.w.relay.as_mut().is_some_and(|relay| relay.caller_left());
        if caller_left {
            verbose!("the caller's pgrun died before the hand-off: stopping the run");
            self.start_stop(StopReason::Cancel);
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
    ///
    /// The leader is pgrun's child until pgrun reaps it, so "no children"
    /// (ECHILD) while it runs is either proof that someone else reaped it
    /// (the status is lost: an ignored SIGCHLD that pgrun could not undo)
    /// or a failing `waitpid`. [`process::is_child`] tells the two apart;
    /// a failing `waitpid` is retried a few times, then it is an error
    /// (reported, 125), never a reason to stop the run as if it had ended.
    fn reap_children(&mut self) -> std::io::Result<bool> {
        /// How many ECHILDs in a row `waitpid` may give for a leader that
        /// is still pgrun's child before pgrun gives up supervising.
        const SPURIOUS_ECHILD_TRIES: u32 = 3;
        let mut leader_exited = false;
        let mut spurious = 0;
        loop {
            match process::reap_one()? {
                // The guard is pgrun's, not the run's: its usage is not counted.
                Reaped::Child(pid, _, _) if self.w.life.guard_reaped(pid) => {
                    verbose!("the guard {pid} died; the run goes on without it");
                }
                Reaped::Child(pid, status, usage) if pid == self.pgid => {
                    self.usage.add(usage);
                    self.w.life.leader_reaped(pid);
                    match status {
                        ChildStatus::Exited(code) => verbose!("command exited with status {code}"),
                        ChildStatus::Signaled(sig) => verbose!("command was ended by signal {}", Signal(sig)),
                    }
                    self.leader = Leader::GroupEnd(status);
                    leader_exited = true;
                }
                // Every other child of pgrun is a process of the run (an
                // orphan of the run handed to pgrun, the subreaper).
                Reaped::Child(_, _, usage) => self.usage.add(usage),
                Reaped::Stopped(pid, signal) => self.on_stopped(pid, signal),
                Reaped::NoneReady | Reaped::NoChildren if !matches!(self.leader, Leader::Running) => {
                    return Ok(leader_exited);
                }
                // The guard is a child too, so "none ready" cannot say the
                // leader is gone: ask about the leader itself.
                Reaped::NoneReady if process::is_child(self.pgid) => return Ok(leader_exited),
                Reaped::NoChildren if process::is_child(self.pgid) => {
                    spurious += 1;
                    let what = format!(
                        "waitpid says pgrun has no children, but process {} (the command) is still its child",
                        self.pgid
                    );
                    if spurious >= SPURIOUS_ECHILD_TRIES {
                        return Err(std::io::Error::other(what));
                    }
                    verbose!("{what}; trying again");
                }
                Reaped::NoneReady | Reaped::NoChildren => {
                    // The leader is not pgrun's child any more: someone else
                    // reaped it. Its status is lost; waiting for it would be
                    // waiting forever.
                    verbose!("the command's exit status was lost: it was reaped by someone else");
                    self.leader = Leader::Lost;
                    self.w.life.leader_lost();
                    return Ok(true);
                }
            }
        }
    }

    /// The command exited and left members behind: stop them, or with
    /// --wait-group wait for them. They are counted first, for the report
    /// and `--verbose`, as they were when the command exited (after the
    /// first signal, some would be gone): among pgrun's descendants, a walk
    /// that costs what the run has, never a scan of all of `/proc`, which
    /// costs what the machine runs (see [`crate::contain::OwnGroup::members`]).
    fn on_stragglers(&mut self) {
        if self.w.count_stragglers {
            crate::test_hook::pause("straggler-count");
            self.stragglers = self.w.life.scope.group().members();
        }
        if let Phase::Running = self.phase {
            let left = match self.stragglers {
                0 if self.w.count_stragglers => {
                    format!("nothing left in process group {}, but the run goes on", self.pgid)
                }
                n => format!("{n} process(es) left in process group {}", self.pgid),
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
    /// timeout (and the idle timeout) keeps counting meanwhile: its
    /// deadline is on the monotonic clock.
    fn on_stopped(&mut self, pid: Pid, signal: i32) {
        if let Some(terminal) = self.w.life.terminal {
            let stopping = matches!(self.phase, Phase::Stopping(_));
            let timed = self.timeout_at.is_some() || self.idle_at.is_some();
            terminal.on_stopped(self.w.life.scope.group(), pid, signal, RunState { stopping, timed });
        }
    }

    fn on_signal(&mut self, signal: i32) {
        if signal == libc::SIGUSR1 && self.panic_on_usr1 {
            panic!("test hook: panic in the supervise loop");
        }
        match signal_policy::handling(signal) {
            Some(Handling::Cancel) => {
                verbose!("received {}: cancelling", Signal(signal));
                self.start_stop(StopReason::Cancel);
            }
            Some(Handling::Forward { then_cont }) => {
                verbose!("forwarding {} to process group {}", Signal(signal), self.pgid);
                self.send(Signal(signal));
                if then_cont {
                    self.send(Signal::CONT);
                }
            }
            Some(Handling::ParentDeath) => self.check_parent(),
            Some(Handling::Reap) => self.reap_due = true,
            Some(Handling::Absorb) | None => {}
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

    /// Act on the timeout and on an expired step grace.
    fn on_deadlines(&mut self) {
        let now = Instant::now();
        if let Some(every) = self.w.parent.and_then(|p| p.check_every())
            && self.parent_check_at.is_some_and(|at| now >= at)
        {
            self.parent_check_at = now.checked_add(every);
            if !matches!(self.phase, Phase::Stopping(_)) && self.w.parent.is_some_and(|p| p.parent_gone()) {
                self.check_parent();
            }
        }
        if let Phase::Running | Phase::Draining = self.phase
            && self.timeout_at.is_some_and(|at| now >= at)
        {
            verbose!("timeout: stopping process group {}", self.pgid);
            self.start_stop(StopReason::Timeout);
        }
        if let Phase::Running | Phase::Draining = self.phase
            && self.idle_at.is_some_and(|at| now >= at)
            && !self.w.relay.as_mut().is_some_and(|relay| relay.end_rests_that_hold_bytes())
        {
            // (Output waiting behind a rest of the relay was written: it
            // is taken on this turn and moves the deadline.)
            let idle = self.w.idle_timeout.map(crate::duration::describe).unwrap_or_default();
            verbose!("no output for {idle}: stopping process group {}", self.pgid);
            self.start_stop(StopReason::IdleTimeout);
        }
        let Phase::Stopping(plan) = &self.phase else { return };
        if self.straggler_note_at.is_some_and(|at| now >= at) {
            self.straggler_note_at = None;
            if self.sent.len() == 1 {
                let left = self.w.life.scope.group().left();
                if let Some(line) = crate::stop::straggler_note::line(left, self.w.sequence, plan.deadline(), now) {
                    say::line(format_args!("{line}"));
                }
                // Counting took a moment: a step due meanwhile waits for
                // the next turn's look at the run.
                return;
            }
        }
        if plan.deadline().is_none_or(|at| now < at) {
            return;
        }
        if plan.final_grace_over(now)
            && plan.kill_repeats() > 0
            && let Some(zombies) = self.unreapable_zombies()
        {
            // One more grace has passed and only zombies are left that
            // pgrun cannot reap: report them instead of waiting forever.
            self.give_up_on(zombies);
            return;
        }
        self.advance_stop(now);
    }

    /// The next moment the loop must wake without an event, if any.
    fn next_wake(&mut self) -> Option<Instant> {
        let deadline = match &self.phase {
            Phase::Running | Phase::Draining => earliest(self.timeout_at, self.idle_at),
            Phase::Stopping(plan) => plan.deadline(),
        };
        let deadline = earliest(deadline, self.parent_check_at);
        let deadline = earliest(deadline, self.straggler_note_at);
        // A source of the relay that rests after bytes it took.
        let deadline = earliest(deadline, self.w.relay.as_ref().and_then(|relay| relay.next_wake()));
        // Once the command has exited, members that are not pgrun's
        // children (zombies of parents outside the run, processes that
        // moved away from pgrun) end without a SIGCHLD to pgrun: check the
        // run on a backoff of up to 100 ms. Never while the command simply
        // runs.
        // A member waiting for the terminal in the background: look for `fg`.
        let deadline = match self.w.life.terminal.filter(|t| t.is_waiting()) {
            Some(_) => {
                let look = Instant::now() + crate::terminal::WAITING_POLL;
                Some(deadline.map_or(look, |d| d.min(look)))
            }
            None => deadline,
        };
        if let Phase::Running = self.phase {
            return deadline;
        }
        let check = Instant::now() + self.poll_backoff.next_pause();
        Some(deadline.map_or(check, |d| d.min(check)))
    }
}

/// The earlier of two optional deadlines.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

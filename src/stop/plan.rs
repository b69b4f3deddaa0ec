//! The stop policy, as a value: which signal to send next and when, for
//! every driver that stops a run (the supervisor's event loop, and the
//! blocking loop in [`crate::stop::unsupervised`] that the guard and `cancel`
//! use).
//!
//! A [`StopPlan`] walks a [`StopSequence`]: each step sends its signal
//! (with a SIGCONT after it unless it is KILL or CONT, see [`needs_cont`])
//! and then waits its grace; the final KILL waits [`KILL_GRACE`]. Past an
//! optional bound (`cancel --timeout`) the steps left are skipped for the
//! final KILL. After the final KILL the plan either gives up at once (a
//! driver that is not the run's parent and has nothing more to try) or
//! sends KILL again every [`KILL_GRACE`] for as long as the run is there,
//! giving up only once [`REFUSED_KILLS`] KILLs in a row were refused (kill
//! failed, say with EPERM): a run pgrun may not signal would otherwise be
//! waited for forever.
//!
//! A `leader:` step ([`Send::leader`]) is for the command's own process
//! alone. The driver sends it only where it can reach that process and no
//! other (its parent before reaping it; a pidfd held on it); where the
//! leader has exited or cannot be reached so, the driver calls
//! [`StopPlan::skip`] and the plan moves on to the next step at once,
//! without waiting that step's grace.
//!
//! The plan reads no clock and touches no process: the driver passes the
//! time in, does what [`StopPlan::next`] says, tells it with
//! [`StopPlan::sent`] whether a signal was delivered, and decides itself
//! when the run is gone.

use crate::signame::Signal;
use crate::stop::sequence::{Step, StopSequence};
use std::time::{Duration, Instant};

/// How long a KILL waits for the run to be gone before KILL is sent again
/// (or, where it is not repeated, before the driver gives up).
pub const KILL_GRACE: Duration = Duration::from_secs(1);

/// How many KILLs in a row may be refused before the plan gives up.
pub const REFUSED_KILLS: u32 = 3;

/// A stop-sequence signal pgrun sent, and when (counted from pgrun's
/// start): what the report lists.
#[derive(Clone, Copy, Debug)]
pub struct SentSignal {
    pub signal: Signal,
    pub at: Duration,
    /// Sent to the command's own process only (a `leader:` step): the
    /// report names it `leader:SIG`.
    pub leader: bool,
}

impl SentSignal {
    /// As the report names it: `TERM`, or `leader:TERM`.
    pub fn name(&self) -> String {
        crate::stop::sequence::StepSignal { signal: self.signal, leader: self.leader }.to_string()
    }
}

/// Whether a SIGCONT must follow `signal`: a stopped member cannot act on
/// a signal until it is continued; KILL needs no help, CONT is one.
pub fn needs_cont(signal: Signal) -> bool {
    signal != Signal::KILL && signal != Signal::CONT
}

/// A signal to send to the run now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Send {
    pub signal: Signal,
    /// Send SIGCONT after it.
    pub cont: bool,
    /// The final KILL (first or repeated).
    pub last: bool,
    /// A KILL sent again after the final step, not a step of its own.
    pub repeat: bool,
    /// To the command's own process only (a `leader:` step); if the driver
    /// cannot send it so, it calls [`StopPlan::skip`].
    pub leader: bool,
}

/// Why the plan stopped trying.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveUp {
    /// The final KILL's grace passed and KILL is not repeated.
    Survived,
    /// [`REFUSED_KILLS`] KILLs in a row could not be sent.
    Refused,
}

/// What the driver does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Send(Send),
    /// Wait for the run to be gone until then (`None`: no deadline), then
    /// ask again.
    WaitUntil(Option<Instant>),
    GiveUp(GiveUp),
}

/// What follows the final KILL's grace if the run is still there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterKill {
    /// Send KILL again every [`KILL_GRACE`] (until [`GiveUp::Refused`]).
    Repeat,
    /// Give up ([`GiveUp::Survived`]).
    GiveUp,
}

/// Where a stop of one run stands.
#[derive(Clone, Debug)]
pub struct StopPlan {
    steps: Vec<Step>,
    /// Past this, the steps left are skipped for the final KILL.
    until: Option<Instant>,
    after_kill: AfterKill,
    /// The step last entered and when its wait ends (`None`: no end);
    /// `None` before the first.
    current: Option<(usize, Option<Instant>)>,
    /// KILLs sent again after the final step.
    kill_repeats: u32,
    /// KILLs refused in a row.
    refused: u32,
}

impl StopPlan {
    /// A plan that has sent nothing yet; its first [`StopPlan::next`] sends
    /// the first step.
    pub fn new(sequence: &StopSequence, after_kill: AfterKill, until: Option<Instant>) -> StopPlan {
        StopPlan { steps: sequence.steps().to_vec(), until, after_kill, current: None, kill_repeats: 0, refused: 0 }
    }

    /// What to do at `now`.
    pub fn next(&mut self, now: Instant) -> Action {
        let Some((step, deadline)) = self.current else {
            return self.enter(0, now);
        };
        match deadline {
            Some(at) if now >= at => {}
            _ => return Action::WaitUntil(deadline),
        }
        let last = self.steps.len() - 1;
        if step < last {
            let skip = self.until.is_some_and(|u| now >= u);
            return self.enter(if skip { last } else { step + 1 }, now);
        }
        match self.after_kill {
            AfterKill::GiveUp => Action::GiveUp(GiveUp::Survived),
            AfterKill::Repeat if self.refused >= REFUSED_KILLS => Action::GiveUp(GiveUp::Refused),
            AfterKill::Repeat => {
                self.kill_repeats += 1;
                self.current = Some((step, now.checked_add(KILL_GRACE)));
                Action::Send(Send { signal: Signal::KILL, cont: false, last: true, repeat: true, leader: false })
            }
        }
    }

    /// Whether the signal [`StopPlan::next`] last said to send was
    /// delivered; a KILL that was not counts toward [`GiveUp::Refused`].
    pub fn sent(&mut self, delivered: bool) {
        if !self.at_final_kill() {
            return;
        }
        self.refused = if delivered { 0 } else { self.refused + 1 };
    }

    /// The `leader:` step [`StopPlan::next`] last said to send was not sent
    /// (the leader has exited, or cannot be reached alone): end its wait,
    /// so that the next [`StopPlan::next`] enters the next step.
    pub fn skip(&mut self, now: Instant) {
        if let Some((step, _)) = self.current
            && self.steps[step].leader
        {
            self.current = Some((step, Some(now)));
        }
    }

    /// When the current wait ends, if anything was sent yet.
    pub fn deadline(&self) -> Option<Instant> {
        self.current.and_then(|(_, deadline)| deadline)
    }

    /// Whether the final KILL was sent and its latest grace has passed.
    pub fn final_grace_over(&self, now: Instant) -> bool {
        self.at_final_kill() && self.deadline().is_some_and(|at| now >= at)
    }

    /// How often KILL was sent again after the final step.
    pub fn kill_repeats(&self) -> u32 {
        self.kill_repeats
    }

    fn at_final_kill(&self) -> bool {
        self.current.is_some_and(|(step, _)| step + 1 == self.steps.len())
    }

    fn enter(&mut self, step: usize, now: Instant) -> Action {
        let Step { signal, grace, leader } = self.steps[step];
        let last = step + 1 == self.steps.len();
        // The final KILL waits KILL_GRACE; a leader:KILL its own grace.
        let grace = if signal == Signal::KILL && !leader { KILL_GRACE } else { grace };
        let end = now.checked_add(grace);
        let deadline = match (end, self.until) {
            (Some(e), Some(u)) if !last => Some(e.min(u)),
            (None, u) if !last => u,
            (e, _) => e,
        };
        self.current = Some((step, deadline));
        Action::Send(Send { signal, cont: needs_cont(signal), last, repeat: false, leader })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const INT: Signal = Signal(libc::SIGINT);

    fn seq(text: &str) -> StopSequence {
        StopSequence::parse_escalate(text).unwrap()
    }

    fn send(signal: Signal, last: bool) -> Action {
        Action::Send(Send { signal, cont: needs_cont(signal), last, repeat: false, leader: false })
    }

    fn to_leader(signal: Signal) -> Action {
        Action::Send(Send { signal, cont: needs_cont(signal), last: false, repeat: false, leader: true })
    }

    const REPEAT: Action =
        Action::Send(Send { signal: Signal::KILL, cont: false, last: true, repeat: true, leader: false });

    #[test]
    fn a_leader_step_waits_its_grace_unless_skipped() {
        let t0 = Instant::now();
        let mut plan = StopPlan::new(&seq("leader:TERM/2s/TERM/5s/KILL"), AfterKill::GiveUp, None);
        assert_eq!(plan.next(t0), to_leader(Signal::TERM));
        assert_eq!(plan.next(t0), Action::WaitUntil(Some(t0 + 2000 * MS)));
        assert_eq!(plan.next(t0 + 2000 * MS), send(Signal::TERM, false));
        // skip() only ends a leader step's wait.
        plan.skip(t0 + 2000 * MS);
        assert_eq!(plan.next(t0 + 2001 * MS), Action::WaitUntil(Some(t0 + 7000 * MS)));

        let mut skipped = StopPlan::new(&seq("leader:TERM/2s/TERM/5s/KILL"), AfterKill::GiveUp, None);
        assert_eq!(skipped.next(t0), to_leader(Signal::TERM));
        skipped.skip(t0);
        assert_eq!(skipped.next(t0), send(Signal::TERM, false));
    }

    #[test]
    fn a_leader_kill_keeps_its_grace_and_a_final_kill_follows() {
        let t0 = Instant::now();
        let mut plan = StopPlan::new(&seq("leader:KILL/3s"), AfterKill::GiveUp, None);
        assert_eq!(plan.next(t0), to_leader(Signal::KILL));
        assert_eq!(plan.next(t0), Action::WaitUntil(Some(t0 + 3000 * MS)));
        assert_eq!(plan.next(t0 + 3000 * MS), send(Signal::KILL, true));
    }

    #[test]
    fn steps_in_order_each_after_its_grace() {
        let t0 = Instant::now();
        let mut plan = StopPlan::new(&seq("INT/2s/TERM/5s/KILL"), AfterKill::GiveUp, None);
        assert_eq!(plan.next(t0), send(INT, false));
        assert_eq!(plan.next(t0), Action::WaitUntil(Some(t0 + 2000 * MS)));
        assert_eq!(plan.next(t0 + 1999 * MS), Action::WaitUntil(Some(t0 + 2000 * MS)));
        let t1 = t0 + 2003 * MS;
        assert_eq!(plan.next(t1), send(Signal::TERM, false));
        assert_eq!(plan.next(t1), Action::WaitUntil(Some(t1 + 5000 * MS)));
        let t2 = t1 + 5000 * MS;
        assert_eq!(plan.next(t2), send(Signal::KILL, true));
        assert_eq!(plan.next(t2), Action::WaitUntil(Some(t2 + KILL_GRACE)));
        assert_eq!(plan.next(t2 + KILL_GRACE), Action::GiveUp(GiveUp::Survived));
    }

    #[test]
    fn cont_follows_every_signal_but_kill_and_cont() {
        let t0 = Instant::now();
        let mut plan = StopPlan::new(&seq("STOP/0s/CONT/0s/KILL"), AfterKill::GiveUp, None);
        let Action::Send(stop) = plan.next(t0) else { panic!() };
        let Action::Send(cont) = plan.next(t0) else { panic!() };
        let Action::Send(kill) = plan.next(t0) else { panic!() };
        assert_eq!(
            [(stop.signal, stop.cont), (cont.signal, cont.cont), (kill.signal, kill.cont)],
            [(Signal(libc::SIGSTOP), true), (Signal::CONT, false), (Signal::KILL, false)]
        );
        assert!(needs_cont(Signal::TERM) && !needs_cont(Signal::KILL) && !needs_cont(Signal::CONT));
    }

    #[test]
    fn a_kill_first_sequence_is_one_step_with_the_kill_grace() {
        let t0 = Instant::now();
        let mut plan =
            StopPlan::new(&StopSequence::simple(Signal::KILL, Duration::from_secs(60)), AfterKill::GiveUp, None);
        assert_eq!(plan.next(t0), send(Signal::KILL, true));
        assert_eq!(plan.deadline(), Some(t0 + KILL_GRACE));
    }

    #[test]
    fn final_kill_is_sent_again_each_grace_while_delivered() {
        let t0 = Instant::now();
        let mut plan = StopPlan::new(&StopSequence::simple(Signal::TERM, 10 * MS), AfterKill::Repeat, None);
        assert_eq!(plan.next(t0), send(Signal::TERM, false));
        plan.sent(true);
        let t1 = t0 + 10 * MS;
        assert_eq!(plan.next(t1), send(Signal::KILL, true));
        plan.sent(true);
        assert!(!plan.final_grace_over(t1 + KILL_GRACE - MS));
        let mut at = t1 + KILL_GRACE;
        for n in 1..=10 {
            assert!(plan.final_grace_over(at));
            assert_eq!(plan.next(at), REPEAT);
            plan.sent(true);
            assert_eq!(plan.kill_repeats(), n);
            assert_eq!(plan.next(at + MS), Action::WaitUntil(Some(at + KILL_GRACE)));
            at += KILL_GRACE;
        }
    }

    #[test]
    fn refused_kills_in_a_row_end_in_giving_up() {
        let t0 = Instant::now();
        let mut plan = StopPlan::new(&StopSequence::simple(Signal::TERM, 10 * MS), AfterKill::Repeat, None);
        plan.next(t0);
        // A refused TERM does not count: only KILLs do.
        plan.sent(false);
        let mut at = t0 + 10 * MS;
        assert_eq!(plan.next(at), send(Signal::KILL, true));
        plan.sent(false);
        // One delivered KILL starts the count again.
        at += KILL_GRACE;
        assert_eq!(plan.next(at), REPEAT);
        plan.sent(true);
        for _ in 0..REFUSED_KILLS {
            at += KILL_GRACE;
            assert_eq!(plan.next(at), REPEAT);
            plan.sent(false);
        }
        assert_eq!(plan.next(at + KILL_GRACE - MS), Action::WaitUntil(Some(at + KILL_GRACE)));
        assert_eq!(plan.next(at + KILL_GRACE), Action::GiveUp(GiveUp::Refused));
    }

    #[test]
    fn past_the_bound_the_steps_left_are_skipped_for_kill() {
        let t0 = Instant::now();
        let until = t0 + 500 * MS;
        let mut plan = StopPlan::new(&seq("INT/2s/TERM/5s/KILL"), AfterKill::GiveUp, Some(until));
        assert_eq!(plan.next(t0), send(INT, false));
        // The wait is cut at the bound, and then KILL comes next.
        assert_eq!(plan.next(t0), Action::WaitUntil(Some(until)));
        assert_eq!(plan.next(until), send(Signal::KILL, true));
        // The final KILL keeps its whole grace, past the bound.
        assert_eq!(plan.next(until), Action::WaitUntil(Some(until + KILL_GRACE)));
        assert_eq!(plan.next(until + KILL_GRACE), Action::GiveUp(GiveUp::Survived));
    }

    #[test]
    fn before_the_bound_the_steps_go_on_in_order() {
        let t0 = Instant::now();
        let mut plan = StopPlan::new(&seq("INT/1s/TERM/1s/KILL"), AfterKill::GiveUp, Some(t0 + 10_000 * MS));
        plan.next(t0);
        assert_eq!(plan.next(t0 + 1000 * MS), send(Signal::TERM, false));
        assert_eq!(plan.next(t0 + 2000 * MS), send(Signal::KILL, true));
    }

    #[test]
    fn a_grace_past_the_clock_waits_for_the_bound_or_forever() {
        let t0 = Instant::now();
        let huge = Duration::MAX;
        let mut unbounded = StopPlan::new(&StopSequence::simple(Signal::TERM, huge), AfterKill::Repeat, None);
        unbounded.next(t0);
        assert_eq!(unbounded.next(t0 + 3600 * 1000 * MS), Action::WaitUntil(None));
        let until = t0 + 5 * MS;
        let mut bounded = StopPlan::new(&StopSequence::simple(Signal::TERM, huge), AfterKill::GiveUp, Some(until));
        bounded.next(t0);
        assert_eq!(bounded.next(t0), Action::WaitUntil(Some(until)));
        assert_eq!(bounded.next(until), send(Signal::KILL, true));
    }
}

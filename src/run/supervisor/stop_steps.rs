//! The stop's steps, for the supervisor: starting the stop sequence,
//! sending each step its plan says (to the group or to the command
//! alone), and giving up, with what is left reported, on a run that
//! refuses KILL or holds only zombies pgrun cannot reap. The loop in
//! [`super`] decides when; this file says what each step does.

use super::{Leader, MAX_POLL, Phase, StopReason, Supervisor, Unstopped};
use crate::backoff::Backoff;
use crate::contain::Target;
use crate::signame::Signal;
use crate::stop::plan::{Action, AfterKill, SentSignal, StopPlan};
use crate::{say, verbose};
use std::time::Instant;

impl Supervisor<'_> {
    /// While draining: if nothing of the run is alive any more but zombies
    /// in the group that pgrun cannot reap, how many (only where /proc can
    /// tell a zombie from a live member). A member alive among pgrun's
    /// descendants says no without a scan of all of `/proc` (see
    /// [`crate::contain::OwnGroup::census`]).
    pub(super) fn only_zombies_left(&self) -> Option<usize> {
        crate::test_hook::pause("draining-census");
        if !self.w.life.scope.is_gone_except_group() {
            return None;
        }
        // A zombie whose parent is pgrun (one just handed over, say) is
        // reaped on the next turn, not given up on.
        self.w.life.scope.group().census()?.only_foreign_zombies()
    }

    pub(super) fn give_up_on(&mut self, zombies: usize) {
        say::line(format_args!(
            "warning: process group {} still holds {zombies} zombie process(es) that pgrun cannot reap \
             (their parent is outside the run); not waiting for them",
            self.pgid
        ));
        self.unreaped = Some(zombies);
    }

    /// Start the stop sequence; the first reason is the one reported.
    pub(super) fn start_stop(&mut self, reason: StopReason) {
        if let Phase::Stopping(_) = self.phase {
            return;
        }
        self.stop_reason.get_or_insert(reason);
        verbose!("stop sequence {} for process group {}", self.w.sequence.describe(), self.pgid);
        self.w.life.stopping(matches!(self.leader, Leader::Running));
        self.phase = Phase::Stopping(StopPlan::new(self.w.sequence, AfterKill::Repeat, None));
        self.advance_stop(Instant::now());
        if reason == StopReason::Stragglers {
            self.straggler_note_at = Instant::now().checked_add(crate::stop::straggler_note::AFTER);
        }
    }

    /// Do what the stop plan says at `now`: send the next step, or KILL
    /// again (after the final KILL something is still there: a member we
    /// may not signal, one that forked in the meantime, or a zombie whose
    /// parent may yet reap it), or give up on a run that refuses KILL. A
    /// `leader:` step goes to the command's own process only, and only
    /// while pgrun has not reaped it (its parent, pgrun is the one that
    /// frees the pid, so until then the pid is the command's); once the
    /// command has exited (reaped, or a zombie waiting for pgrun) the step
    /// is skipped.
    pub(super) fn advance_stop(&mut self, now: Instant) {
        loop {
            let Phase::Stopping(plan) = &mut self.phase else { return };
            let send = match plan.next(now) {
                Action::Send(send) => send,
                Action::WaitUntil(_) => return,
                Action::GiveUp(_) => return self.give_up_refused(),
            };
            if send.leader {
                crate::test_hook::pause("leader-step");
            }
            // A leader that exited but is not reaped yet (its SIGCHLD not
            // read yet) has exited too: skip, as the contract says.
            if send.leader && !self.w.life.scope.group().leader_reachable() {
                verbose!("the command has exited: skipping the step leader:{}", send.signal);
                plan.skip(now);
                continue;
            }
            if send.repeat {
                verbose!("process group {} survived KILL; sending it again", self.pgid);
            } else {
                let at = now.saturating_duration_since(self.w.started);
                self.sent.push(SentSignal { signal: send.signal, at, leader: send.leader });
                match send.leader {
                    true => verbose!("sending {} to process {} (the command) alone", send.signal, self.pgid),
                    false => verbose!("sending {} to process group {}", send.signal, self.pgid),
                }
                self.poll_backoff = Backoff::up_to(MAX_POLL);
            }
            let result = match send.leader {
                true => self.w.life.scope.group().signal_leader(send.signal, send.cont),
                false => self.w.life.scope.signal(send.signal, send.cont, send.last),
            };
            plan.sent(result.is_ok());
            if let Err(err) = result {
                self.send_error = Some(err);
            }
            return;
        }
    }

    /// Every KILL in a row was refused: pgrun cannot end the run, and must
    /// not wait for it forever. What is left is reported (see
    /// [`Unstopped`]).
    pub(super) fn give_up_refused(&mut self) {
        let left = self.w.life.scope.group().left();
        verbose!("process group {} refuses KILL; giving up with {left} process(es) left", self.pgid);
        let error = self.send_error.take().unwrap_or_else(|| std::io::Error::from_raw_os_error(libc::EPERM));
        self.unstopped = Some(Unstopped { left, error });
    }

    /// After the final KILL and one more grace: if what holds the group
    /// can only be zombies pgrun cannot reap, how many. On Linux that is
    /// read from /proc (a live member, say one in uninterruptible sleep, is
    /// still waited for; one among pgrun's descendants is found without a
    /// scan of all of `/proc`); where pgrun cannot look, whatever survived two
    /// KILLs and a grace is taken for such zombies. Never before the
    /// leader is reaped (or lost): pgrun can always reap its own child.
    pub(super) fn unreapable_zombies(&self) -> Option<usize> {
        if matches!(self.leader, Leader::Running) || !self.w.life.scope.is_gone_except_group() {
            return None;
        }
        let group = self.w.life.scope.group();
        match group.census() {
            Some(census) => census.only_foreign_zombies(),
            None => Some(group.members()),
        }
    }

    pub(super) fn send(&self, signal: Signal) {
        if let Err(err) = self.w.life.scope.signal_group(signal) {
            verbose!("cannot send {signal} to process group {}: {err}", self.pgid);
        }
    }
}

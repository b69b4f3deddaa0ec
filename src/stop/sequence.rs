//! The stop sequence: which signals pgrun sends to the group, and how long it
//! waits after each before moving on.
//!
//! One sequence serves every way a run is stopped (timeout, cancel, SIGTERM
//! to pgrun, stragglers). It is built from `-s/-k` or from `--escalate
//! SIG/DUR/SIG/...`, and always ends with SIGKILL to the whole run.
//!
//! A step written `leader:SIG` sends SIG to the command's own process only
//! (the group leader), not to its group; its grace still waits for the whole
//! run. It never counts as the final KILL: `leader:KILL` is followed by a
//! KILL to the whole run like any other step.

use crate::duration::parse_duration;
use crate::signame::{Signal, parse_signal};
use std::time::Duration;

/// The grace a step gets when none is given.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// How a `leader:` step is written: this prefix, then SIG.
pub const LEADER_PREFIX: &str = "leader:";

/// One step: send `signal` to the group (to the leader alone if `leader`),
/// then wait up to `grace` for the whole run to be gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub signal: Signal,
    pub grace: Duration,
    /// Send to the command's own process only (`leader:SIG`).
    pub leader: bool,
}

impl Step {
    /// The step's signal as written: `TERM`, or `leader:TERM`.
    pub fn name(&self) -> String {
        StepSignal { signal: self.signal, leader: self.leader }.to_string()
    }
}

/// A step's signal and whom it is for: `SIG` (the whole run) or
/// `leader:SIG` (the command's own process), as `-s` and `--escalate` take
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepSignal {
    pub signal: Signal,
    pub leader: bool,
}

impl std::fmt::Display for StepSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let prefix = if self.leader { LEADER_PREFIX } else { "" };
        write!(f, "{prefix}{}", self.signal.name())
    }
}

/// Parse `SIG` or `leader:SIG`.
pub fn parse_step_signal(text: &str) -> Result<StepSignal, String> {
    match text.strip_prefix(LEADER_PREFIX) {
        Some("") => Err(format!("'{text}' names no signal after '{LEADER_PREFIX}'")),
        Some(sig) => Ok(StepSignal { signal: parse_signal(sig)?, leader: true }),
        None => Ok(StepSignal { signal: parse_signal(text)?, leader: false }),
    }
}

/// A non-empty list of steps whose last signal is SIGKILL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopSequence {
    steps: Vec<Step>,
}

impl StopSequence {
    /// `-s SIG -k DUR`: SIG, then SIGKILL after the grace. `-s KILL` is a
    /// single step.
    pub fn simple(first: Signal, kill_after: Duration) -> Self {
        Self::first_then_kill(StepSignal { signal: first, leader: false }, kill_after)
    }

    /// `-s SIG -k DUR` where SIG may be `leader:SIG`, which is the same as
    /// `--escalate leader:SIG/DUR/KILL`.
    pub fn first_then_kill(first: StepSignal, kill_after: Duration) -> Self {
        Self::ending_in_kill(vec![Step { signal: first.signal, grace: kill_after, leader: first.leader }])
    }

    /// Parse `--escalate SIG/DUR/SIG/DUR/...`. A signal may be followed by a
    /// duration (its grace) or by the next signal (default grace); a token
    /// that parses as a duration right after a signal is a duration.
    pub fn parse_escalate(text: &str) -> Result<Self, String> {
        let mut steps: Vec<Step> = Vec::new();
        let mut grace_given = false;
        for token in text.split('/') {
            if let (Some(last), false) = (steps.last_mut(), grace_given)
                && let Ok(grace) = parse_duration(token)
            {
                last.grace = grace;
                grace_given = true;
                continue;
            }
            let StepSignal { signal, leader } = parse_step_signal(token).map_err(|e| {
                // Where a grace may stand, a token that starts like a number
                // was meant as one: say what is wrong with it as a duration.
                let number_like = token.starts_with(|c: char| c.is_ascii_digit() || c == '.');
                let why = match parse_duration(token) {
                    Err(bad) if number_like && !steps.is_empty() && !grace_given => bad,
                    _ => e,
                };
                format!("in --escalate '{text}': {why}")
            })?;
            steps.push(Step { signal, grace: DEFAULT_GRACE, leader });
            grace_given = false;
        }
        if steps.is_empty() {
            return Err(format!("invalid --escalate '{text}'"));
        }
        Ok(Self::ending_in_kill(steps))
    }

    /// Cut the steps at the first KILL to the whole run (nothing after it
    /// can matter) and append one if there is none.
    fn ending_in_kill(mut steps: Vec<Step>) -> Self {
        if let Some(first_kill) = steps.iter().position(|s| s.signal == Signal::KILL && !s.leader) {
            steps.truncate(first_kill + 1);
        } else {
            steps.push(Step { signal: Signal::KILL, grace: DEFAULT_GRACE, leader: false });
        }
        StopSequence { steps }
    }

    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The text form, for `--verbose` and docs: `TERM/10s/KILL`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (i, step) in self.steps.iter().enumerate() {
            parts.push(step.name());
            if i + 1 < self.steps.len() {
                parts.push(crate::duration::describe(step.grace));
            }
        }
        parts.join("/")
    }
}

impl Default for StopSequence {
    fn default() -> Self {
        Self::simple(Signal::TERM, DEFAULT_GRACE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signals(seq: &StopSequence) -> Vec<String> {
        seq.steps().iter().map(Step::name).collect()
    }

    #[test]
    fn escalate_with_every_grace_given() {
        let seq = StopSequence::parse_escalate("INT/2s/TERM/5s/KILL").unwrap();
        assert_eq!(signals(&seq), ["INT", "TERM", "KILL"]);
        assert_eq!(seq.steps()[0].grace, Duration::from_secs(2));
        assert_eq!(seq.steps()[1].grace, Duration::from_secs(5));
        assert_eq!(seq.describe(), "INT/2s/TERM/5s/KILL");
    }

    #[test]
    fn escalate_implies_final_kill_and_default_grace() {
        let seq = StopSequence::parse_escalate("INT/TERM/250ms").unwrap();
        assert_eq!(signals(&seq), ["INT", "TERM", "KILL"]);
        assert_eq!(seq.steps()[0].grace, DEFAULT_GRACE);
        assert_eq!(seq.steps()[1].grace, Duration::from_millis(250));
    }

    #[test]
    fn escalate_rejects_malformed_schedules() {
        for text in ["", "/", "2s", "TERM/2s/3s", "TERM//KILL", "TERM/bogus", "TERM/"] {
            assert!(StopSequence::parse_escalate(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn simple_sequence_and_kill_first() {
        assert_eq!(StopSequence::default().describe(), "TERM/10s/KILL");
        assert_eq!(signals(&StopSequence::simple(Signal::KILL, DEFAULT_GRACE)), ["KILL"]);
    }

    #[test]
    fn leader_steps_parse_and_never_count_as_the_final_kill() {
        let seq = StopSequence::parse_escalate("leader:TERM/5s/TERM/5s/KILL").unwrap();
        assert_eq!(signals(&seq), ["leader:TERM", "TERM", "KILL"]);
        assert!(seq.steps()[0].leader && !seq.steps()[1].leader && !seq.steps()[2].leader);
        assert_eq!(seq.describe(), "leader:TERM/5s/TERM/5s/KILL");
        let seq = StopSequence::parse_escalate("leader:KILL/1s").unwrap();
        assert_eq!(signals(&seq), ["leader:KILL", "KILL"]);
        assert_eq!(seq.steps()[0].grace, Duration::from_secs(1));
        let seq = StopSequence::parse_escalate("leader:sigint").unwrap();
        assert_eq!(seq.describe(), "leader:INT/10s/KILL");
    }

    #[test]
    fn simple_with_a_leader_signal_is_the_same_as_escalate() {
        let first = parse_step_signal("leader:TERM").unwrap();
        assert_eq!(
            StopSequence::first_then_kill(first, Duration::from_millis(700)),
            StopSequence::parse_escalate("leader:TERM/700ms/KILL").unwrap()
        );
    }

    #[test]
    fn malformed_leader_steps_are_refused() {
        for text in ["leader:", "leader:0", "leader:BOGUS", "leader:leader:TERM", "leader", "TERM/leader:"] {
            assert!(StopSequence::parse_escalate(text).is_err(), "{text:?}");
        }
        for text in ["leader:", "leader:0", "leader:BOGUS"] {
            assert!(parse_step_signal(text).is_err(), "{text:?}");
        }
    }
}

//! The stop sequence: which signals pgrun sends to the group, and how long it
//! waits after each before moving on.
//!
//! One sequence serves every way a run is stopped (timeout, cancel, SIGTERM
//! to pgrun, stragglers). It is built from `-s/-k` or from `--escalate
//! SIG/DUR/SIG/...`, and always ends with SIGKILL.

use crate::duration::parse_duration;
use crate::signame::{Signal, parse_signal};
use std::time::Duration;

/// The grace a step gets when none is given.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// One step: send `signal` to the group, then wait up to `grace` for it to
/// be gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub signal: Signal,
    pub grace: Duration,
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
        Self::ending_in_kill(vec![Step { signal: first, grace: kill_after }])
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
            let signal = parse_signal(token).map_err(|e| format!("in --escalate '{text}': {e}"))?;
            steps.push(Step { signal, grace: DEFAULT_GRACE });
            grace_given = false;
        }
        if steps.is_empty() {
            return Err(format!("invalid --escalate '{text}'"));
        }
        Ok(Self::ending_in_kill(steps))
    }

    /// Cut the steps at the first KILL (nothing after it can matter) and
    /// append one if there is none.
    fn ending_in_kill(mut steps: Vec<Step>) -> Self {
        if let Some(first_kill) = steps.iter().position(|s| s.signal == Signal::KILL) {
            steps.truncate(first_kill + 1);
        } else {
            steps.push(Step { signal: Signal::KILL, grace: DEFAULT_GRACE });
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
            parts.push(step.signal.name());
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
        seq.steps().iter().map(|s| s.signal.name()).collect()
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
}

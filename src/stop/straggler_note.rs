//! The one line pgrun says when COMMAND has exited by itself and what it
//! left behind outlives the first signal of the stop sequence. Without it,
//! members that ignore TERM make pgrun sit out the whole grace (10 s by
//! default) without a word, and the user cannot tell a grace from a hang.
//!
//! When: [`AFTER`] (1 s) after that signal was sent, if the run is still
//! there, the stop is still at that step, and the next step is at least as
//! far away again (else it comes soon enough to speak for itself). Not at
//! the step itself: most stragglers (a `sleep 300 &`) end within
//! milliseconds of TERM, and a line for each would be noise. A process still
//! there a second later is ignoring or blocking the signal, or taking long
//! over its clean-up; the line says that fact ("still there 1s after TERM"),
//! not a guess at which. Only for stragglers: a timeout, a cancel or a
//! signal to pgrun is a stop the user asked for, and with `--wait-group`
//! COMMAND's exit starts no stop at all.

use super::sequence::StopSequence;
use std::time::{Duration, Instant};

/// How long after the first signal the line is due.
pub const AFTER: Duration = Duration::from_secs(1);

/// The line (without `pgrun: `), if it is worth saying at `now`: `left`
/// members of the command's group are there (0: only processes outside
/// it), the stop of stragglers by `sequence` has sent its first signal
/// only, and its next step is due at `next_at`.
pub fn line(left: usize, sequence: &StopSequence, next_at: Option<Instant>, now: Instant) -> Option<String> {
    // COMMAND has exited, so a leader: step was skipped: the first signal
    // sent is the first step for the whole run.
    let steps = sequence.steps();
    let first = steps.iter().position(|s| !s.leader)?;
    let next = steps.get(first + 1)?;
    let wait = next_at?.checked_duration_since(now)?;
    if wait < AFTER {
        return None;
    }
    let who = match left {
        0 => "what is left of the run is".to_string(),
        1 => "1 process left in the run is".to_string(),
        n => format!("{n} processes left in the run are"),
    };
    // -s and -k make two steps, SIG and the final KILL: the grace is -k's.
    let option = if steps.len() == 2 { "--kill-after" } else { "--escalate" };
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    Some(format!(
        "{who} still there {}s after {}; {} in {secs}s ({option})",
        AFTER.as_secs(),
        steps[first].signal,
        next.name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(text: &str) -> StopSequence {
        StopSequence::parse_escalate(text).unwrap()
    }

    #[test]
    fn says_who_is_left_what_comes_next_and_which_option_sets_it() {
        let now = Instant::now();
        let in_9s = Some(now + Duration::from_secs(9));
        assert_eq!(
            line(1, &seq("TERM/10s/KILL"), in_9s, now).unwrap(),
            "1 process left in the run is still there 1s after TERM; KILL in 9s (--kill-after)"
        );
        assert_eq!(
            line(3, &seq("INT/5s/TERM/5s/KILL"), Some(now + Duration::from_millis(3500)), now).unwrap(),
            "3 processes left in the run are still there 1s after INT; TERM in 4s (--escalate)"
        );
        // A leader: step was skipped (COMMAND has exited): the next after
        // the first step for the whole run.
        assert_eq!(
            line(0, &seq("leader:TERM/5s/TERM/5s/KILL"), in_9s, now).unwrap(),
            "what is left of the run is still there 1s after TERM; KILL in 9s (--escalate)"
        );
    }

    #[test]
    fn nothing_when_the_next_step_is_near_or_there_is_none() {
        let now = Instant::now();
        assert_eq!(line(1, &seq("TERM/10s/KILL"), Some(now + Duration::from_millis(900)), now), None);
        assert_eq!(line(1, &seq("TERM/10s/KILL"), Some(now), now), None);
        assert_eq!(line(1, &seq("KILL"), Some(now + Duration::from_secs(9)), now), None);
        assert_eq!(line(1, &seq("leader:TERM/5s/KILL"), Some(now + Duration::from_secs(9)), now), None);
    }
}

//! Waiting for a condition that no event announces: a process pgrun is not
//! the parent of (`cancel`, the guard: [`crate::stop::unsupervised`]), a lock
//! another process holds or a file it creates ([`crate::pidfile`],
//! [`crate::cancel`]), a run that ends without a SIGCHLD to pgrun (the
//! [`crate::run::supervisor`]'s fallback check), a group killed on a panic
//! ([`crate::panic_stop`]), the [`crate::guard`]'s looks at pgrun. One
//! backoff serves every such wait, so each costs little and none sleeps
//! past its deadline: pauses start at 1 ms and double up to a ceiling, 20 ms
//! unless the wait says otherwise (the supervisor's check, which events make
//! redundant most of the time, goes up to 100 ms; the guard's look for the
//! command being spawned starts at 20 µs). The one look on a fixed period is the terminal's, for a
//! job brought to the foreground ([`crate::terminal::WAITING_POLL`]): it
//! waits for a person, not for a process to end.

use std::thread;
use std::time::{Duration, Instant};

const FIRST: Duration = Duration::from_millis(1);
const LONGEST: Duration = Duration::from_millis(20);

/// Pauses that double from 1 ms up to a ceiling (20 ms by default).
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pause: Duration,
    longest: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::up_to(LONGEST)
    }
}

impl Backoff {
    /// Pauses that double from 1 ms up to `longest`.
    pub fn up_to(longest: Duration) -> Self {
        Backoff::between(FIRST, longest)
    }

    /// Pauses that double from `first` up to `longest`.
    pub fn between(first: Duration, longest: Duration) -> Self {
        Backoff { pause: first.min(longest), longest }
    }

    /// The next pause, for a caller that waits by itself (in poll):
    /// 1 ms, 2 ms, 4 ms, ... up to the ceiling.
    pub fn next_pause(&mut self) -> Duration {
        let pause = self.pause;
        self.pause = (self.pause * 2).min(self.longest);
        pause
    }

    /// Sleep for the next pause, cut short at `until` (`None`: no limit).
    /// Returns false, without sleeping, once `until` has passed.
    pub fn pause_until(&mut self, until: Option<Instant>) -> bool {
        let now = Instant::now();
        let pause = match until {
            Some(u) if now >= u => return false,
            Some(u) => (u - now).min(self.pause),
            None => self.pause,
        };
        thread::sleep(pause);
        self.next_pause();
        true
    }
}

/// Check `done` with backoff until it holds (true) or `until` passes
/// (false).
pub fn poll_until(until: Option<Instant>, mut done: impl FnMut() -> bool) -> bool {
    let mut backoff = Backoff::default();
    loop {
        if done() {
            return true;
        }
        if !backoff.pause_until(until) {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_ceiling() {
        let ms = Duration::from_millis;
        let mut default = Backoff::default();
        let pauses: Vec<_> = (0..7).map(|_| default.next_pause()).collect();
        assert_eq!(pauses, [ms(1), ms(2), ms(4), ms(8), ms(16), ms(20), ms(20)]);
        let mut long = Backoff::up_to(ms(100));
        let pauses: Vec<_> = (0..9).map(|_| long.next_pause()).collect();
        assert_eq!(pauses, [ms(1), ms(2), ms(4), ms(8), ms(16), ms(32), ms(64), ms(100), ms(100)]);
        let mut short = Backoff::between(Duration::from_micros(400), ms(1));
        let pauses: Vec<_> = (0..4).map(|_| short.next_pause()).collect();
        assert_eq!(pauses, [Duration::from_micros(400), Duration::from_micros(800), ms(1), ms(1)]);
    }

    #[test]
    fn no_pause_past_the_deadline() {
        let mut backoff = Backoff::default();
        assert!(!backoff.pause_until(Some(Instant::now())));
    }
}

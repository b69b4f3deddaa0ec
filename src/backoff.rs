//! Waiting for a condition that no event announces: a process pgrun is not
//! the parent of, a lock another process holds, a file another process
//! creates. One backoff serves every such wait, so each costs little (1 ms
//! doubling to 20 ms) and none sleeps past its deadline.

use std::thread;
use std::time::{Duration, Instant};

const FIRST: Duration = Duration::from_millis(1);
const LONGEST: Duration = Duration::from_millis(20);

/// Pauses that double from 1 ms up to 20 ms.
pub struct Backoff {
    pause: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { pause: FIRST }
    }
}

impl Backoff {
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
        self.pause = (self.pause * 2).min(LONGEST);
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

//! When a stream's source rests: the rule, as a pure value the relay asks
//! and tells (it is given the time and what the pipe holds; it reads no
//! clock and no fd of its own).
//!
//! A pipe wakes its reader at each write once it has emptied, so a relay
//! that keeps up with a writer of small pieces (`head` writes 4 KiB at a
//! time) would wake, poll and move each piece on its own: a context switch
//! for pgrun and one for the reader downstream per piece, one more hop as
//! costly as one more `cat`. Where pgrun keeps up with a writer that comes
//! back within a fraction of a millisecond, a source it has just taken
//! (all but the few pieces written meanwhile) rests that long before it is
//! polled again, so that the pieces gather in the pipe and go on together.
//!
//! Only a busy stream rests (more than [`BUSY_AFTER`] taken), and only if
//! its source holds [`PIPE_CAPACITY`] (`wide`); its destination, if a
//! pipe, is widened to match when it turns busy (the stream's job). Only a
//! writer that comes back quickly is rested for: the bytes came within
//! [`REST`] of pgrun starting to watch the source (its previous take, or
//! the end of the rest after it). A slower writer (a line every few
//! milliseconds) would find the rest over before it writes again, and the
//! rest's end would only wake pgrun a second time per piece, for nothing.
//! So the first bytes after a quiet spell go on at once, and so does every
//! piece of a slow writer; only pieces that follow within `REST` (or came
//! while pgrun took the last ones) wait, for at most that long. A command
//! that writes nothing causes no wake-up at all: a rest follows only bytes
//! taken. Bytes read and copied (near a cut, into the ring, to a terminal)
//! do not rest: pgrun, copying, rests them no faster than the pipe would
//! gather them (a cut of 1 GiB: 1.36x a direct pipe with rests, 1.23x
//! without). That at most one source rests at a time is the relay's part.

use std::time::{Duration, Instant};

/// What the inner pipes hold on Linux (best effort), and a busy stream's
/// destination if it is a pipe.
pub const PIPE_CAPACITY: usize = 1024 * 1024;

/// A stream is busy once this much of it has been taken: only then is its
/// destination widened and may its source rest. A run whose output is
/// small leaves its caller's pipe as it found it (and takes no more of the
/// user's pipe budget for it: past `pipe-user-pages-soft`, the kernel
/// gives an unprivileged user's new pipes 2 pages instead of 16), and its
/// output is never held back by a rest.
pub const BUSY_AFTER: u64 = 1024 * 1024;

/// How long a stream's source rests once pgrun has caught up with it
/// (taken all it held but under [`CAUGHT_UP`]): short enough that a writer
/// at the kernel's pipe speed (a few GB/s) does not fill [`PIPE_CAPACITY`]
/// meanwhile, long enough that it writes many small pieces.
pub const REST: Duration = Duration::from_micros(200);

/// pgrun has caught up with the writer when the source holds less than
/// this after a take: what came while pgrun moved the last piece, a few
/// of a fast writer's small pieces (16 of `head`'s). Taking them at once
/// would move only those few: a source with a writer that fast would be
/// taken a few pieces at a time, never empty, and never rest (1 GiB from
/// `head`: 25,000 wake-ups of pgrun, 5,000 with this, its CPU time
/// halved). They wait for the rest, as the pieces that follow them do.
pub const CAUGHT_UP: usize = 64 * 1024;

/// One source's rest: whether it may rest, since when pgrun watches it,
/// and until when it rests.
#[derive(Clone, Debug)]
pub struct Rest {
    /// The source holds [`PIPE_CAPACITY`] bytes.
    pub(super) wide: bool,
    /// The stream was found busy: more than `busy_after` bytes taken.
    pub(super) busy: bool,
    /// [`BUSY_AFTER`] (0 under the test hook `long-rest`).
    pub(super) busy_after: u64,
    /// How long a busy stream with a wide source rests: [`REST`] (2 s
    /// under `long-rest`).
    pub(super) length: Duration,
    /// The last bytes taken went kernel to kernel (splice, tee): only
    /// those rest.
    pub(super) spliced_last: bool,
    /// Until when the source rests: not polled, however much it gets.
    pub(super) until: Option<Instant>,
    /// Since when pgrun has watched the source (caught up with, or so it
    /// was): its last take, or the end of the rest that followed it.
    pub(super) watched_since: Option<Instant>,
}

impl Rest {
    /// The rest of a source that holds [`PIPE_CAPACITY`] bytes if `wide`.
    pub fn new(wide: bool) -> Rest {
        Rest {
            wide,
            busy: false,
            busy_after: BUSY_AFTER,
            length: REST,
            spliced_last: false,
            until: None,
            watched_since: None,
        }
    }

    /// The test hook `long-rest`: busy at once, resting two seconds, so
    /// that a test can act while a source rests.
    pub fn long_for_tests(&mut self) {
        (self.busy_after, self.length) = (0, Duration::from_secs(2));
    }

    /// `taken` bytes of the stream have been taken in all: true the one
    /// time it turns busy (then its destination is to be widened).
    pub fn turns_busy(&mut self, taken: u64) -> bool {
        if self.busy || taken < self.busy_after {
            return false;
        }
        self.busy = true;
        true
    }

    /// How long the source rests once caught up: [`Rest::length`] once the
    /// stream is busy, if its source is wide; else it never rests.
    pub fn length(&self) -> Option<Duration> {
        (self.busy && self.wide).then_some(self.length)
    }

    /// Whether the source rests at `now`.
    pub fn at(&self, now: Instant) -> bool {
        self.until.is_some_and(|until| now < until)
    }

    /// Until when the source rests, or rested last (a rest over is still
    /// here until [`Rest::end`] or the next take).
    pub fn until(&self) -> Option<Instant> {
        self.until
    }

    /// End the rest now.
    pub fn end(&mut self) {
        self.until = None;
    }

    /// Bytes were taken, kernel to kernel (`spliced`) or read and copied.
    pub fn taken_by(&mut self, spliced: bool) {
        self.spliced_last = spliced;
    }

    /// Bytes were taken at `now`; if they were all the source held, or
    /// all but what the writer wrote meanwhile (`held()`: less than
    /// [`CAUGHT_UP`]), and the writer came back quickly, the source rests
    /// for [`Rest::length`] from now. Not if the pipe cannot say what it
    /// holds (`held()` is `None`), nor unless `may_rest` (no other source
    /// rests), nor after a read (see [`Rest::taken_by`]). `held` is asked
    /// only when all else says to rest.
    pub fn after_take(&mut self, now: Instant, may_rest: bool, held: impl FnOnce() -> Option<usize>) {
        let Some(rest) = self.length() else { return };
        let quick = self.watched_since.is_some_and(|since| now.saturating_duration_since(since) <= rest);
        self.watched_since = Some(now);
        if may_rest && quick && self.spliced_last && held().is_some_and(|held| held < CAUGHT_UP) {
            self.until = now.checked_add(rest);
            self.watched_since = self.until;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A busy stream's wide source, watched since `since`.
    fn busy_since(since: Instant) -> Rest {
        let mut rest = Rest::new(true);
        assert!(rest.turns_busy(BUSY_AFTER));
        rest.watched_since = Some(since);
        rest.taken_by(true);
        rest
    }

    #[test]
    fn a_stream_turns_busy_once_past_busy_after() {
        let mut rest = Rest::new(true);
        assert!(!rest.turns_busy(BUSY_AFTER - 1));
        assert_eq!(rest.length(), None, "a stream not busy rests");
        assert!(rest.turns_busy(BUSY_AFTER));
        assert!(!rest.turns_busy(2 * BUSY_AFTER), "turned busy twice");
        assert_eq!(rest.length(), Some(REST));
        let mut narrow = Rest::new(false);
        assert!(narrow.turns_busy(BUSY_AFTER));
        assert_eq!(narrow.length(), None, "a source that is not wide rests");
    }

    #[test]
    fn a_quick_writer_caught_up_with_rests_for_rest() {
        let t0 = Instant::now();
        let mut rest = busy_since(t0);
        let now = t0 + REST / 2;
        rest.after_take(now, true, || Some(CAUGHT_UP - 1));
        assert_eq!(rest.until(), Some(now + REST));
        assert!(rest.at(now) && rest.at(now + REST / 2) && !rest.at(now + REST));
        rest.end();
        assert!(!rest.at(now) && rest.until().is_none());
    }

    #[test]
    fn the_first_take_after_a_quiet_spell_does_not_rest_nor_does_a_slow_writer() {
        let t0 = Instant::now();
        let mut rest = Rest::new(true);
        assert!(rest.turns_busy(BUSY_AFTER));
        rest.taken_by(true);
        rest.after_take(t0, true, || Some(0));
        assert_eq!(rest.until(), None, "rested without having watched the source");
        // The writer comes back only after a rest would have ended.
        rest.after_take(t0 + 2 * REST, true, || Some(0));
        assert_eq!(rest.until(), None, "a slow writer's source rested");
        // And then quickly: it rests.
        rest.after_take(t0 + 2 * REST + REST / 4, true, || Some(0));
        assert!(rest.until().is_some());
    }

    #[test]
    fn no_rest_after_a_read_with_another_resting_or_with_a_full_pipe() {
        let t0 = Instant::now();
        let now = t0 + REST / 2;
        let mut read = busy_since(t0);
        read.taken_by(false);
        read.after_take(now, true, || Some(0));
        assert_eq!(read.until(), None, "bytes read and copied rested");
        let mut other = busy_since(t0);
        other.after_take(now, false, || Some(0));
        assert_eq!(other.until(), None, "rested while another source rests");
        let mut full = busy_since(t0);
        full.after_take(now, true, || Some(CAUGHT_UP));
        assert_eq!(full.until(), None, "a source holding {CAUGHT_UP} bytes rested");
        let mut unknown = busy_since(t0);
        unknown.after_take(now, true, || None);
        assert_eq!(unknown.until(), None, "rested without knowing what the pipe holds");
    }

    #[test]
    fn what_the_pipe_holds_is_asked_only_when_all_else_says_rest() {
        let mut asked = false;
        let mut idle = Rest::new(true);
        idle.after_take(Instant::now(), true, || {
            asked = true;
            Some(0)
        });
        assert!(!asked, "a stream that is not busy asked the pipe");
    }

    #[test]
    fn the_test_hook_rests_long_from_the_first_byte() {
        let mut rest = Rest::new(true);
        rest.long_for_tests();
        assert!(rest.turns_busy(0));
        assert_eq!(rest.length(), Some(Duration::from_secs(2)));
    }
}

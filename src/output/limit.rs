//! The head-and-tail cut of one output stream, as a pure state machine.
//!
//! A [`Cut`] is fed the stream's bytes in whatever pieces they arrive and
//! says which of them to write at once (the head); everything past the head
//! goes into a ring of bounded size. When the stream ends, [`Cut::finish`]
//! returns what is left to write: nothing more for a stream of at most SIZE
//! bytes except what the ring kept (so it comes out byte-identical), and
//! otherwise the marker line and the tail.
//!
//! Invariants: memory is the ring (SIZE - SIZE/2 + 3 bytes, reserved up
//! front) plus at most 3 held bytes; the head is written as it arrives,
//! except a trailing prefix that a later byte could still complete into a
//! character (at most 3 bytes, see [`super::utf8`]); the head ends and the
//! tail starts on a character boundary; no byte is ever transcoded.

use super::utf8::{incomplete_suffix_len, is_valid_prefix, tail_skip, width};

/// How far before the head's nominal end (SIZE/2) bytes may still pass
/// without being looked at ([`Cut::may_pass`]): the cut looks at most 3
/// bytes back from SIZE/2 for a character that reaches past it, a character
/// is at most 4 bytes long, and at least one head byte must be seen so that
/// the marker knows whether the head ended with a newline. 4 would do; the
/// rest is slack.
pub const PASS_MARGIN: u64 = 16;

/// Room for the marker line in the ring's allocation, so that turning the
/// ring into the final output never reallocates.
const MARKER_ROOM: usize = 64;

/// What one stream came to, for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Bytes the command wrote (that pgrun read).
    pub bytes: u64,
    /// Bytes left out between the head and the tail.
    pub omitted: u64,
}

/// One stream's cut.
pub struct Cut {
    size: u64,
    /// The head's nominal end: SIZE/2.
    head_max: u64,
    /// The tail's nominal length: SIZE/2.
    tail_len: usize,
    /// Bytes fed so far.
    pos: u64,
    /// A trailing character prefix not yet written: stream positions
    /// `pos - held_len .. pos`.
    held: [u8; 4],
    held_len: usize,
    /// Where the head ended, once decided; from there on, bytes go to the ring.
    cut: Option<u64>,
    head_written: u64,
    head_last: Option<u8>,
    ring: Ring,
}

impl Cut {
    /// A cut for SIZE `size` (at least 1). Reserves the ring now, so that
    /// a SIZE too large for memory fails before the command starts.
    pub fn new(size: u64) -> Result<Self, std::collections::TryReserveError> {
        assert!(size > 0, "SIZE 0 is refused by the parser");
        let half = size / 2;
        let ring_cap = usize::try_from(size - half + 3).unwrap_or(usize::MAX - MARKER_ROOM);
        Ok(Cut {
            size,
            head_max: half,
            tail_len: usize::try_from(half).unwrap_or(usize::MAX),
            pos: 0,
            held: [0; 4],
            held_len: 0,
            cut: None,
            head_written: 0,
            head_last: None,
            ring: Ring::new(ring_cap)?,
        })
    }

    /// Bytes fed so far.
    pub fn bytes(&self) -> u64 {
        self.pos
    }

    /// Whether the head is complete: what is fed from now on produces no
    /// output until [`Cut::finish`].
    pub fn past_head(&self) -> bool {
        self.cut.is_some()
    }

    /// How many of the next bytes may go to the destination as they are,
    /// without being fed ([`Cut::passed`]): in the head, nothing held, and
    /// far enough ([`PASS_MARGIN`]) from its end that the UTF-8 rule at the
    /// cut and the marker's newline are decided by bytes that are fed.
    pub fn may_pass(&self) -> u64 {
        if self.cut.is_some() || self.held_len > 0 {
            return 0;
        }
        self.head_max.saturating_sub(PASS_MARGIN).saturating_sub(self.pos)
    }

    /// `n` bytes (at most [`Cut::may_pass`]) went to the destination
    /// without being fed: count them as head bytes written. Whatever
    /// character the last of them began, the bytes fed next settle the
    /// cut exactly as if these had been fed too: a held prefix only ever
    /// delays a write in the head, and a character that began this far
    /// from SIZE/2 ends before it.
    pub fn passed(&mut self, n: u64) {
        assert!(n <= self.may_pass(), "{n} bytes passed, {} may", self.may_pass());
        if n > 0 {
            self.pos += n;
            self.head_written += n;
            // Unknown; the bytes fed before the cut (at least one) set it.
            self.head_last = None;
        }
    }

    /// Feed the next bytes of the stream; the bytes to write now are
    /// appended to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let mut rest = chunk;
        // First settle a held prefix with the bytes that follow it.
        while self.held_len > 0 {
            let Some(&b) = rest.first() else { return };
            let mut candidate = self.held;
            candidate[self.held_len] = b;
            if is_valid_prefix(&candidate[..=self.held_len]) {
                self.held = candidate;
                self.held_len += 1;
                self.pos += 1;
                rest = &rest[1..];
                if Some(self.held_len) == width(self.held[0]) {
                    self.settle_held(true, out);
                }
            } else {
                // Not a character: the held bytes pass as they are, and `b`
                // is looked at afresh below.
                self.settle_held(false, out);
            }
        }
        if rest.is_empty() {
            return;
        }
        if self.cut.is_some() {
            self.pos += rest.len() as u64;
            self.ring.push(rest);
            return;
        }
        // Head: nothing held, pos <= head_max.
        let room = usize::try_from(self.head_max - self.pos).unwrap_or(usize::MAX);
        if rest.len() <= room {
            let keep = incomplete_suffix_len(rest);
            self.emit(&rest[..rest.len() - keep], out);
            self.hold(&rest[rest.len() - keep..]);
            self.pos += rest.len() as u64;
            if self.pos == self.head_max && self.held_len == 0 {
                self.cut = Some(self.head_max);
            }
            return;
        }
        let before = &rest[..room];
        let k = incomplete_suffix_len(before);
        self.pos += rest.len() as u64;
        if k == 0 {
            self.emit(before, out);
            self.cut = Some(self.head_max);
            self.ring.push(&rest[room..]);
            return;
        }
        // A character starts at `start` and reaches past the cut.
        let start = room - k;
        let w = width(rest[start]).expect("a held prefix starts with a lead byte");
        let seen = &rest[start..rest.len().min(start + w)];
        if !is_valid_prefix(seen) {
            self.emit(before, out);
            self.cut = Some(self.head_max);
            self.ring.push(&rest[room..]);
        } else if seen.len() == w {
            self.emit(&rest[..start], out);
            self.cut = Some(self.head_max - k as u64);
            self.ring.push(&rest[start..]);
        } else {
            self.emit(&rest[..start], out);
            self.hold(seen);
        }
    }

    /// The stream has ended: everything still to write, in order (held
    /// bytes, the ring's bytes or the marker and the tail), and the stats.
    pub fn finish(mut self, out: &mut Vec<u8>) -> (Vec<u8>, StreamStats) {
        if self.held_len > 0 {
            // No byte will complete it now: not a character, written as is.
            self.settle_held(false, out);
        }
        let total = self.pos;
        let Some(cut) = self.cut else {
            return (Vec::new(), StreamStats { bytes: total, omitted: 0 });
        };
        if total <= self.size {
            return (self.ring.into_output(&[], 0), StreamStats { bytes: total, omitted: 0 });
        }
        let window_start = self.ring.len() - self.tail_len;
        let skip = tail_skip(self.ring.window(window_start, 3).as_slice());
        let tail = (self.tail_len - skip) as u64;
        let omitted = total - cut - tail;
        let mut marker = Vec::with_capacity(MARKER_ROOM);
        if self.head_written > 0 && self.head_last != Some(b'\n') {
            marker.push(b'\n');
        }
        marker.extend_from_slice(format!("[pgrun: {omitted} bytes omitted]\n").as_bytes());
        (self.ring.into_output(&marker, window_start + skip), StreamStats { bytes: total, omitted })
    }

    /// Decide a held prefix: a whole character (`complete`) or bytes that
    /// can no longer become one.
    fn settle_held(&mut self, complete: bool, out: &mut Vec<u8>) {
        let held = self.held;
        let len = self.held_len;
        self.held_len = 0;
        let first = self.pos - len as u64;
        if self.pos <= self.head_max {
            // Entirely in the head.
            self.emit(&held[..len], out);
            if self.pos == self.head_max {
                self.cut = Some(self.head_max);
            }
        } else if complete {
            // A character across the cut: the head ends before it.
            self.cut = Some(first);
            self.ring.push(&held[..len]);
        } else {
            // Invalid bytes across the cut: the cut stays where it is.
            let in_head = (self.head_max - first) as usize;
            self.emit(&held[..in_head], out);
            self.cut = Some(self.head_max);
            self.ring.push(&held[in_head..len]);
        }
    }

    fn hold(&mut self, bytes: &[u8]) {
        self.held[..bytes.len()].copy_from_slice(bytes);
        self.held_len = bytes.len();
    }

    fn emit(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        if let Some(&last) = bytes.last() {
            self.head_last = Some(last);
            self.head_written += bytes.len() as u64;
            out.extend_from_slice(bytes);
        }
    }
}

/// The last `cap` bytes of what was pushed. Filled linearly first (pages are
/// touched only as bytes arrive), then overwritten in a circle.
struct Ring {
    buf: Vec<u8>,
    cap: usize,
    /// Once full: the index of the oldest byte (the next to be overwritten).
    start: usize,
}

impl Ring {
    fn new(cap: usize) -> Result<Self, std::collections::TryReserveError> {
        let mut buf = Vec::new();
        buf.try_reserve_exact(cap.saturating_add(MARKER_ROOM))?;
        Ok(Ring { buf, cap, start: 0 })
    }

    fn len(&self) -> usize {
        self.buf.len()
    }

    fn push(&mut self, mut data: &[u8]) {
        if data.len() >= self.cap {
            data = &data[data.len() - self.cap..];
            self.buf.clear();
            self.buf.extend_from_slice(data);
            self.start = 0;
            return;
        }
        let room = self.cap - self.buf.len();
        if room > 0 {
            let n = room.min(data.len());
            self.buf.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        while !data.is_empty() {
            let n = (self.cap - self.start).min(data.len());
            self.buf[self.start..self.start + n].copy_from_slice(&data[..n]);
            self.start = (self.start + n) % self.cap;
            data = &data[n..];
        }
    }

    /// Up to `n` bytes from logical offset `from` (0: the oldest byte kept).
    fn window(&self, from: usize, n: usize) -> Vec<u8> {
        (from..self.len().min(from + n)).map(|i| self.buf[(self.start + i) % self.len()]).collect()
    }

    /// The kept bytes from logical offset `from` on, after `prefix`, reusing
    /// the ring's own allocation (rotated into order in place).
    fn into_output(mut self, prefix: &[u8], from: usize) -> Vec<u8> {
        self.buf.rotate_left(self.start);
        self.buf.drain(..from);
        self.buf.splice(0..0, prefix.iter().copied());
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The contract, written directly over the whole stream, with std's
    /// decoder saying what a character is.
    fn reference(data: &[u8], size: u64) -> Vec<u8> {
        let total = data.len();
        if total as u64 <= size {
            return data.to_vec();
        }
        let half = (size / 2) as usize;
        // The head ends before a well-formed character that reaches past SIZE/2.
        let mut head = half;
        for p in half.saturating_sub(3)..half {
            let probe = &data[p..total.min(p + 4)];
            let valid = match std::str::from_utf8(probe) {
                Ok(s) => s,
                Err(e) => std::str::from_utf8(&probe[..e.valid_up_to()]).unwrap(),
            };
            if let Some(c) = valid.chars().next()
                && p + c.len_utf8() > half
            {
                head = p;
                break;
            }
        }
        let window = total - half;
        let tail = window + data[window..].iter().take(3).take_while(|&&b| b & 0xC0 == 0x80).count();
        let mut out = data[..head].to_vec();
        if head > 0 && data[head - 1] != b'\n' {
            out.push(b'\n');
        }
        out.extend_from_slice(format!("[pgrun: {} bytes omitted]\n", tail - head).as_bytes());
        out.extend_from_slice(&data[tail..]);
        out
    }

    /// Feed `data` in pieces of the given lengths (cycled); return the
    /// whole output and check the head is written as it arrives.
    fn run(data: &[u8], size: u64, pieces: &[usize]) -> (Vec<u8>, StreamStats) {
        run_passing(data, size, pieces, false)
    }

    /// [`run`], and with `pass`, every piece that [`Cut::may_pass`]
    /// allows (all or its first part) goes straight to the output, as the
    /// relay's splice does.
    fn run_passing(data: &[u8], size: u64, pieces: &[usize], pass: bool) -> (Vec<u8>, StreamStats) {
        let mut cut = Cut::new(size).unwrap();
        let mut out = Vec::new();
        let mut at = 0;
        let mut i = 0;
        while at < data.len() {
            let mut n = pieces[i % pieces.len()].max(1).min(data.len() - at);
            let may = usize::try_from(cut.may_pass()).unwrap();
            if pass && may > 0 {
                n = n.min(may);
                cut.passed(n as u64);
                out.extend_from_slice(&data[at..at + n]);
            } else {
                cut.feed(&data[at..at + n], &mut out);
            }
            at += n;
            i += 1;
            let due = (at as u64).min(size / 2).saturating_sub(3) as usize;
            assert!(out.len() >= due, "head lags: {} written of {at} fed", out.len());
        }
        let (rest, stats) = cut.finish(&mut out);
        out.extend_from_slice(&rest);
        (out, stats)
    }

    /// Bytes biased towards the interesting ones: ASCII, newlines, lead
    /// bytes, continuation bytes, and the bytes that start nothing.
    fn byte() -> impl Strategy<Value = u8> {
        prop_oneof![
            Just(b'a'),
            Just(b'\n'),
            0x80u8..=0xBF,
            0xC0u8..=0xFF,
            prop_oneof![Just(0xE0u8), Just(0xED), Just(0xF0), Just(0xF4)],
            any::<u8>(),
        ]
    }

    fn text() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(byte(), 0..80),
            proptest::collection::vec(any::<char>(), 0..30)
                .prop_map(|c| c.into_iter().collect::<String>().into_bytes()),
        ]
    }

    proptest! {
        // A tenth of the cases in plain `cargo test`; all with the long tests.
        #![proptest_config(ProptestConfig::with_cases(if cfg!(feature = "long-tests") { 4000 } else { 400 }))]
        #[test]
        fn matches_the_reference_in_any_pieces(
            data in text(),
            size in 1u64..40,
            pieces in proptest::collection::vec(1usize..9, 1..6),
        ) {
            let (out, stats) = run(&data, size, &pieces);
            prop_assert_eq!(&out, &reference(&data, size), "size {}", size);
            prop_assert_eq!(stats.bytes, data.len() as u64);
        }

        #[test]
        fn passing_bytes_far_from_the_cut_changes_nothing(
            data in proptest::collection::vec(byte(), 0..160),
            size in 1u64..120,
            pieces in proptest::collection::vec(1usize..24, 1..6),
        ) {
            let (out, stats) = run_passing(&data, size, &pieces, true);
            prop_assert_eq!(&out, &reference(&data, size), "size {}", size);
            prop_assert_eq!(stats.bytes, data.len() as u64);
        }

        #[test]
        fn valid_text_stays_valid(chars in proptest::collection::vec(any::<char>(), 0..40), size in 1u64..60, piece in 1usize..5) {
            let data: String = chars.into_iter().collect();
            let (out, _) = run(data.as_bytes(), size, &[piece]);
            prop_assert!(std::str::from_utf8(&out).is_ok());
        }
    }

    #[test]
    fn bytes_pass_only_up_to_the_margin_before_the_head_ends() {
        let mut cut = Cut::new(100).unwrap();
        assert_eq!(cut.may_pass(), 50 - PASS_MARGIN);
        cut.passed(10);
        assert_eq!(cut.may_pass(), 40 - PASS_MARGIN);
        // A held prefix is settled by feeding, not passing.
        cut.feed(b"ab\xE2", &mut Vec::new());
        assert_eq!(cut.may_pass(), 0);
        cut.feed(b"\x82\xAC", &mut Vec::new());
        assert_eq!(cut.may_pass(), 35 - PASS_MARGIN);
        cut.feed(&[b'x'; 40], &mut Vec::new());
        assert!(cut.past_head());
        assert_eq!(cut.may_pass(), 0);
        assert_eq!(Cut::new(2 * PASS_MARGIN).unwrap().may_pass(), 0);
    }

    #[test]
    fn a_character_begun_in_passed_bytes_and_one_across_the_cut_come_out_as_fed() {
        // SIZE 40: the head ends at 20; 4 bytes pass, then "€" (E2 82 AC)
        // begun in them, then 13 ASCII bytes, then "€" across 20.
        let mut data = b"abc\xE2\x82\xAC".to_vec();
        data.extend_from_slice(&[b'x'; 13]);
        data.extend_from_slice(b"\xE2\x82\xAC");
        data.extend_from_slice(&[b'y'; 30]);
        for piece in [1, 3, 5, 64] {
            let (passed, _) = run_passing(&data, 40, &[piece], true);
            assert_eq!(passed, reference(&data, 40), "pieces of {piece}");
        }
    }

    #[test]
    fn the_head_ends_with_a_newline_just_before_a_character_across_the_cut() {
        // "...\n😀" with the emoji (F0 9F 98 80) from SIZE/2 - 3 on: the head
        // ends with the newline, so the marker line needs none of its own;
        // the newline must be fed for the cut to know it.
        for size in 2 * PASS_MARGIN + 8..2 * PASS_MARGIN + 12 {
            let half = (size / 2) as usize;
            let mut data = vec![b'a'; half - 4];
            data.push(b'\n');
            data.extend_from_slice("😀".as_bytes());
            data.extend_from_slice(&[b'z'; 64]);
            let (passed, _) = run_passing(&data, size, &[4096], true);
            assert_eq!(passed, reference(&data, size), "size {size}");
        }
    }

    #[test]
    fn exactly_size_is_identical_and_one_more_is_cut() {
        let data = b"0123456789";
        assert_eq!(run(data, 10, &[3]).0, data);
        let (out, stats) = run(b"0123456789\n", 10, &[1]);
        assert_eq!(out, b"01234\n[pgrun: 1 bytes omitted]\n6789\n");
        assert_eq!(stats, StreamStats { bytes: 11, omitted: 1 });
    }

    #[test]
    fn a_character_across_the_head_cut_moves_the_cut_back() {
        // "ab€..." with SIZE/2 = 3: the euro sign (E2 82 AC) spans 2..5.
        let mut data = b"ab\xE2\x82\xACcdefghij\n".to_vec();
        data.extend_from_slice(b"klm");
        let (out, stats) = run(&data, 6, &[1]);
        assert_eq!(out, b"ab\n[pgrun: 12 bytes omitted]\nklm");
        assert_eq!(stats.omitted, 12);
    }

    #[test]
    fn a_held_prefix_at_the_end_of_a_short_stream_is_written() {
        let (out, _) = run(b"abcdefgh\xF0\x9F", 6, &[1]);
        assert_eq!(out, b"abc\n[pgrun: 4 bytes omitted]\nh\xF0\x9F");
        let (out, _) = run(b"ab\xF0\x9F", 8, &[1]);
        assert_eq!(out, b"ab\xF0\x9F");
    }

    #[test]
    fn memory_stays_in_the_ring_however_much_is_fed() {
        let mut cut = Cut::new(1000).unwrap();
        let mut out = Vec::new();
        let chunk = vec![b'x'; 4096];
        for _ in 0..1000 {
            cut.feed(&chunk, &mut out);
        }
        assert_eq!(out.len(), 500);
        assert!(cut.ring.buf.capacity() <= 1000 - 500 + 3 + MARKER_ROOM);
        let (rest, stats) = cut.finish(&mut out);
        assert_eq!(stats.bytes, 4096 * 1000);
        assert_eq!(rest.len(), format!("\n[pgrun: {} bytes omitted]\n", stats.omitted).len() + 500);
    }
}

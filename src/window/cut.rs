//! Where a window of an output file ends, on the cut rules of
//! `--max-output` ([`crate::output::utf8`]): never inside a character, and
//! never holding back bytes that can never become one. Pure: it looks only
//! at bytes already read.
//!
//! A window is cut from the bytes that follow its start, read up to 3
//! bytes past its limit (a character is at most 4 bytes long): those 3
//! say whether a character that reaches past the limit is whole (held
//! back for the next window), or can never be valid (passed as it is).
//! Where the file ends inside a character that more bytes could still
//! complete, that start is held back while the run may still write it,
//! and passed once the run is over.

use crate::output::utf8::{incomplete_suffix_len, is_valid_prefix, width};

/// How many bytes past its limit a window's bytes are read: enough to see
/// the whole of a character that starts before the limit.
pub const LOOK_PAST: usize = 3;

/// Where a window ends in the bytes it was cut from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct End {
    /// How many of the bytes the window holds.
    pub len: usize,
    /// Nothing more can be given now: the bytes read end the file, and
    /// the window reaches their end or all that is past it is the start
    /// of a character still being written.
    pub eof: bool,
}

/// Where a window of at most `limit` bytes (SIZE, at least 4, or what the
/// file holds past the window's start if less) ends in `bytes`:
/// what follows its start, read up to `limit + LOOK_PAST` bytes, or fewer
/// where the file ends (`to_end`). `over`: the run that writes the file is
/// over, so a character the file ends inside can never be completed.
pub fn end(bytes: &[u8], limit: usize, to_end: bool, over: bool) -> End {
    let n = bytes.len().min(limit);
    let whole = End { len: n, eof: to_end && n == bytes.len() };
    let held = incomplete_suffix_len(&bytes[..n]);
    if held == 0 {
        return whole;
    }
    // A character starts at `start` and does not end within the window.
    let start = n - held;
    let char_len = width(bytes[start]).unwrap_or(1);
    let known = &bytes[start..bytes.len().min(start + char_len)];
    if known.len() == char_len {
        // All its bytes are read: a whole character goes to the next
        // window; bytes that are no character pass as they are.
        return if std::str::from_utf8(known).is_ok() { End { len: start, eof: false } } else { whole };
    }
    // The file ends inside it (only a read to the end is this short).
    if is_valid_prefix(known) && !over { End { len: start, eof: true } } else { whole }
}

/// The window's bytes as JSON text: valid UTF-8 as it is, each byte of an
/// invalid sequence as U+FFFD.
pub fn text_of(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        text.push_str(chunk.valid());
        text.extend(std::iter::repeat_n('\u{FFFD}', chunk.invalid().len()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_whole_character_at_the_limit_goes_to_the_next_window() {
        // "ab€" (€ = E2 82 AC), limit 4: the window ends before the €.
        let bytes = "ab€c".as_bytes();
        assert_eq!(end(bytes, 4, true, false), End { len: 2, eof: false });
        assert_eq!(end(bytes, 5, true, false), End { len: 5, eof: false });
        assert_eq!(end(bytes, 6, true, false), End { len: 6, eof: true });
    }

    #[test]
    fn bytes_that_can_never_be_a_character_pass_at_the_limit() {
        // E2 82 then 'x': no character can come of it.
        let bytes = b"abcd\xE2\x82xyz";
        assert_eq!(end(bytes, 6, false, false), End { len: 6, eof: false });
        // A lone continuation byte, or a lead no character starts with.
        assert_eq!(end(b"abc\x80xyz", 4, false, false).len, 4);
        assert_eq!(end(b"abc\xFFxyz", 4, false, false).len, 4);
        // An overlong start (E0 80) is never held, even at the file's end.
        assert_eq!(end(b"abc\xE0\x80", 10, true, false), End { len: 5, eof: true });
    }

    #[test]
    fn a_character_the_file_ends_inside_waits_until_the_run_is_over() {
        let bytes = b"abc\xE2\x82";
        assert_eq!(end(bytes, 64, true, false), End { len: 3, eof: true });
        assert_eq!(end(bytes, 64, true, true), End { len: 5, eof: true });
        // Cut by the limit and by the file's end at once.
        assert_eq!(end(b"abcd\xF0\x9F", 5, true, false), End { len: 4, eof: true });
        assert_eq!(end(b"abcd\xF0\x9F", 5, true, true), End { len: 5, eof: false });
    }

    #[test]
    fn json_text_has_one_replacement_per_invalid_byte() {
        assert_eq!(text_of(b"a\xE2\x82b\xFF\xFE"), "a\u{FFFD}\u{FFFD}b\u{FFFD}\u{FFFD}");
        assert_eq!(text_of("é€".as_bytes()), "é€");
    }

    proptest! {
        /// Paging through any text window by window gives it back whole,
        /// every window on a character boundary and within its limit.
        #[test]
        fn windows_of_text_split_no_character(chars in proptest::collection::vec(any::<char>(), 0..40), limit in 4usize..12) {
            let text: String = chars.into_iter().collect();
            let bytes = text.as_bytes();
            let mut at = 0;
            let mut out = Vec::new();
            loop {
                let read = &bytes[at..bytes.len().min(at + limit + LOOK_PAST)];
                let cut = end(read, limit, at + read.len() == bytes.len(), false);
                prop_assert!(cut.len <= limit);
                prop_assert!(text.is_char_boundary(at + cut.len));
                out.extend_from_slice(&read[..cut.len]);
                at += cut.len;
                if cut.eof {
                    break;
                }
                prop_assert!(cut.len > 0, "no progress at {}", at);
            }
            prop_assert_eq!(out, bytes);
        }

        /// Any bytes at all come back whole once the run is over: nothing
        /// is held back for good, and every window moves on.
        #[test]
        fn windows_of_any_bytes_lose_nothing(bytes in proptest::collection::vec(any::<u8>(), 0..40), limit in 4usize..12) {
            let mut at = 0;
            let mut out = Vec::new();
            loop {
                let read = &bytes[at..bytes.len().min(at + limit + LOOK_PAST)];
                let cut = end(read, limit, at + read.len() == bytes.len(), true);
                prop_assert!(cut.len <= limit);
                out.extend_from_slice(&read[..cut.len]);
                at += cut.len;
                if cut.eof {
                    break;
                }
                prop_assert!(cut.len > 0, "no progress at {}", at);
            }
            prop_assert_eq!(out, bytes);
        }
    }
}

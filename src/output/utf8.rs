//! Where a cut may fall in a UTF-8 byte stream, without decoding it.
//!
//! pgrun never transcodes: invalid bytes pass as they are. The only
//! question asked here is whether some trailing bytes are the start of a
//! character that the next bytes could still complete. Only such a prefix is
//! held back at a cut; a byte that can begin no character (C0, C1, F5..FF, a
//! continuation byte) and a start that no further byte can make valid
//! (overlong E0 80..9F and F0 80..8F, surrogates ED A0..BF, F4 90..BF) are
//! never held. The tables are RFC 3629's (Unicode's "well-formed byte
//! sequences"), the same that `std::str::from_utf8` checks.

/// A byte of the form `10xxxxxx`, which can only continue a character.
pub fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// The length of the character `lead` begins, or `None` if no character
/// begins with it (a continuation byte, C0, C1, F5..FF).
pub fn width(lead: u8) -> Option<usize> {
    match lead {
        0x00..=0x7F => Some(1),
        0xC2..=0xDF => Some(2),
        0xE0..=0xEF => Some(3),
        0xF0..=0xF4 => Some(4),
        _ => None,
    }
}

/// The bytes allowed right after `lead`: narrower than 80..BF for the leads
/// whose full range would encode overlongs, surrogates or values past
/// U+10FFFF.
fn second_byte_range(lead: u8) -> std::ops::RangeInclusive<u8> {
    match lead {
        0xE0 => 0xA0..=0xBF,
        0xED => 0x80..=0x9F,
        0xF0 => 0x90..=0xBF,
        0xF4 => 0x80..=0x8F,
        _ => 0x80..=0xBF,
    }
}

/// Whether `bytes` (non-empty, at most one character long) is the start of
/// a well-formed character, or a whole one.
pub fn is_valid_prefix(bytes: &[u8]) -> bool {
    let Some((&lead, rest)) = bytes.split_first() else { return false };
    let Some(w) = width(lead) else { return false };
    if rest.len() >= w {
        return false;
    }
    rest.iter()
        .enumerate()
        .all(|(i, &b)| if i == 0 { second_byte_range(lead).contains(&b) } else { is_continuation(b) })
}

/// How many trailing bytes of `bytes` are an incomplete character that more
/// bytes could still complete (0 to 3): the prefix a cut at the end of
/// `bytes` must hold back.
pub fn incomplete_suffix_len(bytes: &[u8]) -> usize {
    // The candidate starts at the last byte that is not a continuation byte,
    // at most 3 bytes from the end (a character has at most 3 after its lead).
    for k in 1..=bytes.len().min(3) {
        let start = bytes.len() - k;
        if !is_continuation(bytes[start]) {
            let candidate = &bytes[start..];
            let incomplete = width(bytes[start]).is_some_and(|w| k < w);
            return if incomplete && is_valid_prefix(candidate) { k } else { 0 };
        }
    }
    0
}

/// Where a tail that would start at `window[0]` really starts: at the first
/// byte that is not a continuation byte, at most 3 bytes in.
pub fn tail_skip(window: &[u8]) -> usize {
    window.iter().take(3).take_while(|&&b| is_continuation(b)).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference: std's decoder. A suffix is an incomplete character
    /// exactly when decoding it alone fails at its very start with
    /// `error_len() == None` ("more input could complete it").
    fn reference_incomplete(bytes: &[u8]) -> usize {
        for k in 1..=bytes.len().min(3) {
            let start = bytes.len() - k;
            if !is_continuation(bytes[start]) {
                return match std::str::from_utf8(&bytes[start..]) {
                    Err(e) if e.valid_up_to() == 0 && e.error_len().is_none() => k,
                    _ => 0,
                };
            }
        }
        0
    }

    #[test]
    fn every_one_two_and_three_byte_input_agrees_with_std() {
        for a in 0..=255u8 {
            assert_eq!(incomplete_suffix_len(&[a]), reference_incomplete(&[a]), "{a:02X}");
            for b in 0..=255u8 {
                let two = [a, b];
                assert_eq!(incomplete_suffix_len(&two), reference_incomplete(&two), "{a:02X} {b:02X}");
                // Three bytes: the third only matters after a lead byte.
                if width(a).is_some_and(|w| w >= 3) || width(b).is_some_and(|w| w >= 3) {
                    for c in 0..=255u8 {
                        let three = [a, b, c];
                        assert_eq!(incomplete_suffix_len(&three), reference_incomplete(&three), "{three:02X?}");
                    }
                }
            }
        }
    }

    #[test]
    fn bytes_that_cannot_start_a_character_are_never_held() {
        let never: Vec<Vec<u8>> = (0x00..=0x7F)
            .chain(0x80..=0xC1)
            .chain(0xF5..=0xFF)
            .map(|b| vec![b])
            .chain((0x80..=0x9F).map(|b| vec![0xE0, b]))
            .chain((0x80..=0x8F).map(|b| vec![0xF0, b]))
            .chain((0xA0..=0xBF).map(|b| vec![0xED, b]))
            .chain((0x90..=0xBF).map(|b| vec![0xF4, b]))
            .collect();
        for bytes in never {
            assert_eq!(incomplete_suffix_len(&bytes), 0, "{bytes:02X?} was held back");
        }
        // ED 80..9F is U+D000..U+D7FF: a real character, still waiting.
        assert_eq!(incomplete_suffix_len(&[0xED, 0x9F]), 2);
        assert_eq!(incomplete_suffix_len(&[b'a', 0xF4, 0x8F, 0xBF]), 3);
    }

    #[test]
    fn the_tail_skips_at_most_three_continuation_bytes() {
        assert_eq!(tail_skip(b"abc"), 0);
        assert_eq!(tail_skip(&[0x80, b'a']), 1);
        assert_eq!(tail_skip(&[0x80, 0x80, 0x80, 0x80, b'a']), 3);
        assert_eq!(tail_skip(&[0x80]), 1);
        assert_eq!(tail_skip(&[]), 0);
    }

    proptest! {
        #[test]
        fn incomplete_suffix_agrees_with_std(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            prop_assert_eq!(incomplete_suffix_len(&bytes), reference_incomplete(&bytes));
        }

        #[test]
        fn a_valid_text_cut_anywhere_holds_exactly_the_split_character(
            chars in proptest::collection::vec(any::<char>(), 0..12),
            at in 0usize..64,
        ) {
            let s: String = chars.into_iter().collect();
            let bytes = s.as_bytes();
            let at = at.min(bytes.len());
            let held = incomplete_suffix_len(&bytes[..at]);
            prop_assert!(s.is_char_boundary(at - held));
            prop_assert!(held == 0 || !s.is_char_boundary(at));
            prop_assert!(held < 4);
        }
    }
}

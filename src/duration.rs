//! Parsing DUR arguments: `30`, `1.5`, `.5`, `250ms`, `2m`, `1h`, `1d`.
//!
//! The grammar is fixed by the contract: `([0-9]+\.?[0-9]*|\.[0-9]+)(ms|s|m|h|d)?`,
//! seconds by default; nothing else (no sign, spaces, exponent, `inf`, hex or
//! upper-case unit). Arithmetic is exact decimal, so `0.1` is 100 ms and not
//! 99.999 ms, rounded up to whole nanoseconds, so any value above zero is
//! above zero; a value too large to represent saturates to
//! [`Duration::MAX`], which callers treat as "forever".

use std::time::Duration;

/// Parse a DUR; the error says what is wrong with the text.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    if let Some(magnitude) = text.strip_prefix('-')
        && parse_duration(magnitude).is_ok()
    {
        return Err(format!("'{text}': a duration cannot be negative (0 means none)"));
    }
    let invalid = || format!("invalid duration '{text}' (expected e.g. 30, 1.5, 250ms, 2m, 1h, 1d)");
    let (number, nanos_per_unit): (&str, u128) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1_000_000)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1_000_000_000)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60 * 1_000_000_000)
    } else if let Some(n) = text.strip_suffix('h') {
        (n, 3_600 * 1_000_000_000)
    } else if let Some(n) = text.strip_suffix('d') {
        (n, 86_400 * 1_000_000_000)
    } else {
        (text, 1_000_000_000)
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(fraction) || (whole.is_empty() && fraction.is_empty()) {
        return Err(invalid());
    }
    // Whole units, saturating: an absurdly long number is "forever".
    let mut nanos: u128 = 0;
    for b in whole.bytes() {
        nanos = nanos.saturating_mul(10).saturating_add(u128::from(b - b'0'));
    }
    nanos = nanos.saturating_mul(nanos_per_unit);
    // The fraction, exactly: its first 24 digits as one integer (24 digits
    // times the largest unit still fit in a u128), scaled to nanoseconds and
    // rounded up; so does any non-zero digit past them. Any value above zero,
    // however small, is at least one nanosecond.
    let (head, tail) = fraction.split_at(fraction.len().min(24));
    let numerator = head.bytes().fold(0u128, |n, b| n * 10 + u128::from(b - b'0'));
    let scaled = numerator * nanos_per_unit;
    let denominator = 10u128.pow(head.len() as u32);
    let mut fraction_nanos = scaled / denominator;
    if scaled % denominator != 0 || tail.bytes().any(|d| d != b'0') {
        fraction_nanos += 1;
    }
    nanos = nanos.saturating_add(fraction_nanos);
    let secs = nanos / 1_000_000_000;
    if secs > u128::from(u64::MAX) {
        return Ok(Duration::MAX);
    }
    Ok(Duration::new(secs as u64, (nanos % 1_000_000_000) as u32))
}

/// Render a duration the way a user would write it, for messages.
pub fn describe(d: Duration) -> String {
    if d == Duration::MAX {
        "forever".to_string()
    } else if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_contract_grammar() {
        let ms = Duration::from_millis;
        for (text, want) in [
            ("30", ms(30_000)),
            ("1.5", ms(1_500)),
            (".5", ms(500)),
            ("5.", ms(5_000)),
            ("250ms", ms(250)),
            ("0.1", ms(100)),
            ("2m", ms(120_000)),
            ("1h", ms(3_600_000)),
            ("1d", ms(86_400_000)),
            ("1.5ms", Duration::from_micros(1_500)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn anything_above_zero_rounds_up_to_at_least_a_nanosecond() {
        assert_eq!(parse_duration("0.0000000001"), Ok(Duration::from_nanos(1)));
        assert_eq!(parse_duration("0.000000001"), Ok(Duration::from_nanos(1)));
        assert_eq!(parse_duration("0.0000000001ms"), Ok(Duration::from_nanos(1)));
        assert_eq!(parse_duration("1.0000000001"), Ok(Duration::new(1, 1)));
        assert_eq!(parse_duration("0.00000000000"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0.0000000010"), Ok(Duration::from_nanos(1)));
        // 9e-11 minutes is 5.4 ns: 6, not 1.
        assert_eq!(parse_duration("0.00000000009m"), Ok(Duration::from_nanos(6)));
    }

    #[test]
    fn huge_values_mean_forever() {
        assert_eq!(parse_duration("99999999999999999999999999999999d"), Ok(Duration::MAX));
        assert_eq!(parse_duration("18446744073709551616"), Ok(Duration::MAX));
    }

    #[test]
    fn rejects_everything_else() {
        for text in [
            "", ".", "-1", "+1", " 1", "1 ", "1e3", "inf", "nan", "0x10", "1S", "1M", "1H", "1.2.3", "ms", "s", "1us",
            "1sec", "1..", "1 s", "１",
        ] {
            assert!(parse_duration(text).is_err(), "{text:?} should be rejected");
        }
    }

    #[test]
    fn a_negative_duration_is_named_as_such() {
        for text in ["-1", "-1.5", "-250ms", "-0"] {
            assert!(parse_duration(text).is_err_and(|e| e.contains("cannot be negative")), "{text:?}");
        }
        for text in ["-", "--1", "-x", "-1e3"] {
            assert!(parse_duration(text).is_err_and(|e| e.starts_with("invalid duration")), "{text:?}");
        }
    }
}

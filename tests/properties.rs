//! The parsers, checked by property against the contract's grammar: every
//! string the grammar accepts parses to the right value, and every other
//! string (random bytes and near misses) is rejected. Each property states
//! the grammar on its own, independently of the parser's code. A tenth of
//! the cases in the default suite, all of them in the long target.

use crate::util::rounds;
use pgrun::duration::parse_duration;
use pgrun::pidfile::parse_group_id;
use pgrun::signame::{Signal, max_signal, parse_signal, realtime_range};
use pgrun::stop::sequence::{DEFAULT_GRACE, StopSequence};
use proptest::prelude::*;
use std::time::Duration;

const UNITS: [(&str, u128); 6] = [
    ("", 1_000_000_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

/// The value of DUR by the contract: the decimal number times the unit, in
/// nanoseconds, rounded up. Fractions of at most 20 digits.
fn duration_value(whole: &str, fraction: &str, unit_ns: u128) -> Duration {
    let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().unwrap() };
    let numerator: u128 = if fraction.is_empty() { 0 } else { fraction.parse().unwrap() };
    let denominator = 10u128.pow(fraction.len() as u32);
    let nanos = whole * unit_ns + (numerator * unit_ns).div_ceil(denominator);
    match u64::try_from(nanos / 1_000_000_000) {
        Ok(secs) => Duration::new(secs, (nanos % 1_000_000_000) as u32),
        Err(_) => Duration::MAX, // too large to represent: forever
    }
}

/// Whether `text` matches `([0-9]+\.?[0-9]*|\.[0-9]+)(ms|s|m|h|d)?` exactly.
fn duration_grammar(text: &str) -> bool {
    let number = ["ms", "s", "m", "h", "d"].iter().find_map(|u| text.strip_suffix(u)).unwrap_or(text);
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    match number.split_once('.') {
        Some((w, f)) => digits(w) && digits(f) && (!w.is_empty() || !f.is_empty()),
        None => !number.is_empty() && digits(number),
    }
}

/// Near misses of DUR: signs, exponents, inf/nan, hex, upper-case or
/// unknown units, spaces, several dots, non-ASCII digits.
fn duration_near_miss() -> impl Strategy<Value = String> {
    prop_oneof![
        "[-+ ]?[0-9]{0,4}(\\.[0-9]{0,3})?([eE][-+]?[0-9]{1,2})?(ms|s|m|h|d|MS|S|M|H|D|us|ns|sec|min)?[ \n]?",
        "(inf|nan|infinity|INF|0x[0-9a-f]{1,4}|1_000|1,5|\\.\\.|1\\.2\\.3|١|٣s)",
        "[0-9.a-zA-Z+\\- ]{0,8}",
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(rounds(200, 2000) as u32))]

    #[test]
    fn every_duration_of_the_grammar_parses_to_its_value(
        whole in "[0-9]{0,15}",
        dot in any::<bool>(),
        fraction in "[0-9]{0,20}",
        unit in 0..UNITS.len(),
    ) {
        let fraction = if dot { fraction } else { String::new() };
        prop_assume!(!whole.is_empty() || !fraction.is_empty());
        let (suffix, unit_ns) = UNITS[unit];
        let text = format!("{whole}{}{fraction}{suffix}", if dot { "." } else { "" });
        prop_assert_eq!(parse_duration(&text), Ok(duration_value(&whole, &fraction, unit_ns)), "{}", text);
    }

    #[test]
    fn a_duration_is_accepted_exactly_when_the_grammar_says_so(text in duration_near_miss()) {
        prop_assert_eq!(parse_duration(&text).is_ok(), duration_grammar(&text), "{:?}", text);
    }

    #[test]
    fn any_duration_above_zero_is_at_least_a_nanosecond(zeros in 0usize..40, digit in 1u8..10, unit in 0..UNITS.len()) {
        let text = format!("0.{}{digit}{}", "0".repeat(zeros), UNITS[unit].0);
        prop_assert!(parse_duration(&text).unwrap() > Duration::ZERO, "{}", text);
    }

    #[test]
    fn overflowing_durations_mean_forever(whole in "[1-9][0-9]{40,60}", unit in 0..UNITS.len()) {
        prop_assert_eq!(parse_duration(&format!("{whole}{}", UNITS[unit].0)), Ok(Duration::MAX));
    }
}

/// Every spelling of signal `n` the contract allows: its name (or alias)
/// with or without SIG in any case, and its number.
fn signal_spellings(n: i32) -> Vec<String> {
    let mut names = vec![Signal(n).name()];
    if let Some((min, max)) = realtime_range()
        && (min..=max).contains(&n)
    {
        names.push(format!("RTMIN+{}", n - min));
        names.push(format!("RTMAX-{}", max - n));
    }
    let mut all = vec![n.to_string()];
    // A signal with no name (32, 33 under glibc) is named by its number,
    // which takes no SIG prefix.
    for name in names.into_iter().filter(|name| name.parse::<i32>().is_err()) {
        all.push(name.clone());
        all.push(format!("SIG{name}"));
    }
    all
}

/// Whether `text` names a signal by the contract, and which. Names are the
/// ones `Signal::name` gives for 1..=max (plus the C library's aliases IOT
/// and POLL) and RTMIN+k / RTMAX-k in range; numbers are 1..=max.
fn signal_grammar(text: &str) -> Option<i32> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse::<i32>().ok().filter(|n| (1..=max_signal()).contains(n));
    }
    let upper = text.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    for n in 1..=max_signal() {
        if signal_spellings(n).iter().any(|s| s.eq_ignore_ascii_case(name) && !s.bytes().all(|b| b.is_ascii_digit())) {
            return Some(n);
        }
    }
    match name {
        "IOT" => Some(libc::SIGABRT),
        #[cfg(target_os = "linux")]
        "POLL" => Some(libc::SIGIO),
        _ => {
            // RTMIN+k and RTMAX-k with a leading zero in k spell a valid offset too.
            let (min, max) = realtime_range()?;
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            let n = if let Some(k) = name.strip_prefix("RTMIN+").filter(|k| digits(k)) {
                k.parse::<i32>().ok().and_then(|k| min.checked_add(k))
            } else if let Some(k) = name.strip_prefix("RTMAX-").filter(|k| digits(k)) {
                k.parse::<i32>().ok().and_then(|k| max.checked_sub(k))
            } else {
                None
            };
            n.filter(|n| (min..=max).contains(n))
        }
    }
}

/// Random case.
fn recase(text: &str, mask: u64) -> String {
    text.chars()
        .enumerate()
        .map(|(i, c)| if mask >> (i % 64) & 1 == 1 { c.to_ascii_lowercase() } else { c.to_ascii_uppercase() })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(rounds(200, 2000) as u32))]

    #[test]
    fn every_spelling_of_every_signal_parses_to_it(n in 1..=max_signal(), pick in any::<prop::sample::Index>(), case in any::<u64>()) {
        let spellings = signal_spellings(n);
        let chosen: &String = pick.get(&spellings);
        let text = recase(chosen, case);
        prop_assert_eq!(parse_signal(&text), Ok(Signal(n)), "{}", text);
    }

    #[test]
    fn a_signal_is_accepted_exactly_when_the_grammar_says_so(
        text in prop_oneof![
            "[-+ ]?0?[0-9]{1,4}[ \n]?",
            "(SIG|sig|Sig)?(TERM|KILL|INT|HUP|RTMIN|RTMAX|CHLD|CLD|IOT|POLL|EMT|INFO|STKFLT|PWR)([-+][0-9]{0,3})?[ \n]?",
            "(SIG|sig)[0-9]{1,3}",
            "[A-Za-z0-9+\\-]{0,8}",
            any::<String>(),
        ]
    ) {
        let got = parse_signal(&text).ok().map(|s| s.0);
        prop_assert_eq!(got, signal_grammar(&text), "{:?}", text);
    }
}

/// One step of a schedule as written: a signal name and maybe a grace.
fn escalate_step() -> impl Strategy<Value = (i32, Option<(String, Duration)>)> {
    // Names only: a number right after a signal would read as its grace.
    let signal = prop::sample::select(vec![
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGKILL,
        libc::SIGCONT,
    ]);
    let grace = prop::option::of(("[0-9]{1,3}", 0..UNITS.len()).prop_map(|(n, u)| {
        let text = format!("{n}{}", UNITS[u].0);
        let value = duration_value(&n, "", UNITS[u].1);
        (text, value)
    }));
    (signal, grace)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(rounds(100, 1000) as u32))]

    #[test]
    fn every_schedule_parses_to_its_steps_ending_in_kill(steps in prop::collection::vec(escalate_step(), 1..6)) {
        let text = steps
            .iter()
            .map(|(sig, grace)| match grace {
                Some((g, _)) => format!("{}/{g}", Signal(*sig).name()),
                None => Signal(*sig).name(),
            })
            .collect::<Vec<_>>()
            .join("/");
        let mut want: Vec<(i32, Duration)> = Vec::new();
        for (sig, grace) in &steps {
            want.push((*sig, grace.as_ref().map_or(DEFAULT_GRACE, |(_, d)| *d)));
            if *sig == libc::SIGKILL {
                break;
            }
        }
        if want.last().unwrap().0 != libc::SIGKILL {
            want.push((libc::SIGKILL, DEFAULT_GRACE));
        }
        let got: Vec<(i32, Duration)> = StopSequence::parse_escalate(&text)
            .map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?
            .steps()
            .iter()
            .map(|s| (s.signal.0, s.grace))
            .collect();
        prop_assert_eq!(got, want, "{}", text);
    }

    #[test]
    fn a_schedule_with_a_bad_token_is_rejected(
        steps in prop::collection::vec(escalate_step(), 1..4),
        bad in prop_oneof![Just(String::new()), "[a-z]{1,3}[0-9]?", "-[0-9]", "[0-9]e[0-9]", " TERM", "0"],
        at in any::<prop::sample::Index>(),
    ) {
        prop_assume!(parse_signal(&bad).is_err() && parse_duration(&bad).is_err());
        let mut tokens: Vec<String> = Vec::new();
        for (sig, grace) in &steps {
            tokens.push(Signal(*sig).name());
            if let Some((g, _)) = grace {
                tokens.push(g.clone());
            }
        }
        tokens.insert(at.index(tokens.len() + 1), bad);
        let text = tokens.join("/");
        prop_assert!(StopSequence::parse_escalate(&text).is_err(), "{:?} was accepted", text);
    }

    #[test]
    fn a_schedule_opening_with_a_grace_or_with_two_graces_in_a_row_is_rejected(
        // With a unit: a bare number is also a signal's number.
        n in "[0-9]{1,3}(ms|s|m)", m in "[0-9]{1,3}(ms|s|m)",
    ) {
        let (leading, doubled) = (format!("{n}/TERM"), format!("TERM/{n}/{m}"));
        prop_assert!(StopSequence::parse_escalate(&leading).is_err(), "{}", leading);
        prop_assert!(StopSequence::parse_escalate(&doubled).is_err(), "{}", doubled);
    }
}

/// The pid file's content by the contract: one line, a group id in decimal
/// (no sign, no leading zero, at least 1, a pid_t) and a newline.
fn pid_file_grammar(text: &str) -> Option<i32> {
    let digits = text.strip_suffix('\n')?;
    let ok = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && !digits.starts_with('0');
    if !ok {
        return None;
    }
    digits.parse::<i32>().ok()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(rounds(200, 2000) as u32))]

    #[test]
    fn every_group_id_line_parses_to_its_number(pgid in 1..=i32::MAX) {
        prop_assert_eq!(parse_group_id(&format!("{pgid}\n")), Some(pgid));
    }

    #[test]
    fn pid_file_content_is_accepted_exactly_when_the_grammar_says_so(
        text in prop_oneof![
            "[-+ 0]?[0-9]{1,11}(\n|\r\n| \n|\n\n|\n[0-9]|)",
            "[0-9]{9,12}\n",
            "[0-9a-fx \n]{0,6}",
            any::<String>(),
        ]
    ) {
        prop_assert_eq!(parse_group_id(&text), pid_file_grammar(&text), "{:?}", text);
    }
}

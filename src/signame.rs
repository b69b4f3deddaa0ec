//! Signal names and numbers: parsing SIG arguments and naming signals in
//! messages and reports.
//!
//! A SIG is a name with or without `SIG`, in any case (`TERM`, `sigterm`,
//! `RTMIN+2`, numbered as the platform's C library numbers them), or a
//! number from 1 to the largest signal. `SIG15` is not a spelling, and 0 is
//! not a signal.

use std::fmt;

// The platform's signals, their names and numbers, are `sys`'s to say.
use crate::sys::signals::{aliases, names};
pub use crate::sys::{Signal, max_signal, realtime_range};

impl Signal {
    pub const TERM: Signal = Signal(libc::SIGTERM);
    pub const KILL: Signal = Signal(libc::SIGKILL);
    pub const CONT: Signal = Signal(libc::SIGCONT);

    /// The name without `SIG`, e.g. `TERM`, `RTMIN+2`; a number if nameless.
    pub fn name(self) -> String {
        if let Some((name, _)) = names().find(|(_, n)| *n == self.0) {
            return (*name).to_string();
        }
        if let Some((min, max)) = realtime_range() {
            if self.0 == min {
                return "RTMIN".into();
            }
            if self.0 == max {
                return "RTMAX".into();
            }
            if (min..max).contains(&self.0) {
                return format!("RTMIN+{}", self.0 - min);
            }
        }
        self.0.to_string()
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Parse a SIG argument.
pub fn parse_signal(text: &str) -> Result<Signal, String> {
    let invalid = || format!("invalid signal '{text}' (expected a name like TERM, INT, RTMIN+2, or a number)");
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<i32>() {
            Ok(n) if (1..=max_signal()).contains(&n) => Ok(Signal(n)),
            _ => Err(invalid()),
        };
    }
    let upper = text.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    if let Some((_, n)) = names().chain(aliases()).find(|(candidate, _)| *candidate == name) {
        return Ok(Signal(*n));
    }
    if let Some((min, max)) = realtime_range() {
        let offset = |s: &str| -> Option<i32> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            s.parse().ok()
        };
        let n = match name {
            "RTMIN" => Some(min),
            "RTMAX" => Some(max),
            _ => {
                if let Some(k) = name.strip_prefix("RTMIN+").and_then(offset) {
                    min.checked_add(k)
                } else if let Some(k) = name.strip_prefix("RTMAX-").and_then(offset) {
                    max.checked_sub(k)
                } else {
                    None
                }
            }
        };
        if let Some(n) = n.filter(|n| (min..=max).contains(n)) {
            return Ok(Signal(n));
        }
    }
    Err(invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_any_case_with_or_without_sig() {
        for text in ["TERM", "term", "SIGTERM", "sigterm", "SigTerm", "15"] {
            assert_eq!(parse_signal(text), Ok(Signal::TERM), "{text}");
        }
        assert_eq!(parse_signal("kill"), Ok(Signal::KILL));
        assert_eq!(parse_signal("9"), Ok(Signal::KILL));
    }

    #[test]
    fn rejects_non_signals() {
        for text in ["", "0", "SIG15", "SIG", "TERMX", "-15", "+15", "1.5", " TERM", "RTMIN+", "RTMIN+-1", "65536"] {
            assert!(parse_signal(text).is_err(), "{text:?} should be rejected");
        }
        assert!(parse_signal(&(max_signal() + 1).to_string()).is_err());
    }

    #[test]
    fn realtime_signals_by_offset() {
        let Some((min, max)) = realtime_range() else { return };
        assert_eq!(parse_signal("RTMIN"), Ok(Signal(min)));
        assert_eq!(parse_signal("sigrtmin+2"), Ok(Signal(min + 2)));
        assert_eq!(parse_signal("RTMAX-1"), Ok(Signal(max - 1)));
        assert!(parse_signal(&format!("RTMIN+{}", max - min + 1)).is_err());
        assert_eq!(Signal(min + 2).name(), "RTMIN+2");
        assert_eq!(Signal(max).name(), "RTMAX");
    }

    #[test]
    fn aliases_parse_to_their_signal_and_are_not_names() {
        assert_eq!(parse_signal("IOT"), Ok(Signal(libc::SIGABRT)));
        assert_eq!(Signal(libc::SIGABRT).name(), "ABRT");
    }

    #[test]
    fn names_round_trip() {
        for n in 1..=max_signal() {
            let name = Signal(n).name();
            assert_eq!(parse_signal(&name), Ok(Signal(n)), "{n} named {name}");
        }
    }
}

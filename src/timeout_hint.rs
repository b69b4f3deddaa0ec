//! The hint for `timeout`'s syntax: `pgrun 30 make test` runs a command
//! named `30`, which is not found (127, as for any missing command); when
//! the missing command's name is a duration, one more line says how to
//! write the timeout: `pgrun --timeout 30 -- make test`.

use crate::duration::parse_duration;
use std::ffi::OsString;

/// The hint for a run whose `command` was not found, if its first word is
/// a duration (a duration holds no `/`, so it was looked for in `PATH`
/// only, and is not there); the rest of the words quoted as a shell needs.
/// A `--` right after the duration (`pgrun 30 -- make`, `timeout`'s way to
/// end its options) was the end of options the hint writes itself: it is
/// not repeated (a second `--` would be run as the command's name).
pub fn for_missing_command(command: &[OsString]) -> Option<String> {
    let (first, rest) = command.split_first()?;
    let word = first.to_str()?;
    parse_duration(word).ok()?;
    let rest = match rest.split_first() {
        Some((separator, after)) if separator == "--" => after,
        _ => rest,
    };
    let mut line = format!("for a timeout, write: pgrun --timeout {word} --");
    if rest.is_empty() {
        line.push_str(" COMMAND");
    }
    for arg in rest {
        line.push(' ');
        line.push_str(&shell_quote(&arg.to_string_lossy()));
    }
    Some(line)
}

/// `word` as a POSIX shell reads it back: as is when it has nothing the
/// shell would act on, else in single quotes (a `'` written `'\''`).
fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-.,/:=@%+".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(words: &[&str]) -> Option<String> {
        for_missing_command(&words.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn durations_get_the_hint_with_the_rest_quoted() {
        assert_eq!(hint(&["30", "make", "test"]).unwrap(), "for a timeout, write: pgrun --timeout 30 -- make test");
        assert_eq!(
            hint(&["2m", "sh", "-c", "echo it's $HOME", ""]).unwrap(),
            "for a timeout, write: pgrun --timeout 2m -- sh -c 'echo it'\\''s $HOME' ''"
        );
        assert_eq!(hint(&["1.5"]).unwrap(), "for a timeout, write: pgrun --timeout 1.5 -- COMMAND");
    }

    #[test]
    fn a_separator_after_the_duration_is_not_repeated() {
        assert_eq!(hint(&["30", "--", "true"]).unwrap(), "for a timeout, write: pgrun --timeout 30 -- true");
        assert_eq!(hint(&["30", "--"]).unwrap(), "for a timeout, write: pgrun --timeout 30 -- COMMAND");
        // A command named `--` stays one, behind the hint's own `--`.
        assert_eq!(hint(&["30", "--", "--", "x"]).unwrap(), "for a timeout, write: pgrun --timeout 30 -- -- x");
        assert_eq!(hint(&["30", "make", "--", "x"]).unwrap(), "for a timeout, write: pgrun --timeout 30 -- make -- x");
    }

    #[test]
    fn other_words_get_none() {
        for first in ["foo", "./30", "30x", "", "-5", "make"] {
            assert_eq!(hint(&[first, "x"]), None, "{first}");
        }
    }
}

//! What pgrun does with each signal sent to it: the one table that the
//! blocked set, the event loop, the portable self-pipe and `--help` all
//! read, so that they cannot disagree.
//!
//! Every handled signal is blocked before pgrun touches the pid file and
//! read synchronously by the supervisor's loop; none runs code in a
//! handler. Signals not in the table keep the disposition pgrun was given.

use crate::signame::{Signal, realtime_range};
use crate::sys::sigmask::SigSet;

/// How pgrun handles one signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handling {
    /// SIGTERM: a cancel request; runs the stop sequence.
    Cancel,
    /// Forwarded to the command's group as it is, once. `then_cont`: a
    /// SIGCONT follows, for the termination requests HUP, INT and QUIT (a
    /// member stopped on terminal access must be able to act on Ctrl-C);
    /// the others ask a program to do something and carry on, and a SIGCONT
    /// would wake a member stopped on purpose.
    Forward { then_cont: bool },
    /// SIGCHLD: wakes the loop to reap and to notice stops.
    Reap,
    /// SIGURG, the parent-death signal of `--die-with-parent`: it counts
    /// only if pgrun's parent process really changed (see
    /// [`crate::parent_death`]).
    ParentDeath,
    /// Kept blocked and never acted on: SIGPIPE (a write to a closed pipe
    /// is a plain EPIPE, never pgrun's death) and SIGTTOU (pgrun may set
    /// the terminal's foreground group from the background).
    Absorb,
}

const FORWARD: Handling = Handling::Forward { then_cont: false };
const FORWARD_THEN_CONT: Handling = Handling::Forward { then_cont: true };

/// The named signals pgrun handles; the real-time range is forwarded too.
const TABLE: [(i32, Handling); 13] = [
    (libc::SIGTERM, Handling::Cancel),
    (libc::SIGHUP, FORWARD_THEN_CONT),
    (libc::SIGINT, FORWARD_THEN_CONT),
    (libc::SIGQUIT, FORWARD_THEN_CONT),
    (libc::SIGUSR1, FORWARD),
    (libc::SIGUSR2, FORWARD),
    (libc::SIGALRM, FORWARD),
    (libc::SIGWINCH, FORWARD),
    (libc::SIGCONT, FORWARD),
    (libc::SIGCHLD, Handling::Reap),
    (libc::SIGPIPE, Handling::Absorb),
    (libc::SIGTTOU, Handling::Absorb),
    (crate::parent_death::SIGNAL, Handling::ParentDeath),
];

/// How pgrun handles `signal`; `None`: not at all (its disposition stays).
pub fn handling(signal: i32) -> Option<Handling> {
    if let Some(&(_, how)) = TABLE.iter().find(|(s, _)| *s == signal) {
        return Some(how);
    }
    realtime_range().is_some_and(|(lo, hi)| (lo..=hi).contains(&signal)).then_some(FORWARD)
}

/// Whether `signal` asks pgrun's run to end (TERM, HUP, INT, QUIT): one of
/// these pending before the command has started ends the run before it
/// begins.
pub fn ends_the_run(signal: i32) -> bool {
    matches!(handling(signal), Some(Handling::Cancel | Handling::Forward { then_cont: true }))
}

/// Whether the caller's process of `--detach`, while it waits for the run
/// to be published, passes `signal` on to the supervising pgrun: the ones
/// pgrun acts on (a cancel, a signal it forwards), not its own SIGCHLD.
pub fn passed_to_a_detached_run(signal: i32) -> bool {
    matches!(handling(signal), Some(Handling::Cancel | Handling::Forward { .. }))
}

/// Every signal pgrun handles, to block before anything else happens.
pub fn handled() -> SigSet {
    set_of(|_| true)
}

/// The handled signals that stay blocked even where signals are delivered
/// through handlers (the portable self-pipe).
pub fn absorbed() -> SigSet {
    set_of(|how| how == Handling::Absorb)
}

fn set_of(keep: impl Fn(Handling) -> bool) -> SigSet {
    let mut set = SigSet::empty();
    for signal in 1..=crate::signame::max_signal() {
        if handling(signal).is_some_and(&keep) {
            set.add(signal);
        }
    }
    set
}

/// The "Signals sent to pgrun" table of `--help` and the man page.
pub fn help_table() -> String {
    let mut out = String::new();
    for (signals, meaning) in rows() {
        out.push_str(&wrap_row(&signals, &meaning));
    }
    out.pop();
    out
}

/// The same table in Markdown, for docs/design.md (between its markers).
pub fn markdown_table() -> String {
    let mut out = String::from("| signals | what pgrun does |\n|---|---|\n");
    for (signals, meaning) in rows() {
        out.push_str(&format!("| {signals} | {meaning} |\n"));
    }
    out
}

/// The table's rows: the signals, and what pgrun does with them.
fn rows() -> [(String, String); 7] {
    let names = |pick: &dyn Fn(Handling) -> bool| -> String {
        TABLE.iter().filter(|(_, how)| pick(*how)).map(|(s, _)| Signal(*s).name()).collect::<Vec<_>>().join(" ")
    };
    [
        (names(&|h| h == Handling::Cancel), "a cancel request: run the stop sequence".to_string()),
        (names(&|h| h == FORWARD_THEN_CONT), "forwarded to the group once each, then SIGCONT".to_string()),
        (names(&|h| h == FORWARD) + " RTMIN..RTMAX", "forwarded to the group once each, as they are".to_string()),
        (
            "PIPE".to_string(),
            "never kills pgrun (blocked first thing, in every mode; COMMAND still gets the caller's disposition and mask)"
                .to_string(),
        ),
        ("TTOU".to_string(), "blocked, so pgrun may hand the terminal over from the background".to_string()),
        (
            "URG".to_string(),
            "with --die-with-parent, the parent-death signal: a cancel if pgrun's parent process is gone, else nothing"
                .to_string(),
        ),
        (
            "CHLD".to_string(),
            "read to reap; a caller that ignores it changes nothing: pgrun takes the default back for itself, and COMMAND still inherits it ignored".to_string(),
        ),
    ]
}

/// `    SIGNALS     meaning`, both wrapped within 78 columns.
fn wrap_row(signals: &str, meaning: &str) -> String {
    const NAMES: usize = 24;
    let wrap = |text: &str, width: usize| -> Vec<String> {
        let mut lines = vec![String::new()];
        for word in text.split(' ') {
            let line = lines.last_mut().expect("one line at least");
            if !line.is_empty() && line.len() + 1 + word.len() > width {
                lines.push(word.to_string());
            } else {
                if !line.is_empty() {
                    line.push(' ');
                }
                line.push_str(word);
            }
        }
        lines
    };
    let left = wrap(signals, NAMES - 1);
    let right = wrap(meaning, 78 - 4 - NAMES);
    let mut out = String::new();
    for i in 0..left.len().max(right.len()) {
        let l = left.get(i).map_or("", String::as_str);
        let r = right.get(i).map_or("", String::as_str);
        out.push_str(format!("    {l:NAMES$}{r}").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contracts_signals() {
        assert_eq!(handling(libc::SIGTERM), Some(Handling::Cancel));
        for s in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT] {
            assert_eq!(handling(s), Some(Handling::Forward { then_cont: true }), "{s}");
            assert!(ends_the_run(s));
        }
        for s in [libc::SIGUSR1, libc::SIGUSR2, libc::SIGALRM, libc::SIGWINCH, libc::SIGCONT] {
            assert_eq!(handling(s), Some(Handling::Forward { then_cont: false }), "{s}");
            assert!(!ends_the_run(s));
        }
        if let Some((lo, hi)) = realtime_range() {
            assert_eq!(handling(lo), Some(FORWARD));
            assert_eq!(handling(hi), Some(FORWARD));
        }
        assert!(ends_the_run(libc::SIGTERM));
        assert_eq!(handling(libc::SIGKILL), None);
        assert_eq!(handling(libc::SIGTSTP), None, "Ctrl-Z stops pgrun as it stops any job");
        assert!(absorbed().contains(libc::SIGPIPE) && absorbed().contains(libc::SIGTTOU));
        assert!(!absorbed().contains(libc::SIGTERM));
        assert!(handled().contains(libc::SIGCHLD));
    }

    #[test]
    fn help_table_fits_and_names_every_forwarded_signal() {
        let text = help_table();
        assert!(text.lines().all(|l| l.len() <= 78), "{text}");
        for name in ["TERM", "HUP INT QUIT", "USR1", "WINCH", "CONT", "RTMIN..RTMAX", "PIPE", "CHLD"] {
            assert!(text.contains(name), "{name} in {text}");
        }
    }
}

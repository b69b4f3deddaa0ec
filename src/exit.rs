//! Every exit status pgrun has, of all its modes, in one place: the enums
//! that `main` turns into a process status, and the tables that document
//! them. `--help`, the man pages and `README.md` are generated from these
//! tables (a test fails when a committed copy is stale, and another when a
//! variant is missing from its table), so the documentation cannot drift
//! from the code.

use crate::sys::process::ChildStatus;

/// 125: pgrun itself failed, in every mode (a usage error, a refused pid
/// file, a set-up step), as distinct from anything the command did.
pub const FAILURE: u8 = 125;

/// 122: `--detach-after`: the command was still running after DUR, and the
/// run goes on detached (the caller's process exits with this).
pub const HANDED_OFF: u8 = 122;

/// One line of an exit-status table: the status as written, and when.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub status: &'static str,
    pub meaning: &'static str,
}

const fn row(status: &'static str, meaning: &'static str) -> Row {
    Row { status, meaning }
}

/// The run mode: `pgrun [OPTIONS] [--] COMMAND`.
pub const RUN_TABLE: &[Row] = &[
    row("N", "COMMAND exited with N, also after a cancel it handled"),
    row(
        "128+N",
        "COMMAND was ended by signal N (143 for TERM, 137 for KILL); an exit code, pgrun does not re-raise the signal",
    ),
    row("122", "--detach-after: COMMAND was still running after DUR; the run goes on detached"),
    row(
        "124",
        "the timeout or the idle timeout fired, however the group then ended (--preserve-status: COMMAND's own status instead)",
    ),
    row(
        "125",
        "pgrun itself failed, including usage errors and a failure to create the process; COMMAND did not run or was stopped",
    ),
    row("126", "COMMAND was found but could not be executed (permission, format)"),
    row("127", "COMMAND was not found"),
    row("143", "cancelled before COMMAND started (128+N for another termination signal N received before the start)"),
];

/// How a run mode invocation ends, as an exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunExit {
    /// N or 128+N: the command's own status, its code or death by signal N.
    Command(ChildStatus),
    /// 124: the timeout fired.
    Timeout,
    /// 125: pgrun itself failed (usage error, pid file, spawn set-up).
    Failed,
    /// 126: the command was found but could not be executed.
    CannotExecute,
    /// 127: the command was not found.
    NotFound,
    /// 143: cancelled before the command started, by the marker or SIGTERM;
    /// 128+N for another termination signal N (INT, HUP, QUIT).
    CancelledBeforeStart(i32),
}

impl RunExit {
    pub fn code(self) -> u8 {
        match self {
            RunExit::Command(ChildStatus::Exited(code)) => code as u8,
            RunExit::Command(ChildStatus::Signaled(sig)) => (128 + sig).clamp(0, 255) as u8,
            RunExit::Timeout => 124,
            RunExit::Failed => FAILURE,
            RunExit::CannotExecute => 126,
            RunExit::NotFound => 127,
            RunExit::CancelledBeforeStart(signal) => (128 + signal).clamp(0, 255) as u8,
        }
    }
}

/// `pgrun cancel PIDFILE`.
pub const CANCEL_TABLE: &[Row] = &[
    row("0", "the run is gone (stopped, or kept from starting)"),
    row("1", "no live run was found (a stale pid file is removed), or the cancel was left pending (--keep-pending)"),
    row(
        "2",
        "the group was still alive 1s after the SIGKILL --timeout led to (in another PID namespace: its pgrun was still stopping it)",
    ),
    row(
        "125",
        "error: a pid file whose content is not a group id, permission denied, an unsafe group id, a pid file that is no pgrun run's (its lock holder is in the group it names: a daemon's own), a usage error",
    ),
];

/// How `pgrun cancel` ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelExit {
    /// 0: the run is gone (stopped, or kept from starting).
    Gone,
    /// 1: no live run was found (also: left pending with --keep-pending).
    NoRun,
    /// 2: the group was still alive 1 s after the SIGKILL --timeout led to.
    Survived,
    /// 125: an error; nothing was signalled.
    Failed,
}

impl CancelExit {
    pub fn code(self) -> u8 {
        match self {
            CancelExit::Gone => 0,
            CancelExit::NoRun => 1,
            CancelExit::Survived => 2,
            CancelExit::Failed => FAILURE,
        }
    }
}

/// `pgrun status PIDFILE`, after the LSB convention.
pub const STATUS_TABLE: &[Row] = &[
    row("0", "running or stopping"),
    row("1", "stale pid file"),
    row("3", "not running, or only a cancel is pending"),
    row(
        "4",
        "unreadable pid file, content that is not a group id, or a pid file that is no pgrun run's (its lock holder is in the group it names)",
    ),
    row("125", "usage error"),
];

/// How `pgrun status` ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusExit {
    /// 0: running or stopping.
    Alive,
    /// 1: stale pid file.
    Stale,
    /// 3: not running, or only a cancel is pending.
    NotRunning,
    /// 4: the pid file cannot be read or does not hold a group id.
    Unknown,
    /// 125: a usage error.
    Usage,
}

impl StatusExit {
    pub fn code(self) -> u8 {
        match self {
            StatusExit::Alive => 0,
            StatusExit::Stale => 1,
            StatusExit::NotRunning => 3,
            StatusExit::Unknown => 4,
            StatusExit::Usage => FAILURE,
        }
    }
}

/// `pgrun wait PIDFILE`.
pub const WAIT_TABLE: &[Row] = &[
    row("0", "the run is over; with --ready: a process of the run listens as asked"),
    row(
        "1",
        "no live run was found: none appeared within --wait-start, or the pid file is stale (left in place); with --ready: the run was over first",
    ),
    row("124", "--timeout passed while the run still lives (the run is left alone)"),
    row(
        "125",
        "error: the refusals of cancel (another user's pid file, a world-writable one, a symlink, content that is not a group id, one that is no pgrun run's), a usage error; with --report, a report that is missing or unreadable; --ready off Linux",
    ),
    row("N", "with --report: the run's own exit status, as its report gives it"),
];

/// How `pgrun wait` ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitExit {
    /// 0: the run is over.
    Over,
    /// 1: no live run was found.
    NoRun,
    /// 124: --timeout passed while the run still lives.
    TimedOut,
    /// 125: an error (a refused pid file, a missing report).
    Failed,
    /// With --report: the run's own exit status.
    RunStatus(u8),
}

impl WaitExit {
    pub fn code(self) -> u8 {
        match self {
            WaitExit::Over => 0,
            WaitExit::NoRun => 1,
            WaitExit::TimedOut => 124,
            WaitExit::Failed => FAILURE,
            WaitExit::RunStatus(code) => code,
        }
    }
}

/// `pgrun output FILE`.
pub const OUTPUT_TABLE: &[Row] = &[
    row("0", "the window was written; with --wait: bytes past N came (with --until: a matching line)"),
    row("1", "with --wait: the run in --pidfile was over first"),
    row("124", "with --wait: DUR passed first"),
    row(
        "125",
        "error: no such file, not a regular file, N beyond the end of FILE (or FILE cut short or replaced while waited on), an invalid REGEX, a usage error",
    ),
];

/// How `pgrun output` ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputExit {
    /// 0: the window was written (with --wait: bytes, or the line, came).
    Came,
    /// 1: with --wait: the run was over first.
    Over,
    /// 124: with --wait: DUR passed first.
    TimedOut,
    /// 125: an error.
    Failed,
}

impl OutputExit {
    pub fn code(self) -> u8 {
        match self {
            OutputExit::Came => 0,
            OutputExit::Over => 1,
            OutputExit::TimedOut => 124,
            OutputExit::Failed => FAILURE,
        }
    }
}

/// `pgrun ls DIR`.
pub const LS_TABLE: &[Row] =
    &[row("0", "the runs were listed (even none)"), row("125", "error: DIR cannot be read, a usage error")];

/// How `pgrun ls` ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LsExit {
    /// 0: the runs were listed (even none).
    Listed,
    /// 125: the folder cannot be read.
    Failed,
}

impl LsExit {
    pub fn code(self) -> u8 {
        match self {
            LsExit::Listed => 0,
            LsExit::Failed => FAILURE,
        }
    }
}

/// `pgrun send P [TEXT]`.
pub const SEND_TABLE: &[Row] = &[
    row("0", "every byte is in the run's stdin pipe (with --eof: and the pipe is closed)"),
    row("1", "no live run at PIDFILE"),
    row(
        "124",
        "--timeout passed while COMMAND read nothing (stderr says how many bytes were written), or with --eof before pgrun closed the pipe",
    ),
    row(
        "125",
        "error: the run has no stdin pipe or it is closed, another user's run, COMMAND closed its stdin, a usage error",
    ),
];

/// How `pgrun send` ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendExit {
    /// 0: every byte is in the pipe.
    Sent,
    /// 1: no live run.
    NoRun,
    /// 124: `--timeout` passed while the command read nothing.
    TimedOut,
    /// 125: an error.
    Failed,
}

impl SendExit {
    pub fn code(self) -> u8 {
        match self {
            SendExit::Sent => 0,
            SendExit::NoRun => 1,
            SendExit::TimedOut => 124,
            SendExit::Failed => FAILURE,
        }
    }
}

/// A table as `--help` prose shows it: indented, the meaning wrapped at 78
/// columns under itself.
pub fn help_table(rows: &[Row]) -> String {
    let width = rows.iter().map(|r| r.status.len()).max().unwrap_or(0).max(3) + 3;
    let mut out = String::new();
    for r in rows {
        let mut line = format!("    {:width$}", r.status);
        let indent = line.len();
        for word in r.meaning.split(' ') {
            if line.len() + 1 + word.len() > 78 && line.len() > indent {
                out.push_str(line.trim_end());
                out.push('\n');
                line = " ".repeat(indent);
            } else if line.len() > indent {
                line.push(' ');
            }
            line.push_str(word);
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.pop();
    out
}

/// A table as Markdown, for `README.md`.
pub fn markdown_table(rows: &[Row]) -> String {
    let mut out = String::from("| status | when |\n|---|---|\n");
    for r in rows {
        out.push_str(&format!("| {} | {} |\n", r.status, r.meaning));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn documented(table: &[Row], code: u8) -> bool {
        table.iter().any(|r| r.status == code.to_string())
    }

    #[test]
    fn every_fixed_status_is_in_its_table() {
        for exit in [RunExit::Timeout, RunExit::Failed, RunExit::CannotExecute, RunExit::NotFound] {
            assert!(documented(RUN_TABLE, exit.code()), "{exit:?}");
        }
        assert!(documented(RUN_TABLE, RunExit::CancelledBeforeStart(libc::SIGTERM).code()));
        assert!(documented(RUN_TABLE, HANDED_OFF));
        for exit in [CancelExit::Gone, CancelExit::NoRun, CancelExit::Survived, CancelExit::Failed] {
            assert!(documented(CANCEL_TABLE, exit.code()), "{exit:?}");
        }
        for exit in
            [StatusExit::Alive, StatusExit::Stale, StatusExit::NotRunning, StatusExit::Unknown, StatusExit::Usage]
        {
            assert!(documented(STATUS_TABLE, exit.code()), "{exit:?}");
        }
        for exit in [WaitExit::Over, WaitExit::NoRun, WaitExit::TimedOut, WaitExit::Failed] {
            assert!(documented(WAIT_TABLE, exit.code()), "{exit:?}");
        }
        for exit in [OutputExit::Came, OutputExit::Over, OutputExit::TimedOut, OutputExit::Failed] {
            assert!(documented(OUTPUT_TABLE, exit.code()), "{exit:?}");
        }
        for exit in [LsExit::Listed, LsExit::Failed] {
            assert!(documented(LS_TABLE, exit.code()), "{exit:?}");
        }
        for exit in [SendExit::Sent, SendExit::NoRun, SendExit::TimedOut, SendExit::Failed] {
            assert!(documented(SEND_TABLE, exit.code()), "{exit:?}");
        }
    }

    #[test]
    fn help_tables_wrap_under_the_meaning() {
        let text = help_table(RUN_TABLE);
        assert!(text.lines().all(|l| l.len() <= 78), "{text}");
        assert!(text.starts_with("    N       COMMAND exited with N"), "{text}");
        assert!(text.contains("\n            exit code, pgrun does not"), "{text}");
    }
}

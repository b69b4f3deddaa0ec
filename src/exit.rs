//! The exit statuses of the run mode, in one place.
//!
//! | status | when |
//! |---|---|
//! | the command's code | it exited normally, including after a cancel it handled |
//! | 128+N | the command was ended by signal N |
//! | 124 | the timeout fired (`--preserve-status`: the command's own status) |
//! | 125 | pgrun itself failed, including usage errors |
//! | 126 | COMMAND was found but could not be executed |
//! | 127 | COMMAND was not found |
//! | 143 | cancelled before the command started |

use crate::sys::process::ChildStatus;

/// How a run mode invocation ends, as an exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunExit {
    /// The command's own status: its code, or 128+N for death by signal N.
    Command(ChildStatus),
    /// 124: the timeout fired.
    Timeout,
    /// 125: pgrun itself failed (usage error, pid file, spawn set-up).
    Failed,
    /// 126: the command was found but could not be executed.
    CannotExecute,
    /// 127: the command was not found.
    NotFound,
    /// 143: cancelled before the command started (by the marker or SIGTERM;
    /// 128+N for another termination signal N: INT, HUP, QUIT).
    CancelledBeforeStart(i32),
}

impl RunExit {
    pub fn code(self) -> u8 {
        match self {
            RunExit::Command(ChildStatus::Exited(code)) => code as u8,
            RunExit::Command(ChildStatus::Signaled(sig)) => (128 + sig).clamp(0, 255) as u8,
            RunExit::Timeout => 124,
            RunExit::Failed => 125,
            RunExit::CannotExecute => 126,
            RunExit::NotFound => 127,
            RunExit::CancelledBeforeStart(signal) => (128 + signal).clamp(0, 255) as u8,
        }
    }
}

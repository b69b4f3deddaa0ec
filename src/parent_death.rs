//! `--die-with-parent`: the death of the process that started pgrun is a
//! cancel.
//!
//! On Linux pgrun asks the kernel for a signal when its parent dies
//! (`PR_SET_PDEATHSIG`), armed before the command starts. The kernel sends
//! it when the parent *thread* exits, which is not the parent process dying
//! when a harness starts pgrun from a short-lived thread; so the signal
//! only counts when `getppid()` has changed (pgrun was reparented), and is
//! ignored otherwise. The signal is SIGURG: pgrun handles nothing else with
//! it, it is ignored by default, and a SIGURG from anyone else also only
//! counts if the parent is really gone. Elsewhere pgrun checks `getppid()`
//! once a second while the run lasts (only with this flag).

use crate::sys::{self, Pid};
use std::time::Duration;

/// The signal the kernel sends on the parent's death.
pub const SIGNAL: i32 = libc::SIGURG;

/// The parent pgrun was started by, and how its death is noticed.
#[derive(Clone, Copy, Debug)]
pub struct ParentWatch {
    parent: Pid,
    /// The kernel signals the parent's death (Linux): no need to check.
    announced: bool,
}

impl ParentWatch {
    /// Arm the watch for `parent`, the parent pgrun had when it started
    /// (read as early as possible, so a death before arming is seen by
    /// [`ParentWatch::parent_gone`]).
    pub fn arm(parent: Pid) -> std::io::Result<ParentWatch> {
        let announced = sys::lifetime::set_parent_death_signal(SIGNAL)?;
        Ok(ParentWatch { parent, announced })
    }

    /// Whether the parent process is gone: pgrun has been reparented.
    pub fn parent_gone(&self) -> bool {
        sys::getppid() != self.parent
    }

    pub fn parent(&self) -> Pid {
        self.parent
    }

    /// How often to check the parent where no signal announces its death.
    pub fn check_every(&self) -> Option<Duration> {
        if self.announced { None } else { Some(Duration::from_secs(1)) }
    }
}

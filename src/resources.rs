//! What a run used: the report's `resources`, and the live figures
//! `pgrun status --json` shows for a run in cgroup mode.
//!
//! Two sources, and no syscall before the spawn for either. In every mode,
//! the usage `wait4` hands back with each child pgrun reaps for the run
//! (the supervisor sums them; the guard, pgrun's own child, is left out,
//! and pgrun's own usage is never asked for): each one counts the child and
//! whatever it reaped itself, the `RUSAGE_CHILDREN` rule. In cgroup mode,
//! the leaf's accounting files, read once the run is gone and before the
//! leaf is removed: `cpu.stat` counts every member, reaped by pgrun or not,
//! so it gives the CPU times there; `memory.peak`, `pids.peak` and
//! `memory.events`' `oom_kill` are there only where the parent cgroup
//! enabled the controller, and null otherwise. The peak resident set of
//! one process (`max_rss_kb`) only rusage can tell, in every mode.

use crate::sys::cgroup::Accounting;
use crate::sys::process::ChildUsage;
use serde::Serialize;

/// The report's `resources`. A run that never started: zeros and nulls
/// (the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    pub user_ms: u64,
    pub system_ms: u64,
    pub max_rss_kb: u64,
    pub memory_peak_bytes: Option<u64>,
    pub pids_peak: Option<u64>,
    pub oom_kills: Option<u64>,
}

impl Resources {
    /// What the reaped processes of the run used (group and tree mode).
    pub fn reaped(usage: ChildUsage) -> Self {
        Resources {
            user_ms: millis(usage.user),
            system_ms: millis(usage.system),
            max_rss_kb: usage.max_rss_kb,
            ..Resources::default()
        }
    }

    /// cgroup mode: the leaf's figures where it has them. The CPU times of
    /// `cpu.stat` replace rusage's (they count every member); should that
    /// file not be readable, rusage's stay.
    pub fn with_leaf(self, leaf: &Accounting) -> Self {
        Resources {
            user_ms: leaf.user_usec.map_or(self.user_ms, |us| us / 1000),
            system_ms: leaf.system_usec.map_or(self.system_ms, |us| us / 1000),
            max_rss_kb: self.max_rss_kb,
            memory_peak_bytes: leaf.memory_peak,
            pids_peak: leaf.pids_peak,
            oom_kills: leaf.oom_kills,
        }
    }
}

/// `pgrun status --json`'s `resources` for a live run in cgroup mode: what
/// its leaf says so far (null where the file is not there).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Live {
    /// `memory.current`.
    pub memory_bytes: Option<u64>,
    /// `pids.current`.
    pub pids: Option<u64>,
    /// `cpu.stat`'s `user_usec` and `system_usec`, in milliseconds.
    pub user_ms: Option<u64>,
    pub system_ms: Option<u64>,
}

impl From<&Accounting> for Live {
    fn from(leaf: &Accounting) -> Self {
        Live {
            memory_bytes: leaf.memory_current,
            pids: leaf.pids_current,
            user_ms: leaf.user_usec.map(|us| us / 1000),
            system_ms: leaf.system_usec.map(|us| us / 1000),
        }
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn reaped_usage_in_milliseconds() {
        let usage = ChildUsage {
            user: Duration::from_micros(1_520_999),
            system: Duration::from_micros(210_000),
            max_rss_kb: 48,
        };
        let r = Resources::reaped(usage);
        assert_eq!((r.user_ms, r.system_ms, r.max_rss_kb), (1520, 210, 48));
        assert_eq!((r.memory_peak_bytes, r.pids_peak, r.oom_kills), (None, None, None));
    }

    #[test]
    fn the_leaf_gives_cpu_times_and_its_peaks() {
        let usage = ChildUsage { user: Duration::from_millis(5), system: Duration::from_millis(6), max_rss_kb: 7 };
        let leaf = Accounting {
            user_usec: Some(2_000_999),
            system_usec: None,
            memory_peak: Some(1 << 20),
            oom_kills: Some(1),
            ..Accounting::default()
        };
        let r = Resources::reaped(usage).with_leaf(&leaf);
        assert_eq!((r.user_ms, r.system_ms, r.max_rss_kb), (2000, 6, 7));
        assert_eq!((r.memory_peak_bytes, r.pids_peak, r.oom_kills), (Some(1 << 20), None, Some(1)));
    }
}

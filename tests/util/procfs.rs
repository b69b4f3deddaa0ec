//! What `/proc` says of a process: its stat fields, descendants, the
//! guard of a pgrun, whether it is dead, its state, parent and group.

use super::*;
use std::fs;

/// `/proc/PID/stat` fields after the command name: state is index 0, pgrp 2,
/// starttime 19. `None` if the process is gone.
pub(super) fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.rfind(')')?;
    Some(stat[close + 1..].split_whitespace().map(str::to_string).collect())
}

/// One read of `/proc/PID/stat`: what a test needs to tell a process apart
/// from a later one with the same pid (`start`), and where it stands.
#[derive(Clone, Debug)]
pub struct ProcStat {
    /// The state letter (`R`, `S`, `Z`...).
    pub state: String,
    pub pgrp: i32,
    pub session: i32,
    /// Start time in clock ticks since boot: with the pid, an identity.
    pub start: u64,
}

/// [`ProcStat`] of `pid`, read at once; `None` if the process is gone.
pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    let f = stat_fields(pid)?;
    Some(ProcStat {
        state: f[0].clone(),
        pgrp: f[2].parse().ok()?,
        session: f[3].parse().ok()?,
        start: f[19].parse().ok()?,
    })
}

/// Live descendants of `pid` (children, grandchildren...), from `/proc`.
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut parent_of = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Some(p) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok())
            && let Some(f) = stat_fields(p)
            && f[0] != "Z"
        {
            parent_of.push((p, f[1].parse::<i32>().unwrap_or(0)));
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(parent_of.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    found.split_off(1)
}

/// A live descendant of `pid` whose command name (`/proc/PID/comm`) is
/// `comm`, polled for until one appears (a payload may still be on its way
/// to the `exec` that names it).
pub fn descendant_named(pid: i32, comm: &str) -> i32 {
    let mut found = None;
    eventually(&format!("a {comm} under {pid}"), || {
        found = descendants(pid)
            .into_iter()
            .find(|&p| fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim_end() == comm));
        found.is_some()
    });
    found.unwrap()
}

/// pgrun's guard: its child named `pgrun-guard`.
pub fn guard_of(pgrun: i32) -> i32 {
    descendant_named(pgrun, "pgrun-guard")
}

/// Dead: `/proc/PID/stat` is gone or shows state Z.
pub fn is_dead(pid: i32) -> bool {
    stat_fields(pid).is_none_or(|f| f[0] == "Z")
}

/// The process state letter (`R`, `S`, `T`, `Z`...), if it exists.
pub fn state(pid: i32) -> Option<String> {
    stat_fields(pid).map(|f| f[0].clone())
}

/// The parent of `pid`, if it exists.
pub fn ppid(pid: i32) -> Option<i32> {
    stat_fields(pid).and_then(|f| f[1].parse().ok())
}

/// The process group of `pid`, if it exists.
pub fn pgrp(pid: i32) -> Option<i32> {
    stat_fields(pid).and_then(|f| f[2].parse().ok())
}

pub fn wait_dead(pid: i32) {
    eventually(&format!("pid {pid} to die"), || is_dead(pid));
}

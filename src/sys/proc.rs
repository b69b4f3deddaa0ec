//! Reading Linux's `/proc`: a process's children, its parent, group and
//! state, and the cgroup it belongs to.
//!
//! Nothing here signals anything: these are the facts the tree walk of
//! `--contain tree` and the process counts are made of. A process may end
//! between two reads, so every reader returns `None` (or an empty list)
//! for a process that is gone, and callers check again before they act.

use super::Pid;
use std::io;

/// The fields of `/proc/PID/stat` pgrun uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// `R`, `S`, `Z`...
    pub state: u8,
    pub ppid: Pid,
    pub pgrp: Pid,
}

/// Parse a `/proc/PID/stat` line: the fields after the command name, which
/// is parenthesised and may itself hold spaces and parentheses.
pub fn parse_stat(stat: &[u8]) -> Option<Stat> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(Stat { state, ppid, pgrp })
}

/// `/proc/PID/stat`; `None` if the process is gone.
pub fn stat(pid: Pid) -> Option<Stat> {
    parse_stat(&std::fs::read(format!("/proc/{pid}/stat")).ok()?)
}

/// The children of every thread of `pid`, from
/// `/proc/PID/task/TID/children` (a child belongs to the thread that
/// forked it). `Err(NotFound)` for a gone process, and also where the
/// kernel lacks the file (no `CONFIG_PROC_CHILDREN`): see
/// [`children_files_exist`].
pub fn children(pid: Pid) -> io::Result<Vec<Pid>> {
    let mut out = Vec::new();
    let mut path = format!("/proc/{pid}/task");
    let base = path.len();
    for entry in std::fs::read_dir(&path)? {
        let entry = entry?;
        path.truncate(base);
        path.push('/');
        path.push_str(&entry.file_name().to_string_lossy());
        path.push_str("/children");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            // The thread ended meanwhile.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        out.extend(text.split_ascii_whitespace().filter_map(|p| p.parse::<Pid>().ok()));
    }
    Ok(out)
}

/// The children of the calling process's main thread (all of them, for a
/// single-threaded process), in one read.
pub fn own_children() -> io::Result<Vec<Pid>> {
    let me = super::getpid();
    let text = std::fs::read_to_string(format!("/proc/{me}/task/{me}/children"))?;
    Ok(text.split_ascii_whitespace().filter_map(|p| p.parse::<Pid>().ok()).collect())
}

/// Whether this kernel has `/proc/PID/task/TID/children`.
pub fn children_files_exist() -> bool {
    let me = super::getpid();
    std::fs::metadata(format!("/proc/{me}/task/{me}/children")).is_ok()
}

/// Every process in `/proc` with its stat line: the scan that replaces
/// [`children`] where the kernel has no children files.
pub fn scan() -> Vec<(Pid, Stat)> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<Pid>().ok()))
        .filter_map(|pid| stat(pid).map(|s| (pid, s)))
        .collect()
}

/// The command name (`comm`) of `pid`.
pub fn comm(pid: Pid) -> Option<String> {
    Some(std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?.trim_end().to_string())
}

/// The arguments `pid` was started with, from `/proc/PID/cmdline`.
pub fn cmdline(pid: Pid) -> Option<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStringExt;
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let mut args: Vec<std::ffi::OsString> =
        raw.split(|&b| b == 0).map(|a| std::ffi::OsString::from_vec(a.to_vec())).collect();
    if args.last().is_some_and(|a| a.is_empty()) {
        args.pop();
    }
    Some(args)
}

/// The cgroup v2 path of `pid` (the `0::PATH` line of `/proc/PID/cgroup`),
/// `pid` 0 meaning pgrun itself.
pub fn cgroup_path(pid: Pid) -> Option<String> {
    read_cgroup_path(pid).ok().flatten()
}

/// [`cgroup_path`], telling a file that cannot be read (`Err`) from one
/// without a `0::` line (`Ok(None)`).
pub fn read_cgroup_path(pid: Pid) -> std::io::Result<Option<String>> {
    let file = if pid == 0 { "/proc/self/cgroup".to_string() } else { format!("/proc/{pid}/cgroup") };
    let text = std::fs::read_to_string(file)?;
    Ok(text.lines().find_map(|l| l.strip_prefix("0::")).map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_odd_command_names() {
        let s = parse_stat(b"42 (a) b (c)) S 7 42 42 0 -1").unwrap();
        assert_eq!(s, Stat { state: b'S', ppid: 7, pgrp: 42 });
        assert_eq!(parse_stat(b"42 (x"), None);
    }

    #[test]
    fn own_children_and_stat() {
        let me = crate::sys::getpid();
        let s = stat(me).unwrap();
        assert_eq!(s.ppid, crate::sys::getppid());
        if children_files_exist() {
            assert!(children(me).is_ok());
        }
    }
}

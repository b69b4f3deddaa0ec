//! Reading Linux's `/proc`: a process's children, its parent, group and
//! state, and the cgroup it belongs to; a group's members counted; a
//! process's effective uid and PID namespace.
//!
//! Nothing here signals anything: these are the facts the tree walk of
//! `--contain tree` and the process counts are made of. A process may end
//! between two reads, so every reader returns `None` (or an empty list)
//! for a process that is gone, and callers check again before they act.
//!
//! Folders are listed with [`list_folder`], the platform's: Linux's reads
//! them with `getdents64(2)`, not `std::fs::read_dir`, whose directory
//! handle panics when `closedir` fails (EIO, EBADF...), and a failed close
//! of a folder opened read-only is nothing to end pgrun for.
//!
//! Some answers are Linux's strengths (`ASKS_PROC` in `linux/proc.rs` and
//! `posix/proc.rs`): a group's census and a process's effective uid are
//! `None` on the portable path, which does without them, as it must where
//! there is no `/proc`.

use super::ids::Pid;
use super::platform::proc::ASKS_PROC;
pub use super::platform::proc::list_folder;
use std::io;

/// The fields of `/proc/PID/stat` pgrun uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// `R`, `S`, `Z`...
    pub state: u8,
    pub ppid: Pid,
    pub pgrp: Pid,
    /// How many threads it has (`num_threads`).
    pub threads: u32,
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
    // session, tty_nr, tpgid, flags, minflt, cminflt, majflt, cmajflt,
    // utime, stime, cutime, cstime, priority, nice, then num_threads.
    let threads = fields.nth(14)?.parse().ok()?;
    Some(Stat { state, ppid, pgrp, threads })
}

/// `/proc/PID/stat`; `None` if the process is gone.
pub fn stat(pid: Pid) -> Option<Stat> {
    parse_stat(&read_whole(&format!("/proc/{pid}/stat")).ok()?)
}

/// Whether `/proc` says process `pid` is a child of the caller: `Some(false)`
/// if it is gone or has another parent, `None` if `/proc` cannot be read
/// (not mounted, say), so that it proves nothing.
pub fn is_child_of_self(pid: Pid) -> Option<bool> {
    match read_whole(&format!("/proc/{pid}/stat")) {
        Ok(line) => Some(parse_stat(&line)?.ppid == super::ids::getpid()),
        Err(e) if e.kind() == io::ErrorKind::NotFound && std::fs::metadata("/proc/self/stat").is_ok() => Some(false),
        Err(_) => None,
    }
}

/// Test-only (debug builds): called before each listing of all of `/proc`
/// (see [`on_full_scan`]).
#[cfg(debug_assertions)]
static FULL_SCAN_HOOK: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Test-only: have `hook` called before every listing of all of `/proc`
/// ([`pids`], under [`scan`] and [`group_census`]), the read whose cost is
/// what the whole machine runs. Installed from above (`crate::test_hook`,
/// which this floor cannot call); debug builds only, the first hook stays.
pub fn on_full_scan(hook: fn()) {
    #[cfg(debug_assertions)]
    let _ = FULL_SCAN_HOOK.set(hook);
    #[cfg(not(debug_assertions))]
    let _ = hook;
}

/// The pids named in `/proc`: a read of every process on the machine.
pub fn pids() -> io::Result<Vec<Pid>> {
    #[cfg(debug_assertions)]
    if let Some(hook) = FULL_SCAN_HOOK.get() {
        hook();
    }
    Ok(list_folder("/proc")?.iter().filter_map(|name| name.to_str()?.parse::<Pid>().ok()).collect())
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
    for thread in list_folder(&path)? {
        path.truncate(base);
        path.push('/');
        path.push_str(&thread.to_string_lossy());
        path.push_str("/children");
        let text = match read_children_file(&path) {
            Ok(text) => text,
            // The thread ended meanwhile.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        out.extend(text.split_ascii_whitespace().filter_map(|p| p.parse::<Pid>().ok()));
    }
    Ok(out)
}

/// One thread's children file, whole. In one read where the list fits the
/// kernel's page-sized buffer (over 500 children): the kernel fills a read
/// in one pass down the list, and each further read resumes by position,
/// so a child is skipped when siblings listed before it ended between two
/// reads (std's `read_to_string` starts with a 32-byte read: five pids).
/// A 4 KiB buffer takes a 4 KiB pass whole; where pages are larger, what
/// it leaves of the pass stays in the kernel's buffer for the next read,
/// which takes it from there without resuming.
fn read_children_file(path: &str) -> io::Result<String> {
    read_whole_text(path)
}

/// A `/proc` file, whole, in page-sized reads into a buffer on the stack:
/// one read for a stat line or a status file where std's `fs::read` asks
/// the file's size (which `/proc` does not know) and grows its reads from
/// 32 bytes (six reads for a stat line). On the stack: a walk reads one
/// file per process, and a large zeroed buffer per file would cost.
fn read_whole(path: &str) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(text),
            Ok(n) => text.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// [`read_whole`], as text.
fn read_whole_text(path: &str) -> io::Result<String> {
    String::from_utf8(read_whole(path)?).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The children of `pid`'s main thread (all of them, for a process with
/// one thread: half the reads of [`children`], which lists the threads
/// first). `Err(NotFound)` for a gone process.
pub fn main_thread_children(pid: Pid) -> io::Result<Vec<Pid>> {
    let text = read_children_file(&format!("/proc/{pid}/task/{pid}/children"))?;
    Ok(text.split_ascii_whitespace().filter_map(|p| p.parse::<Pid>().ok()).collect())
}

/// The children of the calling process's main thread (all of them, for a
/// single-threaded process), in one read.
pub fn own_children() -> io::Result<Vec<Pid>> {
    let me = super::ids::getpid();
    let text = std::fs::read_to_string(format!("/proc/{me}/task/{me}/children"))?;
    Ok(text.split_ascii_whitespace().filter_map(|p| p.parse::<Pid>().ok()).collect())
}

/// More processes than a kernel can have at once (`pid_max` is at most
/// 2^22): a bound for walks over them.
pub const MAX_PIDS: usize = 1 << 22;

/// Every descendant of `root` (children, their children, ...), found by
/// walking the children files down from it: as many reads as the tree has
/// processes, whatever else the machine runs (a `/proc` scan reads every
/// process's stat). `None` where the kernel has no children files, or
/// `root` is gone. A process forked or reparented during the walk may be
/// missed, as it may by a scan made a moment earlier; so may one that
/// stays put in a list longer than a page (see [`children`]'s reader). A
/// child whose own files cannot be read (it ended meanwhile) is listed
/// without its children. So what the walk finds is there; what it does not
/// find may be there too. At most `limit` pids are listed.
pub fn descendants(root: Pid, limit: usize) -> Option<Vec<Pid>> {
    let mut found = children(root).ok()?;
    let mut seen: std::collections::BTreeSet<Pid> = found.iter().copied().collect();
    let mut next = 0;
    while next < found.len() && found.len() < limit {
        let pid = found[next];
        next += 1;
        for child in children(pid).unwrap_or_default() {
            if child != root && seen.insert(child) {
                found.push(child);
            }
        }
    }
    found.truncate(limit);
    Some(found)
}

/// Whether this kernel has `/proc/PID/task/TID/children`.
pub fn children_files_exist() -> bool {
    let me = super::ids::getpid();
    std::fs::metadata(format!("/proc/{me}/task/{me}/children")).is_ok()
}

/// Every process in `/proc` with its stat line: the scan that replaces
/// [`children`] where the kernel has no children files.
pub fn scan() -> Vec<(Pid, Stat)> {
    let Ok(pids) = pids() else { return Vec::new() };
    pids.into_iter().filter_map(|pid| stat(pid).map(|s| (pid, s))).collect()
}

/// The command name (`comm`) of `pid`.
pub fn comm(pid: Pid) -> Option<String> {
    Some(read_whole_text(&format!("/proc/{pid}/comm")).ok()?.trim_end().to_string())
}

/// Whether processes `a` and `b` run the same executable file (the same
/// device and inode behind `/proc/PID/exe`); `None` where either cannot be
/// read (gone, another user's, no `/proc`).
pub fn same_executable(a: Pid, b: Pid) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    let id = |pid: Pid| std::fs::metadata(format!("/proc/{pid}/exe")).ok().map(|m| (m.dev(), m.ino()));
    Some(id(a)? == id(b)?)
}

/// Whether `child` is named `name` and runs the executable of `parent`
/// (a fork of it that named itself, as pgrun's guard does): a process
/// that only bears the name (a command of the run) is not; by the name
/// alone where the executables cannot be compared.
pub fn is_named_fork_of(child: Pid, parent: Pid, name: &str) -> bool {
    comm(child).is_some_and(|comm| comm == name) && same_executable(child, parent).unwrap_or(true)
}

/// The arguments `pid` was started with, from `/proc/PID/cmdline`.
pub fn cmdline(pid: Pid) -> Option<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStringExt;
    let raw = read_whole(&format!("/proc/{pid}/cmdline")).ok()?;
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
        let s = parse_stat(b"42 (a) b (c)) S 7 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 3 0 5").unwrap();
        assert_eq!(s, Stat { state: b'S', ppid: 7, pgrp: 42, threads: 3 });
        assert_eq!(parse_stat(b"42 (x"), None);
    }

    #[test]
    fn after_kill_reads_the_pending_kill_the_exit_and_the_dead() {
        let stat = |state: &str, flags: u64| format!("42 (a b) {state} 7 42 42 0 -1 {flags} 1 0 0 0").into_bytes();
        let status = |own: &str, shared: &str| format!("Name:\ta b\nSigPnd:\t{own}\nShdPnd:\t{shared}\n");
        let none = "0000000000000000";
        let kill = "0000000000000100";
        assert_eq!(parse_after_kill(&stat("S", 0x400040), &status(none, none)), Some(false));
        assert_eq!(parse_after_kill(&stat("R", 0x400040), &status(kill, none)), Some(true));
        assert_eq!(parse_after_kill(&stat("t", 0x400448), &status(none, kill)), Some(true));
        assert_eq!(parse_after_kill(&stat("S", 0x400044), &status(none, none)), Some(true));
        assert_eq!(parse_after_kill(&stat("Z", 0), &status(none, none)), Some(true));
        assert_eq!(parse_after_kill(&stat("X", 0), &status(none, none)), Some(true));
        // TERM pending is not KILL.
        assert_eq!(parse_after_kill(&stat("S", 0), &status("0000000000004000", none)), Some(false));
        assert_eq!(parse_after_kill(&stat("S", 0), "Name:\tx\n"), None);
    }

    #[test]
    fn descendants_walks_down_to_grandchildren() {
        use std::io::BufRead;
        if !children_files_exist() {
            return;
        }
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let grandchild: Pid = line.trim().parse().unwrap();
        let found = descendants(crate::sys::getpid(), MAX_PIDS);
        let limited = descendants(crate::sys::getpid(), 1);
        // SAFETY: the grandchild's pid, read from its parent, which has not
        // reaped it (it waits for it): the number still names it.
        unsafe { libc::kill(grandchild, libc::SIGKILL) };
        child.wait().unwrap();
        let found = found.unwrap();
        assert!(found.contains(&(child.id() as Pid)), "{found:?} lacks the child");
        assert!(found.contains(&grandchild), "{found:?} lacks the grandchild");
        assert_eq!(limited.map(|l| l.len()), Some(1));
    }

    #[test]
    fn own_children_and_stat() {
        let me = crate::sys::getpid();
        let s = stat(me).unwrap();
        assert_eq!(s.ppid, crate::sys::getppid());
        if children_files_exist() {
            assert!(children(me).is_ok());
        }
        assert!(pids().unwrap().contains(&me));
        let mut threads = list_folder(format!("/proc/{me}/task")).unwrap();
        threads.sort();
        assert!(threads.iter().any(|t| t.to_str() == Some(&me.to_string())), "{threads:?}");
        assert!(list_folder("/proc/no-such-folder").is_err());
    }
}

/// How many processes are in group `pgid`, counted from `/proc` (Linux only;
/// `None` elsewhere or if `/proc` is not mounted).
pub fn count_group_members(pgid: Pid) -> Option<usize> {
    group_census(pgid).map(|c| c.members)
}

/// How many processes of group `pgid` are among the descendants of
/// `root` (found by [`descendants`], zombies included): a group's members
/// counted from one process's tree, not from every process's stat (Linux
/// only; `None` on the portable path, where `root` is gone, or without
/// children files).
pub fn count_group_members_below(root: Pid, pgid: Pid) -> Option<usize> {
    if !ASKS_PROC {
        return None;
    }
    let below = descendants(root, MAX_PIDS)?;
    Some(below.into_iter().filter(|&pid| stat(pid).is_some_and(|s| s.pgrp == pgid)).count())
}

/// The members of a process group, and how many of them are zombies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    pub members: usize,
    pub zombies: usize,
    /// Zombies whose parent is the caller: it can reap them itself.
    pub own_zombies: usize,
}

impl Census {
    /// Whether the group holds nothing but zombies that the caller cannot
    /// reap (their parent is someone else): how many, if so.
    pub fn only_foreign_zombies(&self) -> Option<usize> {
        (self.members > 0 && self.zombies == self.members && self.own_zombies == 0).then_some(self.zombies)
    }
}

/// Count group `pgid`'s members from `/proc` (Linux only; `None` on the
/// portable path or if `/proc` is not mounted).
pub fn group_census(pgid: Pid) -> Option<Census> {
    if !ASKS_PROC {
        return None;
    }
    let pids = pids().ok()?;
    let me = super::ids::getpid();
    let mut census = Census::default();
    for pid in pids {
        let Some(stat) = stat(pid) else { continue };
        if stat.pgrp == pgid {
            census.members += 1;
            census.zombies += usize::from(stat.state == b'Z');
            census.own_zombies += usize::from(stat.state == b'Z' && stat.ppid == me);
        }
    }
    Some(census)
}

/// The effective uid process `pid` runs as, from `/proc/PID/status` (Linux
/// only; `None` on the portable path, or if the process is gone or hidden).
pub fn effective_uid(pid: Pid) -> Option<u32> {
    if !ASKS_PROC {
        return None;
    }
    let status = read_whole_text(&format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    line.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// How many PID namespaces, from the one `/proc` belongs to down, number
/// process `pid` (the entries of its `NSpid` line, readable by anyone).
fn nspid_depth(pid: &str) -> Option<usize> {
    let status = read_whole_text(&format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    Some(line.split_ascii_whitespace().count())
}

/// Whether process `pid` lives in the caller's PID namespace, so that the
/// numbers it sees (its group id) name the same processes here. Compares
/// `/proc/self/ns/pid` with `/proc/PID/ns/pid`; where that cannot be read
/// the answer is `false`, the safe side. A system with no namespace files
/// for the caller (no `/proc`, or one without `ns`, as other systems'
/// are) has no PID namespaces to tell apart: `true`. (Linux's namespaces
/// are a fact of the kernel, whichever path pgrun takes.)
pub fn in_own_pid_namespace(pid: Pid) -> bool {
    use std::os::unix::fs::MetadataExt;
    let ns = |p: &str| std::fs::metadata(format!("/proc/{p}/ns/pid")).map(|m| (m.dev(), m.ino()));
    match (ns("self"), ns(&pid.to_string())) {
        (Ok(own), Ok(theirs)) => own == theirs,
        // No namespace files at all: nothing can tell namespaces apart,
        // and a system without them has none to offer.
        (Err(_), Err(_)) if std::fs::metadata("/proc/self/ns").is_err() => true,
        // Another user's process: its ns link is not ours to read, but
        // its NSpid line is. One entry each means both live in the
        // namespace this /proc belongs to, so in the same one.
        _ => nspid_depth("self") == Some(1) && nspid_depth(&pid.to_string()) == Some(1),
    }
}

/// `PF_EXITING` in `/proc/PID/stat`'s flags: the process has begun its exit.
const PF_EXITING: u64 = 0x4;

/// Whether process `pid` has been dealt its death and is on its way out: a
/// SIGKILL pending (`SigPnd` or `ShdPnd` of `/proc/PID/status`), its exit
/// begun (the exiting flag of `/proc/PID/stat`), or it is dead already
/// (state `X` or `Z`). On a loaded machine a process that was sent KILL
/// may not run for a while, and one in its exit may be held there (by a
/// tracer, or a slow release of its memory): it is not alive, and nothing
/// more can be done to it. `None` where it cannot be told: the portable
/// path, the process gone or hidden.
pub fn after_kill(pid: Pid) -> Option<bool> {
    if !ASKS_PROC {
        return None;
    }
    let stat = read_whole(&format!("/proc/{pid}/stat")).ok()?;
    let status = read_whole_text(&format!("/proc/{pid}/status")).ok()?;
    parse_after_kill(&stat, &status)
}

/// [`after_kill`]'s reading of a `/proc/PID/stat` line and the
/// `/proc/PID/status` text of the same process.
fn parse_after_kill(stat: &[u8], status: &str) -> Option<bool> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    // ppid, pgrp, session, tty_nr, tpgid, then flags.
    let flags: u64 = fields.nth(5)?.parse().ok()?;
    let kill_bit = 1u64 << (libc::SIGKILL - 1);
    let pending = |key: &str| {
        let line = status.lines().find_map(|l| l.strip_prefix(key))?;
        u64::from_str_radix(line.trim(), 16).ok()
    };
    let (own, shared) = (pending("SigPnd:")?, pending("ShdPnd:")?);
    Some(matches!(state, b'X' | b'Z') || flags & PF_EXITING != 0 || (own | shared) & kill_bit != 0)
}

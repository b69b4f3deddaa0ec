//! The cgroup v2 files `--contain cgroup` uses: finding the cgroup2 mount,
//! creating and removing a leaf, and its `cgroup.procs`, `cgroup.events`
//! and `cgroup.kill`.
//!
//! The mount is found in `/proc/self/mountinfo` (it is `/sys/fs/cgroup` on
//! a unified host and often `/sys/fs/cgroup/unified` on a hybrid one), and
//! pgrun's own cgroup in `/proc/self/cgroup`; a leaf is created below that.

use super::ids::Pid;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Where the cgroup2 hierarchy is mounted, and the path inside it that
/// the mount shows at its top (`/` unless a container mounted a subtree).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub point: PathBuf,
    pub root: String,
}

/// The cgroup2 mount, from `/proc/self/mountinfo`: `Ok(None)` if there is
/// none, `Err` if the file cannot be read (too many open files, no /proc).
pub fn find_mount() -> io::Result<Option<Mount>> {
    Ok(parse_mountinfo(&fs::read_to_string("/proc/self/mountinfo")?))
}

/// The first cgroup2 entry of a mountinfo text. A malformed line (no
/// ` - ` separator, too few fields) is skipped, not the whole file.
pub fn parse_mountinfo(text: &str) -> Option<Mount> {
    text.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split(' ').next() != Some("cgroup2") {
            return None;
        }
        let fields: Vec<&str> = left.split(' ').collect();
        let (root, point) = (fields.get(3)?, fields.get(4)?);
        Some(Mount { point: PathBuf::from(unescape(point)), root: unescape(root) })
    })
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Ok(v) = u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 4]).unwrap_or("x"), 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The folder of cgroup `path` (as `/proc/PID/cgroup` names it) under
/// `mount`; `None` if the mount does not show it.
pub fn folder(mount: &Mount, path: &str) -> Option<PathBuf> {
    let root = mount.root.trim_end_matches('/');
    let rel = path.strip_prefix(root)?;
    if !(rel.is_empty() || rel.starts_with('/')) {
        return None;
    }
    Some(mount.point.join(rel.trim_start_matches('/')))
}

/// `mkdir(2)` of a new cgroup (fails if it exists).
pub fn create(path: &Path) -> io::Result<()> {
    fs::create_dir(path)
}

/// Open `name` in cgroup folder `dir` for writing, close-on-exec.
pub fn open_write(dir: &Path, name: &str) -> io::Result<OwnedFd> {
    Ok(OpenOptions::new().write(true).custom_flags(libc::O_CLOEXEC).open(dir.join(name))?.into())
}

/// Open `name` in cgroup folder `dir` for reading, close-on-exec.
pub fn open_read(dir: &Path, name: &str) -> io::Result<OwnedFd> {
    Ok(OpenOptions::new().read(true).custom_flags(libc::O_CLOEXEC).open(dir.join(name))?.into())
}

/// The processes in cgroup `dir` and the cgroups below it. `Err` if a
/// `cgroup.procs` or a folder cannot be read, except a cgroup below `dir`
/// that was removed meanwhile (it had no process left).
pub fn members(dir: &Path) -> io::Result<Vec<Pid>> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), true)];
    while let Some((d, top)) = stack.pop() {
        let removed_below = |e: &io::Error| !top && matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENODEV));
        match fs::read_to_string(d.join("cgroup.procs")) {
            Ok(text) => out.extend(text.split_ascii_whitespace().filter_map(|p| p.parse::<Pid>().ok())),
            Err(e) if removed_below(&e) => continue,
            Err(e) => return Err(e),
        }
        let entries = match fs::read_dir(&d) {
            Ok(entries) => entries,
            Err(e) if removed_below(&e) => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                stack.push((entry.path(), false));
            }
        }
    }
    Ok(out)
}

/// Whether `cgroup.events` (an fd of it) says `populated 1`. Reading from
/// offset 0 also re-arms its poll notification.
pub fn populated(events: BorrowedFd<'_>) -> io::Result<bool> {
    let mut buf = [0u8; 256];
    // SAFETY: pread into a stack buffer of the given size at offset 0.
    let n = unsafe { libc::pread(events.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let text = String::from_utf8_lossy(&buf[..n as usize]);
    Ok(!text.lines().any(|l| l.trim() == "populated 0"))
}

/// Write `1` to `cgroup.kill`: SIGKILL every process in the cgroup and
/// below, atomically with respect to forks.
pub fn kill(dir: &Path) -> io::Result<()> {
    let mut file: File = open_write(dir, "cgroup.kill")?.into();
    file.write_all(b"1")
}

/// `rmdir(2)` every cgroup below `dir`, deepest first (not `dir` itself).
/// Only cgroups with no live process can be removed.
pub fn remove_below(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            remove_below(&entry.path())?;
            fs::remove_dir(entry.path())?;
        }
    }
    Ok(())
}

/// `rmdir(2)` of one empty cgroup.
pub fn remove_one(dir: &Path) -> io::Result<()> {
    fs::remove_dir(dir)
}

/// Open cgroup folder `dir` itself (`O_DIRECTORY`), close-on-exec: the fd
/// names that cgroup whatever later happens to its path.
pub fn open_folder(dir: &Path) -> io::Result<OwnedFd> {
    Ok(OpenOptions::new().read(true).custom_flags(libc::O_CLOEXEC | libc::O_DIRECTORY).open(dir)?.into())
}

/// A path that names the folder open as `folder` (`/proc/self/fd/N`):
/// files below it are reached in that very cgroup, even if another cgroup
/// now has its name.
pub fn through(folder: BorrowedFd<'_>) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", folder.as_raw_fd()))
}

/// The inode number of an open cgroup folder: a cgroup's identity (cgroup2
/// does not reuse them while the system runs, and cannot rename a cgroup).
pub fn inode_of(folder: BorrowedFd<'_>) -> io::Result<u64> {
    Ok(nix::sys::stat::fstat(folder).map_err(io::Error::from)?.st_ino)
}

/// The inode number of what `path` names now; `Ok(None)` if nothing.
pub fn inode_at(path: &Path) -> io::Result<Option<u64>> {
    use std::os::unix::fs::MetadataExt;
    match fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some(meta.ino())),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What a cgroup's accounting files say, each `None` where the file (or
/// the key in it) is not there: `cpu.stat` is in every cgroup2 cgroup, the
/// others only where the parent enabled the controller (`memory`, `pids`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accounting {
    /// `cpu.stat`: `user_usec`, `system_usec`.
    pub user_usec: Option<u64>,
    pub system_usec: Option<u64>,
    /// `memory.peak`, `memory.current`.
    pub memory_peak: Option<u64>,
    pub memory_current: Option<u64>,
    /// `pids.peak`, `pids.current`.
    pub pids_peak: Option<u64>,
    pub pids_current: Option<u64>,
    /// `oom_kill` in `memory.events`.
    pub oom_kills: Option<u64>,
}

/// Read cgroup `dir`'s accounting files. A file that is not there is
/// `None`; one that cannot be read is `None` too, and its error is handed
/// to `failed` (with the file's name) for the caller to say.
pub fn accounting(dir: &Path, failed: &mut dyn FnMut(&str, io::Error)) -> Accounting {
    let mut keyed = |file: &str, keys: &[&str]| -> Vec<Option<u64>> {
        match read_optional(&dir.join(file)) {
            Ok(Some(text)) => keys.iter().map(|k| keyed_value(&text, k)).collect(),
            Ok(None) => vec![None; keys.len()],
            Err(e) => {
                failed(file, e);
                vec![None; keys.len()]
            }
        }
    };
    let cpu = keyed("cpu.stat", &["user_usec", "system_usec"]);
    let oom = keyed("memory.events", &["oom_kill"]);
    let mut single = |file: &str| match read_optional(&dir.join(file)) {
        Ok(text) => text.and_then(|t| t.trim().parse().ok()),
        Err(e) => {
            failed(file, e);
            None
        }
    };
    Accounting {
        user_usec: cpu[0],
        system_usec: cpu[1],
        memory_peak: single("memory.peak"),
        memory_current: single("memory.current"),
        pids_peak: single("pids.peak"),
        pids_current: single("pids.current"),
        oom_kills: oom[0],
    }
}

/// A file's content; `Ok(None)` if it is not there.
fn read_optional(path: &Path) -> io::Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The value of `key` in a flat-keyed cgroup file (`KEY VALUE` lines).
fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// The words of a cgroup file such as `cgroup.controllers` or
/// `cgroup.subtree_control`.
pub fn read_words(dir: &Path, name: &str) -> io::Result<Vec<String>> {
    Ok(fs::read_to_string(dir.join(name))?.split_ascii_whitespace().map(str::to_string).collect())
}

/// Write `value` to cgroup file `name` in `dir` (one write, as the
/// kernel wants it).
pub fn write_file(dir: &Path, name: &str, value: &str) -> io::Result<()> {
    let mut file: File = open_write(dir, name)?.into();
    file.write_all(value.as_bytes())
}

/// The processes in cgroup `dir` itself (not below it).
pub fn procs_here(dir: &Path) -> io::Result<Vec<Pid>> {
    Ok(fs::read_to_string(dir.join("cgroup.procs"))?
        .split_ascii_whitespace()
        .filter_map(|p| p.parse::<Pid>().ok())
        .collect())
}

/// Whether process `pid` is in cgroup `rel` (a `/proc/PID/cgroup` path) or
/// below it.
pub fn process_in(pid: Pid, rel: &str) -> bool {
    super::proc::cgroup_path(pid).is_some_and(|p| p == rel || p.strip_prefix(rel).is_some_and(|r| r.starts_with('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_hybrid_and_unified() {
        let hybrid = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(parse_mountinfo(hybrid), Some(Mount { point: "/sys/fs/cgroup/unified".into(), root: "/".into() }));
        let nested = "99 1 0:30 /user.slice /sys/fs/cg\\040x rw shared:1 - cgroup2 cgroup2 rw\n";
        let m = parse_mountinfo(nested).unwrap();
        assert_eq!(m.point, PathBuf::from("/sys/fs/cg x"));
        assert_eq!(folder(&m, "/user.slice/a"), Some(PathBuf::from("/sys/fs/cg x/a")));
        assert_eq!(folder(&m, "/user.slicex"), None);
        assert_eq!(folder(&m, "/other"), None);
        assert_eq!(parse_mountinfo("1 2 0:1 / / rw - ext4 /dev/sda rw\n"), None);
    }

    #[test]
    fn flat_keyed_files() {
        let stat = "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\n";
        assert_eq!(keyed_value(stat, "user_usec"), Some(1000));
        assert_eq!(keyed_value(stat, "system_usec"), Some(500));
        assert_eq!(keyed_value(stat, "usec"), None);
        let events = "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 1\n";
        assert_eq!(keyed_value(events, "oom_kill"), Some(2));
        assert_eq!(keyed_value("oom_kill x\n", "oom_kill"), None);
    }

    #[test]
    fn mountinfo_malformed_lines_are_skipped() {
        // No " - " separator, too few fields before it, an empty line: each
        // is skipped, and the cgroup2 line after them is still found.
        let text = "garbage without a separator\n\
                    7 8 - cgroup2 cgroup2 rw\n\
                    \n\
                    41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(parse_mountinfo(text), Some(Mount { point: "/sys/fs/cgroup/unified".into(), root: "/".into() }));
    }
}

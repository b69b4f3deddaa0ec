//! Cleaning up: the Guard that records every process and group a test
//! started and kills on drop only those still the same, the Tag that finds
//! what a failed test left detached, and sending a signal to a process the
//! test started.

use super::*;
use std::fs;
use std::process::{Child, Command};
use std::thread;
use std::time::{Duration, Instant};

/// Records the processes a test started; on drop SIGKILLs those still alive,
/// and only if the pid still names the same process (same start time), so a
/// reused pid is never hit.
#[derive(Default)]
pub struct Guard {
    pids: Vec<(i32, String)>,
    children: Vec<Child>,
    /// Group ids, with their leader's start time when it was recorded.
    groups: Vec<(i32, Option<String>)>,
}

impl Guard {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn record(&mut self, pid: i32) {
        if let Some(f) = stat_fields(pid) {
            self.pids.push((pid, f[19].clone()));
        }
    }
    /// Record a process group that a pgrun this test started created (read
    /// from its pid file while the group existed). A group id cannot be
    /// reused while any member of the group lives, so killing it on drop
    /// can only hit what is left of that group.
    pub fn record_group(&mut self, pgid: i32) {
        let leader_start = stat_fields(pgid).map(|f| f[19].clone());
        self.groups.push((pgid, leader_start));
    }
    /// Spawn `cmd` and keep its handle; killed on drop if still running.
    pub fn spawn(&mut self, cmd: &mut Command) -> usize {
        let child = cmd.spawn().expect("spawn");
        self.children.push(child);
        self.children.len() - 1
    }
    /// Spawn `cmd` and reap it from a thread as soon as it ends (so it never
    /// lingers as a zombie of the test); the receiver gets its status.
    pub fn spawn_reaped(&mut self, cmd: &mut Command) -> (i32, std::sync::mpsc::Receiver<i32>) {
        let mut child = cmd.spawn().expect("spawn");
        let pid = child.id() as i32;
        self.record(pid);
        let (tx, rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(code_of(child.wait().expect("wait")));
        });
        (pid, rx)
    }
    pub fn child(&mut self, index: usize) -> &mut Child {
        &mut self.children[index]
    }
    /// Wait for child `index` with the suite deadline; returns its output
    /// status code (or 128+signal).
    pub fn wait(&mut self, index: usize) -> i32 {
        let child = &mut self.children[index];
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return code_of(status);
            }
            assert!(start.elapsed() < DEADLINE, "pgrun did not exit in time");
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // A child still running here means the test failed half-way: what it
        // started is ours too, so record its descendants before killing it.
        let running: Vec<i32> = self
            .children
            .iter_mut()
            .filter_map(|c| c.try_wait().ok().flatten().is_none().then(|| c.id() as i32))
            .collect();
        for pid in running {
            for descendant in descendants(pid) {
                self.record(descendant);
            }
        }
        for child in &mut self.children {
            if child.try_wait().ok().flatten().is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        for (pgid, leader_start) in &self.groups {
            if group_still_ours(*pgid, leader_start.as_deref()) {
                // SAFETY: a group this test created that still exists, see
                // record_group and group_still_ours.
                unsafe { libc::kill(-*pgid, libc::SIGKILL) };
            }
        }
        for (pid, start) in &self.pids {
            if let Some(f) = stat_fields(*pid)
                && &f[19] == start
                && f[0] != "Z"
            {
                // SAFETY: a pid we recorded, verified by its start time.
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
        }
    }
}

/// Whether group `pgid` still exists and is still the one recorded: some
/// live process is in it, and if its leader is alive, it is the process that
/// led it when it was recorded (same start time). A group that is gone is
/// never signalled: its id may have been reused by another group.
pub(super) fn group_still_ours(pgid: i32, leader_start: Option<&str>) -> bool {
    // No process at all in the group (ESRCH): gone, without reading all of
    // /proc. kill with signal 0 only probes.
    // SAFETY: kill takes plain integers; signal 0 sends nothing.
    if unsafe { libc::kill(-pgid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return false;
    }
    if let (Some(f), Some(start)) = (stat_fields(pgid), leader_start)
        && f[2] == pgid.to_string()
        && f[19] != start
    {
        return false; // a new process leads a group with this id
    }
    fs::read_dir("/proc").into_iter().flatten().flatten().any(|entry| {
        entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
            .and_then(stat_fields)
            .is_some_and(|f| f[0] != "Z" && f[2] == pgid.to_string())
    })
}

/// Send `signal` to a process this test started.
pub fn send(pid: i32, signal: i32) {
    // SAFETY: kill with a positive pid the test recorded.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill({pid}, {signal})");
}

/// Every process a test starts carries a tag of its own in its environment
/// (pgrun passes it on to the supervising pgrun, the guard and the
/// command): whatever of them a failed test leaves running, detached from
/// the test's own children, is found by it and killed on drop.
pub struct Tag(String);

pub(super) const TAG_VARIABLE: &str = "PGRUN_TEST_TAG";

impl Tag {
    /// A tag no other test of this process has (`name` says whose).
    pub fn new(name: &str) -> Tag {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Tag(format!("{}-{n}-{name}", std::process::id()))
    }
    /// Give `cmd` (and so every process it starts) the tag.
    pub fn on<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env(TAG_VARIABLE, &self.0)
    }
    /// Live processes that hold this tag.
    pub fn processes(&self) -> Vec<i32> {
        let needle = format!("{TAG_VARIABLE}={}", self.0);
        fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| !is_dead(pid))
            .filter(|&pid| {
                fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|&b| b == 0).any(|var| var == needle.as_bytes()))
            })
            .collect()
    }
}

impl Drop for Tag {
    fn drop(&mut self) {
        for pid in self.processes() {
            // SAFETY: kill takes plain integers; a live process that holds
            // this test's own tag (a pid read from /proc just now).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

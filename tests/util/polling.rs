//! Polling with a deadline: for a condition, for a complete line in a
//! file, for a pid a payload wrote.

use super::*;
use std::fs;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

/// Poll `cond` with backoff until it holds or the deadline passes.
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Wait until `path` holds a complete line (ends in a newline) and return
/// its content without the newline.
pub fn wait_line(path: &Path) -> String {
    let mut text = String::new();
    eventually(&format!("a line in {}", path.display()), || {
        text = fs::read_to_string(path).unwrap_or_default();
        text.ends_with('\n')
    });
    text.trim_end().to_string()
}

/// Wait for a pid written by a payload (`echo $$ > FILE`) and guard it.
pub fn wait_pid(path: &Path, guard: &mut Guard) -> i32 {
    let pid: i32 = wait_line(path).parse().expect("a pid");
    guard.record(pid);
    pid
}

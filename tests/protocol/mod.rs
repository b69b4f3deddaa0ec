//! The pid file protocol under races, other users and PID namespaces: a
//! starting run is never taken for a live one, two runs never share a pid
//! file, another user cannot fake a live run or a cancel, a cancel is never
//! lost, and nothing outside the run is ever signalled. Windows found by
//! reading are held open with the test-only pauses (`Pause`). One file per
//! topic; this one holds the helpers they share.

mod cancel;
mod failures;
mod other_users;
pub(crate) mod reused_number;
mod starting;

use std::fs;

/// A stale pid file naming the bystander's group, as a crashed run leaves it.
pub(super) fn stale_file(path: &std::path::Path, pgid: i32) {
    fs::write(path, format!("{pgid}\n")).unwrap();
}

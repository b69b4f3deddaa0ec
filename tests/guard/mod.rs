//! The guard: pgrun killed with SIGKILL (alone, or with its caller's whole
//! process group) still leaves nothing running, and removes its pid file
//! and marker; `--no-guard` does not; a normal exit reaps the guard. One
//! file per topic; this one holds the helpers they share.

mod dying;
mod killed;
mod members;
mod removes;
mod start;

use crate::util::*;
use std::process::{Command, Stdio};

/// A run with a member that ignores TERM (logging it) and a pid file.
pub(super) fn start_stubborn(guard: &mut Guard, scratch: &Scratch, extra: &[&str]) -> (usize, i32, i32) {
    let dir = scratch.sh();
    let payload = format!(
        "sh -c 'trap \"echo TERM >> {dir}/member.log\" TERM; echo $$ > {dir}/member.pid; while :; do sleep 0.1; done' & wait"
    );
    let mut args = vec!["-k", "2"];
    args.extend_from_slice(extra);
    let (index, pgid) = start_published(guard, &scratch.path("job.pid"), &args, &payload);
    let member = wait_pid(&scratch.path("member.pid"), guard);
    (index, pgid, member)
}

/// strace, for the tests that watch pgrun's syscalls: a clear failure if it
/// is missing.
pub(super) fn strace() -> Command {
    let found = Command::new("strace").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(found.is_ok_and(|s| s.success()), "this test needs strace (6.1 or later) on PATH");
    Command::new("strace")
}

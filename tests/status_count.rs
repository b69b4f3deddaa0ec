//! `pgrun status --json` counts a run as the plain line does, in the
//! walk that also reads what the run is doing (issue 32): a process that
//! left the group (`setsid`) is the run's in tree mode, not in group mode.

use crate::util::*;

/// The `processes` of `status --json` and the count of the plain line.
fn counts(pidfile: &std::path::Path) -> (Option<i64>, String) {
    let p = pidfile.to_str().unwrap();
    let json = run(&mut pgrun(["status", "--json", p]));
    assert_status(&json, 0, "status --json");
    let answer: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(answer["listening"].is_array(), "the activity fields are there: {answer}");
    let plain = run(&mut pgrun(["status", p]));
    assert_status(&plain, 0, "status");
    (answer["processes"].as_i64(), String::from_utf8_lossy(&plain.stdout).into_owned())
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path reads no children files")]
fn status_json_counts_an_escapee_in_tree_mode_not_in_group_mode() {
    for (mode, expected) in [("tree", 2), ("group", 1)] {
        let scratch = Scratch::new();
        let mut guard = Guard::new();
        let pidfile = scratch.path("job.pid");
        let dir = scratch.sh();
        let payload = format!("setsid sleep 1000 & echo $! > {dir}/escapee; wait");
        let (run, _) = start_published(&mut guard, &pidfile, &["--contain", mode], &payload);
        let escapee = wait_pid(&scratch.path("escapee"), &mut guard);
        eventually("the escapee in its own session", || pgrp(escapee) == Some(escapee));
        let (json, plain) = counts(&pidfile);
        assert_eq!(json, Some(expected), "{mode} mode: {plain}");
        assert!(plain.contains(&format!(", {expected} process")), "{mode} mode: {plain}");
        send(escapee, libc::SIGKILL);
        wait_dead(escapee);
        send(guard.child(run).id() as i32, libc::SIGTERM);
        guard.wait(run);
    }
}

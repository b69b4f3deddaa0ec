//! `pgrun status`: every state and its LSB exit status.

use crate::util::*;
use std::fs;

fn status(args: &[&str]) -> (i32, String) {
    let mut all = vec!["status"];
    all.extend_from_slice(args);
    let out = run(&mut pgrun(&all));
    (code_of(out.status), String::from_utf8_lossy(&out.stdout).into_owned() + &stderr_of(&out))
}

#[test]
fn running_then_stopping_then_not_running() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let (index, pgid) = start_published(&mut guard, &pidfile, &[], "sleep 300 & sleep 300 & wait");
    let pgrun_pid = guard.child(index).id() as i32;
    // The process count needs /proc, which the portable build does not read.
    let count = if cfg!(feature = "posix-fallback") { "" } else { "3 processes, " };
    eventually("three members", || status(&[p]).1.contains(count));
    let (code, text) = status(&[p]);
    assert_eq!(code, 0);
    assert!(text.starts_with(&format!("running: pgid {pgid}, pgrun pid {pgrun_pid}, {count}up ")), "{text}");

    let (code, text) = status(&["--json", p]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (v["state"].as_str(), v["pgid"].as_i64(), v["pid"].as_i64()),
        (Some("running"), Some(pgid as i64), Some(pgrun_pid as i64))
    );

    fs::write(scratch.path("job.pid.cancel"), "").unwrap();
    let (code, text) = status(&[p]);
    assert_eq!(code, 0);
    assert!(text.starts_with("stopping: "), "{text}");

    send(pgrun_pid, libc::SIGTERM);
    assert_eq!(guard.wait(index), 143);
    assert_eq!(status(&[p]), (3, format!("not-running: no pid file at {p}\n")));
    let (code, text) = status(&["--json", p]);
    assert_eq!(code, 3);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap()["state"], "not-running");
}

#[test]
fn stale_pending_and_broken_files() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    fs::write(&pidfile, "4242\n").unwrap();
    let (code, text) = status(&[p]);
    assert_eq!(code, 1, "{text}");
    assert!(text.starts_with("stale: pgid 4242"), "{text}");

    fs::write(&pidfile, "forty-two\n").unwrap();
    let (code, text) = status(&[p]);
    assert_eq!(code, 4, "{text}");
    assert!(text.starts_with("pgrun: ") && text.lines().count() == 1, "{text}");

    fs::remove_file(&pidfile).unwrap();
    fs::write(scratch.path("job.pid.cancel"), "").unwrap();
    let (code, text) = status(&["--json", p]);
    assert_eq!(code, 3);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap()["state"], "cancel-pending");

    assert_eq!(status(&[]).0, 125, "usage error");
}

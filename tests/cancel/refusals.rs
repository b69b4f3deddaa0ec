//! What `pgrun cancel` refuses: unsafe pid files (garbage, group 1,
//! world-writable, another owner's, a symlink), its own group and its
//! caller's, and bad usage; each one line, exit 125, nothing signalled, its
//! marker withdrawn and a marker it did not make left alone.

use super::cancel;
use crate::util::*;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// Refusals: one line, exit 125, nothing signalled, the marker withdrawn.
fn assert_refused(pidfile: &std::path::Path, marker: &std::path::Path, what: &str, extra: &[&str]) {
    let mut args = extra.to_vec();
    args.push(pidfile.to_str().unwrap());
    let out = cancel(&args);
    assert_status(&out, 125, what);
    let err = stderr_of(&out);
    assert!(err.starts_with("pgrun: ") && err.lines().count() == 1, "{what}: {err}");
    assert!(!marker.exists(), "{what}: marker left behind");
}

#[test]
fn unsafe_pid_files_are_refused() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let marker = scratch.path("job.pid.cancel");
    let mut sleeper = Command::new("sleep");
    sleeper.arg("300").process_group(0);
    let index = guard.spawn(&mut sleeper);
    let victim = guard.child(index).id() as i32;

    fs::write(&pidfile, "not a group\n").unwrap();
    assert_refused(&pidfile, &marker, "garbage", &[]);
    fs::write(&pidfile, "1\n").unwrap();
    assert_refused(&pidfile, &marker, "group 1", &["--force"]);
    // cancel's own group: a new group made for it (never the test runner's,
    // which a regression would kill), whose id sh writes before it becomes
    // that cancel.
    let script = format!("echo $$ > {p}; exec {pgrun} cancel --force {p}", p = pidfile.display(), pgrun = pgrun_path());
    let mut own_group = Command::new("sh");
    own_group.args(["-c", &script]).stdin(Stdio::null()).process_group(0);
    let out = run(default_signals(&mut own_group));
    assert_status(&out, 125, "cancel's own group");
    assert!(!marker.exists(), "cancel's own group: marker left behind");
    assert!(stderr_of(&out).starts_with("pgrun: "), "{}", stderr_of(&out));

    fs::write(&pidfile, format!("{victim}\n")).unwrap();
    fs::set_permissions(&pidfile, fs::Permissions::from_mode(0o666)).unwrap();
    assert_refused(&pidfile, &marker, "world-writable", &["--force"]);
    fs::set_permissions(&pidfile, fs::Permissions::from_mode(0o644)).unwrap();

    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&pidfile, Some(65534), None).unwrap();
        assert_refused(&pidfile, &marker, "owned by nobody", &["--force"]);
    }
    fs::remove_file(&pidfile).unwrap();
    fs::write(scratch.path("real.pid"), format!("{victim}\n")).unwrap();
    symlink(scratch.path("real.pid"), &pidfile).unwrap();
    assert_refused(&pidfile, &marker, "symlink", &["--force"]);

    // A marker that was already there is somebody else's: left alone.
    fs::remove_file(&pidfile).unwrap();
    fs::write(&pidfile, "garbage\n").unwrap();
    fs::write(&marker, "").unwrap();
    let out = cancel(&[pidfile.to_str().unwrap()]);
    assert_status(&out, 125, "garbage with a pending marker");
    assert!(marker.exists(), "a marker cancel did not create was removed");

    assert!(guard.child(index).try_wait().unwrap().is_none(), "a refused cancel signalled the group");
}

#[test]
fn the_callers_group_is_refused() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let status = scratch.path("status");
    // The caller: sh, in a new group of its own (never the test runner's,
    // which a regression would kill), writes that group's id, then runs
    // cancel in yet another group, so only "its parent's group" can refuse.
    let script = format!(
        "echo $$ > {p}; setsid {pgrun} cancel --force {p} 2>&1; echo $? > {status}",
        p = pidfile.display(),
        pgrun = pgrun_path(),
        status = status.display()
    );
    let mut caller = Command::new("sh");
    caller.args(["-c", &script]).stdin(Stdio::null()).process_group(0);
    let out = run(default_signals(&mut caller));
    assert_eq!(wait_line(&status), "125", "parent's group: {}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("caller"), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn cancel_usage_errors_are_125() {
    let out = cancel(&[]);
    assert_status(&out, 125, "no pid file");
    let out = cancel(&["--wait-start", "soon", "x.pid"]);
    assert_status(&out, 125, "bad duration");
}

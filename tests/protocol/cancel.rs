//! Cancels and the marker: a cancel is never lost (a stale pid file, a
//! marker that appears just before the start, no marker at all), the marker
//! cannot be the pid file, and a cancel still works in a read-only folder,
//! with a huge --wait-start, or on a stopped pgrun.

use super::stale_file;
use crate::util::run as run_cmd;
use crate::util::*;
use std::fs;
use std::os::unix::fs::symlink;
use std::process::{Command, Stdio};

#[test]
fn a_stale_pid_file_does_not_lose_a_cancel() {
    // The run has opened the stale file when cancel arrives and removes it;
    // cancel must then keep its marker and wait for the run to start.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    stale_file(&pidfile, canary);
    let opened = Pause::new(&scratch, "claim-opened");
    let witness = scratch.path("ran");
    let run = guard.spawn(opened.arm(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()])));
    opened.wait_reached();

    let canceller = guard.spawn(&mut pgrun(["cancel", p]));
    eventually("cancel to remove the stale pid file", || !pidfile.exists());
    assert!(scratch.path("job.pid.cancel").exists(), "cancel withdrew its marker while a run was starting");
    opened.release();

    assert_eq!(guard.wait(run), 143, "the run must not start");
    assert!(!witness.exists(), "the command ran: the cancel was lost");
    assert_eq!(guard.wait(canceller), 0);
    assert!(!scratch.path("job.pid.cancel").exists());
    assert_canary_untouched(&scratch, canary);
}

#[test]
fn a_marker_that_appears_after_the_check_before_the_start_stops_the_run_and_is_consumed() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let report = scratch.path("r.json");
    let dir = scratch.sh();
    let checked = Pause::new(&scratch, "marker-checked");
    let mut cmd = pgrun(["-p", p, "--report", report.to_str().unwrap(), "--"]);
    cmd.args(["sh", "-c", &format!("echo $$ > {dir}/me; exec sleep 300")]);
    let run = guard.spawn(checked.arm(&mut cmd));
    checked.wait_reached();
    fs::write(scratch.path("job.pid.cancel"), "").unwrap();
    checked.release();

    assert_eq!(guard.wait(run), 143, "the marker found right after publishing stops the run");
    let r = json(&report);
    assert_eq!(r["reason"], "cancelled");
    let group = r["pgid"].as_i64().expect("the command ran") as i32;
    assert!(is_dead(group), "the command outlived pgrun");
    assert!(!scratch.path("job.pid.cancel").exists(), "the marker was left behind to cancel the next run");
    let witness = scratch.path("next");
    assert_status(&run_cmd(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()])), 0, "the next run");
    assert!(witness.exists());
}

#[test]
fn the_marker_cannot_be_the_pid_file() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let link = scratch.path("link");
    symlink("job.pid", &link).unwrap();
    let dotted = format!("{}/./job.pid", scratch.sh());
    let witness = scratch.path("ran");
    for marker in [p, dotted.as_str(), link.to_str().unwrap()] {
        let out = run_cmd(&mut pgrun(["-p", p, "--cancel-file", marker, "--", "touch", witness.to_str().unwrap()]));
        assert_status(&out, 125, marker);
        assert!(stderr_of(&out).contains("names the pid file itself"), "{}", stderr_of(&out));
        assert_status(&run_cmd(&mut pgrun(["cancel", "--cancel-file", marker, p])), 125, marker);
        assert_status(&run_cmd(&mut pgrun(["status", "--cancel-file", marker, p])), 125, marker);
    }
    assert!(!witness.exists());
}

#[test]
fn cancel_in_a_read_only_folder_still_stops_a_live_run() {
    if !require(Capability::MountNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let (index, _) = start_published(&mut guard, &pidfile, &[], "exec sleep 300");
    let d = scratch.sh();
    let script =
        format!("mount --bind {d} {d} && mount -o remount,bind,ro {d} && exec {} cancel {d}/job.pid", pgrun_path());
    let out = run_cmd(Command::new("unshare").args(["--mount", "--", "sh", "-c", &script]));
    assert_status(&out, 0, "cancel without a marker");
    assert_eq!(guard.wait(index), 143);
}

#[test]
fn cancel_with_a_wait_start_too_large_to_represent_waits() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let canceller = guard.spawn(&mut pgrun(["cancel", "--wait-start", "99999999999999999999d", p]));
    eventually("cancel to drop its marker", || scratch.path("job.pid.cancel").exists());
    assert!(guard.child(canceller).try_wait().unwrap().is_none(), "cancel returned at once");
    let witness = scratch.path("ran");
    let out = run_cmd(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 143, "the run found the marker");
    assert_eq!(guard.wait(canceller), 0);
}

#[test]
fn cancel_continues_a_stopped_pgrun() {
    // A pgrun stopped as a job (here by SIGSTOP) must still act on cancel.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let (index, pgid) = start_published(&mut guard, &pidfile, &[], "exec sleep 300");
    let pgrun_pid = guard.child(index).id() as i32;
    send(pgrun_pid, libc::SIGSTOP);
    eventually("pgrun to stop", || state(pgrun_pid).as_deref() == Some("T"));
    let canceller = guard.spawn(&mut pgrun(["cancel", pidfile.to_str().unwrap()]));
    assert_eq!(guard.wait(index), 143, "the stopped pgrun ran its stop sequence");
    assert_eq!(guard.wait(canceller), 0);
    assert!(is_dead(pgid));
}

#[test]
fn a_cancel_without_a_marker_still_waits_for_a_live_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let nowhere = scratch.path("missing/job.cancel");
    let mut canceller = pgrun([
        "cancel",
        "-v",
        "--wait-start",
        "60",
        "--cancel-file",
        nowhere.to_str().unwrap(),
        pidfile.to_str().unwrap(),
    ]);
    let canceller = guard.spawn(canceller.stderr(Stdio::piped()));
    let mut first = String::new();
    let mut err = std::io::BufReader::new(guard.child(canceller).stderr.take().unwrap());
    std::io::BufRead::read_line(&mut err, &mut first).unwrap();
    assert!(first.contains("cannot create cancel marker"), "{first}");
    // Not start_published: the canceller may stop the run before this test
    // gets to read its pid file.
    let run = guard.spawn(&mut pgrun(["-p", pidfile.to_str().unwrap(), "--", "sleep", "300"]));
    assert_eq!(guard.wait(canceller), 0, "the live run was found and stopped");
    assert_eq!(guard.wait(run), 143);
    // A run whose marker could never exist refuses to start.
    let out = run_cmd(&mut pgrun([
        "-p",
        pidfile.to_str().unwrap(),
        "--cancel-file",
        nowhere.to_str().unwrap(),
        "--",
        "true",
    ]));
    assert_status(&out, 125, "marker folder missing");
    assert!(stderr_of(&out).contains("cancel marker folder"), "{}", stderr_of(&out));
}

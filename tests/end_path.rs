//! The one way a started run ends (src/run/finish.rs): what it removes and
//! in which order, and that a failure on the way never leaves the command
//! running.

use crate::util::*;

/// A cancel that finds no run while the previous run on the pid file is
/// finishing waits for the next run, and that run is cancelled: the
/// finishing run removes only the marker it took, never a request dropped
/// for the next run.
#[test]
fn a_finishing_run_leaves_a_cancel_for_the_next_run_alone() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let withdrawn = Pause::new(&scratch, "withdrawn");
    let first = guard.spawn(withdrawn.arm(&mut pgrun(["-p", p, "--", "true"])));
    withdrawn.wait_reached();
    assert!(!pidfile.exists(), "the pid file is withdrawn at this step");
    // The cancel finds no run and waits for one, its marker in place.
    let cancel = guard.spawn(&mut pgrun(["cancel", "--wait-start", "60", p]));
    eventually("cancel to drop its marker", || scratch.path("job.pid.cancel").exists());
    withdrawn.release();
    assert_eq!(guard.wait(first), 0, "the first run ended on its own");
    assert!(scratch.path("job.pid.cancel").exists(), "the finishing run removed the next run's cancel");
    let witness = scratch.path("ran");
    let next = run(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()]));
    assert_status(&next, 143, "the next run is the one cancelled");
    assert!(!witness.exists(), "the cancelled run's command ran");
    assert_eq!(guard.wait(cancel), 0, "cancel: the run was kept from starting");
}

/// `cancel --keep-pending` while the previous run is finishing: the
/// pending request survives that run's end and cancels the next run.
#[test]
fn a_pending_cancel_survives_the_end_of_the_run_before() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let withdrawn = Pause::new(&scratch, "withdrawn");
    let first = guard.spawn(withdrawn.arm(&mut pgrun(["-p", p, "--", "true"])));
    withdrawn.wait_reached();
    let pending = run(&mut pgrun(["cancel", "--keep-pending", "--wait-start", "0", p]));
    assert_status(&pending, 1, "no live run: the cancel is left pending");
    withdrawn.release();
    assert_eq!(guard.wait(first), 0);
    assert!(scratch.path("job.pid.cancel").exists(), "the finishing run removed a pending cancel");
    let witness = scratch.path("ran");
    assert_status(&run(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()])), 143, "the next run");
    assert!(!witness.exists());
}

/// The run's own marker (its stopping note) goes with it, and so does the
/// request that cancelled it.
#[test]
fn the_marker_a_run_took_is_removed_at_its_end() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    // A timeout: the run writes its stopping note.
    assert_status(&run(&mut pgrun(["-p", p, "--timeout", "0.2", "--", "sleep", "60"])), 124, "timeout");
    assert!(!scratch.path("job.pid.cancel").exists(), "the run's stopping note was left");
    // A cancel: the request that cancelled the run.
    let (index, _) = start_published(&mut guard, &pidfile, &[], "exec sleep 60");
    assert_status(&run(&mut pgrun(["cancel", p])), 0, "cancel");
    assert_eq!(guard.wait(index), 143);
    assert!(!scratch.path("job.pid.cancel").exists(), "the request that cancelled the run was left");
}

/// Publishing fails after the spawn, then supervising fails too: the
/// command must still be stopped (SIGKILL, even one that ignores TERM)
/// before pgrun exits 125, and nothing of the run is left.
#[test]
fn a_run_that_can_be_neither_published_nor_supervised_is_killed_before_pgrun_exits() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let report = scratch.path("r.json");
    let mut cmd = pgrun(["-p", pidfile.to_str().unwrap(), "--report", report.to_str().unwrap(), "--"]);
    cmd.args(["sleep", "300"]).env("PGRUN_TEST_HOOK", "publish-fails,supervise-fails");
    let index = guard.spawn(with_ignored(&mut cmd, libc::SIGTERM));
    assert_eq!(guard.wait(index), 125, "pgrun's own failure");
    let r = json(&report);
    let command = r["pgid"].as_i64().expect("the command ran") as i32;
    guard.record(command);
    assert!(is_dead(command), "pgrun exited with the command {command} still running");
    assert_eq!(r["reason"], "error");
    let error = r["error"].as_str().unwrap();
    assert!(error.contains("cannot publish") && error.contains("cannot supervise"), "{error}");
    assert!(!pidfile.exists(), "the pid file was left");
    assert!(!scratch.path("job.pid.cancel").exists(), "the marker was left");
}

/// A cancel that finds the run live while it is already finishing (its run
/// gone, its files not yet withdrawn) stops that run, and only that run:
/// its request does not outlive the run to cancel the next one.
#[test]
fn a_cancel_of_a_finishing_run_does_not_cancel_the_next_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let gone = Pause::new(&scratch, "run-gone");
    let first = guard.spawn(gone.arm(&mut pgrun(["-p", p, "--", "true"])));
    gone.wait_reached();
    let cancel = guard.spawn(pgrun(["cancel", "-v", p]).stderr(std::process::Stdio::piped()));
    read_stderr_until(&mut guard, cancel, "sending TERM to pgrun");
    gone.release();
    assert_eq!(guard.wait(first), 0, "the run had ended on its own");
    assert_eq!(guard.wait(cancel), 0, "cancel: the run is gone");
    assert!(!scratch.path("job.pid.cancel").exists(), "the cancel's request outlived the run it stopped");
    let witness = scratch.path("ran");
    assert_status(&run(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()])), 0, "the next run");
    assert!(witness.exists(), "the next run was cancelled by a request meant for the run before");
}

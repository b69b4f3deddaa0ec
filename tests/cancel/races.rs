//! `pgrun cancel` against a run that ends, or is withdrawn, while it looks:
//! each window held open with the test-only pauses. cancel returns only once
//! the pgrun it stopped has exited (its own cancel, a second one, a run
//! that ends on its own or takes the marker), and says "gone", not "no run",
//! for a run it saw that then ended.

use crate::util::*;
use std::fs;
use std::process::Command;

/// Spawn `pgrun cancel -v ARGS...` with its stderr in `log` (a file the
/// test reads while cancel runs); `pause`, if given, armed on it.
fn spawn_cancel(guard: &mut Guard, log: &std::path::Path, pause: Option<&Pause>, args: &[&str]) -> usize {
    let mut all = vec!["cancel", "-v"];
    all.extend_from_slice(args);
    let mut cmd = pgrun(&all);
    cmd.stderr(fs::File::create(log).unwrap());
    if let Some(pause) = pause {
        pause.arm(&mut cmd);
    }
    guard.spawn(&mut cmd)
}

/// Start `pgrun -p PIDFILE -- sh -c PAYLOAD` paused at `exit` (its run
/// withdrawn: pid file removed, lock let go of, but pgrun not exited);
/// returns its index, its pid and its group.
fn start_paused_at_exit(
    guard: &mut Guard,
    pause: &Pause,
    pidfile: &std::path::Path,
    payload: &str,
) -> (usize, i32, i32) {
    let mut cmd = pgrun(["-p", pidfile.to_str().unwrap(), "--", "sh", "-c", payload]);
    let index = guard.spawn(pause.arm(&mut cmd));
    let pgid: i32 = wait_line(pidfile).parse().expect("pid file holds a number");
    guard.record_group(pgid);
    let pid = guard.child(index).id() as i32;
    (index, pid, pgid)
}

#[test]
fn cancel_returns_only_once_the_pgrun_it_stopped_has_exited() {
    // pgrun lets go of its lock when it withdraws its run, before it
    // writes its report and output and exits. cancel, held at
    // `cancel-signalled` until pgrun is there (paused at `exit`), must not
    // take the lock let go of for pgrun's exit.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let at_exit = Pause::new(&scratch, "exit");
    let (index, pid, pgid) = start_paused_at_exit(&mut guard, &at_exit, &pidfile, "exec sleep 300");
    let signalled = Pause::new(&scratch, "cancel-signalled");
    let log = scratch.path("cancel.log");
    let canceller = spawn_cancel(&mut guard, &log, Some(&signalled), &[pidfile.to_str().unwrap()]);
    signalled.wait_reached();
    at_exit.wait_reached();
    assert!(!pidfile.exists() && is_dead(pgid), "pgrun pauses at exit with its run withdrawn");
    signalled.release();
    let mut ended = None;
    eventually("cancel to wait for pgrun's exit, or return", || {
        ended = guard.child(canceller).try_wait().unwrap();
        ended.is_some() || fs::read_to_string(&log).unwrap().contains(&format!("waiting for pgrun {pid} to exit"))
    });
    assert!(ended.is_none(), "cancel returned {ended:?} while pgrun {pid} was still running");
    assert!(
        guard.child(canceller).try_wait().unwrap().is_none(),
        "cancel returned while pgrun {pid} was still running"
    );
    at_exit.release();
    assert_eq!(guard.wait(canceller), 0, "{}", fs::read_to_string(&log).unwrap());
    assert!(is_dead(pid), "cancel returned before pgrun {pid} exited");
    assert_eq!(guard.wait(index), 143);
}

#[test]
fn a_second_cancel_of_a_run_being_stopped_waits_for_the_same_end() {
    // A first cancel stopped the run: its pgrun has withdrawn it (no pid
    // file) and not exited yet (paused at `exit`). A second cancel, called
    // now, must wait for that end and say 0, not wait --wait-start for a
    // new run and say 1.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let at_exit = Pause::new(&scratch, "exit");
    let (index, pid, _) = start_paused_at_exit(&mut guard, &at_exit, &pidfile, "exec sleep 300");
    let first = spawn_cancel(&mut guard, &scratch.path("first.log"), None, &[pidfile.to_str().unwrap()]);
    at_exit.wait_reached();
    assert!(!pidfile.exists(), "pgrun pauses at exit with its run withdrawn");
    let log = scratch.path("second.log");
    let second = spawn_cancel(&mut guard, &log, None, &["--wait-start", "0.5", pidfile.to_str().unwrap()]);
    let mut ended = None;
    eventually("the second cancel to wait for pgrun's exit, or return", || {
        ended = guard.child(second).try_wait().unwrap();
        ended.is_some() || fs::read_to_string(&log).unwrap().contains(&format!("pgrun {pid} has withdrawn the run"))
    });
    assert!(ended.is_none(), "the second cancel returned {ended:?}: {}", fs::read_to_string(&log).unwrap());
    at_exit.release();
    assert_eq!(guard.wait(second), 0, "{}", fs::read_to_string(&log).unwrap());
    assert!(is_dead(pid), "the second cancel returned before pgrun {pid} exited");
    assert_eq!(guard.wait(first), 0);
    assert_eq!(guard.wait(index), 143);
    assert!(!scratch.path("job.pid.cancel").exists(), "a marker was left");
}

/// Arm `cmd` (a pgrun) with the pauses at all of `steps` at once, each
/// gated as [`Pause::new`] gates it (so a `Pause` of the same step waits
/// for it and releases it).
fn arm_steps<'a>(scratch: &Scratch, cmd: &'a mut Command, steps: &[&str]) -> &'a mut Command {
    let spec: Vec<String> =
        steps.iter().map(|step| format!("{step}={}", scratch.path(&format!("gate-{step}")).display())).collect();
    cmd.env("PGRUN_TEST_PAUSE", spec.join(","))
}

/// cancel `canceller` (its `-v` lines in `log`) must be waiting for pgrun
/// `pid`, which is held at a pause: wait until it says so, or exits, and
/// fail if it exited.
fn assert_waits_for_pgrun(guard: &mut Guard, canceller: usize, log: &std::path::Path, pid: i32) {
    let mut ended = None;
    eventually("cancel to wait for pgrun's exit, or return", || {
        ended = guard.child(canceller).try_wait().unwrap();
        ended.is_some() || fs::read_to_string(log).unwrap().contains(&format!("waiting for pgrun {pid} to exit"))
    });
    assert!(
        ended.is_none() && guard.child(canceller).try_wait().unwrap().is_none(),
        "cancel returned {ended:?} while pgrun {pid} was still running: {}",
        fs::read_to_string(log).unwrap()
    );
}

#[test]
fn a_cancel_that_sees_the_run_end_as_it_looks_waits_for_its_pgrun_to_exit() {
    // cancel finds the run live (held at `cancel-found`), then the run
    // ends: it was stopping (cancelled by this cancel's own request, found
    // right after publishing), and its pgrun, held at `exit`, has let go of
    // the lock but not exited. cancel was there before the run published,
    // so the pgrun's note at the marker path is what proves the pid it
    // found the lock holder's.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let (spawned, gone, at_exit) =
        (Pause::new(&scratch, "spawned"), Pause::new(&scratch, "run-gone"), Pause::new(&scratch, "exit"));
    let mut cmd = pgrun(["-p", p, "--", "sh", "-c", "exec sleep 300"]);
    let index = guard.spawn(arm_steps(&scratch, &mut cmd, &["spawned", "run-gone", "exit"]));
    let pid = guard.child(index).id() as i32;
    spawned.wait_reached();
    assert!(!pidfile.exists(), "the run is not published at `spawned`");
    let found = Pause::new(&scratch, "cancel-found");
    let log = scratch.path("cancel.log");
    let canceller = spawn_cancel(&mut guard, &log, Some(&found), &["--wait-start", "60", p]);
    eventually("cancel to make its marker", || scratch.path("job.pid.cancel").exists());
    spawned.release();
    gone.wait_reached();
    guard.record_group(wait_line(&pidfile).parse().expect("pid file holds a number"));
    found.wait_reached();
    gone.release();
    at_exit.wait_reached();
    assert!(!pidfile.exists(), "pgrun pauses at exit with its run withdrawn");
    found.release();
    assert_waits_for_pgrun(&mut guard, canceller, &log, pid);
    at_exit.release();
    assert_eq!(guard.wait(canceller), 0, "{}", fs::read_to_string(&log).unwrap());
    assert!(is_dead(pid), "cancel returned before pgrun {pid} exited");
    assert_eq!(guard.wait(index), 143);
    assert!(!scratch.path("job.pid.cancel").exists(), "a marker was left");
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path has no pidfds")]
fn a_run_that_ends_on_its_own_as_cancel_looks_is_waited_for_until_its_pgrun_exits() {
    // The run ends on its own (its command dies) while cancel, held at
    // `cancel-found`, has found it live: its pgrun was not stopping, so it
    // holds no note, and has let go of its lock (held at `exit`). cancel
    // saw that pgrun holding the lock as it started: that is its proof.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let at_exit = Pause::new(&scratch, "exit");
    let mut cmd = pgrun(["-p", p, "--", "sh", "-c", "exec sleep 300"]);
    let index = guard.spawn(at_exit.arm(&mut cmd));
    let pid = guard.child(index).id() as i32;
    let pgid: i32 = wait_line(&pidfile).parse().expect("pid file holds a number");
    guard.record_group(pgid);
    let found = Pause::new(&scratch, "cancel-found");
    let log = scratch.path("cancel.log");
    let canceller = spawn_cancel(&mut guard, &log, Some(&found), &[p]);
    found.wait_reached();
    send(pgid, libc::SIGTERM);
    at_exit.wait_reached();
    assert!(!pidfile.exists(), "pgrun pauses at exit with its run withdrawn");
    found.release();
    assert_waits_for_pgrun(&mut guard, canceller, &log, pid);
    at_exit.release();
    assert_eq!(guard.wait(canceller), 0, "{}", fs::read_to_string(&log).unwrap());
    assert!(is_dead(pid), "cancel returned before pgrun {pid} exited");
    assert_eq!(guard.wait(index), 143, "the command died of TERM");
    assert!(!scratch.path("job.pid.cancel").exists(), "the cancel's request was left");
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path has no pidfds")]
fn a_cancel_whose_marker_the_ending_run_took_waits_for_its_pgrun_to_exit() {
    // cancel makes its marker (and is held at `cancel-marked`); the run,
    // stopped meanwhile by a TERM to its pgrun, takes that request as its
    // own and is over by the time cancel looks: no pid file, and its note
    // removed from the marker path (its pgrun held at `note-removed`, in
    // its last steps). "The run took the cancel marker" must not mean
    // "its pgrun is gone": cancel saw it holding the lock as it started.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let removed = Pause::new(&scratch, "note-removed");
    let mut cmd = pgrun(["-p", p, "--", "sh", "-c", "exec sleep 300"]);
    let index = guard.spawn(removed.arm(&mut cmd));
    let pid = guard.child(index).id() as i32;
    guard.record_group(wait_line(&pidfile).parse().expect("pid file holds a number"));
    let marked = Pause::new(&scratch, "cancel-marked");
    let log = scratch.path("cancel.log");
    let canceller = spawn_cancel(&mut guard, &log, Some(&marked), &[p]);
    marked.wait_reached();
    send(pid, libc::SIGTERM);
    removed.wait_reached();
    assert!(
        !pidfile.exists() && !scratch.path("job.pid.cancel").exists(),
        "pgrun pauses with its run withdrawn and its note removed"
    );
    marked.release();
    assert_waits_for_pgrun(&mut guard, canceller, &log, pid);
    removed.release();
    assert_eq!(guard.wait(canceller), 0, "{}", fs::read_to_string(&log).unwrap());
    assert!(is_dead(pid), "cancel returned before pgrun {pid} exited");
    assert_eq!(guard.wait(index), 143);
}

#[test]
fn a_cancel_that_saw_the_run_which_then_ended_says_it_is_gone() {
    // cancel sees the run live before it makes its marker; the run, over
    // already (held at `marker-handled`, so it takes no request), is
    // withdrawn and its pgrun exits before cancel looks at the pid file
    // (held at `cancel-marked`). The run cancel was asked to stop is gone:
    // exit 0 at once, not "no run" after --wait-start, and its request,
    // which no run took, is withdrawn (issue 30).
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let handled = Pause::new(&scratch, "marker-handled");
    let index = guard.spawn(handled.arm(&mut pgrun(["-p", p, "--", "true"])));
    handled.wait_reached();
    let marked = Pause::new(&scratch, "cancel-marked");
    let log = scratch.path("cancel.log");
    let canceller = spawn_cancel(&mut guard, &log, Some(&marked), &["--wait-start", "3", p]);
    marked.wait_reached();
    assert_eq!(fs::read(scratch.path("job.pid.cancel")).unwrap(), b"", "cancel made its request");
    handled.release();
    assert_eq!(guard.wait(index), 0, "the run ended on its own");
    assert!(!pidfile.exists(), "the run was withdrawn");
    marked.release();
    let said = || fs::read_to_string(&log).unwrap();
    assert_eq!(guard.wait(canceller), 0, "cancel: the run it saw is gone: {}", said());
    assert!(!said().contains("no run"), "{}", said());
    assert!(!scratch.path("job.pid.cancel").exists(), "cancel left its request for the next run");
    assert!(next_run_runs(&scratch, p));
}

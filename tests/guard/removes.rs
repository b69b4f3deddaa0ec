//! What the guard removes after pgrun's death, and what it leaves: never a
//! live run's pid file or a cancel request made of its note, the temporary
//! report file but not one that replaced it, a cancel request made for its
//! run, but not one for a run that had not started.

use crate::util::*;
use std::fs;
use std::process::Stdio;

/// Start a run on `scratch`'s `job.pid` whose member ignores TERM (logging
/// it), with `-k 300`; with `stopping`, cancel it first (SIGTERM to pgrun:
/// pgrun sends TERM and writes its stopping note), once the member is
/// ready (a timeout could come before the member's trap); SIGKILL pgrun
/// so that its guard sends TERM and then waits out the long grace.
/// Returns (pgid, member, guard).
fn guard_in_a_long_grace(guard: &mut Guard, scratch: &Scratch, stopping: bool) -> (i32, i32, i32) {
    let (index, pgid, member) = start_stubborn_with(guard, scratch, &["-k", "300"]);
    let pgrun_pid = guard.child(index).id() as i32;
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    eventually("the guard to block", || state(keeper).as_deref() == Some("S"));
    if stopping {
        send(pgrun_pid, libc::SIGTERM);
        assert_eq!(wait_line(&scratch.path("member.log")), "TERM");
    }
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    eventually("the guard to send TERM", || {
        fs::read_to_string(scratch.path("member.log")).is_ok_and(|l| l.lines().count() > usize::from(stopping))
    });
    (pgid, member, keeper)
}

/// As [`start_stubborn`], with `args` in place of `-k 2`.
fn start_stubborn_with(guard: &mut Guard, scratch: &Scratch, args: &[&str]) -> (usize, i32, i32) {
    let dir = scratch.sh();
    let payload = format!(
        "sh -c 'trap \"echo TERM >> {dir}/member.log\" TERM; echo $$ > {dir}/member.pid; while :; do sleep 0.1; done' & wait"
    );
    let (index, pgid) = start_published(guard, &scratch.path("job.pid"), args, &payload);
    let member = wait_pid(&scratch.path("member.pid"), guard);
    (index, pgid, member)
}

/// Write-lock all of `file` as a published run does (fcntl, from byte 0).
fn lock_as_a_live_run(file: &fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed flock is valid.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: a valid fd and flock; the lock dies with `file`.
    assert_eq!(unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &lock) }, 0, "cannot lock the pid file");
}

#[test]
fn the_guard_never_removes_a_live_runs_pid_file_even_on_the_old_inode() {
    // While a dead pgrun's guard waits out the grace, the pid file is stale
    // and a new run may publish there; on ext4 its file often gets the old
    // inode number. Made certain here: the test locks the very file (same
    // device and inode) as a live run does. The guard must see the live
    // lock and leave the file alone.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let (_pgid, member, keeper) = guard_in_a_long_grace(&mut guard, &scratch, false);
    let live = fs::OpenOptions::new().read(true).write(true).open(&pidfile).unwrap();
    lock_as_a_live_run(&live);
    send(member, libc::SIGKILL);
    wait_dead(member);
    wait_dead(keeper);
    assert!(pidfile.exists(), "the dead run's guard removed a live run's pid file");
    drop(live);
}

#[test]
fn the_guard_never_removes_a_cancel_request_made_of_its_note() {
    // pgrun starts stopping (its note at the marker) and is SIGKILLed; a
    // `cancel --keep-pending` turns the note into a request for the next
    // run. The dead run's guard must leave that request alone.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let marker = scratch.path("job.pid.cancel");
    let (_pgid, member, keeper) = guard_in_a_long_grace(&mut guard, &scratch, true);
    assert!(fs::read_to_string(&marker).unwrap().starts_with("pgrun-stopping "), "no stopping note");
    let out =
        run(pgrun(["cancel", "--keep-pending", "--wait-start", "0.1", pidfile.to_str().unwrap()]).stdin(Stdio::null()));
    assert_status(&out, 1, "cancel --keep-pending with no live run");
    assert_eq!(fs::read(&marker).unwrap(), b"", "cancel left no request");
    send(member, libc::SIGKILL);
    wait_dead(member);
    wait_dead(keeper);
    assert!(marker.exists(), "the dead run's guard removed the pending cancel request");
    let out = run(pgrun(["-p", pidfile.to_str().unwrap(), "--", "true"]).stdin(Stdio::null()));
    assert_status(&out, 143, "the next run, cancelled in advance");
}

/// A run with `--report report.json` whose command waits; returns pgrun's
/// index, its guard, and the report's temporary name (named after pgrun's
/// pid: there on the portable path; on Linux the file has no name until
/// it is placed), once the command is ready.
fn start_reporting(guard: &mut Guard, scratch: &Scratch) -> (usize, i32, std::path::PathBuf) {
    let dir = scratch.sh();
    let report = scratch.path("report.json");
    let mut cmd = pgrun([
        "--report",
        report.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &format!("echo x > {dir}/ready; exec sleep 300"),
    ]);
    let index = guard.spawn(&mut cmd);
    let pgrun_pid = guard.child(index).id() as i32;
    wait_line(&scratch.path("ready"));
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    let temp = scratch.path(&format!(".report.json.pgrun-{pgrun_pid}.tmp"));
    assert_eq!(temp.exists(), cfg!(feature = "posix-fallback"), "the report's temporary name at {}", temp.display());
    (index, keeper, temp)
}

#[test]
fn pgrun_killed_leaves_no_temporary_report_file() {
    // The report is never written (SIGKILL), and its temporary file, made
    // at the start, would pile up beside it: the guard removes it.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let (index, keeper, temp) = start_reporting(&mut guard, &scratch);
    send(guard.child(index).id() as i32, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    wait_dead(keeper);
    assert!(!temp.exists(), "the guard left the report's temporary file");
    assert!(!scratch.path("report.json").exists(), "no report can be written after a SIGKILL");
    let left: Vec<_> = fs::read_dir(scratch.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["ready"], "files left");
}

#[test]
fn the_guard_leaves_a_file_that_replaced_the_temporary_report() {
    // Someone else's file now stands at the temporary name (another
    // inode): the guard removes only the file pgrun made.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let (index, keeper, temp) = start_reporting(&mut guard, &scratch);
    let planted = scratch.path("planted");
    fs::write(&planted, "not pgrun's\n").unwrap();
    fs::rename(&planted, &temp).unwrap();
    send(guard.child(index).id() as i32, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    wait_dead(keeper);
    assert_eq!(fs::read_to_string(&temp).unwrap(), "not pgrun's\n", "the guard removed a file that was not pgrun's");
}

#[test]
fn the_guard_removes_a_cancel_request_made_for_its_run() {
    // A request made for a live run (a `cancel --no-wait` whose TERM came
    // too late, or a marker dropped by hand) whose pgrun is then
    // SIGKILLed: pgrun can no longer take it at its end, so the guard
    // removes it once the run is stopped. Left, it would cancel the next
    // run on the pid file (issue 29, end-path defect 1).
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let marker = scratch.path("job.pid.cancel");
    let (index, pgid) = start_published(&mut guard, &pidfile, &[], "exec sleep 300");
    let pgrun_pid = guard.child(index).id() as i32;
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    fs::write(&marker, b"").unwrap();
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    wait_dead(keeper);
    assert_ne!(unsafe { libc::kill(-pgid, 0) }, 0, "the guard left the group");
    assert!(!pidfile.exists(), "the guard left the pid file");
    assert!(!marker.exists(), "the guard left the request made for its run");
    let witness = scratch.path("ran");
    let out =
        run(pgrun(["-p", pidfile.to_str().unwrap(), "--", "touch", witness.to_str().unwrap()]).stdin(Stdio::null()));
    assert_status(&out, 0, "the next run");
    assert!(witness.exists(), "the next run was cancelled by a request meant for the run before");
}

#[test]
fn the_guard_of_a_run_that_had_not_started_leaves_a_request_pending() {
    // pgrun is SIGKILLed before its command is spawned (held at
    // `guard-started`, past its look at the marker), with a request at the
    // marker path: no run started, so the request is for the next run, and
    // the guard leaves it there.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let marker = scratch.path("job.pid.cancel");
    let witness = scratch.path("ran");
    let w = witness.to_str().unwrap();
    let started = Pause::new(&scratch, "guard-started");
    let index = guard.spawn(started.arm(&mut pgrun(["-p", p, "--", "touch", w])));
    started.wait_reached();
    let pgrun_pid = guard.child(index).id() as i32;
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    fs::write(&marker, b"").unwrap();
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    wait_dead(keeper);
    assert!(!witness.exists(), "the command ran");
    assert!(marker.exists(), "the guard of a run that never started removed the pending request");
    let out = run(pgrun(["-p", p, "--", "touch", w]).stdin(Stdio::null()));
    assert_status(&out, 143, "the next run, cancelled in advance");
    assert!(!witness.exists(), "the cancelled run's command ran");
}

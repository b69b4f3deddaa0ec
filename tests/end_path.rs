//! The one way a started run ends (src/run/finish.rs): what it removes and
//! in which order, and that a failure on the way never leaves the command
//! running.

use crate::util::*;
use std::fs;

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
    assert!(!next_run_runs(&scratch, p));
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
    assert!(next_run_runs(&scratch, p), "the next run was cancelled by a request meant for the run before");
}

/// `cancel --no-wait` of a run that is over (its run gone and marked over,
/// its marker handled, its pid file still published: pgrun held at
/// `marker-handled`): the run takes no request any more, so the one the
/// cancel made is for no run; the cancel withdraws it, and the next run on
/// the pid file runs (issue 29, end-path defect 1).
#[test]
fn a_no_wait_cancel_of_a_run_that_is_over_does_not_cancel_the_next_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let handled = Pause::new(&scratch, "marker-handled");
    let first = guard.spawn(handled.arm(&mut pgrun(["-p", p, "--", "true"])));
    handled.wait_reached();
    assert!(pidfile.exists(), "the pid file is still published at this step");
    assert_status(&run(&mut pgrun(["cancel", "--no-wait", p])), 0, "cancel --no-wait: the request is delivered");
    handled.release();
    assert_eq!(guard.wait(first), 0, "the run had ended on its own");
    assert!(!scratch.path("job.pid.cancel").exists(), "the cancel's request outlived the run it found");
    assert!(next_run_runs(&scratch, p), "the next run was cancelled by a request meant for the run before");
}

/// `cancel --no-wait` of a run that is finishing (its run gone, nothing
/// withdrawn yet: pgrun held at `run-gone`), one that ended on its own and
/// one that was stopping (its stopping note, which the cancel makes a
/// request of): the run is not over yet, so it takes the request at its
/// end, and the next run on the pid file runs (issue 29, end-path defect
/// 1).
#[test]
fn a_no_wait_cancel_of_a_finishing_or_stopping_run_is_taken_by_that_run() {
    for (args, status) in [(&["--", "true"][..], 0), (&["--timeout", "0.2", "--", "sleep", "60"][..], 124)] {
        let scratch = Scratch::new();
        let mut guard = Guard::new();
        let pidfile = scratch.path("job.pid");
        let p = pidfile.to_str().unwrap();
        let marker = scratch.path("job.pid.cancel");
        let gone = Pause::new(&scratch, "run-gone");
        let mut cmd = pgrun(["-p", p]);
        cmd.args(args);
        let first = guard.spawn(gone.arm(&mut cmd));
        gone.wait_reached();
        assert_eq!(marker.exists(), status == 124, "{args:?}: a stopping run has its note, no other a marker");
        assert_status(&run(&mut pgrun(["cancel", "--no-wait", p])), 0, "cancel --no-wait: the request is delivered");
        assert_eq!(fs::read(&marker).unwrap(), b"", "{args:?}: cancel's request is in place");
        gone.release();
        assert_eq!(guard.wait(first), status, "{args:?}");
        assert!(!marker.exists(), "{args:?}: the cancel's request outlived the run it stopped");
        assert!(
            next_run_runs(&scratch, p),
            "{args:?}: the next run was cancelled by a request meant for the run before"
        );
    }
}

/// A run that was never published (publishing failed: it is stopped as
/// if cancelled, its note at the marker path) ends with a request there
/// (a cancel that made one of its note, held at `run-gone`): no cancel
/// could have found that run, so the request is for the next run, which
/// it cancels. Only a published run takes the requests it finds at its
/// end.
#[test]
fn a_run_never_published_leaves_a_request_for_the_next_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let marker = scratch.path("job.pid.cancel");
    let gone = Pause::new(&scratch, "run-gone");
    let mut cmd = pgrun(["-p", p, "--", "sleep", "60"]);
    cmd.env("PGRUN_TEST_HOOK", "publish-fails");
    let first = guard.spawn(gone.arm(&mut cmd));
    gone.wait_reached();
    assert!(!pidfile.exists(), "the run was not published");
    assert!(fs::read_to_string(&marker).unwrap().starts_with("pgrun-stopping "), "no stopping note");
    fs::write(&marker, b"").unwrap();
    gone.release();
    assert_eq!(guard.wait(first), 125, "publishing failed");
    assert!(marker.exists(), "the run that was never published took a request for the next run");
    assert!(!next_run_runs(&scratch, p), "the cancelled run's command ran");
}

// A SIGKILL of pgrun at any point leaves no file of the run behind (issue
// 29, end-path defect 4): pgrun names no file of the run while no guard is
// armed (the report's temporary file, made before the guard, has no name
// on Linux), and the guard removes what is named when pgrun dies. Each
// test pauses pgrun at one step, SIGKILLs it there, waits for its guard,
// and looks at the run's folder.

/// The names in `dir`, sorted.
fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// A folder of the run's own files (the pauses' gates stay outside it).
fn run_folder(scratch: &Scratch) -> std::path::PathBuf {
    let dir = scratch.path("run");
    std::fs::create_dir(&dir).unwrap();
    dir
}

/// pgrun's guard, if it has forked one by now.
fn guard_if_any(pgrun: i32) -> Option<i32> {
    let named =
        |p: i32| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim_end() == "pgrun-guard");
    descendants(pgrun).into_iter().find(|&p| named(p))
}

/// SIGKILL pgrun (child `index`), paused at a step, then wait until its
/// guard (if it had one) is gone too: what is left then is left for good.
fn kill_paused(guard: &mut Guard, index: usize) {
    let pgrun_pid = guard.child(index).id() as i32;
    let keeper = guard_if_any(pgrun_pid);
    if let Some(keeper) = keeper {
        guard.record(keeper);
    }
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    if let Some(keeper) = keeper {
        wait_dead(keeper);
    }
}

/// A command that writes its pid (its group's id) to `DIR/cmd.pid`, then
/// sleeps: a TERM ends it.
fn sleeper(scratch: &Scratch) -> String {
    format!("echo $$ > {}/cmd.pid; exec sleep 60", scratch.sh())
}

/// Killed while it claims the pid file (the claim byte held, the starting
/// name held, the marker checked): neither `.NAME.pgrun-starting.tmp` nor
/// the report's temporary file is left (the guard is forked before the
/// claim, and the report's file has no name on Linux).
#[test]
fn a_pgrun_killed_while_it_claims_the_pid_file_leaves_no_file() {
    for step in ["claimed", "starting", "marker-checked"] {
        let scratch = Scratch::new();
        let mut guard = Guard::new();
        let dir = run_folder(&scratch);
        let (pidfile, report) = (dir.join("job.pid"), dir.join("r.json"));
        let pause = Pause::new(&scratch, step);
        let mut cmd = pgrun(["-p", pidfile.to_str().unwrap(), "--report", report.to_str().unwrap(), "--", "true"]);
        let index = guard.spawn(pause.arm(&mut cmd));
        pause.wait_reached();
        kill_paused(&mut guard, index);
        assert_eq!(names_in(&dir), Vec::<String>::new(), "files left by a pgrun killed at {step}");
    }
}

/// Killed in the instant between placing its pid file and saying it is
/// published: the guard knows the record from the claim on, and removes
/// it once it has stopped the run.
#[test]
fn a_pgrun_killed_as_it_places_its_pid_file_leaves_no_pid_file() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = run_folder(&scratch);
    let pidfile = dir.join("job.pid");
    let placed = Pause::new(&scratch, "placed");
    let index =
        guard.spawn(placed.arm(&mut pgrun(["-p", pidfile.to_str().unwrap(), "--", "sh", "-c", &sleeper(&scratch)])));
    placed.wait_reached();
    let command = wait_pid(&scratch.path("cmd.pid"), &mut guard);
    guard.record_group(command);
    assert!(pidfile.exists(), "the pid file is in place at this step");
    kill_paused(&mut guard, index);
    wait_dead(command);
    assert_eq!(names_in(&dir), Vec::<String>::new(), "files left");
}

/// Killed as a stop starts, its stopping note written under its temporary
/// name and not yet at the marker path: the guard removes that name too.
#[test]
fn a_pgrun_killed_while_it_writes_its_stopping_note_leaves_no_file() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = run_folder(&scratch);
    let (pidfile, report) = (dir.join("job.pid"), dir.join("r.json"));
    let named = Pause::new(&scratch, "temp-named:job.pid.cancel");
    let mut cmd = pgrun(["-p", pidfile.to_str().unwrap(), "--report", report.to_str().unwrap(), "-t", "0.1", "--"]);
    cmd.args(["sh", "-c", &sleeper(&scratch)]);
    let index = guard.spawn(named.arm(&mut cmd));
    named.wait_reached();
    let command = wait_pid(&scratch.path("cmd.pid"), &mut guard);
    guard.record_group(command);
    assert!(names_in(&dir).iter().any(|n| n.starts_with(".job.pid.cancel.pgrun-")), "{:?}", names_in(&dir));
    kill_paused(&mut guard, index);
    wait_dead(command);
    assert_eq!(names_in(&dir), Vec::<String>::new(), "files left");
}

/// Killed at its end, as it puts the note it holds until it exits in the
/// marker's place: neither the note's temporary file nor the marker is
/// left.
#[test]
fn a_pgrun_killed_while_it_writes_its_ending_note_leaves_no_file() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = run_folder(&scratch);
    let (pidfile, report) = (dir.join("job.pid"), dir.join("r.json"));
    let ending = Pause::new(&scratch, "ending-note");
    let mut cmd = pgrun(["-p", pidfile.to_str().unwrap(), "--report", report.to_str().unwrap(), "-t", "0.1", "--"]);
    cmd.args(["sh", "-c", &sleeper(&scratch)]);
    let index = guard.spawn(ending.arm(&mut cmd));
    ending.wait_reached();
    assert!(names_in(&dir).iter().any(|n| n.starts_with(".job.pid.cancel.pgrun-")), "{:?}", names_in(&dir));
    kill_paused(&mut guard, index);
    assert_eq!(names_in(&dir), Vec::<String>::new(), "files left");
}

/// Killed at its end right after it put its ending note in the marker's
/// place, before anything else: the guard knew that note's identity before
/// it was placed (issue 30, the load test: a note was left), so it removes
/// it. Without that the guard knew only the marker the run took, which the
/// note replaced, and left the note.
#[test]
fn a_pgrun_killed_right_after_it_placed_its_ending_note_leaves_no_file() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = run_folder(&scratch);
    let (pidfile, report) = (dir.join("job.pid"), dir.join("r.json"));
    let placed = Pause::new(&scratch, "ending-note-placed");
    let mut cmd = pgrun(["-p", pidfile.to_str().unwrap(), "--report", report.to_str().unwrap(), "-t", "0.1", "--"]);
    cmd.args(["sh", "-c", &sleeper(&scratch)]);
    let index = guard.spawn(placed.arm(&mut cmd));
    placed.wait_reached();
    let names = names_in(&dir);
    assert!(names.contains(&"job.pid.cancel".to_string()), "the note is in place at this step: {names:?}");
    assert!(!names.iter().any(|n| n.starts_with(".job.pid.cancel.pgrun-")), "{names:?}");
    kill_paused(&mut guard, index);
    assert_eq!(names_in(&dir), Vec::<String>::new(), "files left");
}

/// Killed as it exits (after the output's last flush), the note at the
/// marker path still held: the guard is let go only once that note is
/// removed, so it removes it. The report stays.
#[test]
fn a_pgrun_killed_at_its_exit_leaves_no_note() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = run_folder(&scratch);
    let (pidfile, report) = (dir.join("job.pid"), dir.join("r.json"));
    let exit = Pause::new(&scratch, "exit");
    let mut cmd = pgrun(["-p", pidfile.to_str().unwrap(), "--report", report.to_str().unwrap(), "-t", "0.1", "--"]);
    cmd.args(["sh", "-c", &sleeper(&scratch)]);
    let index = guard.spawn(exit.arm(&mut cmd));
    exit.wait_reached();
    assert_eq!(names_in(&dir), ["job.pid.cancel", "r.json"], "the note is held at this step");
    kill_paused(&mut guard, index);
    assert_eq!(names_in(&dir), ["r.json"], "files left");
    assert_eq!(json(&report)["reason"], "timeout");
}

/// A command that cannot start (127): the report is written after the
/// run's guard would have been let go; it is kept armed until then, so a
/// SIGKILL while the report takes an existing report's place leaves the
/// old report and nothing else.
#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path names the report's temporary file at the start, before the guard exists: that name \
              is the one this pause would stop at"
)]
fn a_pgrun_killed_while_it_reports_a_command_not_found_leaves_no_file() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = run_folder(&scratch);
    let (pidfile, report) = (dir.join("job.pid"), dir.join("r.json"));
    let cleared = Pause::new(&scratch, "report-cleared");
    let named = Pause::new(&scratch, "temp-named:r.json");
    let mut cmd = pgrun(["-p", pidfile.to_str().unwrap(), "--report", report.to_str().unwrap(), "--"]);
    cmd.arg(scratch.path("no-such-command"));
    let index = guard.spawn(arm_steps(&scratch, &mut cmd, &["report-cleared", "temp-named:r.json"]));
    // The run removed the old report before it published; one put there
    // since is what the new report takes the place of.
    cleared.wait_reached();
    std::fs::write(&report, "old\n").unwrap();
    cleared.release();
    named.wait_reached();
    assert_eq!(names_in(&dir).len(), 2, "the new report under its temporary name: {:?}", names_in(&dir));
    kill_paused(&mut guard, index);
    assert_eq!(names_in(&dir), ["r.json"], "files left");
    assert_eq!(std::fs::read_to_string(&report).unwrap(), "old\n");
}

/// A failure before the run's guard is forked (here a limit that needs a
/// cgroup, with `--contain group`): the report is written under a guard of
/// its own, so a SIGKILL while it takes an existing report's place leaves
/// nothing else.
#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path names the report's temporary file at the start, before the guard exists: that name \
              is the one this pause would stop at"
)]
fn a_pgrun_killed_while_it_reports_a_failure_before_its_guard_leaves_no_file() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = run_folder(&scratch);
    let report = dir.join("r.json");
    let cleared = Pause::new(&scratch, "report-cleared");
    let named = Pause::new(&scratch, "temp-named:r.json");
    let mut cmd =
        pgrun(["--contain", "group", "--memory-max", "1G", "--report", report.to_str().unwrap(), "--", "true"]);
    let index = guard.spawn(arm_steps(&scratch, &mut cmd, &["report-cleared", "temp-named:r.json"]));
    // The run removed the old report before it published; one put there
    // since is what the new report takes the place of.
    cleared.wait_reached();
    std::fs::write(&report, "old\n").unwrap();
    cleared.release();
    named.wait_reached();
    assert_eq!(names_in(&dir).len(), 2, "the new report under its temporary name: {:?}", names_in(&dir));
    kill_paused(&mut guard, index);
    assert_eq!(names_in(&dir), ["r.json"], "files left");
    assert_eq!(std::fs::read_to_string(&report).unwrap(), "old\n");
}

/// The output's last flush fails (the terminal pgrun writes to hangs up):
/// the report is written again after the run's guard was let go, under a
/// guard of its own, so a SIGKILL while it takes the first report's place
/// leaves the first report and nothing else.
#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path writes a terminal as a pipe: PIPE_BUF after POLLOUT, which a full terminal can hold"
)]
fn a_pgrun_killed_while_it_writes_its_report_again_leaves_no_file() {
    use nix::fcntl::OFlag;
    use std::os::unix::fs::OpenOptionsExt;
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = run_folder(&scratch);
    let report = dir.join("report.json");
    // As output::errors::a_write_error_in_the_last_flush_is_added_to_the_report.
    let master = nix::pty::posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC).expect("posix_openpt");
    nix::pty::grantpt(&master).expect("grantpt");
    nix::pty::unlockpt(&master).expect("unlockpt");
    let name = nix::pty::ptsname_r(&master).expect("ptsname_r");
    let slave = std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOCTTY).open(name).unwrap();
    let named = Pause::new(&scratch, "temp-named:report.json");
    let mut cmd = pgrun(["--max-output", "24K", "--report", report.to_str().unwrap(), "--", "head", "-c", "60000"]);
    cmd.arg("/dev/zero").stdout(slave).stderr(std::process::Stdio::null());
    let index = guard.spawn(named.arm(&mut cmd));
    eventually("the report, before the last flush", || report.exists());
    let first = std::fs::read_to_string(&report).unwrap();
    drop(master);
    named.wait_reached();
    assert_eq!(names_in(&dir).len(), 2, "the report again under its temporary name: {:?}", names_in(&dir));
    kill_paused(&mut guard, index);
    assert_eq!(names_in(&dir), ["report.json"], "files left");
    assert_eq!(std::fs::read_to_string(&report).unwrap(), first, "the first report stays");
}

/// Arm `cmd` (a pgrun) with the pauses at all of `steps` at once, each
/// gated as [`Pause::new`] gates it (so a `Pause` of the same step waits
/// for it and releases it).
fn arm_steps<'a>(
    scratch: &Scratch,
    cmd: &'a mut std::process::Command,
    steps: &[&str],
) -> &'a mut std::process::Command {
    let spec: Vec<String> =
        steps.iter().map(|step| format!("{step}={}", scratch.path(&format!("gate-{step}")).display())).collect();
    cmd.env("PGRUN_TEST_PAUSE", spec.join(","))
}

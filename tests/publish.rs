//! The pid file, the cancel marker and the report, as a run writes them.

use crate::util::*;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

#[test]
fn pid_file_names_the_group_is_locked_0644_and_removed_at_exit() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let mut cmd =
        pgrun(["-p", pidfile.to_str().unwrap(), "--", "sh", "-c", &format!("echo $$ > {dir}/me; read x < {dir}/fifo")]);
    // SAFETY: umask is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o077);
            Ok(())
        })
    };
    assert!(std::process::Command::new("mkfifo").arg(scratch.path("fifo")).status().unwrap().success());
    let index = guard.spawn(&mut cmd);
    let me = wait_pid(&scratch.path("me"), &mut guard);
    let pgrun_pid = guard.child(index).id() as i32;

    // The command can run before pgrun publishes: wait for the file.
    assert_eq!(wait_line(&pidfile), me.to_string(), "the group id is the command's pid");
    assert_eq!(fs::metadata(&pidfile).unwrap().permissions().mode() & 0o777, 0o644, "mode despite umask 077");
    assert_eq!(lock_holder(&pidfile), Some(pgrun_pid), "F_GETLK names pgrun");
    assert!(!can_lock(&pidfile), "a non-blocking lock attempt must fail while the run lives");
    eventually("the temporary file to go", || {
        fs::read_dir(scratch.dir()).unwrap().all(|e| !e.unwrap().file_name().to_string_lossy().ends_with(".tmp"))
    });

    fs::write(scratch.path("fifo"), "go\n").unwrap();
    assert_eq!(guard.wait(index), 0);
    assert!(!pidfile.exists(), "pid file left behind");
    assert!(!scratch.path("job.pid.cancel").exists());
}

#[test]
fn a_second_run_on_a_live_pid_file_is_refused_and_the_first_goes_on() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let (first, pgid) = start_published(&mut guard, &pidfile, &[], "sleep 300");
    let witness = scratch.path("second-ran");
    let out = run(&mut pgrun(["-p", pidfile.to_str().unwrap(), "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 125, "second run");
    assert!(stderr_of(&out).contains("held by a live run"), "{}", stderr_of(&out));
    assert!(!witness.exists(), "the second command ran");
    assert_eq!(fs::read_to_string(&pidfile).unwrap(), format!("{pgid}\n"));
    assert!(guard.child(first).try_wait().unwrap().is_none(), "the first run was disturbed");
    send(guard.child(first).id() as i32, libc::SIGTERM);
    assert_eq!(guard.wait(first), 143);
}

#[test]
fn a_stale_pid_file_is_replaced() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    fs::write(&pidfile, "99999\n").unwrap();
    let dir = scratch.sh();
    let payload = format!("echo $$ > {dir}/me; exec sleep 300");
    let index = guard.spawn(&mut pgrun(["-p", pidfile.to_str().unwrap(), "--", "sh", "-c", &payload]));
    let me = wait_pid(&scratch.path("me"), &mut guard);
    eventually("the stale pid file to be replaced", || {
        fs::read_to_string(&pidfile).unwrap_or_default() == format!("{me}\n")
    });
    assert_eq!(lock_holder(&pidfile), Some(guard.child(index).id() as i32));
    send(guard.child(index).id() as i32, libc::SIGTERM);
    assert_eq!(guard.wait(index), 143);
    assert!(!pidfile.exists());

    // Garbage content is stale too: nobody holds it.
    fs::write(&pidfile, "not a pid").unwrap();
    let out = run(&mut pgrun(["-p", pidfile.to_str().unwrap(), "--", "true"]));
    assert_status(&out, 0, "garbage pid file");
}

#[test]
fn unusable_pid_file_and_report_paths_are_refused_before_the_start() {
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    let touch = ["touch", witness.to_str().unwrap()];
    let link = scratch.path("link.pid");
    symlink(scratch.path("target"), &link).unwrap();
    let report_link = scratch.path("report.json");
    symlink(scratch.path("report-target"), &report_link).unwrap();
    let missing = scratch.path("no/such/folder/job.pid");
    let cases: Vec<Vec<&str>> = vec![
        vec!["-p", link.to_str().unwrap()],
        vec!["-p", missing.to_str().unwrap()],
        vec!["-p", scratch.sh().leak()],
        vec!["--report", report_link.to_str().unwrap()],
        vec!["--report", missing.to_str().unwrap()],
    ];
    for case in cases {
        let mut args = case.clone();
        args.push("--");
        args.extend(touch);
        let out = run(&mut pgrun(&args));
        assert_status(&out, 125, &format!("{case:?}"));
        let err = stderr_of(&out);
        assert!(err.starts_with("pgrun: ") && err.lines().count() == 1, "{case:?}: {err}");
        assert!(!witness.exists(), "{case:?} ran the command");
    }
    assert!(!scratch.path("target").exists(), "the symlink was followed");
    assert!(!scratch.path("report-target").exists(), "the report symlink was followed");
}

#[test]
fn a_marker_before_the_start_means_143_and_nothing_runs() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let witness = scratch.path("ran");
    let report = scratch.path("report.json");
    fs::write(scratch.path("job.pid.cancel"), "").unwrap();
    let out = run(&mut pgrun([
        "-p",
        pidfile.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--",
        "touch",
        witness.to_str().unwrap(),
    ]));
    assert_status(&out, 143, "pending cancel");
    // Said, not a silent 143.
    let marker = scratch.path("job.pid.cancel");
    assert_eq!(
        stderr_of(&out),
        format!("pgrun: cancelled before it started: a cancel was pending (cancel marker {})\n", marker.display())
    );
    assert!(!witness.exists(), "the command ran");
    assert!(!scratch.path("job.pid.cancel").exists(), "marker not taken");
    assert!(!pidfile.exists());
    let r = json(&report);
    assert_eq!(r["reason"], "cancelled-before-start");
    assert_eq!(r["pgid"], serde_json::Value::Null);
    assert_eq!(r["exit_code"], 143);

    // --cancel-file names another marker.
    let custom = scratch.path("custom.cancel");
    fs::write(&custom, "").unwrap();
    let out = run(&mut pgrun(["--cancel-file", custom.to_str().unwrap(), "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 143, "custom marker");
    assert!(!witness.exists() && !custom.exists());
}

#[test]
fn keep_pending_cancels_a_later_run() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let out = run(&mut pgrun(["cancel", "--wait-start", "0.1", "--keep-pending", pidfile.to_str().unwrap()]));
    assert_status(&out, 1, "cancel with no run");
    assert!(scratch.path("job.pid.cancel").exists(), "marker not kept");
    let witness = scratch.path("ran");
    let out = run(&mut pgrun(["-p", pidfile.to_str().unwrap(), "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 143, "later run");
    assert!(!witness.exists());
}

fn report_of(args: &[&str], scratch: &Scratch) -> serde_json::Value {
    report_with(args, scratch, |_| {})
}

/// [`report_of`], with `setup` applied to the pgrun command first.
fn report_with(args: &[&str], scratch: &Scratch, setup: impl FnOnce(&mut std::process::Command)) -> serde_json::Value {
    let report = scratch.path("r.json");
    let _ = fs::remove_file(&report);
    let mut all = vec!["--report", report.to_str().unwrap()];
    all.extend_from_slice(args);
    let mut cmd = pgrun(&all);
    setup(&mut cmd);
    let out = run(&mut cmd);
    let r = json(&report);
    assert_eq!(r["exit_code"], crate::util::code_of(out.status), "{args:?}: exit_code field");
    r
}

#[test]
fn the_report_says_how_each_run_ended() {
    let scratch = Scratch::new();
    let r = report_of(&["--", "sh", "-c", "exit 3"], &scratch);
    assert_eq!((r["reason"].as_str(), r["status"]["code"].as_i64()), (Some("exited"), Some(3)));
    assert_eq!(r["signals"], serde_json::json!([]));
    assert_eq!(r["stragglers"], 0);
    assert!(r["pgid"].as_i64().unwrap() > 1 && r["duration_ms"].is_u64());

    let r = report_of(&["--", "sh", "-c", "kill -USR1 $$"], &scratch);
    assert_eq!((r["reason"].as_str(), r["status"]["signal"].as_str()), (Some("signaled"), Some("USR1")));
    assert_eq!(r["status"]["code"], serde_json::Value::Null);

    // TERM ignored from the start (inherited, no trap to race the timeout).
    let r = report_with(&["-t", "0.2", "-k", "0.2", "--", "sleep", "300"], &scratch, |cmd| {
        with_ignored(cmd, libc::SIGTERM);
    });
    assert_eq!(r["reason"], "timeout");
    assert_eq!(r["exit_code"], 124);
    let sent: Vec<&str> = r["signals"].as_array().unwrap().iter().map(|s| s["signal"].as_str().unwrap()).collect();
    assert_eq!(sent, ["TERM", "KILL"]);
    let t0 = r["signals"][0]["at_ms"].as_u64().unwrap();
    let t1 = r["signals"][1]["at_ms"].as_u64().unwrap();
    assert!((150..5000).contains(&t0) && t1 >= t0 + 150, "times {t0} {t1}");

    let r = report_of(&["--", "sh", "-c", "sleep 300 & sleep 300 & exit 0"], &scratch);
    // Counting needs /proc, which the portable build does not read: there
    // 1 stands for "some".
    let counted = if cfg!(feature = "posix-fallback") { Some(1) } else { Some(2) };
    assert_eq!((r["reason"].as_str(), r["stragglers"].as_u64()), (Some("exited"), counted));
    assert_eq!(r["signals"][0]["signal"], "TERM");

    let r = report_of(&["--", "pgrun-test-no-such-command"], &scratch);
    assert_eq!((r["reason"].as_str(), r["exit_code"].as_i64()), (Some("error"), Some(127)));
    assert!(r["error"].as_str().unwrap().contains("pgrun-test-no-such-command"));
    assert_eq!(r["pgid"], serde_json::Value::Null);
}

#[test]
fn the_report_of_a_cancelled_run_is_written_after_the_group_is_gone() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let report = scratch.path("r.json");
    let dir = scratch.sh();
    let payload = format!("sleep 300 & echo $! > {dir}/bg; wait");
    let (index, _) = start_published(&mut guard, &pidfile, &["--report", report.to_str().unwrap()], &payload);
    let bg = wait_pid(&scratch.path("bg"), &mut guard);
    let out = run(&mut pgrun(["cancel", pidfile.to_str().unwrap()]));
    assert_status(&out, 0, "cancel");
    assert_eq!(guard.wait(index), 143);
    assert!(is_dead(bg));
    let r = json(&report);
    assert_eq!(r["reason"], "cancelled");
    assert_eq!(r["status"]["signal"], "TERM");
}

#[test]
fn a_pid_file_and_a_report_named_with_255_bytes_are_published() {
    // The longest name a Linux file system takes: the temporary names they
    // are written under must fit too.
    let scratch = Scratch::new();
    let pidfile = scratch.path(&"p".repeat(255));
    let report = scratch.path(&"r".repeat(255));
    let seen = scratch.path("seen");
    let out = run(&mut pgrun([
        "-p",
        pidfile.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "until [ -s \"$0\" ]; do sleep 0.01; done; cat \"$0\" > \"$1\"",
        pidfile.to_str().unwrap(),
        seen.to_str().unwrap(),
    ]));
    assert_status(&out, 0, "255-byte names");
    assert!(fs::read_to_string(&seen).unwrap().ends_with('\n'), "the pid file was published");
    assert_eq!(json(&report)["reason"], "exited");
    assert!(!pidfile.exists());
    let left: Vec<_> = fs::read_dir(scratch.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 2, "only the report and seen are left: {left:?}");
}

#[test]
fn a_stopping_marker_that_cannot_be_removed_is_reported_and_cancels_no_later_run() {
    // The marker a run creates when it starts stopping cannot be removed at
    // its exit: one warning, and the next run on that pid file still runs.
    // A real cancel request left pending afterwards still counts.
    for errno in ["EIO", "EROFS", "EACCES", "EPERM", "EBUSY"] {
        let scratch = Scratch::new();
        let pidfile = scratch.path("job.pid");
        let marker = scratch.path("job.pid.cancel");
        let p = pidfile.to_str().unwrap();
        let out = run(&mut pgrun_injected(
            &format!("unlink:error={errno}"),
            Some(&marker),
            &["-p", p, "-t", "0.1", "--", "sleep", "300"],
        ));
        assert_status(&out, 124, errno);
        let err = stderr_of(&out);
        assert_eq!(err.lines().count(), 1, "{errno}: {err}");
        assert!(
            err.starts_with("pgrun: warning: cannot remove cancel marker ")
                && err.contains(marker.to_str().unwrap())
                && err.contains(errno),
            "{errno}: {err}"
        );
        assert!(marker.exists(), "{errno}: the injection left the marker");
        let note = fs::read_to_string(&marker).unwrap();
        assert!(note.starts_with("pgrun-stopping pgrun="), "{errno}: the run's own marker is a note: {note:?}");

        let status = run(&mut pgrun(["status", "--json", p]));
        let state: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
        assert_eq!(state["state"], "not-running", "{errno}: a leftover is no pending cancel: {state}");

        let witness = scratch.path("ran");
        let out = run(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()]));
        assert_status(&out, 0, &format!("{errno}: the next run"));
        assert!(witness.exists(), "{errno}: the next run did not run its command");

        let out = run(&mut pgrun(["cancel", "--keep-pending", "--wait-start", "0", p]));
        assert_status(&out, 1, &format!("{errno}: cancel left pending"));
        let out = run(&mut pgrun(["-p", p, "--", "true"]));
        assert_status(&out, 143, &format!("{errno}: a pending cancel still cancels"));
        assert!(!marker.exists(), "{errno}: the pending cancel was consumed");
    }
}

#[test]
fn a_cancel_request_that_cannot_be_removed_at_exit_cancels_no_later_run() {
    // cancel's (empty) marker stopped the run, which puts its note in the
    // request's place as it withdraws the run and cannot remove that note
    // at exit: it is reported and left a note, so the next run on that pid
    // file still runs.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let marker = scratch.path("job.pid.cancel");
    let p = pidfile.to_str().unwrap();
    let mut traced = pgrun_injected("unlink:error=EIO", Some(&marker), &["-p", p, "--", "sleep", "300"]);
    let run_index = guard.spawn(traced.stderr(std::process::Stdio::piped()));
    let pgid: i32 = wait_line(&pidfile).parse().unwrap();
    guard.record_group(pgid);
    let out = run(&mut pgrun(["cancel", p]));
    assert_status(&out, 0, "cancel");
    assert_eq!(guard.wait(run_index), 143, "cancelled");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut guard.child(run_index).stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.starts_with("pgrun: warning: cannot remove cancel marker ") && err.contains("EIO"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let left = fs::read_to_string(&marker).unwrap();
    assert!(left.starts_with("pgrun-stopping "), "the request was replaced by the run's note: {left:?}");
    let witness = scratch.path("ran");
    let out = run(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 0, "the next run");
    assert!(witness.exists());
}

#[test]
fn a_stopping_run_marks_its_marker_with_a_note_naming_it() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let marker = scratch.path("job.pid.cancel");
    // TERM ignored from the start: a trap would race the 0.1 s timeout.
    let (index, pgid) = start_published_ignoring_term(&mut guard, &pidfile, &["-t", "0.1", "-k", "2"], "sleep 300");
    let pgrun_pid = guard.child(index).id();
    let mut note = String::new();
    eventually("the stopping note", || {
        note = fs::read_to_string(&marker).unwrap_or_default();
        note.ends_with('\n')
    });
    assert_eq!(note, format!("pgrun-stopping pgrun={pgrun_pid} pgid={pgid}\n"));
    let status = run(&mut pgrun(["status", "--json", pidfile.to_str().unwrap()]));
    let state: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(state["state"], "stopping", "{state}");
    assert_eq!(state["cancel_pending"], false, "a note is no cancel request: {state}");
    assert_eq!(guard.wait(index), 124);
    assert!(!marker.exists(), "the note is removed at exit");
}

#[test]
fn a_cancel_request_that_cannot_be_consumed_before_the_start_cancels_only_that_run() {
    // The request is honoured (exit 143, nothing run) but cannot be
    // removed: one warning, and it is marked consumed, so the next run runs.
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let marker = scratch.path("job.pid.cancel");
    let p = pidfile.to_str().unwrap();
    let witness = scratch.path("ran");
    let w = witness.to_str().unwrap();
    fs::write(&marker, "").unwrap();
    let out = run(&mut pgrun_injected("unlink:error=EIO", Some(&marker), &["-p", p, "--", "touch", w]));
    assert_status(&out, 143, "cancelled before the start");
    assert!(!witness.exists(), "the command ran");
    let err = stderr_of(&out);
    assert!(err.starts_with("pgrun: warning: cannot remove cancel marker ") && err.contains("EIO"), "{err}");
    // The warning, then the cancel itself.
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(err.lines().nth(1).unwrap().starts_with("pgrun: cancelled before it started: "), "{err}");
    let out = run(&mut pgrun(["-p", p, "--", "touch", w]));
    assert_status(&out, 0, "the next run");
    assert!(witness.exists(), "the next run did not run its command");
}

#[test]
fn a_leftover_stopping_note_does_not_make_the_next_run_look_stopping() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let marker = scratch.path("job.pid.cancel");
    let p = pidfile.to_str().unwrap();
    let out =
        run(&mut pgrun_injected("unlink:error=EIO", Some(&marker), &["-p", p, "-t", "0.1", "--", "sleep", "300"]));
    assert_status(&out, 124, "a run whose note is left");
    assert!(marker.exists());
    let (index, _) = start_published(&mut guard, &pidfile, &[], "exec sleep 300");
    let status = run(&mut pgrun(["status", "--json", p]));
    let state: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(state["state"], "running", "another run's note says nothing about this one: {state}");
    let out = run(&mut pgrun(["cancel", p]));
    assert_status(&out, 0, "cancel");
    assert_eq!(guard.wait(index), 143);
    assert!(!marker.exists(), "the run that stopped removed the marker");
}

#[test]
fn a_pid_file_that_cannot_be_removed_at_exit_is_reported_and_replaced_by_the_next_run() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let out = run(&mut pgrun_injected("unlink:error=EIO", Some(&pidfile), &["-p", p, "--", "true"]));
    assert_status(&out, 0, "the run");
    let err = stderr_of(&out);
    assert!(err.starts_with("pgrun: warning: cannot remove pid file ") && err.contains("EIO"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(pidfile.exists(), "the injection left the pid file");
    let status = run(&mut pgrun(["status", p]));
    assert_status(&status, 1, "stale: its lock went with its pgrun");
    let witness = scratch.path("ran");
    let out = run(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 0, "the next run replaces the stale file");
    assert!(witness.exists() && !pidfile.exists());
}

#[test]
fn the_report_of_a_run_that_cannot_be_published_names_the_mode_in_force_and_what_the_stop_found() {
    // Issue 17 #9: the command runs, then publishing fails, and pgrun stops
    // the unpublished run. Its report must say what the run was (the mode
    // in force, never the `auto` asked for) and what the stop found: the
    // member left when the leader ended (stragglers) and, where the mode
    // reaches them, the processes outside the group it stopped (escaped).
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let report = scratch.path("r.json");
    let dir = scratch.sh();
    let pause = Pause::new(&scratch, "spawned");
    // A member that ignores TERM (it outlives the leader: a straggler) and
    // a process that left the group.
    let payload = format!(
        "sh -c 'trap \"\" TERM; echo $$ > {dir}/member.pid; exec sleep 300' & \
         setsid sh -c 'echo $$ > {dir}/esc.pid; exec sleep 300' & \
         while [ ! -s {dir}/member.pid ] || [ ! -s {dir}/esc.pid ]; do sleep 0.01; done; \
         echo ready > {dir}/ready; exec sleep 300"
    );
    let mut cmd = pgrun([
        "-p",
        pidfile.to_str().unwrap(),
        "--contain",
        "auto",
        "-k",
        "0.5",
        "--report",
        report.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &payload,
    ]);
    cmd.stdin(std::process::Stdio::null());
    pause.arm(&mut cmd);
    let index = guard.spawn(&mut cmd);
    pause.wait_reached();
    let member = wait_pid(&scratch.path("member.pid"), &mut guard);
    let escapee = wait_pid(&scratch.path("esc.pid"), &mut guard);
    wait_line(&scratch.path("ready"));
    // Somebody else's pid file now stands where pgrun would publish.
    fs::write(&pidfile, "1\n").unwrap();
    pause.release();
    assert_eq!(guard.wait(index), 125, "a run that cannot be published is pgrun's failure");
    let r = json(&report);
    let in_force = if cfg!(feature = "posix-fallback") { vec!["group"] } else { vec!["tree", "cgroup"] };
    assert!(in_force.contains(&r["contain"].as_str().unwrap()), "the mode in force, not the one asked for: {r}");
    assert_eq!(r["reason"], "error", "{r}");
    assert!(is_dead(member), "the member that ignores TERM outlived pgrun");
    let sent: Vec<&str> = r["signals"].as_array().unwrap().iter().map(|s| s["signal"].as_str().unwrap()).collect();
    assert_eq!(sent, ["TERM", "KILL"], "the member survived TERM: {r}");
    assert_eq!(r["stragglers"], 1, "the member left when the leader ended: {r}");
    if cfg!(feature = "posix-fallback") {
        assert_eq!(r["escaped"], 0, "{r}");
    } else {
        assert!(is_dead(escapee), "the escapee outlived pgrun in {} mode", r["contain"]);
        assert_eq!(r["escaped"], 1, "the escapee the stop reached: {r}");
    }
}

#[test]
fn the_report_of_a_command_that_cannot_start_names_the_mode_in_force() {
    let scratch = Scratch::new();
    let report = scratch.path("r.json");
    let out = run(&mut pgrun([
        "--contain",
        "auto",
        "--report",
        report.to_str().unwrap(),
        "--",
        "pgrun-test-no-such-command",
    ]));
    assert_status(&out, 127, "a command that is not found");
    let r = json(&report);
    let in_force = if cfg!(feature = "posix-fallback") { ["group", "group"] } else { ["tree", "cgroup"] };
    assert!(in_force.contains(&r["contain"].as_str().unwrap()), "the mode in force, not the one asked for: {r}");
}

// The faults sweep (new-A): the temporary name of the pid file, unlinked
// once the file is linked into place, was left silently when that unlink
// failed. It is said now, in one warning line naming it (nobody else will
// remove it); the run goes on as usual.
#[test]
fn a_temporary_name_that_cannot_be_removed_is_said() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let found = Command::new("strace").arg("-V").stdout(Stdio::null()).status();
    assert!(found.is_ok_and(|s| s.success()), "this test needs strace; install it");
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-o", "/dev/null", "-b", "execve", "-e", "inject=unlink:error=EACCES:when=1"]);
    cmd.args(["--", pgrun_path(), "-p", pidfile.to_str().unwrap(), "--", "sh", "-c", "exit 3"]);
    let out = run(default_signals(&mut cmd));
    assert_status(&out, 3, "the command's status");
    let stderr = stderr_of(&out);
    let left: Vec<_> = fs::read_dir(scratch.dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert_eq!(left.len(), 1, "the injected failure left no temporary name: {left:?}");
    assert!(
        stderr.lines().any(|l| l.starts_with("pgrun: warning: cannot remove temporary file") && l.contains(&left[0])),
        "{stderr}"
    );
}

//! `pgrun wait PIDFILE`: waiting from another process for a run to be over,
//! every exit status, and that wait touches nothing (no signal, no file).

use crate::util::*;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn wait_cmd(args: &[&str]) -> Command {
    let mut all = vec!["wait"];
    all.extend_from_slice(args);
    let mut cmd = pgrun(&all);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

fn wait(args: &[&str]) -> std::process::Output {
    run(&mut wait_cmd(args))
}

/// The rest of a spawned wait's stderr, once it has ended.
fn rest_of_stderr(guard: &mut Guard, index: usize) -> String {
    let mut err = String::new();
    std::io::Read::read_to_string(guard.child(index).stderr.as_mut().unwrap(), &mut err).unwrap();
    err
}

/// The names in a folder, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// A payload that writes `ready`, waits for the test to create `gate`, then
/// writes `end` as its very last act and exits with `code`.
fn gated_payload(dir: &str, code: i32) -> String {
    format!(
        "echo ready > {dir}/ready; while [ ! -e {dir}/gate ]; do sleep 0.05; done; echo end > {dir}/end; exit {code}"
    )
}

/// Shell code that logs every catchable signal the shell gets to `log`.
fn log_signals(dir: &str) -> String {
    ["HUP", "INT", "QUIT", "USR1", "USR2", "ALRM", "TERM", "CONT", "WINCH", "PIPE"]
        .iter()
        .map(|s| {
            // TERM (cancel's, at the end of the test) ends the run.
            let then = if *s == "TERM" { "; exit 143" } else { "" };
            format!("trap 'echo {s} >> {dir}/signals.log{then}' {s}; ")
        })
        .collect()
}

#[test]
fn wait_returns_0_once_the_run_is_over_and_not_before() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    // A member in the background outlives the leader for a moment: the run
    // is over only when it is gone too.
    let payload =
        format!("sh -c 'sleep 0.3; echo $$ > {dir}/bg.done' & echo $! > {dir}/bg; {}", gated_payload(&dir, 0));
    let (index, pgid) = start_published(&mut guard, &pidfile, &["--wait-group"], &payload);
    wait_line(&scratch.path("ready"));
    let waiter = spawn_waiting(&mut guard, &[pidfile.to_str().unwrap()]);
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(guard.wait(waiter), 0, "wait");
    let pgrun_pid = guard.child(index).id() as i32;
    assert!(scratch.path("end").exists(), "wait returned before the payload's last act");
    assert!(scratch.path("bg.done").exists(), "wait returned before the background member ended");
    // SAFETY: kill(-pgid, 0) only probes.
    assert_eq!(unsafe { libc::kill(-pgid, 0) }, -1, "wait returned while group {pgid} existed");
    // wait returns once pgrun has withdrawn the run (removed the pid file,
    // let go of the lock), which may be before pgrun exits (it may still
    // be writing output to a slow reader).
    assert!(!pidfile.exists(), "wait returned while the run's pid file was in place");
    let _ = pgrun_pid;
    assert_eq!(guard.wait(index), 0);
}

/// In tree mode (the Linux default) the run includes a descendant that
/// left the group: wait returns only once that one is gone too.
#[cfg(not(feature = "posix-fallback"))]
#[test]
fn in_tree_mode_wait_waits_for_a_descendant_that_left_the_group() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let payload = format!(
        "setsid sh -c 'echo $$ > {dir}/esc; while [ ! -e {dir}/gate ]; do sleep 0.05; done; sleep 0.3; echo done > {dir}/esc.done' & \
         {}",
        gated_payload(&dir, 0)
    );
    let (index, pgid) = start_published(&mut guard, &pidfile, &["--wait-group", "--contain", "tree"], &payload);
    let escapee = wait_pid(&scratch.path("esc"), &mut guard);
    assert_ne!(pgrp(escapee), Some(pgid), "the escapee did not leave the group");
    wait_line(&scratch.path("ready"));
    let waiter = spawn_waiting(&mut guard, &[pidfile.to_str().unwrap()]);
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(guard.wait(waiter), 0, "wait");
    assert!(scratch.path("esc.done").exists() && is_dead(escapee), "wait returned while the escapee lived");
    assert_eq!(guard.wait(index), 0);
}

#[test]
fn wait_timeout_is_124_and_leaves_the_run_alone() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let payload = format!("{}echo ready > {dir}/ready; while :; do sleep 0.05; done", log_signals(&dir));
    let (index, pgid) = start_published(&mut guard, &pidfile, &[], &payload);
    wait_line(&scratch.path("ready"));
    let before = listing(scratch.dir());
    let started = Instant::now();
    let out = wait(&["--timeout", "0.3", pidfile.to_str().unwrap()]);
    assert_status(&out, 124, "wait --timeout");
    assert!(started.elapsed() >= Duration::from_millis(300), "returned before --timeout");
    assert!(guard.child(index).try_wait().unwrap().is_none() && !is_dead(pgid), "wait --timeout touched the run");
    assert_eq!(listing(scratch.dir()), before, "wait created or removed a file");
    assert_eq!(fs::read_to_string(scratch.path("signals.log")).unwrap_or_default(), "", "the run got a signal");
    let out = run(&mut pgrun(["cancel", pidfile.to_str().unwrap()]));
    assert_status(&out, 0, "cancel");
    assert_eq!(guard.wait(index), 143);
    // (The stop sequence's SIGCONT may be logged too.)
    let log = fs::read_to_string(scratch.path("signals.log")).unwrap_or_default();
    assert!(log.starts_with("TERM\n"), "cancel's TERM: {log:?}");
}

#[test]
fn wait_with_no_run_is_1_after_wait_start() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let started = Instant::now();
    let out = wait(&["--wait-start", "0.2", pidfile.to_str().unwrap()]);
    assert_status(&out, 1, "no run");
    assert!(started.elapsed() >= Duration::from_millis(200), "gave up before --wait-start");
    assert!(stderr_of(&out).starts_with("pgrun: "), "{}", stderr_of(&out));
    assert!(listing(scratch.dir()).is_empty(), "wait created a file: {:?}", listing(scratch.dir()));
}

#[test]
fn wait_waits_for_a_run_that_starts_during_wait_start() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    // wait looks for the file before the run starts; it says when it
    // found the run, which cannot end before the gate is opened.
    let waiter = guard.spawn(&mut wait_cmd(&["-v", "--wait-start", "30s", pidfile.to_str().unwrap()]));
    let (index, _) = start_published(&mut guard, &pidfile, &[], &gated_payload(&dir, 0));
    wait_line(&scratch.path("ready"));
    assert!(guard.child(waiter).try_wait().unwrap().is_none(), "wait returned while the run was live");
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(guard.wait(waiter), 0, "wait");
    assert!(scratch.path("end").exists(), "wait returned before the run ended");
    assert_eq!(guard.wait(index), 0);
}

#[test]
fn wait_report_gives_the_runs_own_status() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    // exit 3
    let pidfile = scratch.path("three.pid");
    let report = scratch.path("three.json");
    let (index, _) =
        start_published(&mut guard, &pidfile, &["--report", report.to_str().unwrap()], &gated_payload(&dir, 3));
    wait_line(&scratch.path("ready"));
    let waiter = spawn_waiting(&mut guard, &["--report", report.to_str().unwrap(), pidfile.to_str().unwrap()]);
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(guard.wait(waiter), 3, "wait --report of exit 3");
    assert_eq!(guard.wait(index), 3);
    // A timed-out run: 124.
    let pidfile = scratch.path("slow.pid");
    let report = scratch.path("slow.json");
    let (index, _) = start_published(
        &mut guard,
        &pidfile,
        &["-t", "1", "--report", report.to_str().unwrap()],
        &format!("echo ready > {dir}/slow.ready; sleep 300"),
    );
    wait_line(&scratch.path("slow.ready"));
    let waiter = spawn_waiting(&mut guard, &["--report", report.to_str().unwrap(), pidfile.to_str().unwrap()]);
    assert_eq!(guard.wait(waiter), 124, "wait --report of a timed-out run");
    assert_eq!(guard.wait(index), 124);
    // A cancelled run: 143.
    let pidfile = scratch.path("cancelled.pid");
    let report = scratch.path("cancelled.json");
    let (index, _) = start_published(
        &mut guard,
        &pidfile,
        &["--report", report.to_str().unwrap()],
        &format!("echo ready > {dir}/cancelled.ready; sleep 300"),
    );
    wait_line(&scratch.path("cancelled.ready"));
    let waiter = spawn_waiting(&mut guard, &["--report", report.to_str().unwrap(), pidfile.to_str().unwrap()]);
    assert_status(&run(&mut pgrun(["cancel", pidfile.to_str().unwrap()])), 0, "cancel");
    assert_eq!(guard.wait(waiter), 143, "wait --report of a cancelled run");
    assert_eq!(guard.wait(index), 143);
}

#[test]
fn wait_does_not_wait_for_pgrun_to_flush_output_to_a_stalled_reader() {
    // The run is over (the command exited, the pid file is withdrawn) while
    // pgrun still owes its stdout reader, who does not read, the marker and
    // the tail. wait, with and without --report, returns then, with the
    // run's status, not once pgrun has written everything (which the test
    // then reads, and which must be complete).
    for with_report in [false, true] {
        let scratch = Scratch::new();
        let mut guard = Guard::new();
        let dir = scratch.sh();
        let pidfile = scratch.path("job.pid");
        let report = scratch.path("job.json");
        let (mut reader, writer) = widened_pipe();
        // The head fits in pgrun's stdout pipe, head and tail do not: the
        // command ends, and pgrun holds the rest for the reader.
        // SAFETY: F_GETPIPE_SZ on the test's own pipe.
        let capacity = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&reader), libc::F_GETPIPE_SZ) };
        let capacity = usize::try_from(capacity).expect("F_GETPIPE_SZ");
        let (size, produced) = ((capacity * 3 / 2).to_string(), capacity * 8);
        let payload = format!(
            "echo ready > {dir}/ready; while [ ! -e {dir}/gate ]; do sleep 0.05; done; head -c {produced} /dev/zero; exit 3"
        );
        let mut args = vec!["-p", pidfile.to_str().unwrap(), "--max-output", &size];
        if with_report {
            args.extend(["--report", report.to_str().unwrap()]);
        }
        args.extend(["--", "sh", "-c", &payload]);
        let index = guard.spawn(pgrun(&args).stdout(writer));
        let pgid: i32 = wait_line(&pidfile).parse().expect("pid file holds a number");
        guard.record_group(pgid);
        wait_line(&scratch.path("ready"));
        let mut wait_args = vec![pidfile.to_str().unwrap()];
        if with_report {
            wait_args.splice(0..0, ["--report", report.to_str().unwrap()]);
        }
        let waiter = spawn_waiting(&mut guard, &wait_args);
        fs::write(scratch.path("gate"), "").unwrap();
        let status = guard.wait(waiter);
        let err = rest_of_stderr(&mut guard, waiter);
        assert_eq!(status, if with_report { 3 } else { 0 }, "report {with_report}: {err}");
        assert!(!pidfile.exists(), "wait returned before the record was withdrawn");
        // SAFETY: kill(-pgid, 0) only probes.
        assert_eq!(unsafe { libc::kill(-pgid, 0) }, -1, "wait returned while group {pgid} existed");
        assert!(guard.child(index).try_wait().unwrap().is_none(), "pgrun no longer waited for its reader");
        let mut all = Vec::new();
        std::io::Read::read_to_end(&mut reader, &mut all).unwrap();
        assert_eq!(guard.wait(index), 3);
        let half = capacity * 3 / 4;
        let mut want = vec![0u8; half];
        want.extend_from_slice(format!("\n[pgrun: {} bytes omitted]\n", produced - 2 * half).as_bytes());
        want.extend_from_slice(&vec![0u8; half]);
        assert!(all == want, "report {with_report}: {} bytes out, {} expected", all.len(), want.len());
        if with_report {
            let r = json(&report);
            assert_eq!(r["exit_code"], 3, "{r}");
            assert_eq!(r["output"]["stdout"]["bytes"], produced, "{r}");
        }
    }
}

/// `wait --report`: a report that never comes, or another run's, is 125.
/// (The longest of wait's tests, for its 5 s report settle: named to come
/// first of them in libtest's order, which is by name, so that it starts
/// before the rest rather than finish the suite alone.)
#[test]
fn a_missing_report_or_another_runs_report_is_125() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    // pgrun is held at its last step (`exit`: the run withdrawn, the guard
    // released and gone, pgrun not exited), so wait takes the path on which
    // the report may still be on its way: it gives it its settle time (5 s),
    // then says it is missing.
    let held = Pause::new(&scratch, "exit");
    let payload = gated_payload(&dir, 0);
    let index = guard.spawn(held.arm(&mut pgrun(["-p", pidfile.to_str().unwrap(), "--", "sh", "-c", &payload])));
    let pgid: i32 = wait_line(&pidfile).parse().expect("pid file holds a number");
    guard.record(pgid);
    guard.record_group(pgid);
    wait_line(&scratch.path("ready"));
    let report = scratch.path("none.json");
    let waiter = spawn_waiting(&mut guard, &["--report", report.to_str().unwrap(), pidfile.to_str().unwrap()]);
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(guard.wait(waiter), 125, "wait --report with no report");
    let err = rest_of_stderr(&mut guard, waiter);
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("pgrun: cannot read report") && last.contains("none.json"), "{err}");
    assert!(scratch.path("end").exists(), "the report was looked for before the run was over");
    assert!(guard.child(index).try_wait().unwrap().is_none(), "pgrun was not held: wait saw it exit");
    held.release();
    assert_eq!(guard.wait(index), 0);
    // A report left by another run (another group) is not this run's. With
    // --no-guard wait sees pgrun itself exit (the other path: the report,
    // if any, is written by then) and reads the report at once.
    let (index, pgid) =
        start_published(&mut guard, &pidfile, &["--no-guard"], &format!("echo again > {dir}/again; sleep 300"));
    wait_line(&scratch.path("again"));
    fs::write(&report, format!("{{\"exit_code\": 0, \"pgid\": {}}}\n", pgid + 1)).unwrap();
    let waiter = spawn_waiting(&mut guard, &["--report", report.to_str().unwrap(), pidfile.to_str().unwrap()]);
    assert_status(&run(&mut pgrun(["cancel", pidfile.to_str().unwrap()])), 0, "cancel");
    assert_eq!(guard.wait(waiter), 125, "wait --report with another run's report");
    assert!(rest_of_stderr(&mut guard, waiter).contains("not the run's"));
    assert_eq!(guard.wait(index), 143);
}

#[test]
fn several_waiters_all_return_0() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let (index, _) = start_published(&mut guard, &pidfile, &[], &gated_payload(&dir, 0));
    wait_line(&scratch.path("ready"));
    let waiters: Vec<usize> = (0..5).map(|_| spawn_waiting(&mut guard, &[pidfile.to_str().unwrap()])).collect();
    fs::write(scratch.path("gate"), "").unwrap();
    for w in waiters {
        assert_eq!(guard.wait(w), 0, "waiter {w}");
    }
    assert!(scratch.path("end").exists());
    assert_eq!(guard.wait(index), 0);
}

#[test]
fn wait_outlasts_a_sigkilled_pgrun_until_its_guard_has_stopped_the_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    // The payload ignores TERM (and logs it) and lives on until the test
    // lets it go, as a slow clean-up would: the guard's stop sequence, its
    // KILL 300 s away, waits for it, and so must wait.
    let payload = format!(
        "trap 'echo TERM >> {dir}/term.log' TERM; echo $$ > {dir}/leader; \
         while [ ! -e {dir}/go ]; do sleep 0.05; done; echo end > {dir}/end"
    );
    let (index, pgid) = start_published(&mut guard, &pidfile, &["-k", "300"], &payload);
    let leader = wait_pid(&scratch.path("leader"), &mut guard);
    let waiter = spawn_waiting(&mut guard, &[pidfile.to_str().unwrap()]);
    let pgrun_pid = guard.child(index).id() as i32;
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    // The guard sent TERM; the payload lives on, and so does the wait.
    wait_line(&scratch.path("term.log"));
    assert!(guard.child(waiter).try_wait().unwrap().is_none(), "wait returned while the guard was stopping the run");
    assert!(!is_dead(leader), "the payload did not survive TERM");
    fs::write(scratch.path("go"), "").unwrap();
    assert_eq!(guard.wait(waiter), 0, "wait");
    assert!(scratch.path("end").exists() && is_dead(leader), "wait returned while the run lived");
    // SAFETY: kill(-pgid, 0) only probes.
    let probe = unsafe { libc::kill(-pgid, 0) };
    assert_eq!(probe, -1, "wait returned while group {pgid} still existed");
}

#[test]
fn a_stale_pid_file_is_1_and_left_in_place() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    fs::write(&pidfile, "999999\n").unwrap();
    fs::set_permissions(&pidfile, fs::Permissions::from_mode(0o644)).unwrap();
    let before = listing(scratch.dir());
    let out = wait(&["--wait-start", "0.2", pidfile.to_str().unwrap()]);
    assert_status(&out, 1, "stale pid file");
    assert!(stderr_of(&out).contains("stale"), "{}", stderr_of(&out));
    assert_eq!(listing(scratch.dir()), before, "wait created or removed a file");
    assert_eq!(fs::read_to_string(&pidfile).unwrap(), "999999\n");
}

#[test]
fn unsafe_pid_files_are_refused_with_125() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let (index, _) = start_published(&mut guard, &pidfile, &[], &format!("echo ready > {dir}/ready; sleep 300"));
    wait_line(&scratch.path("ready"));
    let check = |path: &Path, what: &str| {
        let out = wait(&[path.to_str().unwrap()]);
        assert_status(&out, 125, what);
        let err = stderr_of(&out);
        assert!(err.starts_with("pgrun: ") && err.lines().count() == 1, "{what}: {err}");
    };
    let link = scratch.path("link.pid");
    symlink(&pidfile, &link).unwrap();
    check(&link, "symlink to a live run's pid file");
    fs::set_permissions(&pidfile, fs::Permissions::from_mode(0o666)).unwrap();
    check(&pidfile, "world-writable");
    fs::set_permissions(&pidfile, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(scratch.path("garbage.pid"), "not a group\n").unwrap();
    check(&scratch.path("garbage.pid"), "garbage");
    assert!(guard.child(index).try_wait().unwrap().is_none(), "a refused wait touched the run");
    assert_status(&run(&mut pgrun(["cancel", pidfile.to_str().unwrap()])), 0, "cancel");
    assert_eq!(guard.wait(index), 143);
}

/// A process's context switches so far, from `/proc/PID/status`.
fn context_switches(pid: i32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .filter(|l| l.starts_with("voluntary_ctxt_switches:") || l.starts_with("nonvoluntary_ctxt_switches:"))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
        .sum()
}

/// In both builds: the lock is waited for by a blocking lock, not polled.
#[test]
fn a_waiter_does_not_wake_up_while_the_run_runs() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let (index, _) = start_published(&mut guard, &pidfile, &[], &gated_payload(&dir, 0));
    wait_line(&scratch.path("ready"));
    let waiter = spawn_waiting(&mut guard, &[pidfile.to_str().unwrap()]);
    let pid = guard.child(waiter).id() as i32;
    // Not a synchronisation: the window in which an idle waiter must not
    // run at all (a 20 ms poll would switch about 25 times in it).
    let before = context_switches(pid);
    std::thread::sleep(Duration::from_millis(500));
    let woke = context_switches(pid) - before;
    assert!(woke <= 2, "wait woke up {woke} times in 0.5 s while the run simply ran");
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(guard.wait(waiter), 0);
    assert_eq!(guard.wait(index), 0);
}

#[test]
fn without_a_guard_wait_returns_once_the_run_is_withdrawn_not_once_pgrun_exits() {
    // --no-guard: no guard's exit to announce the withdrawal. The run ends
    // (the command exits, the pid file is withdrawn, the lock let go of)
    // while its pgrun has not exited (paused at `exit`; in life, a long
    // final flush to a slow reader): wait returns then, while pgrun lives.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let pidfile = scratch.path("job.pid");
    let at_exit = Pause::new(&scratch, "exit");
    let payload = gated_payload(&dir, 0);
    let mut cmd = pgrun(["--no-guard", "-p", pidfile.to_str().unwrap(), "--", "sh", "-c", &payload]);
    let index = guard.spawn(at_exit.arm(&mut cmd));
    let pgid: i32 = wait_line(&pidfile).parse().expect("pid file holds a number");
    guard.record_group(pgid);
    wait_line(&scratch.path("ready"));
    let waiter = spawn_waiting(&mut guard, &[pidfile.to_str().unwrap()]);
    fs::write(scratch.path("gate"), "").unwrap();
    at_exit.wait_reached();
    assert_eq!(guard.wait(waiter), 0, "{}", rest_of_stderr(&mut guard, waiter));
    assert!(!pidfile.exists() && is_dead(pgid), "wait returned before the run was over");
    assert!(guard.child(index).try_wait().unwrap().is_none(), "pgrun is still paused at its exit");
    at_exit.release();
    assert_eq!(guard.wait(index), 0);
}

/// A run that ends cleanly between wait opening its pid file and looking
/// at its lock removed that file before it let go of the lock: the lock
/// found free, the path no longer names the file wait read, so the run is
/// over (wait gives its status), not stale. wait is held at `record-read`
/// (the pid file open and its record read, its lock not looked at yet).
#[test]
fn a_run_that_ends_cleanly_as_wait_looks_is_over_not_stale() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let report = scratch.path("r.json");
    let (p, r) = (pidfile.to_str().unwrap(), report.to_str().unwrap());
    let (index, _) = start_published(&mut guard, &pidfile, &["--report", r], "exec sleep 300");
    let read = Pause::new(&scratch, "record-read");
    let waiters: Vec<usize> = [&["-v", p][..], &["-v", "--report", r, p][..]]
        .iter()
        .map(|args| guard.spawn(read.arm(&mut wait_cmd(args))))
        .collect();
    read.wait_reached();
    eventually("both waiters held at record-read", || {
        // Each writes the same `.reached` file: wait until both have read
        // the record (the one pid file's inode open in each).
        waiters.iter().all(|&w| {
            let pid = guard.child(w).id();
            fs::read_dir(format!("/proc/{pid}/fd"))
                .into_iter()
                .flatten()
                .flatten()
                .any(|fd| fs::read_link(fd.path()).is_ok_and(|t| t == pidfile))
        })
    });
    send(guard.child(index).id() as i32, libc::SIGTERM);
    assert_eq!(guard.wait(index), 143);
    assert!(!pidfile.exists(), "the run removed its pid file");
    read.release();
    let plain = guard.wait(waiters[0]);
    assert_eq!(plain, 0, "the run is over: {}", rest_of_stderr(&mut guard, waiters[0]));
    let with_report = guard.wait(waiters[1]);
    assert_eq!(with_report, 143, "the run's own status: {}", rest_of_stderr(&mut guard, waiters[1]));
}

/// Whether the path still names the file wait read is asked of the file
/// system: a failure to answer is no proof that the run ended (nor that
/// the file is stale), and is reported (125, one line).
#[test]
fn a_failing_look_at_the_path_after_the_lock_is_reported_not_read_as_over() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    fs::write(&pidfile, "999999\n").unwrap();
    fs::set_permissions(&pidfile, fs::Permissions::from_mode(0o644)).unwrap();
    let args = ["wait", "--wait-start", "0", p];
    let fault = crate::status::stat_after_lock_test(&scratch, &pidfile, &args);
    let out = run(&mut pgrun_injected(&fault, Some(&pidfile), &args));
    let err = stderr_of(&out);
    assert_eq!(code_of(out.status), 125, "{fault}: {err}");
    assert!(
        err.starts_with(&format!("pgrun: cannot use pid file {p}: ")) && err.lines().count() == 1,
        "{fault}: {err}"
    );
    assert_eq!(fs::read_to_string(&pidfile).unwrap(), "999999\n", "wait changed the pid file");
}

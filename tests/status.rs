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

/// A tree-mode count must find an escaped process that stays put even when
/// siblings listed before it in its parent's children file end while status
/// reads that file: each read after the first resumes by position, and those
/// ends shift the escapee past it. status is stopped (strace injects a
/// SIGSTOP) right after its first read of the leader's children file; the
/// siblings end and the leader reaps them meanwhile. Read in 32-byte parts,
/// the file lost the escapee and the count was one short.
#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path reads no children files")]
fn status_counts_an_escapee_whose_earlier_siblings_end_during_the_walk() {
    use std::process::Stdio;
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    // 12 siblings in the group, then the escapee in a session of its own
    // (not a group leader when forked, so setsid(1) does not fork again).
    let fork_siblings = fork_fifo_siblings(&scratch);
    let payload = format!(
        "{fork_siblings}
         setsid sleep 1000 & echo $! > {dir}/escapee
         echo done >> {dir}/siblings
         wait"
    );
    let (run, pgid) = start_published(&mut guard, &pidfile, &["--contain", "tree"], &payload);
    let escapee = wait_pid(&scratch.path("escapee"), &mut guard);
    let siblings = fifo_siblings(&scratch, &mut guard);
    eventually("the escapee in its own session", || pgrp(escapee) == Some(escapee));
    let children_file = std::path::PathBuf::from(format!("/proc/{pgid}/task/{pgid}/children"));
    let status = guard.spawn(
        pgrun_injected("read:signal=SIGSTOP:when=1", Some(&children_file), &["status", pidfile.to_str().unwrap()])
            .stdout(Stdio::piped()),
    );
    let strace_pid = guard.child(status).id() as i32;
    let reader = stopped_reading(strace_pid, &children_file);
    // End the siblings (EOF on the fifo) and wait until the leader reaped them.
    end_fifo_siblings(&scratch, &siblings);
    send(reader, libc::SIGCONT);
    assert_eq!(guard.wait(status), 0);
    let mut out = String::new();
    std::io::Read::read_to_string(guard.child(status).stdout.as_mut().unwrap(), &mut out).unwrap();
    // Counted before the stop: the leader and its 12 siblings; then the escapee.
    assert!(out.contains(", 14 processes,"), "the escapee was not counted: {out}");
    assert!(!is_dead(escapee));
    // End the run: tree mode stops the escapee too.
    send(guard.child(run).id() as i32, libc::SIGTERM);
    guard.wait(run);
    wait_dead(escapee);
}

/// Spawn `pgrun status ARGS...` held at `record-read` (the pid file open
/// and its record read, its lock not looked at yet), its stdout and stderr
/// in `out`; returns its index once it is held there.
fn spawn_held_status(guard: &mut Guard, scratch: &Scratch, out: &std::path::Path, args: &[&str]) -> usize {
    let mut all = vec!["status"];
    all.extend_from_slice(args);
    let mut cmd = pgrun(&all);
    cmd.stdout(fs::File::create(out).unwrap()).stderr(fs::File::create(out).unwrap());
    let read = Pause::new(scratch, "record-read");
    let index = guard.spawn(read.arm(&mut cmd));
    read.wait_reached();
    index
}

/// A run that ends cleanly between status opening its pid file and looking
/// at its lock removed that file before it let go of the lock: the lock
/// found free, the path no longer names the file status read, so there is
/// no run (as for a pid file removed), not a stale file.
#[test]
fn a_run_that_ends_cleanly_as_status_looks_is_not_running_not_stale() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let (index, _) = start_published(&mut guard, &pidfile, &[], "exec sleep 300");
    let out = scratch.path("status.out");
    let looker = spawn_held_status(&mut guard, &scratch, &out, &["--json", p]);
    send(guard.child(index).id() as i32, libc::SIGTERM);
    assert_eq!(guard.wait(index), 143);
    assert!(!pidfile.exists(), "the run removed its pid file");
    Pause::new(&scratch, "record-read").release();
    let code = guard.wait(looker);
    let text = fs::read_to_string(&out).unwrap();
    assert_eq!(code, 3, "{text}");
    let answer: serde_json::Value = serde_json::from_str(&text).expect(&text);
    assert_eq!((answer["state"].as_str(), answer["pgid"].as_i64()), (Some("not-running"), None), "{text}");
}

/// The `strace -e inject=` fault that fails, with EIO, the first look at
/// the path of the stale pid file `pidfile` that `pgrun ARGS` makes once
/// it has found the file's lock free: found in a recorded run (how many
/// stat calls come before it depends on the build). Fails the test if
/// there is no such look.
pub fn stat_after_lock_test(scratch: &Scratch, pidfile: &std::path::Path, args: &[&str]) -> String {
    use std::process::{Command, Stdio};
    let trace = scratch.path("recorded.trace");
    let traced = Command::new("strace")
        .args(["-f", "-qq", "-o"])
        .arg(&trace)
        .args(["-e", "trace=%stat,%fstat,fcntl", "-P"])
        .arg(pidfile)
        .arg(pgrun_path())
        .args(args)
        .stdin(Stdio::null())
        .output();
    assert!(traced.is_ok(), "this test needs strace; install it");
    let text = fs::read_to_string(&trace).unwrap();
    fs::remove_file(&trace).unwrap();
    let mut counts = std::collections::HashMap::<String, usize>::new();
    let mut lock_tested = false;
    for line in text.lines() {
        // `PID NAME(ARGS) = RESULT` (with -f, each line starts with the pid).
        let Some(name) = line.split('(').next().and_then(|head| head.split_whitespace().last()) else { continue };
        if name == "fcntl" {
            lock_tested |= line.contains("F_GETLK");
            continue;
        }
        let count = counts.entry(name.to_string()).or_default();
        *count += 1;
        if lock_tested {
            return format!("{name}:error=EIO:when={count}");
        }
    }
    panic!("pgrun {args:?} did not look at {} again once it found the lock free:\n{text}", pidfile.display());
}

/// Whether the path still names the file status read is asked of the
/// file system: a failure to answer is no proof that the run ended (nor
/// that the file is stale), and is reported (4, one line).
#[test]
fn a_failing_look_at_the_path_after_the_lock_is_reported_not_read_as_gone() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    fs::write(&pidfile, "4242\n").unwrap();
    let fault = stat_after_lock_test(&scratch, &pidfile, &["status", p]);
    let out = run(&mut pgrun_injected(&fault, Some(&pidfile), &["status", p]));
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &stderr_of(&out);
    assert_eq!(code_of(out.status), 4, "{fault}: {text}");
    assert!(
        text.starts_with(&format!("pgrun: cannot read pid file {p}: ")) && text.lines().count() == 1,
        "{fault}: {text}"
    );
}

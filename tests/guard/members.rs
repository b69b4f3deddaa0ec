//! Which members the guard stops after pgrun's death: one born after the
//! hand-over (with --wait-group, or started by a straggler during the
//! stop), the run without pidfds, and members past the bound of the
//! hand-over (each handed at most once, the rest reached by the group's
//! number).

use crate::util::*;
use std::fs;
use std::process::Stdio;

/// A run (`extra` options) whose leader exits at once, leaving member A
/// (which survives TERM), which waits for `go`, then starts B in the group
/// and exits. Once A is
/// reaped (every process pgrun handed its guard is then gone) pgrun is
/// SIGKILLed: its guard must still stop B, whose group is the run's.
fn member_started_after_the_hand_over_is_stopped_by_the_guard(extra: &[&str]) {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let a = format!(
        "trap 'echo TERM >> {dir}/a.log' TERM; echo $$ > {dir}/a.pid; until [ -e {dir}/go ]; do sleep 0.01; done
sh -c 'echo $$ > {dir}/b.pid; exec sleep 300' &
until [ -s {dir}/b.pid ]; do sleep 0.01; done
exit 0
"
    );
    fs::write(scratch.path("a.sh"), a).unwrap();
    // The leader exits once A has its trap set and its pid written.
    let payload = format!("sh {dir}/a.sh & until [ -s {dir}/a.pid ]; do sleep 0.01; done; exit 0");
    let mut args = vec!["-k", "300"];
    args.extend_from_slice(extra);
    let (index, pgid) = start_published(&mut guard, &scratch.path("job.pid"), &args, &payload);
    let a = wait_pid(&scratch.path("a.pid"), &mut guard);
    let pgrun_pid = guard.child(index).id() as i32;
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    // The leader is gone: reaped by pgrun, which handed A to its guard
    // (and, without --wait-group, started stopping A, which ignores TERM).
    eventually("the leader to be reaped", || is_dead(pgid) && !std::path::Path::new(&format!("/proc/{pgid}")).exists());
    if !extra.contains(&"--wait-group") {
        // pgrun's stop reached A before B exists.
        assert_eq!(wait_line(&scratch.path("a.log")), "TERM");
    }
    fs::write(scratch.path("go"), "").unwrap();
    let b = wait_pid(&scratch.path("b.pid"), &mut guard);
    assert_eq!(pgrp(b), Some(pgid), "B is not in the run's group");
    eventually("A to be reaped", || !std::path::Path::new(&format!("/proc/{a}")).exists());
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    wait_dead(b);
    wait_dead(keeper);
}

#[test]
fn with_wait_group_the_guard_stops_a_member_born_after_the_hand_over() {
    member_started_after_the_hand_over_is_stopped_by_the_guard(&["--wait-group"]);
}

#[test]
fn the_guard_stops_a_member_a_straggler_started_during_the_stop() {
    member_started_after_the_hand_over_is_stopped_by_the_guard(&[]);
}

#[test]
fn without_pidfds_the_guard_still_stops_the_run() {
    // pidfd_open fails (ENOSYS: an old kernel, or a seccomp filter) for
    // pgrun and its guard alike; pgrun is SIGKILLed: the guard stops the
    // group by its number, which pgrun never saw empty.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let pidfile = scratch.path("job.pid");
    let mut cmd = pgrun_injected(
        "pidfd_open:error=ENOSYS",
        None,
        &["-p", pidfile.to_str().unwrap(), "--", "sh", "-c", &format!("echo $$ > {dir}/cmd.pid; exec sleep 300")],
    );
    cmd.stderr(fs::File::create(scratch.path("err")).unwrap());
    let index = guard.spawn(&mut cmd);
    let strace_pid = guard.child(index).id() as i32;
    let command = wait_pid(&scratch.path("cmd.pid"), &mut guard);
    guard.record_group(command);
    wait_line(&pidfile);
    let comm = |p: i32| fs::read_to_string(format!("/proc/{p}/comm")).map(|c| c.trim_end().to_string()).ok();
    let pgrun_pid = descendants(strace_pid).into_iter().find(|&p| comm(p).as_deref() == Some("pgrun")).unwrap();
    guard.record(pgrun_pid);
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    send(pgrun_pid, libc::SIGKILL);
    wait_dead(command);
    wait_dead(keeper);
    guard.wait(index);
    eventually("the pid file to be removed", || !pidfile.exists());
}

/// The guard's line saying how many processes pgrun handed it.
fn handed_over(log: &str) -> Option<usize> {
    let line = log.lines().find(|l| l.contains("guard: pgrun handed over "))?;
    line.split("handed over ").nth(1)?.split_whitespace().next()?.parse().ok()
}

// pgrun hands its guard pidfds of the run's members, over a socket the
// guard reads only once pgrun is dead. It handed every member, at each
// stop start and again at the leader's reap (issue 30 item 10): fds without
// bound, the same members over and over, past the fd limit dropped without
// a word. Here 100 members that ignore TERM outlive their leader (the
// leader's reap is one hand-over) and are then cancelled (the stop's start
// is another); pgrun is SIGKILLed in the stop's long grace. The guard must
// have been handed at most the bound (32 members and the command's own
// process), and pgrun must have said that the rest is reached by the
// group's number.
#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path has no pidfds: nothing is handed to the guard")]
fn the_guard_is_handed_each_member_once_and_no_more_than_the_bound() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let log = scratch.path("stderr.log");
    let payload = format!(
        "for i in $(seq 100); do sh -c \"trap '' TERM; exec sleep 300\" & done; echo ready > {dir}/ready; exit 0"
    );
    let mut cmd = pgrun(["-v", "--wait-group", "-k", "300", "-p", scratch.path("job.pid").to_str().unwrap()]);
    cmd.args(["--", "sh", "-c", &payload]).stdin(Stdio::null()).stderr(fs::File::create(&log).unwrap());
    let index = guard.spawn(&mut cmd);
    let pgrun_pid = guard.child(index).id() as i32;
    let pgid: i32 = wait_line(&scratch.path("job.pid")).parse().unwrap();
    guard.record_group(pgid);
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    wait_line(&scratch.path("ready"));
    let said = || fs::read_to_string(&log).unwrap_or_default();
    eventually("the leader to be reaped", || said().contains("command exited with status 0"));
    send(pgrun_pid, libc::SIGTERM);
    eventually("the stop to send its TERM", || said().contains(&format!("sending TERM to process group {pgid}")));
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    eventually("the guard to take what it was handed", || handed_over(&said()).is_some());
    let handed = handed_over(&said()).unwrap();
    assert!(handed <= 33, "the guard was handed {handed} processes for a run of 101: {}", said());
    assert!(
        said().contains("the rest it reaches by the group's number"),
        "pgrun handed the guard only some of the members without saying so: {}",
        said()
    );
    // Guard::drop kills the members (the group is recorded) and the guard.
}

// Past the bound the guard reaches the members by the group's number: 100
// members left by their leader (handed over at its reap, 32 of them), then
// pgrun SIGKILLed: the guard stops them all.
#[test]
fn the_guard_stops_members_past_the_bound_by_the_groups_number() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let pidfile = scratch.path("job.pid");
    let log = scratch.path("stderr.log");
    let payload = format!("for i in $(seq 100); do sleep 300 & done; echo ready > {dir}/ready; exit 0");
    let mut cmd = pgrun(["-v", "--wait-group", "-p", pidfile.to_str().unwrap(), "--", "sh", "-c", &payload]);
    cmd.stdin(Stdio::null()).stderr(fs::File::create(&log).unwrap());
    let index = guard.spawn(&mut cmd);
    let pgrun_pid = guard.child(index).id() as i32;
    let pgid: i32 = wait_line(&pidfile).parse().unwrap();
    guard.record_group(pgid);
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    wait_line(&scratch.path("ready"));
    let said = || fs::read_to_string(&log).unwrap_or_default();
    eventually("the leader to be reaped", || said().contains("command exited with status 0"));
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    // SAFETY: kill with signal 0 only probes the run's group.
    eventually("the guard to stop every member", || unsafe { libc::kill(-pgid, 0) } != 0);
    wait_dead(keeper);
    assert!(!pidfile.exists(), "the guard left the pid file: {}", said());
}

//! pgrun SIGKILLed (alone, mid-stop, or with its caller's whole group):
//! the guard finishes the stop; `--no-guard` leaves the group running; a
//! normal exit reaps the guard; a stopped guard does not hold pgrun; the
//! guard is never signalled once dead, never stops a group that took the
//! run's number, and a failed wait of it is not pgrun's death.

use super::{start_stubborn, strace};
use crate::util::*;
use std::fs;
use std::process::{Command, Stdio};

/// A run whose command waits for a file `go`; returns pgrun's index and its
/// guard's pid, once the command is ready.
fn start_waiting_for_go(guard: &mut Guard, scratch: &Scratch) -> (usize, i32) {
    let dir = scratch.sh();
    let mut cmd =
        pgrun(["--", "sh", "-c", &format!("echo x > {dir}/ready; while [ ! -e {dir}/go ]; do sleep 0.01; done")]);
    let index = guard.spawn(&mut cmd);
    let pgrun_pid = guard.child(index).id() as i32;
    wait_line(&scratch.path("ready"));
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    (index, keeper)
}

#[test]
fn pgrun_killed_mid_stop_leaves_the_guard_to_finish_and_clean_up() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let (index, pgid, member) = start_stubborn(&mut guard, &scratch, &[]);
    let pgrun_pid = guard.child(index).id() as i32;
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    assert_eq!(fs::read_to_string(format!("/proc/{keeper}/comm")).unwrap().trim_end(), "pgrun-guard");
    assert_eq!(pgrp(keeper), Some(keeper), "the guard is not in a group of its own");
    eventually("the guard to block, using no CPU", || state(keeper).as_deref() == Some("S"));
    // A stop is under way (the marker exists) when pgrun is killed.
    send(pgrun_pid, libc::SIGTERM);
    assert_eq!(wait_line(&scratch.path("member.log")), "TERM");
    assert!(scratch.path("job.pid.cancel").exists(), "a stopping run has its marker");
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    wait_dead(member);
    eventually("the group to be gone", || unsafe { libc::kill(-pgid, 0) } != 0);
    wait_dead(keeper);
    assert!(!scratch.path("job.pid").exists(), "the guard left the pid file");
    assert!(!scratch.path("job.pid.cancel").exists(), "the guard left the marker");
}

#[test]
fn killing_the_callers_whole_group_does_not_take_the_guard() {
    use std::os::unix::process::CommandExt;
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let pidfile = scratch.path("job.pid");
    // The caller: a shell in a group of its own that runs pgrun in it.
    let script = format!(
        "{} -p {} -- sh -c 'echo $$ > {dir}/member.pid; exec sleep 300' & echo $! > {dir}/pgrun.pid; wait",
        pgrun_path(),
        pidfile.display()
    );
    let mut caller = Command::new("sh");
    caller.args(["-c", &script]).stdin(Stdio::null()).process_group(0);
    let (caller_pid, _) = guard.spawn_reaped(&mut caller);
    guard.record_group(caller_pid);
    let pgrun_pid = wait_pid(&scratch.path("pgrun.pid"), &mut guard);
    let member = wait_pid(&scratch.path("member.pid"), &mut guard);
    let pgid: i32 = wait_line(&pidfile).parse().unwrap();
    guard.record_group(pgid);
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    // SAFETY: the group this test created for the caller.
    assert_eq!(unsafe { libc::kill(-caller_pid, libc::SIGKILL) }, 0);
    wait_dead(pgrun_pid);
    wait_dead(member);
    wait_dead(keeper);
    eventually("the pid file to be removed", || !pidfile.exists());
}

#[test]
fn no_guard_leaves_the_group_running_when_pgrun_is_killed() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let (index, _pgid, member) = start_stubborn(&mut guard, &scratch, &["--no-guard"]);
    let pgrun_pid = guard.child(index).id() as i32;
    assert!(
        descendants(pgrun_pid)
            .iter()
            .all(|&p| fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim_end() != "pgrun-guard")),
        "--no-guard started a guard"
    );
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    assert!(!is_dead(member), "without a guard nothing stops the group");
    // Guard::drop kills the group.
}

#[test]
fn a_normal_exit_releases_and_reaps_the_guard() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let (index, keeper) = start_waiting_for_go(&mut guard, &scratch);
    fs::write(scratch.path("go"), "").unwrap();
    assert_eq!(guard.wait(index), 0);
    // Reaped by pgrun itself: not even a zombie is left.
    assert!(!std::path::Path::new(&format!("/proc/{keeper}")).exists(), "the guard outlived pgrun");
}

#[test]
fn in_cgroup_mode_the_guard_also_stops_the_escapees_and_removes_the_leaf() {
    if cfg!(feature = "posix-fallback") || !require(Capability::Cgroup2) {
        return;
    }
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let payload =
        format!("setsid sh -c 'echo $$ > {dir}/esc.pid; exec sleep 300' & echo $$ > {dir}/member.pid; exec sleep 300");
    let (index, _pgid) = start_published(&mut guard, &scratch.path("job.pid"), &["--contain", "cgroup"], &payload);
    let escapee = wait_pid(&scratch.path("esc.pid"), &mut guard);
    let member = wait_pid(&scratch.path("member.pid"), &mut guard);
    let pgrun_pid = guard.child(index).id() as i32;
    let leaf = fs::read_to_string(format!("/proc/{escapee}/cgroup")).unwrap();
    assert!(leaf.contains(&format!("/pgrun-{pgrun_pid}")), "the escapee is not in the leaf: {leaf}");
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    wait_dead(member);
    wait_dead(escapee);
    wait_dead(keeper);
    let folder = cgroup2_folders().unwrap().1.join(format!("pgrun-{pgrun_pid}"));
    assert!(!folder.exists(), "the guard left the leaf {}", folder.display());
    assert!(!scratch.path("job.pid").exists());
}

#[test]
fn a_stopped_guard_does_not_hold_pgrun() {
    // pgrun never waits for something it cannot end: a guard stopped by
    // SIGSTOP is killed, not waited for, once pgrun is done.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let (index, keeper) = start_waiting_for_go(&mut guard, &scratch);
    send(keeper, libc::SIGSTOP);
    eventually("the guard to stop", || state(keeper).as_deref() == Some("T"));
    fs::write(scratch.path("go"), "").unwrap();
    assert_eq!(guard.wait(index), 0, "pgrun exits although its guard is stopped");
    assert!(!std::path::Path::new(&format!("/proc/{keeper}")).exists(), "the guard outlived pgrun");
}

/// A trace of several processes (`strace -f`) with each call on one line:
/// a call another process interrupted (`... <unfinished ...>`) is joined
/// with its `<... NAME resumed>` rest.
fn whole_calls(trace: &str) -> String {
    let mut open: Vec<(String, String)> = Vec::new();
    let mut out = String::new();
    for line in trace.lines() {
        let pid = line.split_whitespace().next().unwrap_or("").to_string();
        if let Some(start) = line.strip_suffix(" <unfinished ...>") {
            open.push((pid, start.to_string()));
        } else if let Some(at) = line.find("<... ")
            && let Some(end) = line[at..].find(" resumed>")
            && let Some(i) = open.iter().position(|(p, _)| *p == pid)
        {
            let (_, start) = open.remove(i);
            out.push_str(&start);
            out.push_str(&line[at + end + " resumed>".len()..]);
            out.push('\n');
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn a_guard_that_died_before_a_failed_publish_is_never_signalled_again() {
    // The guard dies while the command starts; publishing then fails, so
    // pgrun stops the unpublished run, and its supervisor reaps the dead
    // guard. The guard's pid is free from then on: pgrun must neither
    // signal nor wait for it again (it may be somebody else's by then).
    let mut strace = strace();
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let trace = scratch.path("trace");
    let pause = Pause::new(&scratch, "spawned");
    strace
        .args(["-f", "-qq", "-e", "trace=kill,wait4", "-o"])
        .arg(&trace)
        .arg(pgrun_path())
        .args(["-p", pidfile.to_str().unwrap(), "--", "sleep", "300"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    default_signals(&mut strace);
    pause.arm(&mut strace);
    let index = guard.spawn(&mut strace);
    pause.wait_reached();
    let strace_pid = guard.child(index).id() as i32;
    let keeper = guard_of(strace_pid);
    guard.record(keeper);
    send(keeper, libc::SIGKILL);
    eventually("the guard to die", || state(keeper).as_deref() == Some("Z"));
    // Somebody else's pid file now stands where pgrun would publish.
    fs::write(&pidfile, "1\n").unwrap();
    pause.release();
    assert_eq!(guard.wait(index), 125, "a run that cannot be published is pgrun's failure");
    let trace = whole_calls(&fs::read_to_string(&trace).unwrap());
    let reaped = trace.lines().filter(|l| l.contains("wait4(-1") && l.contains(&format!("= {keeper}"))).count();
    assert_eq!(reaped, 1, "the guard {keeper} was not reaped once by the supervisor:\n{trace}");
    let after: Vec<_> = trace
        .lines()
        .skip_while(|l| !(l.contains("wait4(-1") && l.contains(&format!("= {keeper}"))))
        .skip(1)
        .filter(|l| l.contains(&format!("kill({keeper},")) || l.contains(&format!("wait4({keeper},")))
        .collect();
    assert!(after.is_empty(), "pgrun signalled or waited for the reaped guard's pid {keeper}: {after:?}");
}

#[test]
fn the_guard_never_stops_a_group_that_took_the_number_after_the_run_ended() {
    // The run's group ends and pgrun is held before it releases its guard;
    // the group's number is handed to an unrelated process (ns_last_pid,
    // in a PID namespace of our own); then pgrun is SIGKILLed. The guard
    // must see that the run is over (pgrun saw the group empty), and leave
    // the newcomer alone: with pidfds or by number (the portable path).
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = format!(
        r#"PGRUN_TEST_PAUSE=run-gone=$PWD/gate {pg} -v -p job.pid -- sh -c 'echo $$ > g.pid' 2> run.log &
R=$!
until [ -e gate.reached ]; do sleep 0.01; done
G=$(cat g.pid)
"#,
        pg = pgrun_path()
    );
    let after = r#"for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = pgrun-guard ] && GP=${p#/proc/}; done
kill -KILL "$R"; wait "$R"; echo "run=$?"
while [ "$(cut -d' ' -f3 /proc/$GP/stat 2>/dev/null)" = S ]; do sleep 0.01; done
"#;
    let script = format!("{before}{}{after}", crate::protocol::reused_number::HAND_OVER);
    crate::protocol::reused_number::assert_number_handed_over_untouched(&scratch, &script, "run=137", "run.log");
}

#[test]
fn a_failed_wait_of_the_guard_is_not_taken_for_pgruns_death() {
    // The guard's first wait for pgrun fails (EIO, by a test hook): pgrun
    // is alive, so the run goes on, and the guard still guards it.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let pidfile = scratch.path("job.pid");
    let log = scratch.path("pgrun.log");
    let mut cmd = pgrun([
        "-p",
        pidfile.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &format!("echo $$ > {dir}/cmd.pid; trap 'echo TERM > {dir}/term; exit 1' TERM; while :; do sleep 0.01; done"),
    ]);
    cmd.env("PGRUN_TEST_HOOK", "guard-wait-fails").stderr(fs::File::create(&log).unwrap());
    let index = guard.spawn(&mut cmd);
    let pgrun_pid = guard.child(index).id() as i32;
    let command = wait_pid(&scratch.path("cmd.pid"), &mut guard);
    guard.record_group(command);
    // The command runs before pgrun publishes it: once published, the pid
    // file must stay (a busy host showed the check below racing the
    // publication).
    wait_line(&pidfile);
    // The guard has seen the failure once it says so, or (wrongly) acts.
    eventually("the guard to act on its failed wait", || fs::read_to_string(&log).is_ok_and(|l| l.contains("guard: ")));
    let said = fs::read_to_string(&log).unwrap();
    assert!(said.contains("guard: cannot wait for pgrun"), "{said}");
    assert!(guard.child(index).try_wait().unwrap().is_none(), "pgrun ended: {said}");
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    assert!(!scratch.path("term").exists(), "the guard stopped a run whose pgrun is alive");
    assert!(pidfile.exists(), "the guard removed a live run's pid file");
    // Still on guard: pgrun killed now leaves nothing.
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    wait_dead(command);
    wait_dead(keeper);
    eventually("the pid file to be removed", || !pidfile.exists());
}

//! `leader:` steps of the stop sequence: the signal goes to the command's
//! own process alone, the step's grace waits for the whole run, the next
//! step reaches every member, a leader that has exited skips its step, and a
//! final KILL to the whole run always follows.

use crate::util::*;
use std::fs;
use std::path::Path;

/// A process that logs every TERM it gets to `DIR/NAME.log` and survives
/// it (a `trap` with a handler, not SIG_IGN); `DIR/NAME.pid` says it is
/// ready (written after the trap is set).
fn term_logger(dir: &str, name: &str) -> String {
    format!("trap 'echo TERM >> {dir}/{name}.log' TERM; echo $$ > {dir}/{name}.pid; while :; do sleep 0.05; done")
}

/// The payload: a member (its own `sh`, in the command's group) and the
/// leader, both TERM loggers; the leader writes its pid once the member's
/// trap is set too.
fn leader_and_member(dir: &str) -> String {
    let member = term_logger(dir, "member");
    let leader = term_logger(dir, "leader");
    format!(
        "sh -c \"{}\" & while [ ! -s {dir}/member.pid ]; do sleep 0.01; done; {}",
        member.replace('"', "\\\"").replace('$', "\\$"),
        leader
    )
}

fn log_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

fn signal_names(report: &serde_json::Value) -> Vec<String> {
    report["signals"].as_array().unwrap().iter().map(|s| s["signal"].as_str().unwrap().to_string()).collect()
}

/// Start pgrun with `stop_args` on the leader-and-member payload, cancel it
/// with SIGTERM once both are ready, and return the report and the two logs.
fn cancel_with(stop_args: &[&str]) -> (serde_json::Value, Vec<String>, Vec<String>) {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let report = scratch.path("report.json");
    let mut args = vec!["--report", report.to_str().unwrap()];
    args.extend_from_slice(stop_args);
    let payload = leader_and_member(&dir);
    args.extend_from_slice(&["--", "sh", "-c", &payload]);
    let index = guard.spawn(&mut pgrun(&args));
    let pgrun_pid = guard.child(index).id() as i32;
    let member = wait_pid(&scratch.path("member.pid"), &mut guard);
    let leader = wait_pid(&scratch.path("leader.pid"), &mut guard);
    send(pgrun_pid, libc::SIGTERM);
    assert_eq!(guard.wait(index), 137, "the leader ignores TERM: KILL ends it");
    wait_dead(member);
    wait_dead(leader);
    (json(&report), log_lines(&scratch.path("leader.log")), log_lines(&scratch.path("member.log")))
}

#[test]
fn the_fakes_log_term_and_survive_it() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", &leader_and_member(&scratch.sh())]).stdin(std::process::Stdio::null());
    guard.spawn(&mut cmd);
    for name in ["member", "leader"] {
        let pid = wait_pid(&scratch.path(&format!("{name}.pid")), &mut guard);
        send(pid, libc::SIGTERM);
        assert_eq!(wait_line(&scratch.path(&format!("{name}.log"))), "TERM", "{name}");
        assert!(!is_dead(pid), "the {name} died of TERM");
    }
}

#[test]
fn a_leader_step_reaches_the_leader_alone_and_the_next_step_everyone() {
    let (report, leader, member) = cancel_with(&["--escalate", "leader:TERM/700ms/TERM/700ms/KILL"]);
    assert_eq!(signal_names(&report), ["leader:TERM", "TERM", "KILL"], "{report}");
    // One TERM from the leader step, one from the group step; the member
    // got only the group's.
    assert_eq!(leader, ["TERM", "TERM"], "{report}");
    assert_eq!(member, ["TERM"], "{report}");
    let at: Vec<u64> = report["signals"].as_array().unwrap().iter().map(|s| s["at_ms"].as_u64().unwrap()).collect();
    assert!(at[1] >= at[0] + 700 && at[2] >= at[1] + 700, "each step waits its grace: {report}");
}

#[test]
fn signal_leader_with_kill_after_is_leader_then_kill() {
    let (report, leader, member) = cancel_with(&["-s", "leader:TERM", "-k", "700ms"]);
    assert_eq!(signal_names(&report), ["leader:TERM", "KILL"], "{report}");
    assert_eq!(leader, ["TERM"], "{report}");
    assert!(member.is_empty(), "the member got {member:?}: {report}");
}

#[test]
fn a_final_kill_to_the_whole_run_follows_a_leader_kill() {
    // leader:KILL ends the leader; the member, untouched by it, must still
    // be stopped by the KILL to the whole run that follows.
    let (report, leader, member) = cancel_with(&["--escalate", "leader:KILL/500ms"]);
    assert_eq!(signal_names(&report), ["leader:KILL", "KILL"], "{report}");
    assert!(leader.is_empty() && member.is_empty(), "{leader:?} {member:?}");
}

#[test]
fn the_step_of_a_leader_that_has_exited_is_skipped() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let report = scratch.path("report.json");
    // The leader exits once the member's trap is set: the member is a
    // straggler, and the stop sequence starts without a leader.
    let member = term_logger(&dir, "member").replace('"', "\\\"").replace('$', "\\$");
    let payload = format!("sh -c \"{member}\" & while [ ! -s {dir}/member.pid ]; do sleep 0.01; done; exit 3");
    let out = run(&mut pgrun([
        "--report",
        report.to_str().unwrap(),
        "--escalate",
        "leader:TERM/20s/TERM/500ms/KILL",
        "--",
        "sh",
        "-c",
        &payload,
    ]));
    let member_pid = wait_pid(&scratch.path("member.pid"), &mut guard);
    assert_status(&out, 3, "leader exited, straggler stopped");
    assert!(is_dead(member_pid), "the straggler survived");
    let r = json(&report);
    assert_eq!(signal_names(&r), ["TERM", "KILL"], "{r}");
    assert!(r["duration_ms"].as_u64().unwrap() < 20_000, "the skipped step's grace was waited: {r}");
    assert_eq!(log_lines(&scratch.path("member.log")), ["TERM"]);
}

#[test]
fn malformed_leader_steps_are_usage_errors() {
    for bad in ["leader:0", "leader:", "leader:BOGUS", "leader", "LEADER:TERM"] {
        for option in ["--escalate", "-s"] {
            let out = run(&mut pgrun([option, bad, "--", "true"]));
            assert_status(&out, 125, &format!("{option} {bad}"));
            assert!(stderr_of(&out).starts_with("pgrun: "), "{option} {bad}: {}", stderr_of(&out));
        }
    }
}

#[test]
fn the_guard_sends_a_leader_step_to_the_leader_alone_through_its_pidfd() {
    // pgrun is killed with SIGKILL: its guard, which is not the leader's
    // parent, runs the run's stop sequence. On Linux it holds the leader
    // by a pidfd and sends the leader step through it; where it cannot
    // (the portable build) it skips the step rather than kill(pid).
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let payload = leader_and_member(&dir);
    let pidfile = scratch.path("job.pid");
    let (index, pgid) =
        start_published(&mut guard, &pidfile, &["--escalate", "leader:TERM/700ms/TERM/700ms/KILL"], &payload);
    let pgrun_pid = guard.child(index).id() as i32;
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    let member = wait_pid(&scratch.path("member.pid"), &mut guard);
    let leader = wait_pid(&scratch.path("leader.pid"), &mut guard);
    assert_eq!(leader, pgid);
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    wait_dead(member);
    wait_dead(leader);
    wait_dead(keeper);
    let leader_terms: &[&str] = if cfg!(feature = "posix-fallback") { &["TERM"] } else { &["TERM", "TERM"] };
    assert_eq!(log_lines(&scratch.path("leader.log")), leader_terms);
    assert_eq!(log_lines(&scratch.path("member.log")), ["TERM"]);
}

// Found while speeding up the suite: while the group's number was still the
// run's, the guard sent each step through every pidfd it held and then
// again by kill(-pgid), so every member got each TERM twice (a command that
// takes a second TERM for "abort now" is hit). Only visible when the two do
// not merge into one pending signal: strace delays every kill by 300 ms.
#[test]
fn the_guard_sends_each_step_to_each_member_once() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let payload = leader_and_member(&dir);
    let pidfile = scratch.path("job.pid");
    let args =
        ["-p", pidfile.to_str().unwrap(), "--escalate", "leader:TERM/1s/TERM/1s/KILL", "--", "sh", "-c", &payload];
    let index = guard.spawn(&mut pgrun_injected("kill:delay_enter=300000", None, &args));
    let pgid: i32 = wait_line(&pidfile).parse().expect("pid file holds a number");
    guard.record_group(pgid);
    let member = wait_pid(&scratch.path("member.pid"), &mut guard);
    let leader = wait_pid(&scratch.path("leader.pid"), &mut guard);
    let pgrun_pid = ppid(leader).expect("the leader's parent");
    guard.record(pgrun_pid);
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    send(pgrun_pid, libc::SIGKILL);
    guard.wait(index);
    wait_dead(member);
    wait_dead(leader);
    wait_dead(keeper);
    let leader_terms: &[&str] = if cfg!(feature = "posix-fallback") { &["TERM"] } else { &["TERM", "TERM"] };
    assert_eq!(log_lines(&scratch.path("leader.log")), leader_terms, "the leader step, then the TERM step");
    assert_eq!(log_lines(&scratch.path("member.log")), ["TERM"], "the TERM step, once");
}

#[test]
fn a_leader_that_exited_but_is_not_reaped_yet_is_skipped_too() {
    // The window: the timeout fires, and the leader exits before pgrun has
    // read its SIGCHLD. pgrun is held right before the leader step while
    // the leader exits and becomes a zombie; the step must be skipped (a
    // zombie has exited), not "sent" and its long grace waited.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let report = scratch.path("report.json");
    let member = term_logger(&dir, "member").replace('"', "\\\"").replace('$', "\\$");
    let payload = format!(
        "sh -c \"{member}\" & while [ ! -s {dir}/member.pid ]; do sleep 0.01; done; echo $$ > {dir}/leader.pid; \
         while [ ! -e {dir}/go ]; do sleep 0.01; done; exit 3"
    );
    let pause = Pause::new(&scratch, "leader-step");
    let mut cmd = pgrun([
        "--report",
        report.to_str().unwrap(),
        "--timeout",
        "300ms",
        "--escalate",
        "leader:TERM/20s/TERM/500ms/KILL",
        "--",
        "sh",
        "-c",
        &payload,
    ]);
    pause.arm(&mut cmd);
    let index = guard.spawn(&mut cmd);
    let member_pid = wait_pid(&scratch.path("member.pid"), &mut guard);
    let leader = wait_pid(&scratch.path("leader.pid"), &mut guard);
    pause.wait_reached();
    fs::write(scratch.path("go"), b"").unwrap();
    eventually("the leader to be a zombie", || state(leader).as_deref() == Some("Z"));
    pause.release();
    assert_eq!(guard.wait(index), 124);
    assert!(is_dead(member_pid), "the member survived");
    let r = json(&report);
    assert_eq!(signal_names(&r), ["TERM", "KILL"], "{r}");
    assert_eq!(r["status"]["code"], 3, "{r}");
}

//! `pgrun cancel` stopping a live run: it returns once the group is gone,
//! escalates to KILL, ends the members of a run whose leader died, waits for
//! a run that publishes late, leaves a stale pid file's group alone unless
//! forced, and says 0 or 2 after `--timeout` (never SIGKILLing a group that
//! took the number meanwhile); `--no-wait` returns once the request is in.

use super::cancel;
use crate::util::*;
use std::fs;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

#[test]
fn cancel_stops_a_live_run_and_waits_until_it_is_gone() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let (index, _) = start_published(&mut guard, &pidfile, &[], &format!("sleep 300 & echo $! > {dir}/bg; wait"));
    let bg = wait_pid(&scratch.path("bg"), &mut guard);
    let out = cancel(&[pidfile.to_str().unwrap()]);
    assert_status(&out, 0, "cancel");
    // cancel returned: the group must already be gone.
    assert!(is_dead(bg), "cancel returned while a member lived");
    assert!(!pidfile.exists() && !scratch.path("job.pid.cancel").exists(), "files left behind");
    assert_eq!(guard.wait(index), 143);
}

#[test]
fn cancel_of_a_term_ignoring_group_escalates_to_kill() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    // Leader and grandchild both log TERM and live on.
    let payload = format!(
        "trap 'echo TERM >> {dir}/leader.log' TERM; \
         sh -c 'trap \"echo TERM >> {dir}/gc.log\" TERM; echo $$ > {dir}/gc; while :; do sleep 0.2; done' & \
         while :; do sleep 0.2; done"
    );
    let (index, pgid) = start_published(&mut guard, &pidfile, &["-k", "1"], &payload);
    let gc = wait_pid(&scratch.path("gc"), &mut guard);
    let out = cancel(&[pidfile.to_str().unwrap()]);
    assert_status(&out, 0, "cancel");
    assert!(is_dead(gc) && is_dead(pgid), "a member survived the cancel");
    assert_eq!(guard.wait(index), 137, "the leader ignored TERM, so KILL ended it");
    assert_eq!(fs::read_to_string(scratch.path("gc.log")).unwrap_or_default(), "TERM\n");
}

#[test]
fn cancel_ends_the_members_of_a_run_whose_leader_was_killed() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let payload = format!("sleep 300 & echo $! > {dir}/bg; sleep 300 & wait");
    let (index, leader) = start_published(&mut guard, &pidfile, &["--wait-group"], &payload);
    let bg = wait_pid(&scratch.path("bg"), &mut guard);
    send(leader, libc::SIGKILL);
    wait_dead(leader);
    assert!(!is_dead(bg), "--wait-group keeps the rest alive until cancelled");
    let out = cancel(&[pidfile.to_str().unwrap()]);
    assert_status(&out, 0, "cancel");
    assert!(is_dead(bg));
    assert_eq!(guard.wait(index), 137, "the command's own status");
}

#[test]
fn no_run_is_exit_1_and_the_marker_is_withdrawn() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let out = cancel(&["--wait-start", "0.1", pidfile.to_str().unwrap()]);
    assert_status(&out, 1, "no run");
    assert!(!scratch.path("job.pid.cancel").exists());
    assert!(stderr_of(&out).starts_with("pgrun: no run at "), "{}", stderr_of(&out));
}

#[test]
fn cancel_waits_for_a_run_that_publishes_late() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let canceller =
        guard.spawn(pgrun(["cancel", "--wait-start", "20", pidfile.to_str().unwrap()]).stderr(Stdio::piped()));
    eventually("cancel to drop its marker", || scratch.path("job.pid.cancel").exists());
    let witness = scratch.path("ran");
    let out = run(&mut pgrun(["-p", pidfile.to_str().unwrap(), "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 143, "the run found the marker");
    assert!(!witness.exists());
    assert_eq!(guard.wait(canceller), 0, "cancel: the run was kept from starting");
    let mut said = String::new();
    std::io::Read::read_to_string(&mut guard.child(canceller).stderr.take().unwrap(), &mut said).unwrap();
    assert!(said.contains("took the cancel marker: it did not start"), "cancel said: {said:?}");
}

#[test]
fn a_stale_pid_file_is_removed_and_its_group_left_alone_unless_forced() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let mut sleeper = Command::new("sleep");
    sleeper.arg("300").process_group(0);
    let (pgid, ended) = guard.spawn_reaped(&mut sleeper);

    fs::write(&pidfile, format!("{pgid}\n")).unwrap();
    let out = cancel(&["--wait-start", "0.2", pidfile.to_str().unwrap()]);
    assert_status(&out, 1, "stale");
    assert!(!pidfile.exists() && !scratch.path("job.pid.cancel").exists());
    assert!(ended.try_recv().is_err(), "a stale group id was trusted without --force");

    fs::write(&pidfile, format!("{pgid}\n")).unwrap();
    let out = cancel(&["--force", "--wait-start", "0.2", pidfile.to_str().unwrap()]);
    assert_status(&out, 0, "stale with --force");
    assert_eq!(ended.recv_timeout(DEADLINE), Ok(143), "the group got the stop sequence");
}

#[test]
fn timeout_kills_the_group_and_2_means_it_survived() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    // The run's own grace is long; cancel's --timeout cuts it short.
    // TERM ignored from the start: a trap would race cancel's TERM.
    let (index, pgid) = start_published_ignoring_term(&mut guard, &pidfile, &["-k", "100"], "exec sleep 300");
    let out = cancel(&["--timeout", "0.3", pidfile.to_str().unwrap()]);
    assert_status(&out, 0, "timeout then KILL");
    assert!(is_dead(pgid));
    assert_eq!(guard.wait(index), 137);

    // A zombie leader whose parent (this test) does not reap it cannot be
    // killed: the group outlives SIGKILL.
    let mut zombie = Command::new("true");
    zombie.process_group(0);
    let z = guard.spawn(&mut zombie);
    let zpid = guard.child(z).id() as i32;
    eventually("the leader to become a zombie", || state(zpid).as_deref() == Some("Z"));
    fs::write(&pidfile, format!("{zpid}\n")).unwrap();
    let out = cancel(&["--force", "--timeout", "0.2", "--wait-start", "0.2", pidfile.to_str().unwrap()]);
    assert_status(&out, 2, "survived");
    assert!(stderr_of(&out).contains("still alive"), "{}", stderr_of(&out));
    guard.wait(z);
}

#[test]
fn no_wait_returns_once_the_request_is_delivered() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let (index, _) = start_published_ignoring_term(&mut guard, &pidfile, &["-k", "100"], "while :; do sleep 0.2; done");
    let out = cancel(&["--no-wait", pidfile.to_str().unwrap()]);
    assert_status(&out, 0, "--no-wait");
    assert!(guard.child(index).try_wait().unwrap().is_none(), "the run cannot be gone yet: it ignores TERM for 100s");
}

#[test]
fn timeout_is_2_while_a_member_the_run_cannot_stop_keeps_its_group() {
    // A process outside pgrun's tree (this test) puts a child into the
    // run's group and does not reap it: a zombie member that no --contain
    // mode can stop, whose parent is not the run's. The group is still the
    // run's (it never went empty), so cancel --timeout SIGKILLs it and says
    // 2 a second later, as the contract says, not 0 because the member
    // does not descend from pgrun.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let (index, pgid) = start_published(&mut guard, &pidfile, &["-k", "100"], "exec sleep 300");
    let mut member = Command::new("true");
    member.process_group(pgid);
    let z = guard.spawn(&mut member);
    let zpid = guard.child(z).id() as i32;
    eventually("the member to become a zombie", || state(zpid).as_deref() == Some("Z"));
    assert_eq!(pgrp(zpid), Some(pgid), "the zombie is a member of the run's group");
    let out = cancel(&["-v", "--timeout", "1", pidfile.to_str().unwrap()]);
    assert_status(&out, 2, "the group survived the SIGKILL");
    assert!(
        stderr_of(&out).contains(&format!("process group {pgid} is still alive 1s after SIGKILL")),
        "{}",
        stderr_of(&out)
    );
    assert!(guard.child(index).try_wait().unwrap().is_none(), "pgrun waits for its group too");
    // Reaped, the zombie leaves the group empty: the run ends.
    guard.wait(z);
    assert_eq!(guard.wait(index), 143);
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "tree mode needs Linux")]
fn timeout_never_kills_a_group_that_took_the_number_after_it_went_empty_during_the_wait() {
    // Tree mode: the run's group is the run's when cancel finds it, then
    // ends at cancel's TERM while an escapee that ignores TERM keeps pgrun
    // (and its lock) going past cancel's --timeout. cancel saw the group
    // empty while it waited; the number is then handed to an unrelated
    // process (held at `cancel-timed-out` until it has been), and cancel's
    // SIGKILL, which would reach it, must not be sent.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = format!(
        r#"{pg} --contain tree -k 100 -p job.pid -- sh -c 'setsid sh -c "trap \"\" TERM; echo \$\$ > esc.pid; exec sleep 300" & echo $$ > g.pid; exec sleep 300' &
R=$!
while [ ! -s g.pid ] || [ ! -s job.pid ] || [ ! -s esc.pid ]; do sleep 0.01; done
G=$(cat g.pid)
PGRUN_TEST_PAUSE=cancel-timed-out=gate {pg} cancel -v --timeout 2 job.pid 2> cancel.log &
C=$!
until grep -q "process group $G is empty" cancel.log; do sleep 0.01; done
"#,
        pg = pgrun_path()
    );
    let after = r#"touch gate
wait "$C"; echo "cancel=$?"
kill -KILL "$(cat esc.pid)"
wait "$R"
"#;
    let script = format!("{before}{}{after}", crate::protocol::reused_number::HAND_OVER);
    crate::protocol::reused_number::assert_number_handed_over_untouched(&scratch, &script, "cancel=0", "cancel.log");
}

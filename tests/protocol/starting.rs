//! A starting run and the claim of a pid file: a run that has not started
//! is never taken for a live one, two starters never share a pid file
//! (however many race on an absent, stale or planted name), and a starting
//! name left by a killed starter is taken over.

use super::stale_file;
use crate::util::run as run_cmd;
use crate::util::*;
use std::fs;
use std::process::Stdio;

#[test]
fn a_starting_run_is_not_live_and_cancel_never_trusts_the_old_group() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    stale_file(&pidfile, canary);

    let claimed = Pause::new(&scratch, "claimed");
    let report = scratch.path("r.json");
    let witness = scratch.path("ran");
    let run = guard.spawn(claimed.arm(&mut pgrun([
        "-p",
        p,
        "--report",
        report.to_str().unwrap(),
        "--",
        "touch",
        witness.to_str().unwrap(),
    ])));
    claimed.wait_reached();

    // While the run holds only its claim, nobody may take it for live.
    let out = run_cmd(&mut pgrun(["status", "--json", p]));
    assert_status(&out, 3, "status of a claimed file");
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(state["state"], "not-running", "{state}");
    assert_eq!(state["starting"], true, "{state}");

    let canceller = guard.spawn(pgrun(["cancel", p]).stderr(Stdio::piped()));
    eventually("cancel to drop its marker", || scratch.path("job.pid.cancel").exists());
    claimed.release();

    assert_eq!(guard.wait(run), 143, "the run was cancelled before it started");
    assert_eq!(json(&report)["reason"], "cancelled-before-start", "pgrun itself exited and wrote its report");
    assert!(!witness.exists(), "the command ran");
    assert_eq!(guard.wait(canceller), 0, "cancel kept the run from starting");
    assert!(!scratch.path("job.pid.cancel").exists(), "marker left behind");
    assert_canary_untouched(&scratch, canary);
}

#[test]
fn sigterm_to_a_starting_run_is_a_cancel_not_a_death() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    stale_file(&pidfile, canary);
    let opened = Pause::new(&scratch, "claim-opened");
    let report = scratch.path("r.json");
    let witness = scratch.path("ran");
    let run = guard.spawn(opened.arm(&mut pgrun([
        "-p",
        pidfile.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--",
        "touch",
        witness.to_str().unwrap(),
    ])));
    opened.wait_reached();
    send(guard.child(run).id() as i32, libc::SIGTERM);
    opened.release();
    assert_eq!(guard.wait(run), 143);
    assert_eq!(json(&report)["reason"], "cancelled-before-start", "pgrun exited by itself, report written");
    assert!(!witness.exists());
    assert_canary_untouched(&scratch, canary);
}

#[test]
fn two_starters_never_share_a_pid_file() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    stale_file(&pidfile, canary);
    let dir = scratch.sh();

    // A claims the stale file; B has opened the same (old) inode.
    let a_claimed = Pause::new(&scratch, "claimed");
    let a = guard.spawn(a_claimed.arm(&mut pgrun([
        "-p",
        p,
        "--",
        "sh",
        "-c",
        &format!("echo $$ > {dir}/a; exec sleep 300"),
    ])));
    a_claimed.wait_reached();
    let b_opened = Pause::new(&scratch, "claim-opened");
    let b_witness = scratch.path("b-ran");
    let b = guard
        .spawn(b_opened.arm(&mut pgrun(["-p", p, "--", "touch", b_witness.to_str().unwrap()])).stderr(Stdio::piped()));
    b_opened.wait_reached();

    // A publishes and lets go of the old inode; only then does B try it.
    a_claimed.release();
    let a_pid = guard.child(a).id() as i32;
    let a_group = wait_pid(&scratch.path("a"), &mut guard);
    guard.record_group(a_group);
    eventually("A to publish", || lock_holder(&pidfile) == Some(a_pid));
    b_opened.release();

    assert_eq!(guard.wait(b), 125, "B must see A's live run and refuse");
    let mut said = String::new();
    std::io::Read::read_to_string(&mut guard.child(b).stderr.take().unwrap(), &mut said).unwrap();
    assert!(said.contains("held by a live run"), "B said: {said:?}");
    assert!(!b_witness.exists(), "B's command ran");
    assert_eq!(wait_line(&pidfile), a_group.to_string(), "the pid file still names A's group");
    assert_eq!(lock_holder(&pidfile), Some(a_pid), "A still holds it");

    assert_status(&run_cmd(&mut pgrun(["cancel", p])), 0, "cancel A");
    assert_eq!(guard.wait(a), 143);
    assert_canary_untouched(&scratch, canary);
}

#[test]
fn names_planted_at_the_temporary_pid_file_path_do_not_block_a_run() {
    if !require(Capability::UnprivilegedUser) {
        return;
    }
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    open_up(scratch.dir(), true); // sticky and world-writable, like /tmp
    let pidfile = scratch.path("job.pid");
    let claimed = Pause::new(&scratch, "claimed");
    let dir = scratch.sh();
    let run = guard.spawn(claimed.arm(&mut pgrun([
        "-p",
        pidfile.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &format!("echo ran > {dir}/ran"),
    ])));
    claimed.wait_reached();
    // nobody knows pgrun's pid and plants a folder it cannot remove at the
    // temporary name the pid file would be written under.
    let planted = scratch.path(&format!(".job.pid.pgrun-{}.tmp", guard.child(run).id()));
    let p = planted.to_str().unwrap();
    let out = run_cmd(&mut as_nobody("sh", &["-c", &format!("mkdir {p} && touch {p}/x")]));
    assert_status(&out, 0, "nobody plants a folder");
    claimed.release();
    assert_eq!(guard.wait(run), 0, "the run must not be blocked by another user's planted name");
    assert_eq!(wait_line(&scratch.path("ran")), "ran");
}

#[test]
fn a_stale_file_removed_behind_a_starting_runs_back_is_not_replaced_over_a_new_one() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    stale_file(&pidfile, canary);
    let spawned = Pause::new(&scratch, "spawned");
    let a = guard.spawn(spawned.arm(&mut pgrun(["-p", p, "--", "sleep", "300"])));
    spawned.wait_reached();
    // Somebody removes the stale file by hand, and another program (no
    // pgrun: those wait for A) writes a file there.
    fs::remove_file(&pidfile).unwrap();
    fs::write(&pidfile, "not a run\n").unwrap();
    spawned.release();
    assert_eq!(guard.wait(a), 125, "A must not replace a file it did not claim");
    assert_eq!(fs::read_to_string(&pidfile).unwrap(), "not a run\n");
    assert_canary_untouched(&scratch, canary);
}

#[test]
fn a_run_starting_after_a_stale_file_was_removed_waits_for_the_one_that_claimed_it() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    stale_file(&pidfile, canary);
    let dir = scratch.sh();
    let spawned = Pause::new(&scratch, "spawned");
    let a = guard.spawn(spawned.arm(&mut pgrun([
        "-p",
        p,
        "--",
        "sh",
        "-c",
        &format!("echo $$ > {dir}/a; exec sleep 300"),
    ])));
    spawned.wait_reached();
    let a_group = wait_pid(&scratch.path("a"), &mut guard);
    guard.record_group(a_group);
    // Somebody removes the stale file by hand; B finds no file.
    fs::remove_file(&pidfile).unwrap();
    let b_said = scratch.path("b.err");
    let b_witness = scratch.path("b-ran");
    let b = guard.spawn(
        pgrun(["-v", "-p", p, "--", "touch", b_witness.to_str().unwrap()]).stderr(fs::File::create(&b_said).unwrap()),
    );
    eventually("B to wait for A (or to end)", || {
        fs::read_to_string(&b_said).unwrap_or_default().contains("another run is starting")
            || guard.child(b).try_wait().unwrap().is_some()
    });
    assert!(guard.child(b).try_wait().unwrap().is_none(), "B ended while A was starting");
    assert!(!pidfile.exists(), "B published while A was starting");
    spawned.release();
    assert_eq!(guard.wait(b), 125, "B must refuse A's live run: {}", fs::read_to_string(&b_said).unwrap());
    assert!(!b_witness.exists(), "B's command ran");
    assert_eq!(wait_line(&pidfile), a_group.to_string(), "A published its own file");
    assert_eq!(lock_holder(&pidfile), Some(guard.child(a).id() as i32));
    assert_status(&run_cmd(&mut pgrun(["cancel", p])), 0, "cancel A");
    assert_eq!(guard.wait(a), 143);
    assert_canary_untouched(&scratch, canary);
}

#[test]
fn a_second_starter_on_an_absent_pid_file_waits_for_the_first_and_refuses() {
    // No pid file yet: A has started its command and not published it; B
    // must neither run its command nor disturb A.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let dir = scratch.sh();
    let spawned = Pause::new(&scratch, "spawned");
    let a = guard.spawn(spawned.arm(&mut pgrun([
        "-p",
        p,
        "--",
        "sh",
        "-c",
        &format!("echo $$ > {dir}/a; exec sleep 300"),
    ])));
    spawned.wait_reached();
    let a_group = wait_pid(&scratch.path("a"), &mut guard);
    guard.record_group(a_group);

    let b_said = scratch.path("b.err");
    let b_witness = scratch.path("b-ran");
    let b = guard.spawn(
        pgrun(["-v", "-p", p, "--", "touch", b_witness.to_str().unwrap()]).stderr(fs::File::create(&b_said).unwrap()),
    );
    eventually("B to wait for A (or to end)", || {
        fs::read_to_string(&b_said).unwrap_or_default().contains("another run is starting")
            || guard.child(b).try_wait().unwrap().is_some()
    });
    assert!(!b_witness.exists(), "B's command ran while A was starting");
    assert!(guard.child(b).try_wait().unwrap().is_none(), "B ended while A was starting");

    spawned.release();
    assert_eq!(guard.wait(b), 125, "B must see A's live run and refuse: {}", fs::read_to_string(&b_said).unwrap());
    assert!(fs::read_to_string(&b_said).unwrap().contains("held by a live run"));
    assert!(!b_witness.exists(), "B's command ran");
    let a_pid = guard.child(a).id() as i32;
    assert_eq!(wait_line(&pidfile), a_group.to_string(), "the pid file names A's group");
    assert_eq!(lock_holder(&pidfile), Some(a_pid), "A holds it");
    assert_status(&run_cmd(&mut pgrun(["cancel", p])), 0, "cancel A");
    assert_eq!(guard.wait(a), 143, "A ran undisturbed until cancelled");
}

#[test]
fn of_eight_starters_on_an_absent_pid_file_exactly_one_runs_its_command() {
    for round in 0..3 {
        let scratch = Scratch::new();
        let mut guard = Guard::new();
        let pidfile = scratch.path("job.pid");
        let p = pidfile.to_str().unwrap();
        let ran = scratch.path("ran");
        let payload = format!("echo $$ >> {}; exec sleep 300", ran.display());
        let starters: Vec<usize> =
            (0..8).map(|_| guard.spawn(pgrun(["-p", p, "--", "sh", "-c", &payload]).stderr(Stdio::null()))).collect();
        // The winner's command runs until cancelled, so every other starter
        // meets either its claim or its live pid file.
        let mut refused = 0;
        eventually("seven starters to end", || {
            refused = starters.iter().filter(|&&i| guard.child(i).try_wait().unwrap().is_some()).count();
            refused >= 7
        });
        // The losers may refuse on the winner's claim, before its command
        // has started: wait for its line (no other starter is left to add
        // one).
        eventually("the winner's command to start", || fs::read_to_string(&ran).is_ok_and(|l| l.ends_with('\n')));
        let lines = fs::read_to_string(&ran).unwrap_or_default();
        for pid in lines.lines().filter_map(|l| l.parse().ok()) {
            guard.record(pid);
            guard.record_group(pid);
        }
        let winners: Vec<usize> =
            starters.iter().copied().filter(|&i| guard.child(i).try_wait().unwrap().is_none()).collect();
        assert_eq!(lines.lines().count(), 1, "round {round}: commands started: {lines:?}");
        assert_eq!(winners.len(), 1, "round {round}: one pgrun still runs");
        for &i in &starters {
            if i != winners[0] {
                assert_eq!(guard.wait(i), 125, "round {round}: a loser's exit status");
            }
        }
        assert_status(&run_cmd(&mut pgrun(["cancel", p])), 0, "cancel the winner");
        assert_eq!(guard.wait(winners[0]), 143);
        let left: Vec<_> = fs::read_dir(scratch.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("ran")], "round {round}: files left");
    }
}

#[test]
fn a_starting_name_left_by_a_killed_starter_is_taken_over_and_another_users_blocks() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let starting = scratch.path(".job.pid.pgrun-starting.tmp");
    let dir = scratch.sh();
    let spawned = Pause::new(&scratch, "spawned");
    // Without a guard: a guard would remove the starting name itself.
    let a = guard.spawn(spawned.arm(&mut pgrun([
        "--no-guard",
        "-p",
        p,
        "--",
        "sh",
        "-c",
        &format!("echo $$ > {dir}/a; exec sleep 300"),
    ])));
    spawned.wait_reached();
    let a_group = wait_pid(&scratch.path("a"), &mut guard);
    guard.record_group(a_group);
    assert!(starting.exists(), "A holds the starting name");
    send(guard.child(a).id() as i32, libc::SIGKILL);
    assert_eq!(guard.wait(a), 128 + libc::SIGKILL);
    assert!(starting.exists(), "a SIGKILLed starter leaves its starting name");
    assert!(!pidfile.exists());

    let witness = scratch.path("ran");
    let out = run_cmd(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 0, "a leftover starting name is taken over");
    assert!(witness.exists());
    assert!(!starting.exists() && !pidfile.exists(), "nothing left");

    if !require(Capability::UnprivilegedUser) {
        return;
    }
    // Another user's (here root's, the run being nobody's): it can be
    // neither locked nor removed, and is named.
    open_up(scratch.dir(), true);
    fs::write(&starting, "").unwrap();
    let s = starting.to_str().unwrap();
    let ran2 = scratch.path("ran2");
    let out = run_cmd(&mut as_nobody(pgrun_path(), &["-p", p, "--", "touch", ran2.to_str().unwrap()]));
    assert_status(&out, 125, "another user's starting name");
    assert!(stderr_of(&out).contains("is blocked") && stderr_of(&out).contains(s), "{}", stderr_of(&out));
    assert!(!ran2.exists());
}

#[test]
fn a_file_that_appears_before_the_starting_name_was_taken_is_claimed_again() {
    // A found no pid file; by the time it holds the starting name, another
    // program has put a (stale) one there. A must look again and claim it,
    // not fail at publication with its command already started.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let starting = Pause::new(&scratch, "starting");
    let witness = scratch.path("ran");
    let a = guard.spawn(starting.arm(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()])));
    starting.wait_reached();
    stale_file(&pidfile, canary);
    starting.release();
    assert_eq!(guard.wait(a), 0, "A claims the stale file and runs");
    assert!(witness.exists());
    assert!(!pidfile.exists(), "A replaced the stale file and removed its own at exit");
    let left: Vec<_> =
        fs::read_dir(scratch.dir()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(!left.iter().any(|n| n.contains("pgrun")), "temporary names left: {left:?}");
    assert_canary_untouched(&scratch, canary);
}

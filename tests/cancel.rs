//! `pgrun cancel`: every exit status, every refusal, and the start/cancel race.

use crate::util::*;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

fn cancel(args: &[&str]) -> std::process::Output {
    let mut all = vec!["cancel"];
    all.extend_from_slice(args);
    run(&mut pgrun(&all))
}

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

/// Refusals: one line, exit 125, nothing signalled, the marker withdrawn.
fn assert_refused(pidfile: &std::path::Path, marker: &std::path::Path, what: &str, extra: &[&str]) {
    let mut args = extra.to_vec();
    args.push(pidfile.to_str().unwrap());
    let out = cancel(&args);
    assert_status(&out, 125, what);
    let err = stderr_of(&out);
    assert!(err.starts_with("pgrun: ") && err.lines().count() == 1, "{what}: {err}");
    assert!(!marker.exists(), "{what}: marker left behind");
}

#[test]
fn unsafe_pid_files_are_refused() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let marker = scratch.path("job.pid.cancel");
    let mut sleeper = Command::new("sleep");
    sleeper.arg("300").process_group(0);
    let index = guard.spawn(&mut sleeper);
    let victim = guard.child(index).id() as i32;

    fs::write(&pidfile, "not a group\n").unwrap();
    assert_refused(&pidfile, &marker, "garbage", &[]);
    fs::write(&pidfile, "1\n").unwrap();
    assert_refused(&pidfile, &marker, "group 1", &["--force"]);
    // cancel's own group: a new group made for it (never the test runner's,
    // which a regression would kill), whose id sh writes before it becomes
    // that cancel.
    let script = format!("echo $$ > {p}; exec {pgrun} cancel --force {p}", p = pidfile.display(), pgrun = pgrun_path());
    let mut own_group = Command::new("sh");
    own_group.args(["-c", &script]).stdin(Stdio::null()).process_group(0);
    let out = run(default_signals(&mut own_group));
    assert_status(&out, 125, "cancel's own group");
    assert!(!marker.exists(), "cancel's own group: marker left behind");
    assert!(stderr_of(&out).starts_with("pgrun: "), "{}", stderr_of(&out));

    fs::write(&pidfile, format!("{victim}\n")).unwrap();
    fs::set_permissions(&pidfile, fs::Permissions::from_mode(0o666)).unwrap();
    assert_refused(&pidfile, &marker, "world-writable", &["--force"]);
    fs::set_permissions(&pidfile, fs::Permissions::from_mode(0o644)).unwrap();

    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&pidfile, Some(65534), None).unwrap();
        assert_refused(&pidfile, &marker, "owned by nobody", &["--force"]);
    }
    fs::remove_file(&pidfile).unwrap();
    fs::write(scratch.path("real.pid"), format!("{victim}\n")).unwrap();
    symlink(scratch.path("real.pid"), &pidfile).unwrap();
    assert_refused(&pidfile, &marker, "symlink", &["--force"]);

    // A marker that was already there is somebody else's: left alone.
    fs::remove_file(&pidfile).unwrap();
    fs::write(&pidfile, "garbage\n").unwrap();
    fs::write(&marker, "").unwrap();
    let out = cancel(&[pidfile.to_str().unwrap()]);
    assert_status(&out, 125, "garbage with a pending marker");
    assert!(marker.exists(), "a marker cancel did not create was removed");

    assert!(guard.child(index).try_wait().unwrap().is_none(), "a refused cancel signalled the group");
}

#[test]
fn the_callers_group_is_refused() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let status = scratch.path("status");
    // The caller: sh, in a new group of its own (never the test runner's,
    // which a regression would kill), writes that group's id, then runs
    // cancel in yet another group, so only "its parent's group" can refuse.
    let script = format!(
        "echo $$ > {p}; setsid {pgrun} cancel --force {p} 2>&1; echo $? > {status}",
        p = pidfile.display(),
        pgrun = pgrun_path(),
        status = status.display()
    );
    let mut caller = Command::new("sh");
    caller.args(["-c", &script]).stdin(Stdio::null()).process_group(0);
    let out = run(default_signals(&mut caller));
    assert_eq!(wait_line(&status), "125", "parent's group: {}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("caller"), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn cancel_usage_errors_are_125() {
    let out = cancel(&[]);
    assert_status(&out, 125, "no pid file");
    let out = cancel(&["--wait-start", "soon", "x.pid"]);
    assert_status(&out, 125, "bad duration");
}

#[test]
fn cancel_finishes_a_run_whose_pgrun_died_without_withdrawing_it() {
    // pgrun (no guard) is SIGKILLed while cancel waits for it: its record
    // is left in place, so the group is still the run's, and cancel stops
    // it. In a PID namespace of our own, whose init (the script) reaps the
    // orphans promptly, so "gone" does not hang on a slow host init.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let script = format!(
        r#"cd {dir}
{pg} --no-guard -k 100 -p job.pid -- sh -c 'trap "" TERM; sleep 300 & echo $! > bg; wait' &
R=$!
while [ ! -s bg ] || [ ! -s job.pid ]; do sleep 0.01; done
{pg} cancel -v --timeout 0.5 job.pid 2> cancel.log &
C=$!
until grep -q "sending TERM to pgrun" cancel.log; do sleep 0.01; done
kill -KILL "$R"
wait "$C"; echo "cancel=$?"
[ -e /proc/$(cat bg) ] && echo member-alive
"#,
        dir = scratch.sh(),
        pg = pgrun_path()
    );
    let mut ns = Command::new("timeout");
    ns.args(["-s", "KILL", "25", "unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--", "sh", "-c"])
        .arg(&script)
        .stdin(Stdio::null());
    let out = run(&mut ns);
    let said = String::from_utf8_lossy(&out.stdout);
    let log = fs::read_to_string(scratch.path("cancel.log")).unwrap_or_default();
    assert!(said.contains("cancel=0") && !said.contains("member-alive"), "{said}\nlog: {log}");
    assert!(log.contains("died without withdrawing its record"), "{log}");
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path has no pidfds")]
fn a_pidfd_signal_failing_with_esrch_falls_back_to_the_lock_holders_pid() {
    // pidfd_send_signal says ESRCH although the pgrun holding the lock
    // lives: cancel must still deliver its TERM (by pid, the lock proving
    // who holds that pid), not wait until the run ends by itself.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let (index, pgid) = start_published(&mut guard, &pidfile, &[], "exec sleep 300");
    let out = run(&mut pgrun_injected(
        "pidfd_send_signal:error=ESRCH:when=1",
        None,
        &["cancel", "-v", "--timeout", "10", pidfile.to_str().unwrap()],
    ));
    assert_status(&out, 0, "cancel");
    assert_eq!(guard.wait(index), 143, "the run was cancelled by its own stop sequence: {}", stderr_of(&out));
    assert!(is_dead(pgid));
}

/// A straggler of the run that stays put must be found by cancel's check
/// that the group is still the run's, even when siblings listed before it
/// in pgrun's children file end while cancel reads that file: the file is
/// read in parts, each resumed by position, and those ends shift the
/// straggler past the resume point. cancel is stopped (strace injects a
/// SIGSTOP) right after its first part; the siblings are ended and reaped
/// meanwhile. Missing the straggler, cancel said the group held nothing of
/// the run, did not kill it after --timeout, and exited 0 with it alive.
#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path reads no children files")]
fn cancel_finds_a_straggler_whose_earlier_siblings_end_during_the_walk() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    // The leader forks 12 siblings, then the straggler (fork order is their
    // order in pgrun's children file once the leader is gone), all ignoring
    // TERM; the leader itself dies of the TERM pgrun sends.
    let fork_siblings = fork_fifo_siblings(&scratch);
    let payload = format!(
        "trap '' TERM
         {fork_siblings}
         sleep 1000 & echo $! > {dir}/straggler
         echo done >> {dir}/siblings
         trap - TERM
         wait"
    );
    let (index, pgid) = start_published(&mut guard, &pidfile, &["--contain", "group", "-k", "60"], &payload);
    let pgrun_pid = guard.child(index).id() as i32;
    let straggler = wait_pid(&scratch.path("straggler"), &mut guard);
    let siblings = fifo_siblings(&scratch, &mut guard);
    let children_file = std::path::PathBuf::from(format!("/proc/{pgrun_pid}/task/{pgrun_pid}/children"));
    let cancel = guard.spawn(
        pgrun_injected(
            "read:signal=SIGSTOP:when=1",
            Some(&children_file),
            &["cancel", "-v", "--timeout", "1", pidfile.to_str().unwrap()],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped()),
    );
    // strace's child is cancel; it reads the children file only once the
    // leader is gone (before, the leader answers), after --timeout.
    let strace_pid = guard.child(cancel).id() as i32;
    let canceller = stopped_reading(strace_pid, &children_file);
    // TERM reached the group: the leader died of it, the rest ignore it.
    assert!(is_dead(pgid), "the leader survived pgrun's TERM");
    assert!(!is_dead(straggler) && siblings.iter().all(|&pid| !is_dead(pid)), "TERM was not ignored");
    // End the siblings (EOF on the fifo) and wait until pgrun reaped them.
    end_fifo_siblings(&scratch, &siblings);
    send(canceller, libc::SIGCONT);
    let status = guard.wait(cancel);
    let mut stderr = String::new();
    std::io::Read::read_to_string(guard.child(cancel).stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(is_dead(straggler), "cancel (exit {status}) left the run's straggler alive: {stderr}");
    assert_eq!(status, 0, "{stderr}");
    // The group gone, pgrun ends its stop sequence (the leader died of TERM).
    assert_eq!(guard.wait(index), 143);
}

/// A walk that finds no member proves nothing (here a children file on the
/// way cannot be read: EIO injected), and cancel must not take it for "the
/// group holds nothing of the run". The straggler is the child of a process
/// that left the group (a session of its own), so the walk reaches it only
/// through that process's children file. Taking the failed read for "no
/// children", cancel did not kill the group after --timeout and exited 0
/// with the straggler alive.
#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path reads no children files")]
fn cancel_finds_a_straggler_below_an_unreadable_children_file() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    // The middle process forks the straggler (in the group), then leaves the
    // group (setsid) and reaps it when it dies; both ignore TERM, the leader
    // dies of it.
    let middle_script = format!(
        "import os, signal
pid = os.fork()
if pid == 0:
    os.execvp('sleep', ['sleep', '1000'])
open('{dir}/straggler', 'w').write('%d\\n' % pid)
os.setsid()
open('{dir}/middle', 'w').write('%d\\n' % os.getpid())
os.waitpid(pid, 0)
while True:
    signal.pause()"
    );
    fs::write(scratch.path("middle.py"), middle_script).unwrap();
    let payload = format!("trap '' TERM; {} {dir}/middle.py & trap - TERM; wait", python3());
    let (index, pgid) = start_published(&mut guard, &pidfile, &["--contain", "group", "-k", "60"], &payload);
    let straggler = wait_pid(&scratch.path("straggler"), &mut guard);
    let middle = wait_pid(&scratch.path("middle"), &mut guard);
    eventually("the middle process in a session of its own", || pgrp(middle) == Some(middle));
    assert_eq!(pgrp(straggler), Some(pgid));
    let children_file = std::path::PathBuf::from(format!("/proc/{middle}/task/{middle}/children"));
    let out = run(&mut pgrun_injected(
        "read:error=EIO",
        Some(&children_file),
        &["cancel", "-v", "--timeout", "1", pidfile.to_str().unwrap()],
    ));
    assert!(is_dead(pgid), "the leader survived pgrun's TERM");
    assert!(is_dead(straggler), "cancel left the run's straggler alive: {}", stderr_of(&out));
    assert_status(&out, 0, "cancel");
    assert_eq!(guard.wait(index), 143);
    assert!(!is_dead(middle), "the middle process ignores TERM and is outside the group");
    send(middle, libc::SIGKILL);
    wait_dead(middle);
}

/// Spawn `pgrun cancel -v ARGS...` with its stderr in `log` (a file the
/// test reads while cancel runs); `pause`, if given, armed on it.
fn spawn_cancel(guard: &mut Guard, log: &std::path::Path, pause: Option<&Pause>, args: &[&str]) -> usize {
    let mut all = vec!["cancel", "-v"];
    all.extend_from_slice(args);
    let mut cmd = pgrun(&all);
    cmd.stderr(fs::File::create(log).unwrap());
    if let Some(pause) = pause {
        pause.arm(&mut cmd);
    }
    guard.spawn(&mut cmd)
}

/// Start `pgrun -p PIDFILE -- sh -c PAYLOAD` paused at `exit` (its run
/// withdrawn: pid file removed, lock let go of, but pgrun not exited);
/// returns its index, its pid and its group.
fn start_paused_at_exit(
    guard: &mut Guard,
    pause: &Pause,
    pidfile: &std::path::Path,
    payload: &str,
) -> (usize, i32, i32) {
    let mut cmd = pgrun(["-p", pidfile.to_str().unwrap(), "--", "sh", "-c", payload]);
    let index = guard.spawn(pause.arm(&mut cmd));
    let pgid: i32 = wait_line(pidfile).parse().expect("pid file holds a number");
    guard.record_group(pgid);
    let pid = guard.child(index).id() as i32;
    (index, pid, pgid)
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

#[test]
fn cancel_returns_only_once_the_pgrun_it_stopped_has_exited() {
    // pgrun lets go of its lock when it withdraws its run, before it
    // writes its report and output and exits. cancel, held at
    // `cancel-signalled` until pgrun is there (paused at `exit`), must not
    // take the lock let go of for pgrun's exit.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let at_exit = Pause::new(&scratch, "exit");
    let (index, pid, pgid) = start_paused_at_exit(&mut guard, &at_exit, &pidfile, "exec sleep 300");
    let signalled = Pause::new(&scratch, "cancel-signalled");
    let log = scratch.path("cancel.log");
    let canceller = spawn_cancel(&mut guard, &log, Some(&signalled), &[pidfile.to_str().unwrap()]);
    signalled.wait_reached();
    at_exit.wait_reached();
    assert!(!pidfile.exists() && is_dead(pgid), "pgrun pauses at exit with its run withdrawn");
    signalled.release();
    let mut ended = None;
    eventually("cancel to wait for pgrun's exit, or return", || {
        ended = guard.child(canceller).try_wait().unwrap();
        ended.is_some() || fs::read_to_string(&log).unwrap().contains(&format!("waiting for pgrun {pid} to exit"))
    });
    assert!(ended.is_none(), "cancel returned {ended:?} while pgrun {pid} was still running");
    assert!(
        guard.child(canceller).try_wait().unwrap().is_none(),
        "cancel returned while pgrun {pid} was still running"
    );
    at_exit.release();
    assert_eq!(guard.wait(canceller), 0, "{}", fs::read_to_string(&log).unwrap());
    assert!(is_dead(pid), "cancel returned before pgrun {pid} exited");
    assert_eq!(guard.wait(index), 143);
}

#[test]
fn a_second_cancel_of_a_run_being_stopped_waits_for_the_same_end() {
    // A first cancel stopped the run: its pgrun has withdrawn it (no pid
    // file) and not exited yet (paused at `exit`). A second cancel, called
    // now, must wait for that end and say 0, not wait --wait-start for a
    // new run and say 1.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let at_exit = Pause::new(&scratch, "exit");
    let (index, pid, _) = start_paused_at_exit(&mut guard, &at_exit, &pidfile, "exec sleep 300");
    let first = spawn_cancel(&mut guard, &scratch.path("first.log"), None, &[pidfile.to_str().unwrap()]);
    at_exit.wait_reached();
    assert!(!pidfile.exists(), "pgrun pauses at exit with its run withdrawn");
    let log = scratch.path("second.log");
    let second = spawn_cancel(&mut guard, &log, None, &["--wait-start", "0.5", pidfile.to_str().unwrap()]);
    let mut ended = None;
    eventually("the second cancel to wait for pgrun's exit, or return", || {
        ended = guard.child(second).try_wait().unwrap();
        ended.is_some() || fs::read_to_string(&log).unwrap().contains(&format!("pgrun {pid} has withdrawn the run"))
    });
    assert!(ended.is_none(), "the second cancel returned {ended:?}: {}", fs::read_to_string(&log).unwrap());
    at_exit.release();
    assert_eq!(guard.wait(second), 0, "{}", fs::read_to_string(&log).unwrap());
    assert!(is_dead(pid), "the second cancel returned before pgrun {pid} exited");
    assert_eq!(guard.wait(first), 0);
    assert_eq!(guard.wait(index), 143);
    assert!(!scratch.path("job.pid.cancel").exists(), "a marker was left");
}

/// Arm `cmd` (a pgrun) with the pauses at all of `steps` at once, each
/// gated as [`Pause::new`] gates it (so a `Pause` of the same step waits
/// for it and releases it).
fn arm_steps<'a>(scratch: &Scratch, cmd: &'a mut Command, steps: &[&str]) -> &'a mut Command {
    let spec: Vec<String> =
        steps.iter().map(|step| format!("{step}={}", scratch.path(&format!("gate-{step}")).display())).collect();
    cmd.env("PGRUN_TEST_PAUSE", spec.join(","))
}

/// cancel `canceller` (its `-v` lines in `log`) must be waiting for pgrun
/// `pid`, which is held at a pause: wait until it says so, or exits, and
/// fail if it exited.
fn assert_waits_for_pgrun(guard: &mut Guard, canceller: usize, log: &std::path::Path, pid: i32) {
    let mut ended = None;
    eventually("cancel to wait for pgrun's exit, or return", || {
        ended = guard.child(canceller).try_wait().unwrap();
        ended.is_some() || fs::read_to_string(log).unwrap().contains(&format!("waiting for pgrun {pid} to exit"))
    });
    assert!(
        ended.is_none() && guard.child(canceller).try_wait().unwrap().is_none(),
        "cancel returned {ended:?} while pgrun {pid} was still running: {}",
        fs::read_to_string(log).unwrap()
    );
}

#[test]
fn a_cancel_that_sees_the_run_end_as_it_looks_waits_for_its_pgrun_to_exit() {
    // cancel finds the run live (held at `cancel-found`), then the run
    // ends: it was stopping (cancelled by this cancel's own request, found
    // right after publishing), and its pgrun, held at `exit`, has let go of
    // the lock but not exited. cancel was there before the run published,
    // so the pgrun's note at the marker path is what proves the pid it
    // found the lock holder's.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let (spawned, gone, at_exit) =
        (Pause::new(&scratch, "spawned"), Pause::new(&scratch, "run-gone"), Pause::new(&scratch, "exit"));
    let mut cmd = pgrun(["-p", p, "--", "sh", "-c", "exec sleep 300"]);
    let index = guard.spawn(arm_steps(&scratch, &mut cmd, &["spawned", "run-gone", "exit"]));
    let pid = guard.child(index).id() as i32;
    spawned.wait_reached();
    assert!(!pidfile.exists(), "the run is not published at `spawned`");
    let found = Pause::new(&scratch, "cancel-found");
    let log = scratch.path("cancel.log");
    let canceller = spawn_cancel(&mut guard, &log, Some(&found), &["--wait-start", "60", p]);
    eventually("cancel to make its marker", || scratch.path("job.pid.cancel").exists());
    spawned.release();
    gone.wait_reached();
    guard.record_group(wait_line(&pidfile).parse().expect("pid file holds a number"));
    found.wait_reached();
    gone.release();
    at_exit.wait_reached();
    assert!(!pidfile.exists(), "pgrun pauses at exit with its run withdrawn");
    found.release();
    assert_waits_for_pgrun(&mut guard, canceller, &log, pid);
    at_exit.release();
    assert_eq!(guard.wait(canceller), 0, "{}", fs::read_to_string(&log).unwrap());
    assert!(is_dead(pid), "cancel returned before pgrun {pid} exited");
    assert_eq!(guard.wait(index), 143);
    assert!(!scratch.path("job.pid.cancel").exists(), "a marker was left");
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path has no pidfds")]
fn a_run_that_ends_on_its_own_as_cancel_looks_is_waited_for_until_its_pgrun_exits() {
    // The run ends on its own (its command dies) while cancel, held at
    // `cancel-found`, has found it live: its pgrun was not stopping, so it
    // holds no note, and has let go of its lock (held at `exit`). cancel
    // saw that pgrun holding the lock as it started: that is its proof.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let at_exit = Pause::new(&scratch, "exit");
    let mut cmd = pgrun(["-p", p, "--", "sh", "-c", "exec sleep 300"]);
    let index = guard.spawn(at_exit.arm(&mut cmd));
    let pid = guard.child(index).id() as i32;
    let pgid: i32 = wait_line(&pidfile).parse().expect("pid file holds a number");
    guard.record_group(pgid);
    let found = Pause::new(&scratch, "cancel-found");
    let log = scratch.path("cancel.log");
    let canceller = spawn_cancel(&mut guard, &log, Some(&found), &[p]);
    found.wait_reached();
    send(pgid, libc::SIGTERM);
    at_exit.wait_reached();
    assert!(!pidfile.exists(), "pgrun pauses at exit with its run withdrawn");
    found.release();
    assert_waits_for_pgrun(&mut guard, canceller, &log, pid);
    at_exit.release();
    assert_eq!(guard.wait(canceller), 0, "{}", fs::read_to_string(&log).unwrap());
    assert!(is_dead(pid), "cancel returned before pgrun {pid} exited");
    assert_eq!(guard.wait(index), 143, "the command died of TERM");
    assert!(!scratch.path("job.pid.cancel").exists(), "the cancel's request was left");
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path has no pidfds")]
fn a_cancel_whose_marker_the_ending_run_took_waits_for_its_pgrun_to_exit() {
    // cancel makes its marker (and is held at `cancel-marked`); the run,
    // stopped meanwhile by a TERM to its pgrun, takes that request as its
    // own and is over by the time cancel looks: no pid file, and its note
    // removed from the marker path (its pgrun held at `note-removed`, in
    // its last steps). "The run took the cancel marker" must not mean
    // "its pgrun is gone": cancel saw it holding the lock as it started.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let removed = Pause::new(&scratch, "note-removed");
    let mut cmd = pgrun(["-p", p, "--", "sh", "-c", "exec sleep 300"]);
    let index = guard.spawn(removed.arm(&mut cmd));
    let pid = guard.child(index).id() as i32;
    guard.record_group(wait_line(&pidfile).parse().expect("pid file holds a number"));
    let marked = Pause::new(&scratch, "cancel-marked");
    let log = scratch.path("cancel.log");
    let canceller = spawn_cancel(&mut guard, &log, Some(&marked), &[p]);
    marked.wait_reached();
    send(pid, libc::SIGTERM);
    removed.wait_reached();
    assert!(
        !pidfile.exists() && !scratch.path("job.pid.cancel").exists(),
        "pgrun pauses with its run withdrawn and its note removed"
    );
    marked.release();
    assert_waits_for_pgrun(&mut guard, canceller, &log, pid);
    removed.release();
    assert_eq!(guard.wait(canceller), 0, "{}", fs::read_to_string(&log).unwrap());
    assert!(is_dead(pid), "cancel returned before pgrun {pid} exited");
    assert_eq!(guard.wait(index), 143);
}

#[test]
fn a_cancel_that_saw_the_run_which_then_ended_says_it_is_gone() {
    // cancel sees the run live before it makes its marker; the run, over
    // already (held at `marker-handled`, so it takes no request), is
    // withdrawn and its pgrun exits before cancel looks at the pid file
    // (held at `cancel-marked`). The run cancel was asked to stop is gone:
    // exit 0 at once, not "no run" after --wait-start, and its request,
    // which no run took, is withdrawn (issue 30).
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let handled = Pause::new(&scratch, "marker-handled");
    let index = guard.spawn(handled.arm(&mut pgrun(["-p", p, "--", "true"])));
    handled.wait_reached();
    let marked = Pause::new(&scratch, "cancel-marked");
    let log = scratch.path("cancel.log");
    let canceller = spawn_cancel(&mut guard, &log, Some(&marked), &["--wait-start", "3", p]);
    marked.wait_reached();
    assert_eq!(fs::read(scratch.path("job.pid.cancel")).unwrap(), b"", "cancel made its request");
    handled.release();
    assert_eq!(guard.wait(index), 0, "the run ended on its own");
    assert!(!pidfile.exists(), "the run was withdrawn");
    marked.release();
    let said = || fs::read_to_string(&log).unwrap();
    assert_eq!(guard.wait(canceller), 0, "cancel: the run it saw is gone: {}", said());
    assert!(!said().contains("no run"), "{}", said());
    assert!(!scratch.path("job.pid.cancel").exists(), "cancel left its request for the next run");
    assert!(next_run_runs(&scratch, p));
}

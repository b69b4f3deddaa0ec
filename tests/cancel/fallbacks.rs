//! `pgrun cancel` when its usual way to the run fails: the run's pgrun died
//! without withdrawing it, a pidfd signal says ESRCH while the lock holder
//! lives, and a straggler hides from the walk of children files (siblings
//! ending during it, a file that cannot be read). None of these may be
//! taken for "the run is gone".

use crate::util::*;
use std::fs;
use std::process::{Command, Stdio};

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

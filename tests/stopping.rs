//! Stopping the whole group: stragglers, timeouts, escalation, SIGTERM to
//! pgrun, stopped members, forwarded signals, and pgrun as PID 1.

use crate::util::*;
use std::fs;
use std::process::Stdio;

/// A payload member that logs TERM and survives it: `trap` with a handler
/// (not SIG_IGN) so the test can see TERM arrive and the process live on.
fn term_ignorer(dir: &str, name: &str) -> String {
    format!(
        "sh -c 'trap \"echo TERM >> {dir}/{name}.log\" TERM; echo $$ > {dir}/{name}.pid; while :; do sleep 0.2; done'"
    )
}

#[test]
fn term_ignoring_fake_really_survives_term() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", &term_ignorer(&scratch.sh(), "gc")]).stdin(Stdio::null());
    guard.spawn(&mut cmd);
    let pid = wait_pid(&scratch.path("gc.pid"), &mut guard);
    send(pid, libc::SIGTERM);
    assert_eq!(wait_line(&scratch.path("gc.log")), "TERM");
    assert!(!is_dead(pid), "the fake died of TERM");
}

#[test]
fn straggler_is_gone_when_pgrun_returns_and_status_is_kept() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let out = run(&mut pgrun(["--", "sh", "-c", &format!("sleep 300 & echo $! > {dir}/bg.pid; exit 3")]));
    let pid = wait_pid(&scratch.path("bg.pid"), &mut guard);
    assert_status(&out, 3, "straggler run");
    assert!(is_dead(pid), "the background sleep survived pgrun");
}

/// COMMAND exits and leaves a member that ignores TERM: pgrun says so in
/// one line a second after TERM, naming when KILL comes and the option
/// that sets it, instead of sitting out the grace without a word. Not for
/// a straggler that TERM ends, nor with --wait-group (a timeout's stop is
/// one the user asked for).
#[test]
fn a_straggler_that_outlives_term_is_said_once() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let report = scratch.path("r.json");
    let payload = |name: &str| format!("sleep 300 & echo $! > {dir}/{name}.pid; exit 3");
    // TERM ignored from the sleep's first instruction (inherited).
    let mut cmd = pgrun(["-k", "3", "--report", report.to_str().unwrap(), "--", "sh", "-c", &payload("a")]);
    let out = run(with_ignored(&mut cmd, libc::SIGTERM));
    let pid = wait_pid(&scratch.path("a.pid"), &mut guard);
    assert_status(&out, 3, "a straggler that ignores TERM");
    assert!(is_dead(pid), "the straggler survived pgrun");
    let signals: Vec<String> =
        json(&report)["signals"].as_array().unwrap().iter().map(|s| s["signal"].as_str().unwrap().into()).collect();
    assert_eq!(signals, ["TERM", "KILL"], "the straggler did not outlive TERM");
    let err = stderr_of(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    let line = err.trim_end();
    assert!(
        line.starts_with("pgrun: 1 process left in the run is still there 1s after TERM; KILL in ")
            && line.ends_with("s (--kill-after)"),
        "{err}"
    );

    // A straggler that TERM ends: nothing to say. (Where pgrun is the
    // subreaper, it reaps the orphan at once; on the portable paths its
    // zombie waits for the machine's init, which may take a second or two
    // here, and a zombie in the group cannot be told from a live member.)
    let out = run(&mut pgrun(["-k", "3", "--", "sh", "-c", &payload("b")]));
    assert_status(&out, 3, "a straggler that TERM ends");
    wait_pid(&scratch.path("b.pid"), &mut guard);
    if !cfg!(feature = "posix-fallback") {
        assert_eq!(stderr_of(&out), "");
    }

    // --wait-group: the same straggler is waited for until the timeout,
    // whose stop is the user's own: nothing said either.
    let mut cmd = pgrun(["--wait-group", "-t", "0.5", "-k", "3", "--", "sh", "-c", &payload("c")]);
    let out = run(with_ignored(&mut cmd, libc::SIGTERM));
    wait_pid(&scratch.path("c.pid"), &mut guard);
    assert_status(&out, 124, "--wait-group, then the timeout");
    assert_eq!(stderr_of(&out), "");
}

#[test]
fn wait_group_lets_a_short_straggler_finish() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    // The straggler writes `late` only once the test opens the gate.
    let payload = format!(
        "sh -c 'echo $$ > {dir}/ready; until [ -e {dir}/gate ]; do sleep 0.01; done; echo done > {dir}/late' & \
         until [ -s {dir}/ready ]; do sleep 0.01; done; exit 3"
    );
    let index = guard.spawn(&mut pgrun(["--wait-group", "--", "sh", "-c", &payload]));
    wait_line(&scratch.path("ready"));
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(guard.wait(index), 3, "--wait-group");
    assert_eq!(fs::read_to_string(scratch.path("late")).unwrap_or_default(), "done\n", "straggler was not waited for");

    // Without --wait-group the same straggler is stopped; the gate never
    // opens, so it could only ever write if pgrun left it running.
    for name in ["late", "gate", "ready"] {
        fs::remove_file(scratch.path(name)).unwrap();
    }
    let out = run(&mut pgrun(["--", "sh", "-c", &payload]));
    assert_status(&out, 3, "default");
    let straggler: i32 = wait_line(&scratch.path("ready")).parse().unwrap();
    guard.record(straggler);
    assert!(is_dead(straggler), "straggler was not stopped");
    assert!(!scratch.path("late").exists(), "straggler was not stopped");
}

#[test]
fn wait_group_still_honours_the_timeout() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let out = run(&mut pgrun([
        "--wait-group",
        "-t",
        "0.5",
        "--",
        "sh",
        "-c",
        &format!("sleep 300 & echo $! > {dir}/bg.pid; exit 0"),
    ]));
    let pid = wait_pid(&scratch.path("bg.pid"), &mut guard);
    assert_status(&out, 124, "timeout while draining");
    assert!(is_dead(pid));
}

#[test]
fn captured_output_returns_at_once_despite_a_straggler_holding_the_pipe() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let harness = format!(
        "import subprocess, sys\n\
         r = subprocess.run([{pgrun:?}, '--', 'sh', '-c', 'sleep 300 & echo $! > {dir}/bg.pid; echo hi'], capture_output=True, timeout=60)\n\
         sys.stdout.write(repr((r.returncode, r.stdout)))\n",
        pgrun = pgrun_path()
    );
    let out = run(std::process::Command::new(python3()).args(["-c", &harness]));
    let pid = wait_pid(&scratch.path("bg.pid"), &mut guard);
    assert_status(&out, 0, "python harness");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "(0, b'hi\\n')");
    assert!(is_dead(pid));
}

#[test]
fn timeout_kills_a_grandchild_that_ignores_term() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let payload = format!("{} & wait", term_ignorer(&dir, "gc"));
    let out = run(&mut pgrun(["--timeout", "1", "-k", "1", "--", "sh", "-c", &payload]));
    let pid = wait_pid(&scratch.path("gc.pid"), &mut guard);
    assert_status(&out, 124, "timeout");
    assert!(is_dead(pid), "the TERM-ignoring grandchild survived");
}

#[test]
fn sigterm_to_pgrun_returns_only_after_a_term_ignoring_grandchild_is_dead() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let payload = format!("{} & wait", term_ignorer(&dir, "gc"));
    let mut cmd = pgrun(["-k", "1", "--", "sh", "-c", &payload]);
    let index = guard.spawn(&mut cmd);
    let pid = wait_pid(&scratch.path("gc.pid"), &mut guard);
    send(guard.child(index).id() as i32, libc::SIGTERM);
    let status = guard.wait(index);
    assert!(is_dead(pid), "pgrun returned while the grandchild lived");
    assert_eq!(fs::read_to_string(scratch.path("gc.log")).unwrap_or_default(), "TERM\n", "grandchild never got TERM");
    assert_eq!(status, 143, "the leader sh died of TERM");
}

#[test]
fn escalate_sends_each_step_in_order() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    // INT and TERM blocked until their handlers are in place: the timeout
    // cannot beat them. Each is logged as it arrives, and survived. The
    // final KILL can: the graces leave python 4 s to start (it took over 2
    // on the busy machine).
    let payload = format!(
        "import os, signal\n\
         def note(n, f): open('{dir}/log', 'a').write(signal.Signals(n).name[3:] + '\\n')\n\
         signal.signal(signal.SIGINT, note)\n\
         signal.signal(signal.SIGTERM, note)\n\
         open('{dir}/pid', 'w').write('%d\\n' % os.getpid())\n\
         signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT, signal.SIGTERM])\n\
         while True: signal.pause()\n"
    );
    let mut cmd = pgrun(["--escalate", "INT/2s/TERM/2s/KILL", "-t", "0.2", "--", python3(), "-c", &payload]);
    let out = run(with_blocked(&mut cmd, &[libc::SIGINT, libc::SIGTERM]));
    let pid = wait_pid(&scratch.path("pid"), &mut guard);
    assert_status(&out, 124, "escalate");
    assert_eq!(fs::read_to_string(scratch.path("log")).unwrap(), "INT\nTERM\n");
    assert!(is_dead(pid));
}

#[test]
fn a_stopped_command_is_still_ended_by_the_timeout() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    // The timeout must find the payload stopped (seen in state T): if it
    // came first (a busy host), the run is made again with a longer one.
    for (attempt, timeout) in SHORT_TIMEOUTS.iter().enumerate() {
        let _ = fs::remove_file(scratch.path("pid"));
        let mut cmd = pgrun([
            "--timeout",
            timeout,
            "-k",
            "100",
            "--",
            "sh",
            "-c",
            &format!("echo $$ > {dir}/pid; kill -STOP $$; sleep 300"),
        ]);
        let index = guard.spawn(&mut cmd);
        let pid = wait_pid(&scratch.path("pid"), &mut guard);
        // -k 100: only the SIGCONT after TERM can end it within the deadline.
        let mut stopped = false;
        eventually("the payload to stop itself", || {
            stopped = state(pid).as_deref() == Some("T");
            stopped || is_dead(pid)
        });
        assert_eq!(guard.wait(index), 124);
        assert!(is_dead(pid));
        if stopped {
            return;
        }
        assert!(attempt + 1 < SHORT_TIMEOUTS.len(), "the payload was never seen stopped");
    }
}

/// Each forwarded signal arrives once; HUP, INT and QUIT are followed by a
/// SIGCONT (so a stopped member can act on them), the others are not.
#[test]
fn forwarded_signals_arrive_once_each_and_pgrun_carries_on() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let names = ["HUP", "INT", "QUIT", "USR1", "USR2", "ALRM", "WINCH", "CONT", "RTMIN", "RTMAX"];
    let payload = format!(
        "import os, signal\n\
         names = {names:?}\n\
         def on(sig, frame):\n\
         \x20   with open('{dir}/log', 'a') as f: f.write(signal.Signals(sig).name[3:] + '\\n')\n\
         for n in names: signal.signal(getattr(signal, 'SIG' + n), on)\n\
         open('{dir}/pid', 'w').write(str(os.getpid()) + '\\n')\n\
         while True: signal.pause()\n"
    );
    let mut cmd = pgrun(["--", python3(), "-c", &payload]);
    let index = guard.spawn(&mut cmd);
    let pgrun_pid = guard.child(index).id() as i32;
    let pid = wait_pid(&scratch.path("pid"), &mut guard);
    let rtmin = libc::SIGRTMIN();
    let rtmax = libc::SIGRTMAX();
    let numbers = [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGWINCH,
        libc::SIGCONT,
        rtmin,
        rtmax,
    ];
    let mut expected = String::new();
    for (name, number) in names.iter().zip(numbers) {
        send(pgrun_pid, number);
        expected.push_str(name);
        expected.push('\n');
        if ["HUP", "INT", "QUIT"].contains(name) {
            expected.push_str("CONT\n");
        }
        eventually(&format!("{name} to reach the command"), || {
            fs::read_to_string(scratch.path("log")).unwrap_or_default().len() >= expected.len()
        });
        assert!(!is_dead(pgrun_pid), "pgrun died of {name}");
    }
    assert_eq!(
        fs::read_to_string(scratch.path("log")).unwrap(),
        expected,
        "each signal exactly once, in order, CONT only after HUP, INT and QUIT"
    );
    send(pgrun_pid, libc::SIGTERM);
    assert_eq!(guard.wait(index), 143);
    assert!(is_dead(pid));
}

#[test]
fn a_hundred_background_children_are_all_gone_and_reaped() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let payload = format!("for i in $(seq 100); do sleep 300 & echo $! >> {dir}/pids; done; echo $$ > {dir}/leader");
    let out = run(&mut pgrun(["--", "sh", "-c", &payload]));
    assert_status(&out, 0, "100 children");
    let pgid: i32 = wait_line(&scratch.path("leader")).parse().unwrap();
    let pids: Vec<i32> =
        fs::read_to_string(scratch.path("pids")).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(pids.len(), 100);
    for pid in pids {
        guard.record(pid);
        // Gone, not a zombie; a pid already reused by an unrelated process
        // is in another group.
        let left = state(pid);
        assert!(
            left.is_none() || (left.as_deref() != Some("Z") && pgrp(pid) != Some(pgid)),
            "pid {pid} left behind in state {left:?}"
        );
    }
}

#[test]
fn pgrun_as_pid_1_of_a_new_pid_namespace() {
    if !require(Capability::PidNamespaces) {
        return;
    }
    let out = run(std::process::Command::new("unshare").args([
        "--pid",
        "--fork",
        "--mount-proc",
        pgrun_path(),
        "--timeout",
        ".2",
        "--",
        "sleep",
        "10",
    ]));
    assert_status(&out, 124, "pgrun as PID 1");
    let out = run(std::process::Command::new("unshare").args([
        "--pid",
        "--fork",
        "--mount-proc",
        pgrun_path(),
        "--",
        "sh",
        "-c",
        "sleep 300 & sleep 300 & exit 5",
    ]));
    assert_status(&out, 5, "stragglers under PID 1");
}

#[test]
fn sigterm_reaches_pgrun_as_pid_1_and_cancels_the_run() {
    if !require(Capability::PidNamespaces) {
        return;
    }
    // PID 1 gets no signal it has no handler for, unless it blocks it:
    // pgrun blocks and reads its signals, so a TERM must still cancel it.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--pid", "--fork", "--mount-proc", pgrun_path(), "--", "sh", "-c"])
        .arg(format!("echo ready > {dir}/ready; sleep 300"))
        .stdin(std::process::Stdio::null());
    let index = guard.spawn(&mut cmd);
    wait_line(&scratch.path("ready"));
    let unshare = guard.child(index).id() as i32;
    let pid1 = descendants(unshare)
        .into_iter()
        .find(|&p| fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim_end() == "pgrun"))
        .expect("pgrun under unshare");
    send(pid1, libc::SIGTERM);
    assert_eq!(guard.wait(index), 143, "the run was cancelled and its command died of TERM");
}

#[test]
fn a_broken_stderr_does_not_change_the_status() {
    let scratch = Scratch::new();
    let st = scratch.path("st");
    for flags in ["", "-v"] {
        let script =
            format!("{{ {} {flags} --timeout .1 -- sleep 10 2>&1; echo $? > {}; }} | :", pgrun_path(), st.display());
        let out = run(std::process::Command::new("bash").args(["-c", &script]));
        assert_status(&out, 0, "pipeline");
        assert_eq!(wait_line(&st), "124", "flags {flags:?}");
        fs::remove_file(&st).unwrap();
    }
}

/// pgrun with `pgrun_args` under `strace` with `inject`, tracing only
/// `kill` (its trace thrown away) and only in pgrun and its guard: strace
/// lets go of the command at its exec, so it neither fails the command's
/// own kills nor waits for it. Fails with a clear message if strace is
/// missing.
fn pgrun_under_strace(inject: &str, pgrun_args: &[&str]) -> std::process::Command {
    let probe = std::process::Command::new("strace").arg("-V").output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "this test injects syscall failures with strace, which is not installed"
    );
    let mut cmd = std::process::Command::new("strace");
    cmd.args(["-f", "-b", "execve", "-qq", "-o", "/dev/null", "-e", "trace=kill", "-e", inject, pgrun_path()])
        .args(pgrun_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

#[test]
fn a_kill_that_fails_once_with_esrch_is_sent_again() {
    // The first kill pgrun makes is the stop sequence's KILL to the group
    // (`-s KILL`): it fails with ESRCH while the group lives. pgrun must
    // not take that for "gone": it sends KILL again and ends the run.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let report = scratch.path("report.json");
    let payload = format!("echo $$ > {dir}/leader; exec sleep 100");
    let mut cmd = pgrun_under_strace(
        "inject=kill:error=ESRCH:when=1",
        &["--report", report.to_str().unwrap(), "-t", "0.2", "-s", "KILL", "--", "sh", "-c", &payload],
    );
    let out = run(&mut cmd);
    let leader = wait_pid(&scratch.path("leader"), &mut guard);
    assert_status(&out, 124, "a KILL refused once with ESRCH");
    assert!(is_dead(leader), "the command outlived pgrun");
    let r = json(&report);
    assert_eq!(r["reason"], "timeout", "{r}");
    assert_eq!(r["unstopped"], 0, "{r}");
}

#[cfg(not(feature = "posix-fallback"))]
#[test]
fn a_false_esrch_after_the_leader_is_reaped_does_not_spare_the_group_in_tree_mode() {
    // The leader exits and leaves a member in its group; pgrun's probe of
    // the group once the leader is reaped (its second kill) fails with
    // ESRCH although the member lives. pgrun takes the number for gone
    // for good (it may not signal a reused number), but in tree mode every
    // member is still its descendant: the stop reaches it through the walk,
    // and the run ends at once instead of when the member does.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let payload = format!("sleep 100 & echo $! > {dir}/member; exit 0");
    let mut cmd = pgrun_under_strace(
        "inject=kill:error=ESRCH:when=2",
        &["--contain", "tree", "-s", "KILL", "--", "sh", "-c", &payload],
    );
    let started = std::time::Instant::now();
    let out = run(&mut cmd);
    let member = wait_pid(&scratch.path("member"), &mut guard);
    assert_status(&out, 0, "the command's own status");
    assert!(is_dead(member), "the member outlived pgrun");
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "pgrun waited for the member to end by itself");
}

#[test]
fn a_group_that_refuses_every_kill_is_given_up_on_with_one_line() {
    // Every kill fails with EPERM, as for a non-root pgrun whose members
    // changed uid: pgrun cannot end the run. It must not wait forever:
    // after a few KILLs it gives up, says so in one line and in the report,
    // and leaves the (still live) command behind.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let report = scratch.path("report.json");
    // It lets go of stdout and stderr, pipes the test reads to their end.
    let payload = format!("echo $$ > {dir}/leader; exec sleep 100 >/dev/null 2>&1");
    let mut cmd = pgrun_under_strace(
        "inject=kill:error=EPERM",
        &["--report", report.to_str().unwrap(), "-t", "0.2", "-k", "0.2", "--", "sh", "-c", &payload],
    );
    let started = std::time::Instant::now();
    let out = run(&mut cmd);
    let leader = wait_pid(&scratch.path("leader"), &mut guard);
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "gave up only after {:?}", started.elapsed());
    assert_status(&out, 125, "every kill refused");
    let stderr = stderr_of(&out);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("pgrun: ") && stderr.contains(&format!("process group {leader}")), "{stderr}");
    assert!(!is_dead(leader), "the fake was meant to survive every kill");
    let r = json(&report);
    assert_eq!((r["reason"].as_str(), r["unstopped"].as_u64()), (Some("error"), Some(1)), "{r}");
    assert!(r["error"].as_str().is_some_and(|e| e.contains("KILL")), "{r}");
}

// The stop never waits on a scan of all of /proc. Such a scan costs what
// the whole machine runs, not what the run has: with thousands of processes
// on the host it took seconds under load, while pgrun neither reaped nor
// watched anything, and a plain `&` child that TERM ends got a KILL too.
// The tests arm pgrun's `full-scan` pause (every listing of /proc by the
// supervising pgrun stops there until released, as a slow scan would) and
// check that the stop runs its course without ever getting there.

/// A member that tells when TERM reaches it: on TERM it writes
/// `{name}.termed`, waits until `{name}.go` exists, and exits. Its pid is
/// in `{name}.pid` once the trap is set and its one child (a `sleep`) is
/// started: two members. The child is started before the trap is set: a
/// shell's child has the shell's handlers until it execs, and dash's
/// handler swallows a TERM that comes in between (7 of 20 `sleep`s forked
/// after the trap and TERMed at once outlived it), which left the test's
/// run to its 60 s grace.
fn term_teller(dir: &str, name: &str) -> String {
    format!(
        "sleep 300 & \
         trap \"echo TERM > {dir}/{name}.termed; until [ -e {dir}/{name}.go ]; do sleep 0.01; done; exit 0\" TERM; \
         echo $$ > {dir}/{name}.pid; wait"
    )
}

/// COMMAND (`sh -c`) that starts [`term_teller`] `name` in the background
/// and exits 3 once its trap is set.
fn leaves_a_term_teller(dir: &str, name: &str) -> String {
    format!("sh -c '{}' & until [ -s {dir}/{name}.pid ]; do sleep 0.01; done; exit 3", term_teller(dir, name))
}

fn sent_signals(report: &serde_json::Value) -> Vec<String> {
    report["signals"].as_array().unwrap().iter().map(|s| s["signal"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_straggler_gets_its_term_without_waiting_on_a_scan_of_all_of_proc() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let report = scratch.path("r.json");
    let said = scratch.path("said");
    fs::write(scratch.path("bg.go"), "").unwrap();
    let scan = Pause::new(&scratch, "full-scan");
    // -v and --report: the members left are counted, for both.
    let mut cmd = pgrun(["-v", "-k", "60", "--report", report.to_str().unwrap()]);
    scan.arm(&mut cmd).args(["--", "sh", "-c", &leaves_a_term_teller(&dir, "bg")]);
    cmd.stderr(fs::File::create(&said).unwrap());
    let index = guard.spawn(&mut cmd);
    let bg = wait_pid(&scratch.path("bg.pid"), &mut guard);
    let (termed, scanning) = (scratch.path("bg.termed"), scratch.path("gate-full-scan.reached"));
    eventually("the straggler's TERM, or pgrun in a scan of all of /proc", || termed.exists() || scanning.exists());
    assert!(!scanning.exists(), "pgrun scanned all of /proc before the straggler got TERM");
    assert_eq!(guard.wait(index), 3, "the command's status");
    assert!(!scanning.exists(), "pgrun scanned all of /proc during the stop");
    assert!(is_dead(bg), "the straggler outlived pgrun");
    let r = json(&report);
    assert_eq!(sent_signals(&r), ["TERM"], "TERM ended the straggler: {r}");
    // The teller and its sleep; the portable path cannot count them: 1
    // stands for "some".
    let members = if cfg!(feature = "posix-fallback") { 1 } else { 2 };
    assert_eq!(r["stragglers"], members, "the count is kept: {r}");
    let said = fs::read_to_string(&said).unwrap();
    assert!(said.contains(&format!("pgrun: {members} process(es) left in process group ")), "{said}");
}

#[test]
fn a_straggler_count_that_outlasts_the_grace_sends_no_kill_to_a_run_term_ended() {
    // A cancel's TERM reaches the whole group; COMMAND dies of it, its `&`
    // child holds on in its trap until the test lets it go. pgrun is held
    // at the count of what COMMAND left while the child exits and the
    // grace passes: afterwards, pgrun must see the run gone before it acts
    // on the grace, not send KILL to what TERM ended.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let report = scratch.path("r.json");
    // Long enough for pgrun to reach the count (it reaps COMMAND first)
    // well inside it on a busy machine: with 0.2 s, pgrun under load was
    // still short of the count when the grace ended, and rightly sent
    // KILL to the child still in its trap.
    let grace = std::time::Duration::from_secs(2);
    let payload = format!("sh -c '{}' & exec sleep 300", term_teller(&dir, "bg"));
    let count = Pause::new(&scratch, "straggler-count");
    let mut cmd = pgrun(["-k", "2", "--report", report.to_str().unwrap()]);
    count.arm(&mut cmd).args(["--", "sh", "-c", &payload]);
    let index = guard.spawn(&mut cmd);
    let bg = wait_pid(&scratch.path("bg.pid"), &mut guard);
    send(guard.child(index).id() as i32, libc::SIGTERM);
    wait_line(&scratch.path("bg.termed"));
    // TERM was sent before the child wrote that it got it: the grace ends
    // at most `grace` from now.
    let termed = std::time::Instant::now();
    count.wait_reached();
    assert!(termed.elapsed() < grace, "pgrun reached the count only after the grace: the test proves nothing");
    fs::write(scratch.path("bg.go"), "").unwrap();
    if cfg!(feature = "posix-fallback") {
        // No subreaper: the child's zombie is the machine's init's to
        // reap, and holds the group until then.
        eventually("the child to be reaped", || proc_stat(bg).is_none());
    } else {
        // pgrun's to reap (the subreaper), once it goes on.
        wait_dead(bg);
    }
    eventually("the grace to pass while pgrun counts", || termed.elapsed() > grace + grace / 2);
    count.release();
    assert_eq!(guard.wait(index), 143, "COMMAND died of TERM");
    let r = json(&report);
    assert_eq!(sent_signals(&r), ["TERM"], "TERM ended the run: {r}");
}

#[test]
fn draining_with_a_live_member_waits_on_no_scan_of_all_of_proc() {
    // --contain group --wait-group: while a member lives on, each turn of
    // the drain asks whether only zombies pgrun cannot reap are left. A
    // live member among pgrun's descendants answers that; a cancel's TERM
    // then comes at once. pgrun is held at the drain's first census, so
    // that the cancel comes after it has begun.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    fs::write(scratch.path("bg.go"), "").unwrap();
    let (census, scanning) = (scratch.path("gate-census"), scratch.path("gate-full-scan.reached"));
    let pauses = format!("draining-census={},full-scan={}", census.display(), scratch.path("gate-full-scan").display());
    let mut cmd = pgrun(["--contain", "group", "--wait-group", "-k", "60", "--", "sh", "-c"]);
    cmd.arg(leaves_a_term_teller(&dir, "bg")).env("PGRUN_TEST_PAUSE", pauses);
    let index = guard.spawn(&mut cmd);
    let bg = wait_pid(&scratch.path("bg.pid"), &mut guard);
    let at_census = scratch.path("gate-census.reached");
    eventually("pgrun at the drain's census", || at_census.exists());
    fs::write(&census, "").unwrap();
    send(guard.child(index).id() as i32, libc::SIGTERM);
    let termed = scratch.path("bg.termed");
    eventually("the cancel's TERM, or pgrun in a scan of all of /proc", || termed.exists() || scanning.exists());
    assert!(!scanning.exists(), "pgrun scanned all of /proc while draining");
    assert_eq!(guard.wait(index), 3, "the command's status");
    assert!(!scanning.exists(), "pgrun scanned all of /proc during the stop");
    assert!(is_dead(bg), "the member outlived pgrun");
}

#[test]
fn a_straggler_that_outlives_term_is_said_without_a_scan_of_all_of_proc() {
    // The line a second after TERM says how many are left: counted among
    // pgrun's descendants, not by reading every process on the machine.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let scan = Pause::new(&scratch, "full-scan");
    // TERM ignored from the sleep's first instruction (inherited). No
    // report and no -v: nothing else asks for a count.
    let mut cmd = pgrun(["-k", "3"]);
    scan.arm(&mut cmd).args(["--", "sh", "-c", &format!("sleep 300 & echo $! > {dir}/bg.pid; exit 3")]);
    cmd.stderr(Stdio::piped());
    let index = guard.spawn(with_ignored(&mut cmd, libc::SIGTERM));
    let bg = wait_pid(&scratch.path("bg.pid"), &mut guard);
    let scanning = scratch.path("gate-full-scan.reached");
    let pgrun_pid = guard.child(index).id() as i32;
    eventually("pgrun's end, or pgrun in a scan of all of /proc", || {
        scanning.exists() || state(pgrun_pid).is_none_or(|s| s == "Z")
    });
    assert!(!scanning.exists(), "pgrun scanned all of /proc during the stop");
    assert_eq!(guard.wait(index), 3, "the command's status");
    assert!(is_dead(bg), "the straggler outlived pgrun");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut guard.child(index).stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.starts_with("pgrun: 1 process left in the run is still there 1s after TERM; KILL in "), "{err}");
}

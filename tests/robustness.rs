//! pgrun under strange callers: an ignored SIGCHLD, a closed stderr, a
//! process limit, a bug in pgrun itself, tiny durations, zombies nobody
//! reaps.

use crate::util::*;
use std::fs;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// Start `cmd` with SIGCHLD ignored, as `trap '' CHLD`, Python's
/// `signal.signal(SIGCHLD, SIG_IGN)` or Perl's `$SIG{CHLD}='IGNORE'` leave it.
fn with_sigchld_ignored(cmd: &mut Command) -> &mut Command {
    // SAFETY: signal(2) is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGCHLD, libc::SIG_IGN);
            Ok(())
        })
    }
}

#[test]
fn an_ignored_sigchld_neither_hangs_pgrun_nor_hides_the_status() {
    let out = run(with_sigchld_ignored(&mut pgrun(["--", "sh", "-c", "exit 3"])));
    assert_status(&out, 3, "the command's status");
    let out = run(with_sigchld_ignored(&mut pgrun(["--timeout", "0.2", "-k", "0.2", "--", "sleep", "30"])));
    assert_status(&out, 124, "timeout");
    assert!(!stderr_of(&out).contains("survived KILL"), "{}", stderr_of(&out));
    // The fork path (--setsid) too.
    let out = run(with_sigchld_ignored(&mut pgrun(["--setsid", "--", "sh", "-c", "exit 4"])));
    assert_status(&out, 4, "--setsid");
}

// The portable build catches SIGCHLD with a handler (its self-pipe), which
// replaces "ignored" anyway: the status cannot be lost there.
#[cfg(not(feature = "posix-fallback"))]
#[test]
fn a_lost_leader_status_is_an_error_not_an_endless_wait() {
    // Defence in depth: were SIGCHLD still ignored (the test hook keeps it
    // so), the kernel would reap the command itself and send no SIGCHLD.
    // pgrun, with no children left and no status, must say so and exit, not
    // send KILL every second forever. (The timeout is what wakes it: with
    // no SIGCHLD there is no other event.)
    let mut cmd = pgrun(["--timeout", "0.2", "--", "sleep", "30"]);
    cmd.env("PGRUN_TEST_HOOK", "keep-sigchld-ignored");
    let out = run(with_sigchld_ignored(&mut cmd));
    assert_status(&out, 125, "status lost");
    let err = stderr_of(&out);
    assert!(err.starts_with("pgrun: lost the exit status") && err.lines().count() == 1, "{err}");
}

/// A pipe whose read end is already closed: writing to it raises SIGPIPE.
fn broken_pipe() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two fds pipe2 writes. Close-on-exec:
    // no process another test spawns meanwhile holds the write end.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both fds are fresh and ours; the read end is closed at once.
    unsafe {
        libc::close(fds[0]);
        OwnedFd::from_raw_fd(fds[1])
    }
}

#[test]
fn a_closed_stderr_pipe_never_kills_pgrun_in_any_mode() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let report_in_missing_folder = scratch.path("no/such/r.json");
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["--no-such-flag"], 125),
        (vec!["--report", report_in_missing_folder.to_str().unwrap(), "--", "true"], 125),
        (vec!["--", "pgrun-test-no-such-command"], 127),
        (vec!["cancel", "--wait-start", "0.05", p], 1),
        (vec!["cancel"], 125),
        (vec!["status", p], 3),
        (vec!["status"], 125),
        (vec!["-v", "--", "true"], 0),
    ];
    for (args, want) in cases {
        let mut cmd = pgrun(&args);
        cmd.stdout(Stdio::null()).stderr(Stdio::from(broken_pipe()));
        // SAFETY: signal(2) is async-signal-safe. The default disposition:
        // SIGPIPE kills unless pgrun blocks it.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                Ok(())
            })
        };
        let status = cmd.status().expect("spawn pgrun");
        assert_eq!(code_of(status), want, "{args:?} with a broken stderr");
    }
}

#[test]
fn a_process_limit_at_the_spawn_is_pgruns_failure_125() {
    if !require(Capability::UnprivilegedUser) {
        return;
    }
    // nobody with at most one process: pgrun itself is that one, so it
    // cannot create the command (root is exempt from the limit).
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    open_up(scratch.dir(), true);
    // --no-guard: otherwise the guard's fork is the one that fails.
    let script = format!("ulimit -u 1 && exec {} --no-guard -- touch {}", pgrun_path(), witness.display());
    let out = run(&mut as_nobody("bash", &["-c", &script]));
    assert_status(&out, 125, "fork failure");
    let err = stderr_of(&out);
    assert!(err.starts_with("pgrun: cannot start 'touch': ") && err.lines().count() == 1, "{err}");
    assert!(!witness.exists());

    let script = format!("ulimit -u 1 && exec {} -- touch {}", pgrun_path(), witness.display());
    let out = run(&mut as_nobody("bash", &["-c", &script]));
    assert_status(&out, 125, "the guard's fork failure");
    let err = stderr_of(&out);
    assert!(err.starts_with("pgrun: cannot start the guard: ") && err.lines().count() == 1, "{err}");
    assert!(!witness.exists());
}

#[test]
fn a_panic_in_the_supervise_loop_kills_the_group_and_exits_125() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let mut cmd = pgrun(["--", "sh", "-c", &format!("sleep 300 & echo $! > {dir}/bg; echo $$ > {dir}/me; wait")]);
    cmd.env("PGRUN_TEST_HOOK", "panic-on-usr1").stderr(Stdio::piped());
    let index = guard.spawn(&mut cmd);
    let bg = wait_pid(&scratch.path("bg"), &mut guard);
    let leader = wait_pid(&scratch.path("me"), &mut guard);
    guard.record_group(leader);
    send(guard.child(index).id() as i32, libc::SIGUSR1);
    assert_eq!(guard.wait(index), 125, "a panic is pgrun's own failure");
    // pgrun exited only after the group was gone.
    assert!(is_dead(bg) && is_dead(leader), "the group outlived pgrun's panic");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut guard.child(index).stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.starts_with("pgrun: internal error") && err.lines().count() == 1, "{err}");
    assert!(err.contains(&format!("killing process group {leader}")), "{err}");
}

// Issue 18 #13: once the report path is accepted, every exit writes the
// report, a panic's too, and leaves no temporary file behind.
#[test]
fn a_panic_writes_the_report_and_leaves_no_temporary_file() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let report = scratch.path("report.json");
    let pidfile = scratch.path("job.pid");
    let mut cmd = pgrun([
        "--pidfile",
        pidfile.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &format!("echo $$ > {dir}/me; exec sleep 300"),
    ]);
    cmd.env("PGRUN_TEST_HOOK", "panic-on-usr1").stderr(Stdio::piped());
    let index = guard.spawn(&mut cmd);
    let leader = wait_pid(&scratch.path("me"), &mut guard);
    guard.record_group(leader);
    eventually("the pid file", || pidfile.exists());
    send(guard.child(index).id() as i32, libc::SIGUSR1);
    assert_eq!(guard.wait(index), 125, "a panic is pgrun's own failure");
    assert!(is_dead(leader), "the command outlived pgrun's panic");
    let v = json(&report);
    assert_eq!((v["reason"].as_str(), v["exit_code"].as_u64()), (Some("error"), Some(125)), "{v}");
    assert!(v["error"].as_str().is_some_and(|e| e.starts_with("internal error")), "{v}");
    assert_eq!(v["pgid"], leader, "{v}");
    assert_eq!(v["status"]["signal"], "KILL", "{v}");
    // The guard removes the pid file once pgrun is gone.
    eventually("the pid file to be removed", || !pidfile.exists());
    let left: Vec<String> = fs::read_dir(scratch.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

// Issue 18 #13: the same before the command has started, when the pid
// file's temporary file exists and nothing is published yet.
#[test]
fn a_panic_before_the_spawn_writes_the_report_and_leaves_no_file() {
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let pidfile = scratch.path("job.pid");
    let ran = scratch.path("ran");
    let payload = format!("touch {}", ran.display());
    let mut cmd = pgrun([
        "--pidfile",
        pidfile.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &payload,
    ]);
    cmd.env("PGRUN_TEST_HOOK", "panic-before-spawn");
    let out = run(&mut cmd);
    assert_status(&out, 125, "a panic");
    let err = stderr_of(&out);
    assert!(err.starts_with("pgrun: internal error") && err.lines().count() == 1, "{err}");
    assert!(!ran.exists(), "the command ran");
    let v = json(&report);
    assert_eq!((v["reason"].as_str(), v["exit_code"].as_u64()), (Some("error"), Some(125)), "{v}");
    assert_eq!(v["pgid"], serde_json::Value::Null, "{v}");
    eventually("the guard to remove what is left", || {
        fs::read_dir(scratch.dir()).unwrap().all(|e| e.unwrap().file_name() == "report.json")
    });
}

#[test]
fn any_timeout_above_zero_is_a_timeout() {
    for tiny in ["0.0000000001", "0.000000001", ".0000000000001ms"] {
        let out = run(&mut pgrun(["--timeout", tiny, "--", "sleep", "30"]));
        assert_status(&out, 124, tiny);
    }
    let out = run(&mut pgrun(["--timeout", "0.000000000000", "--", "true"]));
    assert_status(&out, 0, "zero is no timeout");
}

#[test]
fn stragglers_is_an_integer_even_when_the_command_never_ran() {
    let scratch = Scratch::new();
    let report = scratch.path("r.json");
    let r = report.to_str().unwrap();
    let out = run(&mut pgrun(["--report", r, "--", "pgrun-test-no-such-command"]));
    assert_status(&out, 127, "not found");
    let v = json(&report);
    assert_eq!((v["reason"].as_str(), v["stragglers"].as_u64()), (Some("error"), Some(0)), "{v}");
    assert_eq!(v["unreaped"], 0);

    let pidfile = scratch.path("job.pid");
    fs::write(scratch.path("job.pid.cancel"), "").unwrap();
    let out = run(&mut pgrun(["--report", r, "-p", pidfile.to_str().unwrap(), "--", "true"]));
    assert_status(&out, 143, "cancelled before the start");
    let v = json(&report);
    assert_eq!((v["reason"].as_str(), v["stragglers"].as_u64()), (Some("cancelled-before-start"), Some(0)), "{v}");
}

#[test]
fn a_zombie_nobody_reaps_is_reported_not_waited_for_forever() {
    // A member of the group whose parent left the group and never reaps it:
    // its zombie holds the group open, and no signal can end it.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let report = scratch.path("r.json");
    let parent = format!(
        "import os, time\n\
         child = os.fork()\n\
         if child == 0: os._exit(0)\n\
         os.setpgid(0, 0)\n\
         open('{dir}/parent.tmp', 'w').write('%d %d\\n' % (os.getpid(), child))\n\
         os.rename('{dir}/parent.tmp', '{dir}/parent')\n\
         time.sleep(300)\n"
    );
    let payload =
        format!("{} -c \"$0\" 2>/dev/null & until [ -e {dir}/parent ]; do sleep 0.01; done; exit 6", python3());
    // --contain group: in tree mode (the default) the parent, a descendant
    // that left the group, is stopped too and its zombie reaped.
    let mut cmd = pgrun([
        "--contain",
        "group",
        "-k",
        "0.1",
        "--report",
        report.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &payload,
        &parent,
    ]);
    cmd.stderr(Stdio::piped());
    let index = guard.spawn(&mut cmd);
    let pids: Vec<i32> = wait_line(&scratch.path("parent")).split(' ').map(|p| p.parse().unwrap()).collect();
    guard.record(pids[0]);
    eventually("the member to be a zombie", || state(pids[1]).as_deref() == Some("Z"));
    assert_eq!(guard.wait(index), 6, "the command's status, once pgrun stopped waiting");
    assert_eq!(state(pids[1]).as_deref(), Some("Z"), "the zombie is still there: pgrun could not end it");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut guard.child(index).stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.starts_with("pgrun: warning: ") && err.lines().count() == 1, "{err}");
    assert!(err.contains("1 zombie"), "{err}");
    let v = json(&report);
    assert_eq!(v["unreaped"], 1, "{v}");
    assert_eq!(v["stragglers"], 1, "{v}");
}

// The supervise loop itself failing (its poll refused: faults sweep,
// new-B) must not leave the run behind: pgrun stops all of it, the escapee
// in tree mode and the leaf's members in cgroup mode, and waits until it
// is gone before it exits 125; in cgroup mode it also removes its leaf.
#[cfg(not(feature = "posix-fallback"))]
#[test]
fn a_failed_supervise_loop_still_stops_the_whole_run() {
    let mut modes = vec!["tree"];
    if require(Capability::Cgroup2) {
        modes.push("cgroup");
    }
    for mode in modes {
        let scratch = Scratch::new();
        let mut guard = Guard::new();
        let dir = scratch.sh();
        let payload = format!("setsid sleep 300 & echo $! > {dir}/esc.pid; exec sleep 300");
        let pause = Pause::new(&scratch, "spawned");
        let found = Command::new("strace").arg("-V").stdout(Stdio::null()).status();
        assert!(found.is_ok_and(|s| s.success()), "this test needs strace; install it");
        // Only pgrun is traced (-b execve lets the command go at its exec);
        // --no-guard: the guard's own poll is not the one under test.
        let mut cmd = Command::new("strace");
        cmd.args(["-f", "-qq", "-o", "/dev/null", "-b", "execve", "-e", "inject=poll:error=ENOMEM:when=1"]);
        cmd.args(["--", pgrun_path(), "--no-guard", "--contain", mode, "--", "sh", "-c", &payload]);
        let log = scratch.path("stderr.log");
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(fs::File::create(&log).unwrap());
        // The leaf's name, fixed, so that it can be looked for afterwards.
        let leaf = format!("pgrun-test-{}-{mode}", std::process::id());
        cmd.env("PGRUN_TEST_LEAF_NAME", &leaf);
        default_signals(pause.arm(&mut cmd));
        let index = guard.spawn(&mut cmd);
        let escapee = wait_pid(&scratch.path("esc.pid"), &mut guard);
        pause.wait_reached();
        pause.release();
        let status = guard.wait(index);
        let stderr = fs::read_to_string(&log).unwrap_or_default();
        assert_eq!(status, 125, "{mode}: {stderr}");
        assert_eq!(stderr.lines().filter(|l| l.starts_with("pgrun: ")).count(), 1, "{mode}: {stderr}");
        assert!(stderr.contains("cannot supervise"), "{mode}: {stderr}");
        // Said only once the run is seen gone (its reaped leader included):
        // not "SIGKILL did not end it" after waiting out the bound.
        assert!(stderr.contains("stopped it with SIGKILL"), "{mode}: {stderr}");
        assert!(is_dead(escapee), "{mode}: the escapee outlived pgrun");
        if mode == "cgroup" {
            let (_, own) = cgroup2_folders().unwrap();
            assert!(!own.join(&leaf).exists(), "cgroup leaf {leaf} left behind");
        }
    }
}

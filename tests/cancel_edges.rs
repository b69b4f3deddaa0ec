//! `pgrun cancel` at its edges: short of file descriptors (a low
//! `RLIMIT_NOFILE`), where a handle it could not open is never read as the
//! run, or its pgrun, being over; and a request whose run's pgrun was
//! SIGKILLed, which must not cancel the next run on the pid file.

use crate::util::*;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// `pgrun cancel -v ARGS...` with its soft fd limit at `nofile` (its stdin,
/// stdout and stderr among them), stderr piped.
fn cancel_with_nofile(nofile: u64, args: &[&str]) -> Command {
    let mut all = vec!["cancel", "-v"];
    all.extend_from_slice(args);
    let mut cmd = pgrun(&all);
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    // SAFETY: only setrlimit, async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let mut limit: libc::rlimit = std::mem::zeroed();
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            limit.rlim_cur = nofile;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// Six fds: cancel's first look holds the pid file (fd 3) and a pidfd on
/// the pgrun holding it (fd 4), its second look the pid file again (fd 5):
/// the pidfd it opens for the stop finds no room (EMFILE). The pgrun it
/// stopped is held at `withdrawn` (its pid file gone, its lock let go of,
/// itself not exited). cancel must wait for that pgrun's exit on the pidfd
/// its first look proved (the lock still held by the same pid), not say
/// "gone" because its own open failed.
#[test]
fn a_cancel_short_of_fds_still_waits_for_the_pgrun_it_stopped() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let withdrawn = Pause::new(&scratch, "withdrawn");
    let mut run = pgrun(["-p", pidfile.to_str().unwrap(), "--", "sleep", "300"]);
    let run = guard.spawn(withdrawn.arm(&mut run));
    let pgrun_pid = guard.child(run).id() as i32;
    let pgid: i32 = wait_line(&pidfile).parse().expect("a group id");
    guard.record_group(pgid);
    let cancel = guard.spawn(&mut cancel_with_nofile(6, &[pidfile.to_str().unwrap()]));
    withdrawn.wait_reached();
    // pgrun is held with its run withdrawn: a cancel that has exited by now
    // said "gone" with that pgrun alive.
    let early = guard.child(cancel).try_wait().expect("try_wait").is_some();
    withdrawn.release();
    let status = guard.wait(cancel);
    let mut stderr = String::new();
    guard.child(cancel).stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(status, 0, "cancel: {stderr}");
    assert!(!early, "cancel exited while the pgrun it stopped was alive: {stderr}");
    // On Linux it waits on the pidfd its first look proved. The portable
    // path has no pidfds: it polls the lock, then waits on the note pgrun
    // holds until it exits; a poll that comes once pgrun has exited (a busy
    // machine) finds neither and says so. Not early is what counts there.
    if !cfg!(feature = "posix-fallback") {
        assert!(
            stderr.contains(&format!("pgrun {pgrun_pid} has exited")) && !stderr.contains("cannot be told here"),
            "cancel did not wait for pgrun {pgrun_pid} to exit: {stderr}"
        );
    }
    assert_eq!(guard.wait(run), 143);
    assert!(!pidfile.exists() && !scratch.path("job.pid.cancel").exists(), "files left behind");
}

/// Four fds: a cancel that found no run at its first look (the run is
/// held at `spawned`) finds it at `placed`, holding the pid file (fd 3),
/// and has no room for a pidfd on its pgrun (EMFILE), nor, later, to open
/// the note that pgrun holds at the marker path until it exits. It must
/// not go on to say "gone" once that pgrun lets go of its lock (held at
/// `withdrawn`, alive): an error (125), on Linux before anything is
/// signalled; on the portable path (no pidfds: it waits on the note) once
/// the note cannot be opened.
#[test]
fn a_cancel_with_no_room_for_a_pidfd_says_so_rather_than_gone() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let path = pidfile.to_str().unwrap();
    let (spawned, placed, withdrawn) =
        (Pause::new(&scratch, "spawned"), Pause::new(&scratch, "placed"), Pause::new(&scratch, "withdrawn"));
    let gates = format!(
        "spawned={},placed={},withdrawn={}",
        scratch.path("gate-spawned").display(),
        scratch.path("gate-placed").display(),
        scratch.path("gate-withdrawn").display()
    );
    let mut run = pgrun(["-p", path, "--", "sleep", "300"]);
    let run = guard.spawn(run.env("PGRUN_TEST_PAUSE", gates));
    spawned.wait_reached();
    let cancel = guard.spawn(&mut cancel_with_nofile(4, &[path]));
    eventually("cancel to make its marker", || scratch.path("job.pid.cancel").exists());
    spawned.release();
    placed.wait_reached();
    let pgid: i32 = wait_line(&pidfile).parse().expect("a group id");
    guard.record_group(pgid);
    // cancel finds the run held at `placed`: it signals it, or says why not.
    let mut seen = String::new();
    {
        let stderr = guard.child(cancel).stderr.as_mut().expect("stderr piped");
        let mut byte = [0u8];
        while !seen.contains("sending TERM") && !seen.contains("cannot open a pidfd") {
            assert_eq!(stderr.read(&mut byte).expect("read stderr"), 1, "cancel ended: {seen}");
            seen.push(byte[0] as char);
        }
    }
    if seen.contains("sending TERM") {
        // The run takes the marker, stops, and is held withdrawn.
        placed.release();
        withdrawn.wait_reached();
    }
    let status = guard.wait(cancel);
    let mut rest = String::new();
    guard.child(cancel).stderr.take().unwrap().read_to_string(&mut rest).unwrap();
    let stderr = seen + &rest;
    assert_eq!(status, 125, "cancel, with no room to watch pgrun's exit: {stderr}");
    if cfg!(feature = "posix-fallback") {
        // No pidfds: cancel signalled the run, then had no room to open the
        // note pgrun holds until it exits (the run took the marker as its
        // note, which goes at its exit).
        assert!(stderr.contains("cannot look at the note at"), "{stderr}");
    } else {
        assert!(stderr.contains("cannot open a pidfd for pgrun"), "{stderr}");
        assert!(!scratch.path("job.pid.cancel").exists(), "the marker it made is withdrawn");
    }
    placed.release();
    withdrawn.release();
    if !cfg!(feature = "posix-fallback") {
        let out = run_cancel(path);
        assert_status(&out, 0, "cancel with fds to spare");
    }
    assert_eq!(guard.wait(run), 143);
    assert!(!scratch.path("job.pid.cancel").exists(), "a marker left behind");
}

fn run_cancel(path: &str) -> std::process::Output {
    run(&mut pgrun(["cancel", path]))
}

/// A cancel's request for a run whose pgrun is then SIGKILLed outlives
/// that pgrun while its guard stops the run (a command that ignores TERM
/// keeps the guard in its grace): the pid file is stale by then, so the
/// next run on it starts, finds the request, and is cancelled before it
/// starts (143), though the cancel that made it was for the run before.
/// The guard now puts pgrun's stopping note in place of that request as
/// soon as pgrun is gone, and removes the note once its stop is over.
///
/// Reproduction: `pgrun -k 300 -p job.pid -- sh -c 'trap "" TERM; sleep
/// 300' &`; `pgrun cancel --no-wait job.pid`; once pgrun has sent its TERM,
/// `kill -9` that pgrun; `pgrun -p job.pid -- true` exits 143 ("cancelled
/// before it started: a cancel was pending").
#[test]

fn a_request_for_a_run_whose_pgrun_was_killed_does_not_cancel_the_next_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let path = pidfile.to_str().unwrap();
    let mut first = pgrun(["-v", "-k", "300", "-p", path, "--", "sh", "-c", "trap '' TERM; sleep 300"]);
    let first = guard.spawn(first.stderr(Stdio::piped()));
    let first_pid = guard.child(first).id() as i32;
    let pgid: i32 = wait_line(&pidfile).parse().expect("a group id");
    guard.record_group(pgid);
    let out = run(&mut pgrun(["cancel", "--no-wait", path]));
    assert_status(&out, 0, "cancel --no-wait");
    read_stderr_until(&mut guard, first, "sending TERM to process group");
    send(first_pid, libc::SIGKILL);
    assert_eq!(guard.wait(first), 128 + libc::SIGKILL);
    // Its guard has taken over (it says so as it starts its stop), and the
    // first run's group lives on (its guard is in the grace).
    read_stderr_until(&mut guard, first, "died; stopping process group");
    assert!(!is_dead(pgid), "the first run's command ended early");
    let next = run(&mut pgrun(["-p", path, "--", "true"]));
    assert_status(&next, 0, "the next run, started after the first run's pgrun was killed");
    // Once the first run's group is gone, its guard leaves nothing behind.
    // SAFETY: killpg on the group this test's pgrun created and recorded.
    unsafe { libc::killpg(pgid, libc::SIGKILL) };
    let marker = scratch.path("job.pid.cancel");
    eventually("the first run's guard to withdraw its files", || !marker.exists() && !pidfile.exists());
}

// A pid file that is no pgrun run's: a daemon's own, which the daemon
// locks as pgrun locks its own (a write lock over byte 0), holding its own
// pid, which is its group's. cancel must not take the daemon for a run's
// pgrun: it would TERM it, and with the daemon's group holding none of
// "its run", say the run gone while the daemon lives. pgrun never is in
// its run's group: such a file is refused by cancel, wait and status,
// and not listed by ls.
#[test]
fn a_daemons_own_locked_pid_file_is_refused_and_the_daemon_never_signalled() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let (pidfile, termed) = (scratch.path("daemon.pid"), scratch.path("termed"));
    let daemon = format!(
        "import fcntl, os, signal, time\n\
         signal.signal(signal.SIGTERM, lambda *a: open({termed:?}, 'a').write('TERM\\n'))\n\
         f = open({pidfile:?}, 'w')\n\
         fcntl.lockf(f, fcntl.LOCK_EX)\n\
         f.write(str(os.getpid()) + '\\n'); f.flush()\n\
         while True: time.sleep(60)\n"
    );
    let mut cmd = Command::new(python3());
    cmd.args(["-c", &daemon]).process_group(0);
    let index = guard.spawn(&mut cmd);
    let pid = guard.child(index).id() as i32;
    assert_eq!(wait_line(&pidfile), pid.to_string(), "the daemon's pid file");
    let path = pidfile.to_str().unwrap();
    let refusal = format!("pgrun: refusing pid file {path}: its lock holder, process {pid}, is in process group {pid}");
    for (args, code) in [
        (vec!["cancel", "--timeout", "1", path], 125),
        (vec!["wait", "--timeout", "1", path], 125),
        (vec!["status", path], 4),
    ] {
        let out = run(pgrun(&args).stdout(Stdio::piped()).stderr(Stdio::piped()));
        assert_status(&out, code, args[0]);
        assert!(stderr_of(&out).starts_with(&refusal), "{}: {}", args[0], stderr_of(&out));
    }
    let listed = run(pgrun(["ls", scratch.path("").to_str().unwrap()]).stdout(Stdio::piped()));
    assert!(!String::from_utf8_lossy(&listed.stdout).contains("daemon.pid"), "ls listed the daemon's file");
    assert!(!termed.exists(), "the daemon was signalled");
    assert!(!is_dead(pid), "the daemon died");
    assert!(!scratch.path("daemon.pid.cancel").exists(), "cancel left its marker");
}

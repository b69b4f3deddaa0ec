//! `pgrun --detach`: the caller's process returns once the run is published
//! (or with the run's own failure status when it never gets that far), and
//! the run lives on in a session of its own, holding none of the caller's
//! fds, with timeout, cancel, status, wait and the report as for any run.

use crate::util::*;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a test learns about a detached run once its caller has returned:
/// the supervising pgrun (the pid file's lock holder) and the group.
struct Detached {
    pgrun: i32,
    pgid: i32,
}

/// Record the published run of `pidfile` for clean-up, and return it.
fn published(guard: &mut Guard, pidfile: &Path) -> Detached {
    let pgid: i32 = fs::read_to_string(pidfile).expect("pid file published").trim().parse().expect("a group id");
    guard.record(pgid);
    guard.record_group(pgid);
    let pgrun = lock_holder(pidfile).expect("the pid file is locked");
    guard.record(pgrun);
    Detached { pgrun, pgid }
}

/// `pgrun cancel PIDFILE`, which must stop the run.
fn cancel(pidfile: &Path) {
    let out = run(&mut pgrun(["cancel", pidfile.to_str().unwrap()]));
    assert_status(&out, 0, "cancel of the detached run");
}

/// The session id of `pid`, from `/proc/PID/stat`.
fn session_of(pid: i32) -> i32 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).expect("process exists");
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..].split_whitespace().collect();
    fields[3].parse().unwrap()
}

/// The names in a folder, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn returns_once_published_while_the_command_runs() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("run.pid");
    let dir = scratch.sh();
    let payload = format!("while [ ! -e {dir}/gate ]; do sleep 0.05; done; echo after > {dir}/after; exec sleep 300");
    let started = Instant::now();
    let tag = Tag::new("returns");
    let out = run(tag.on(&mut pgrun(["--detach", "-p", pidfile.to_str().unwrap(), "--", "sh", "-c", &payload])));
    let took = started.elapsed();
    assert_status(&out, 0, "detached start");
    let run = published(&mut guard, &pidfile);
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "the caller wrote: {out:?}");
    // Published and live the moment the caller returns.
    let status = run_status(&pidfile);
    assert_status(&status, 0, "status right after the detached start");
    assert!(String::from_utf8_lossy(&status.stdout).contains(&format!("pgid {}", run.pgid)));
    assert!(took < Duration::from_secs(10), "the detached start took {took:?}");
    assert!(!scratch.path("after").exists(), "the command cannot have gone on before the gate");
    // The run lives on after its caller returned; the lock is held by the
    // pgrun that lives on, which leads a session of its own.
    assert!(!is_dead(run.pgrun));
    assert_eq!(session_of(run.pgrun), run.pgrun, "the detached pgrun leads its own session");
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(wait_line(&scratch.path("after")), "after");
    let waiter = spawn_waiting(&mut guard, &[pidfile.to_str().unwrap()]);
    cancel(&pidfile);
    assert_eq!(guard.wait(waiter), 0, "wait for the cancelled detached run");
    wait_dead(run.pgrun);
    assert_eq!(listing(scratch.dir()), ["after", "gate"], "nothing of the run is left");
}

fn run_status(pidfile: &Path) -> std::process::Output {
    run(&mut pgrun(["status", pidfile.to_str().unwrap()]))
}

/// The caller's process exits only once the run is published: held at the
/// step before publication, it is still waiting.
#[test]
fn the_caller_waits_for_the_publication() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("run.pid");
    let pause = Pause::new(&scratch, "spawned");
    let tag = Tag::new("waits");
    let mut cmd = pgrun(["--detach", "-p", pidfile.to_str().unwrap(), "--", "sleep", "300"]);
    pause.arm(tag.on(&mut cmd)).stdout(Stdio::piped()).stderr(Stdio::piped());
    let caller = guard.spawn(&mut cmd);
    pause.wait_reached();
    assert!(guard.child(caller).try_wait().unwrap().is_none(), "the caller returned before the run was published");
    assert!(fs::read_to_string(&pidfile).unwrap_or_default().trim().is_empty(), "published too early");
    pause.release();
    assert_eq!(guard.wait(caller), 0);
    let run = published(&mut guard, &pidfile);
    assert!(!is_dead(run.pgid));
    cancel(&pidfile);
}

#[test]
fn capture_output_returns_at_once() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("run.pid");
    let script = format!(
        "import subprocess, sys, time\n\
         t = time.monotonic()\n\
         r = subprocess.run([{pgrun:?}, '--detach', '-p', {pid:?}, '--', 'sleep', '300'], capture_output=True, timeout=20)\n\
         print(r.returncode, len(r.stdout), len(r.stderr), time.monotonic() - t)\n",
        pgrun = pgrun_path(),
        pid = pidfile.to_str().unwrap()
    );
    let tag = Tag::new("python");
    let out = run(tag.on(Command::new(python3()).args(["-c", &script]).stdin(Stdio::null())));
    if pidfile.exists() {
        published(&mut guard, &pidfile);
    }
    assert_status(&out, 0, "python's subprocess.run (a timeout: the run held its pipes)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let fields: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(fields[..3], ["0", "0", "0"], "status, stdout and stderr bytes: {text}");
    let took: f64 = fields[3].parse().unwrap();
    assert!(took < 3.0, "subprocess.run took {took} s");
    cancel(&pidfile);
}

#[test]
fn the_run_survives_hangup_and_kill_of_the_callers_group() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("run.pid");
    let dir = scratch.sh();
    // The caller: a shell in a group of its own, which stays after pgrun
    // returned, as an interactive shell would.
    let caller_script = detaching_caller(&dir, &pidfile);
    let tag = Tag::new("group");
    let mut cmd = Command::new("sh");
    tag.on(cmd.args(["-c", &caller_script]).stdin(Stdio::null()).process_group(0));
    let caller = guard.spawn(&mut cmd);
    let caller_pid = guard.child(caller).id() as i32;
    guard.record_group(caller_pid);
    assert_eq!(wait_line(&scratch.path("rc")), "0");
    let run = published(&mut guard, &pidfile);
    // SAFETY: kill takes plain integers; the group this test created.
    assert_eq!(unsafe { libc::kill(-caller_pid, libc::SIGHUP) }, 0);
    assert_eq!(guard.wait(caller), 128 + libc::SIGHUP);
    // Whatever else of the caller's group is left, KILLed.
    // SAFETY: as above; ESRCH (nothing left) is fine.
    unsafe { libc::kill(-caller_pid, libc::SIGKILL) };
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(wait_line(&scratch.path("alive")), "alive");
    assert!(!is_dead(run.pgrun) && !is_dead(run.pgid), "the run did not survive its caller's group");
    assert_status(&run_status(&pidfile), 0, "status after the caller's group was hung up and killed");
    cancel(&pidfile);
}

/// The script of a caller that starts a detached run on `pidfile` (its
/// command waits for `DIR/gate`, then writes `DIR/alive`), writes pgrun's
/// status to `DIR/rc` and stays, as an interactive shell would.
fn detaching_caller(dir: &str, pidfile: &Path) -> String {
    let payload = format!("while [ ! -e {dir}/gate ]; do sleep 0.05; done; echo alive > {dir}/alive; exec sleep 300");
    format!(
        "{pgrun} --detach -p {pid} -- sh -c '{payload}'; echo $? > {dir}/rc; exec sleep 300",
        pgrun = pgrun_path(),
        pid = pidfile.to_str().unwrap()
    )
}

/// Each failure before the start: the caller's own status, its reason on
/// stderr, nothing on stdout, no process and no file left.
#[test]
fn failures_before_the_start_come_back_to_the_caller() {
    let scratch = Scratch::new();
    let not_executable = scratch.path("not-executable");
    fs::write(&not_executable, "#!/bin/sh\n").unwrap();
    let pid = scratch.path("run.pid");
    let pid = pid.to_str().unwrap();
    let missing_folder = scratch.path("missing/run.pid");
    let bad_report = scratch.path("missing/report.json");
    let cases: [(&str, Vec<&str>, i32, &str); 5] = [
        ("missing pid file folder", vec!["-p", missing_folder.to_str().unwrap(), "true"], 125, "pid file folder"),
        ("bad report path", vec!["-p", pid, "--report", bad_report.to_str().unwrap(), "true"], 125, "report"),
        ("command not found", vec!["-p", pid, "pgrun-no-such-command"], 127, "cannot run"),
        ("not executable", vec!["-p", pid, not_executable.to_str().unwrap()], 126, "cannot run"),
        ("cancel marker present", vec!["-p", pid, "sleep", "300"], 143, "cancelled before it started"),
    ];
    for (i, (what, args, want, says)) in cases.into_iter().enumerate() {
        let before = if want == 143 {
            fs::write(format!("{pid}.cancel"), "").unwrap();
            listing(scratch.dir()).into_iter().filter(|n| !n.ends_with(".cancel")).collect()
        } else {
            listing(scratch.dir())
        };
        let tag = Tag::new(&format!("failure-{i}"));
        let mut cmd = pgrun(std::iter::once("--detach").chain(args));
        tag.on(&mut cmd);
        let out = run(&mut cmd);
        assert_status(&out, want, what);
        assert!(out.stdout.is_empty(), "{what}: stdout {:?}", out.stdout);
        assert!(stderr_of(&out).contains(says), "{what}: stderr {}", stderr_of(&out));
        assert_eq!(tag.processes(), Vec::<i32>::new(), "{what}: processes left running");
        assert_eq!(listing(scratch.dir()), before, "{what}: files left behind");
    }
}

#[test]
fn detach_needs_a_pidfile_and_refuses_die_with_parent() {
    let scratch = Scratch::new();
    let pid = scratch.path("run.pid");
    for (what, args, names) in [
        ("without --pidfile", vec!["--detach", "--", "true"], "--pidfile"),
        (
            "with --die-with-parent",
            vec!["--detach", "--die-with-parent", "-p", pid.to_str().unwrap(), "--", "true"],
            "cannot be used with '--die-with-parent'",
        ),
    ] {
        let out = run(&mut pgrun(&args));
        assert_status(&out, 125, what);
        assert!(out.stdout.is_empty());
        let err = stderr_of(&out);
        assert!(err.starts_with("pgrun: ") && err.contains(names), "{what}: {err}");
        assert!(listing(scratch.dir()).is_empty(), "{what}: a file was created");
    }
}

#[test]
fn timeout_and_report_work_detached() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("run.pid");
    let report = scratch.path("report.json");
    let (pid, rep) = (pidfile.to_str().unwrap(), report.to_str().unwrap());
    let tag = Tag::new("timeout");
    let out = run(tag.on(&mut pgrun(["--detach", "-p", pid, "--timeout", "1", "--report", rep, "--", "sleep", "300"])));
    assert_status(&out, 0, "detached start");
    let run = published(&mut guard, &pidfile);
    let waited = run_wait(&["--report", rep, pid]);
    assert_status(&waited, 124, "wait --report on a detached run that timed out");
    let report = json(&report);
    assert_eq!(report["reason"], "timeout");
    assert_eq!(report["exit_code"], 124);
    wait_dead(run.pgrun);
    assert!(!pidfile.exists());
}

/// With --output-file the file is the detached command's only destination:
/// it gets both streams, complete and in the order they were written (each
/// line waits for the one before it to be in the file), while the caller
/// got nothing on its own stdout and stderr.
#[test]
fn a_detached_runs_output_goes_to_the_output_file() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("run.pid");
    let file = scratch.path("out.log");
    let report = scratch.path("report.json");
    let (pid, log, rep) = (pidfile.to_str().unwrap(), file.to_str().unwrap(), report.to_str().unwrap());
    // (The file takes its place only once the command has started: the
    // first looks may find none.)
    let seen =
        |n: usize| format!("until [ \"$(wc -l 2>/dev/null < {log})\" -ge {n} ] 2>/dev/null; do sleep 0.01; done");
    // The run waits for `go` at the end, so that its pid file can be read.
    let go = scratch.path("go");
    let payload = format!(
        "echo one; {}; echo two >&2; {}; echo three; {}; echo four >&2; until [ -e {} ]; do sleep 0.01; done",
        seen(1),
        seen(2),
        seen(3),
        go.display()
    );
    let tag = Tag::new("output-file");
    let out = run(tag.on(&mut pgrun([
        "--detach",
        "-p",
        pid,
        "--output-file",
        log,
        "--report",
        rep,
        "--",
        "sh",
        "-c",
        &payload,
    ])));
    assert_status(&out, 0, "detached start");
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "the caller got output: {out:?}");
    let run = published(&mut guard, &pidfile);
    // The waiter first: a run that ended before wait looked would be "no run".
    let waiter = spawn_waiting(&mut guard, &["--report", rep, pid]);
    fs::write(&go, "").unwrap();
    assert_eq!(guard.wait(waiter), 0, "wait --report");
    wait_dead(run.pgrun);
    assert_eq!(fs::read_to_string(&file).unwrap(), "one\ntwo\nthree\nfour\n");
    assert_eq!(json(&report)["output"]["file"], log);
}

fn run_wait(args: &[&str]) -> std::process::Output {
    run(&mut pgrun(std::iter::once("wait").chain(args.iter().copied())))
}

/// The command reads /dev/null, writes to /dev/null, and holds no fd above
/// 2; an fd 3 the caller held (not close-on-exec) is held by nobody once the
/// caller returned: its pipe reaches end of file.
#[test]
fn the_run_holds_none_of_the_callers_fds() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("run.pid");
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two ints.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let [read_end, write_end] = fds;
    let tag = Tag::new("fds");
    let mut cmd = pgrun(["--detach", "-p", pidfile.to_str().unwrap(), "--", "sleep", "300"]);
    tag.on(&mut cmd);
    // SAFETY: dup2 is async-signal-safe; the copy on fd 3 is inherited.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(write_end, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = run(&mut cmd);
    // SAFETY: our own copy of the write end, not used again.
    unsafe { libc::close(write_end) };
    assert_status(&out, 0, "detached start with an fd 3");
    let run = published(&mut guard, &pidfile);
    // The caller is gone: only pgrun, the guard and the command could hold
    // the pipe's write end.
    let mut poll = libc::pollfd { fd: read_end, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut poll, 1, DEADLINE.as_millis() as i32) };
    let mut byte = [0u8];
    // SAFETY: a readable fd (poll said so; never a read that would block)
    // and a one-byte buffer.
    let n = if ready == 1 { unsafe { libc::read(read_end, byte.as_mut_ptr().cast(), 1) } } else { -1 };
    // SAFETY: our read end, not used again.
    unsafe { libc::close(read_end) };
    assert!(ready == 1 && n == 0, "the caller's fd 3 is still held by the detached run");
    // The command may hold a file of its own for a moment as it starts (the
    // C library's locale files): its fds are looked at until only the
    // inherited ones are left, and an fd it inherited never goes away.
    let fds = || {
        let mut names = listing(Path::new(&format!("/proc/{}/fd", run.pgid)));
        names.sort_by_key(|n| n.parse::<i32>().unwrap());
        names
    };
    eventually("the command to hold fds 0, 1 and 2 only", || fds() == ["0", "1", "2"]);
    for fd in ["0", "1", "2"] {
        let target = fs::read_link(format!("/proc/{}/fd/{fd}", run.pgid)).unwrap();
        assert_eq!(target, Path::new("/dev/null"), "the command's fd {fd}");
    }
    cancel(&pidfile);
}

/// Whether `signal` is pending for process `pid` (`ShdPnd` or `SigPnd` in
/// `/proc/PID/status`).
fn pending(pid: i32, signal: i32) -> bool {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().filter(|l| l.starts_with("ShdPnd:") || l.starts_with("SigPnd:")).any(|l| {
        let mask = u64::from_str_radix(l.split_whitespace().nth(1).unwrap_or("0"), 16).unwrap_or(0);
        mask & (1 << (signal - 1)) != 0
    })
}

/// A TERM to the caller's process before the run is published is a cancel
/// before the start, as without --detach: 143 (an exit status, not a death
/// by signal), no run, no file.
#[test]
fn a_term_to_the_caller_before_publication_cancels_the_start() {
    use std::os::unix::process::ExitStatusExt;
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("run.pid");
    let pause = Pause::new(&scratch, "claimed");
    let tag = Tag::new("term");
    let mut cmd = pgrun(["--detach", "-p", pidfile.to_str().unwrap(), "--", "sleep", "300"]);
    pause.arm(tag.on(&mut cmd)).stdout(Stdio::piped()).stderr(Stdio::piped());
    let caller = guard.spawn(&mut cmd);
    let caller_pid = guard.child(caller).id() as i32;
    pause.wait_reached();
    // The supervising pgrun has forked its guard by now (before the claim).
    let named = |pid: i32| fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim_end().to_string();
    let supervisor: Vec<i32> = descendants(caller_pid).into_iter().filter(|&p| named(p) != "pgrun-guard").collect();
    assert_eq!(supervisor.len(), 1, "one supervising pgrun: {supervisor:?}");
    guard.record(supervisor[0]);
    send(caller_pid, libc::SIGTERM);
    eventually("the TERM to reach the supervising pgrun", || pending(supervisor[0], libc::SIGTERM));
    pause.release();
    let status = guard.child(caller).wait().unwrap();
    assert_eq!((status.code(), status.signal()), (Some(143), None), "the caller's status");
    assert_eq!(tag.processes(), Vec::<i32>::new(), "processes left running");
    assert!(!pidfile.exists(), "the pid file was left behind");
}

/// The controlling terminal of `pid` (`tty_nr` in `/proc/PID/stat`; 0: none).
fn tty_of(pid: i32) -> i64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).expect("process exists");
    stat[stat.rfind(')').unwrap() + 1..].split_whitespace().nth(4).unwrap().parse().unwrap()
}

/// The caller runs on a terminal (its session's controlling terminal); the
/// terminal hangs up (its master is closed) after pgrun returned: the
/// caller gets SIGHUP, the detached run, which has no terminal, does not.
#[test]
fn the_run_survives_a_hangup_of_the_callers_terminal() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("run.pid");
    let dir = scratch.sh();
    let caller_script = detaching_caller(&dir, &pidfile);
    // Close-on-exec: the caller must not hold the master, or closing ours
    // would hang nothing up.
    let pty = openpty_cloexec(None);
    let slave = pty.slave;
    let tag = Tag::new("hangup");
    let mut cmd = Command::new("sh");
    tag.on(cmd.args(["-c", &caller_script]));
    cmd.stdin(slave.try_clone().unwrap()).stdout(slave.try_clone().unwrap()).stderr(slave);
    with_controlling_terminal(&mut cmd);
    let caller = guard.spawn(&mut cmd);
    drop(cmd); // closes the test's copies of the slave
    assert_eq!(wait_line(&scratch.path("rc")), "0");
    let run = published(&mut guard, &pidfile);
    assert_eq!(tty_of(run.pgrun), 0, "the detached pgrun has a controlling terminal");
    assert_eq!(tty_of(run.pgid), 0, "the detached command has a controlling terminal");
    drop(pty.master); // the hang-up
    assert_eq!(guard.wait(caller), 128 + libc::SIGHUP, "the caller got the hang-up");
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(wait_line(&scratch.path("alive")), "alive");
    assert!(!is_dead(run.pgrun) && !is_dead(run.pgid), "the run did not survive the hang-up");
    cancel(&pidfile);
}

/// A guard forked while pgrun still spoke to the caller's stderr through a
/// copy of its own (`--detach`, before the publication) closes that copy:
/// its lines go to its own fd 2 from then on, never to the copy's number,
/// which a file the guard opens later (the pid file's starting name, read
/// and write) may take. strace shows every write of the guard.
#[test]
fn a_guard_forked_before_the_publication_never_writes_to_the_callers_closed_stderr() {
    let found = Command::new("strace").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(found.is_ok_and(|s| s.success()), "this test needs strace; install it");
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("run.pid");
    let trace = scratch.path("trace");
    let pause = Pause::new(&scratch, "guard-started");
    let tag = Tag::new("guard-stderr");
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-e", "trace=write", "-o"]).arg(&trace).arg("--").arg(pgrun_path());
    cmd.args(["--detach", "-v", "-p", pidfile.to_str().unwrap(), "--", "sleep", "300"]);
    pause.arm(tag.on(&mut cmd)).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    default_signals(&mut cmd);
    let strace = guard.spawn(&mut cmd);
    let strace_pid = guard.child(strace).id() as i32;
    pause.wait_reached();
    let named = |pid: i32| fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim_end().to_string();
    let under = descendants(strace_pid);
    let guards: Vec<i32> = under.iter().copied().filter(|&p| named(p) == "pgrun-guard").collect();
    assert_eq!(guards.len(), 1, "one guard among {under:?}");
    // The supervising pgrun: the one whose parent is the caller's pgrun.
    let caller = under.iter().copied().find(|&p| ppid(p) == Some(strace_pid)).expect("the caller's pgrun");
    let supervisor = under.iter().copied().find(|&p| ppid(p) == Some(caller) && named(p) != "pgrun-guard");
    let supervisor = supervisor.expect("the supervising pgrun");
    guard.record(supervisor);
    guard.record(guards[0]);
    send(supervisor, libc::SIGKILL);
    let status = guard.child(strace).wait().unwrap();
    assert!(status.code().is_some(), "strace ended: {status:?}");
    wait_dead(guards[0]);
    let trace = fs::read_to_string(&trace).unwrap();
    let guard_pid = format!("{} ", guards[0]);
    let guard_lines: Vec<&str> =
        trace.lines().filter(|l| l.starts_with(&guard_pid) && l.contains("write(") && l.contains("pgrun: ")).collect();
    assert!(!guard_lines.is_empty(), "the guard said nothing (-v): {trace}");
    let elsewhere: Vec<&&str> = guard_lines.iter().filter(|l| !l.contains("write(2, ")).collect();
    assert!(elsewhere.is_empty(), "the guard wrote its lines to an fd other than its stderr: {elsewhere:#?}");
    assert_eq!(tag.processes(), Vec::<i32>::new(), "processes left running");
}

//! `pgrun --detach-after DUR`: an ordinary attached run until DUR; a run
//! still going then is handed off (one stderr line with the exact byte N
//! of the output file the caller got up to, exit 122) and goes on
//! detached, holding none of the caller's fds, out of reach of the
//! caller's group and terminal, its timeout counted from the start.

use crate::util::*;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod at_the_hand_off;

/// The files of one run.
struct Files {
    pidfile: String,
    output: String,
    report: String,
}

impl Files {
    fn new(scratch: &Scratch) -> Files {
        let path = |name: &str| scratch.path(name).to_str().unwrap().to_string();
        Files { pidfile: path("run.pid"), output: path("out.log"), report: path("report.json") }
    }

    /// `pgrun --detach-after DUR -p P --output-file F --report R EXTRA... -- sh -c PAYLOAD`.
    fn command(&self, after: &str, extra: &[&str], payload: &str) -> Command {
        let mut args = vec!["--detach-after", after, "-p", &self.pidfile, "--output-file", &self.output];
        args.extend_from_slice(&["--report", &self.report]);
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", payload]);
        pgrun(args)
    }

    /// The run goes on, published: record its pgrun and group for clean-up.
    fn record(&self, guard: &mut Guard) -> (i32, i32) {
        let pidfile = Path::new(&self.pidfile);
        let pgid: i32 = fs::read_to_string(pidfile).expect("pid file published").trim().parse().expect("a group id");
        guard.record(pgid);
        guard.record_group(pgid);
        let pgrun = lock_holder(pidfile).expect("the pid file is locked");
        guard.record(pgrun);
        (pgrun, pgid)
    }

    fn cancel(&self) {
        assert_status(&run(&mut pgrun(["cancel", &self.pidfile])), 0, "cancel of the handed-off run");
    }
}

/// The session id of `pid`, from `/proc/PID/stat`.
fn session_of(pid: i32) -> i32 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).expect("process exists");
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..].split_whitespace().collect();
    fields[3].parse().unwrap()
}

/// N from the hand-off line, which must be stderr's last line, as the
/// contract words it.
fn handed_off_at(stderr: &str, files: &Files, after: &str) -> u64 {
    let last = stderr.lines().last().unwrap_or_default();
    let prefix =
        format!("pgrun: still running after {after}: pid file {}, output {} from byte ", files.pidfile, files.output);
    let n = last.strip_prefix(&prefix).unwrap_or_else(|| panic!("no hand-off line at the end of: {stderr:?}"));
    n.parse().unwrap_or_else(|_| panic!("N is not a number: {last}"))
}

/// Everything `reader` gives until its end, which must come within the
/// suite's deadline (a pipe the run still holds never ends).
fn to_the_end(mut reader: impl std::io::Read + Send + 'static, what: &str) -> Vec<u8> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let _ = tx.send(reader.read_to_end(&mut got).map(|_| got));
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(got) => got.unwrap_or_else(|e| panic!("{what}: {e}")),
        Err(_) => panic!("{what} did not reach its end within {DEADLINE:?}: something holds it"),
    }
}

/// A run that ends within DUR is an ordinary run: its own output, status
/// and report, nothing on stderr of pgrun's, nothing left.
#[test]
fn a_run_that_ends_within_dur_is_an_ordinary_run() {
    let scratch = Scratch::new();
    let files = Files::new(&scratch);
    let tag = Tag::new("ordinary");
    let out = run(tag.on(&mut files.command("30", &[], "printf out; printf err >&2; exit 3")));
    assert_status(&out, 3, "a run that ended within DUR");
    assert_eq!(out.stdout, b"out");
    assert_eq!(out.stderr, b"err");
    assert_eq!(fs::read(&files.output).unwrap(), b"outerr");
    assert_eq!(json(Path::new(&files.report))["exit_code"], 3);
    assert!(!Path::new(&files.pidfile).exists(), "the pid file was left");
    assert_eq!(tag.processes(), Vec::<i32>::new(), "processes left running");
}

/// The command's stdin is /dev/null, even while attached: a caller's pipe
/// held open would keep `cat` reading.
#[test]
fn the_commands_stdin_is_dev_null() {
    let scratch = Scratch::new();
    let files = Files::new(&scratch);
    let tag = Tag::new("stdin");
    let mut cmd = files.command("30", &[], "readlink /proc/self/fd/0; cat");
    // A pipe the test keeps open for writing: `cat` on it would never end.
    let (reader, _writer) = std::io::pipe().unwrap();
    let out = run(tag.on(&mut cmd).stdin(reader));
    assert_status(&out, 0, "a run whose cat read stdin");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "/dev/null\n");
}

/// Output through the hand-off: both streams written as fast as the
/// command can, so that bytes are on their way at DUR. What the caller
/// got on stdout and stderr is exactly the output file's first N bytes
/// (each stream's lines there, in order), and the file goes on from N
/// with the next lines: no gap, no repeat.
#[test]
fn the_hand_off_says_the_exact_byte_the_caller_got_up_to() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let files = Files::new(&scratch);
    let tag = Tag::new("exact");
    let payload = "i=0; while :; do echo \"out $i\"; echo \"err $i\" >&2; i=$((i+1)); done";
    let started = Instant::now();
    let out = run(tag.on(&mut files.command("1", &[], payload)));
    let took = started.elapsed();
    assert_status(&out, 122, "a run still going after DUR");
    files.record(&mut guard);
    let stderr = stderr_of(&out);
    let n = handed_off_at(&stderr, &files, "1s") as usize;
    assert!(took >= Duration::from_secs(1), "handed off after {took:?}");
    // The file goes on after N: read it once it holds more.
    eventually("the output file to grow past N", || fs::metadata(&files.output).unwrap().len() as usize > n + 100);
    files.cancel();
    let file = fs::read(&files.output).unwrap();
    let (before, after) = file.split_at(n);
    let lines = |bytes: &[u8], prefix: &str| -> String {
        String::from_utf8_lossy(bytes).split_inclusive('\n').filter(|l| l.starts_with(prefix)).collect()
    };
    let caller_stderr = &stderr[..stderr.len() - stderr.lines().last().unwrap().len() - 1];
    assert!(!out.stdout.is_empty(), "the caller got no output before the hand-off");
    assert_eq!(String::from_utf8_lossy(&out.stdout), lines(before, "out "), "stdout is not the file's up to N");
    assert_eq!(caller_stderr, lines(before, "err "), "stderr is not the file's up to N");
    assert_eq!(lines(before, "out ").len() + lines(before, "err ").len(), n, "other bytes before N");
    // From N on: whole lines, each stream going on with its next number.
    let next = |caller: &str, prefix: &str| -> u64 {
        caller.lines().last().map_or(0, |l| l[prefix.len()..].parse::<u64>().unwrap() + 1)
    };
    let first_after = |prefix: &str| -> u64 {
        let text = lines(after, prefix);
        text.lines().next().map(|l| l[prefix.len()..].parse().unwrap()).expect("the stream goes on after N")
    };
    assert_eq!(first_after("out "), next(&String::from_utf8_lossy(&out.stdout), "out "), "stdout after N");
    assert_eq!(first_after("err "), next(caller_stderr, "err "), "stderr after N");
    // `pgrun output --since N` goes on from there.
    let window = run(&mut pgrun(["output", "--since", &n.to_string(), "--max", "64", &files.output]));
    assert_status(&window, 0, "pgrun output --since N");
    assert_eq!(window.stdout, after[..window.stdout.len()]);
}

/// A capturing caller (`subprocess.run(..., capture_output=True)`) returns
/// right after DUR: nothing of the run holds its pipes, which reach their
/// end; the run goes on, in a session of its own.
#[test]
fn a_capturing_caller_returns_right_after_dur() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let files = Files::new(&scratch);
    let script = format!(
        "import subprocess, time\n\
         t = time.monotonic()\n\
         r = subprocess.run([{pgrun:?}, '--detach-after', '0.5', '-p', {pid:?}, '--output-file', {log:?}, \
         '--', 'sh', '-c', 'echo started; exec sleep 300'], capture_output=True, timeout=20)\n\
         print(r.returncode, repr(r.stdout), time.monotonic() - t)\n",
        pgrun = pgrun_path(),
        pid = files.pidfile,
        log = files.output,
    );
    let tag = Tag::new("capture");
    let out = run(tag.on(Command::new(python3()).args(["-c", &script]).stdin(Stdio::null())));
    if Path::new(&files.pidfile).exists() {
        files.record(&mut guard);
    }
    assert_status(&out, 0, "python's subprocess.run (a timeout: the run held its pipes)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let fields: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(fields[..2], ["122", "b'started\\n'"], "status and stdout: {text}");
    let took: f64 = fields[2].parse().unwrap();
    assert!(took < 5.0, "subprocess.run took {took} s");
    let (pgrun_pid, pgid) = files.record(&mut guard);
    assert!(!is_dead(pgrun_pid) && !is_dead(pgid), "the run did not go on");
    assert_eq!(session_of(pgrun_pid), pgrun_pid, "the supervising pgrun leads its own session");
    files.cancel();
}

/// `--timeout` is counted from the start, not from the hand-off: a 2.5 s
/// timeout after a hand-off at 2 s ends the run at 2.5 s, and the report
/// and `pgrun wait --report` say so.
#[test]
fn the_timeout_counts_from_the_start() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let files = Files::new(&scratch);
    let tag = Tag::new("timeout");
    let started = Instant::now();
    let out = run(tag.on(&mut files.command("2", &["--timeout", "2.5"], "exec sleep 300")));
    assert_status(&out, 122, "handed off");
    let (pgrun_pid, _) = files.record(&mut guard);
    let waited = run(&mut pgrun(["wait", "--report", &files.report, &files.pidfile]));
    let ended = started.elapsed();
    assert_status(&waited, 124, "wait --report on the handed-off run");
    assert_eq!(json(Path::new(&files.report))["reason"], "timeout");
    assert!(ended >= Duration::from_millis(2500), "ended after {ended:?}");
    // Restarted at the hand-off, it would end at 4.5 s.
    assert!(ended < Duration::from_millis(4000), "ended after {ended:?}: the timeout was restarted");
    wait_dead(pgrun_pid);
}

/// Until the hand-off a signal to the caller's pgrun acts on the run as
/// for any run: TERM cancels it (143), Ctrl-C's INT reaches the command
/// (130); the run is gone when the caller returns.
#[test]
fn a_signal_to_the_caller_before_the_hand_off_reaches_the_run() {
    for (signal, want) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        let scratch = Scratch::new();
        let mut guard = Guard::new();
        let files = Files::new(&scratch);
        let tag = Tag::new(&format!("signal-{signal}"));
        let started = scratch.path("started");
        let payload = format!("echo > {}; exec sleep 300", started.display());
        let mut cmd = files.command("60", &[], &payload);
        let caller = guard.spawn(tag.on(&mut cmd).stdout(Stdio::null()).stderr(Stdio::null()));
        let caller_pid = guard.child(caller).id() as i32;
        wait_line(&started);
        // The command starts before the run is published.
        let pidfile = Path::new(&files.pidfile);
        eventually("the run to be published", || fs::read_to_string(pidfile).is_ok_and(|s| s.ends_with('\n')));
        let (pgrun_pid, pgid) = files.record(&mut guard);
        send(caller_pid, signal);
        assert_eq!(guard.wait(caller), want, "signal {signal} to the caller");
        wait_dead(pgrun_pid);
        assert!(is_dead(pgid), "the command outlived its run");
        assert!(!Path::new(&files.pidfile).exists());
    }
}

/// After the hand-off a hang-up and a TERM to the caller's whole process
/// group (a terminal closed, a job killed) do not reach the run.
#[test]
fn after_the_hand_off_the_callers_group_and_hangup_do_not_reach_the_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let files = Files::new(&scratch);
    let dir = scratch.sh();
    let alive = scratch.path("alive");
    let payload = format!(
        "trap 'echo hup >> {dir}/signals' HUP; trap 'echo term >> {dir}/signals' TERM; \
         while [ ! -e {dir}/gate ]; do sleep 0.05; done; echo alive > {dir}/alive; exec sleep 300"
    );
    // The caller: a shell in a group of its own, which stays after pgrun
    // returned, as an interactive shell would.
    let caller_script = format!(
        "{pgrun} --detach-after 0.3 -p {pid} --output-file {log} -- sh -c \"{payload}\" 2>/dev/null; \
         echo $? > {dir}/rc; exec sleep 300",
        pgrun = pgrun_path(),
        pid = files.pidfile,
        log = files.output,
    );
    let tag = Tag::new("group");
    let mut cmd = Command::new("sh");
    tag.on(cmd.args(["-c", &caller_script]).stdin(Stdio::null()).process_group(0));
    let caller = guard.spawn(&mut cmd);
    let caller_pid = guard.child(caller).id() as i32;
    guard.record_group(caller_pid);
    assert_eq!(wait_line(&scratch.path("rc")), "122");
    let (pgrun_pid, pgid) = files.record(&mut guard);
    for signal in [libc::SIGHUP, libc::SIGTERM] {
        // SAFETY: kill takes plain integers; the group this test created.
        assert_eq!(unsafe { libc::kill(-caller_pid, signal) }, 0);
    }
    assert_eq!(guard.wait(caller), 128 + libc::SIGHUP);
    // SAFETY: as above; ESRCH (nothing left) is fine.
    unsafe { libc::kill(-caller_pid, libc::SIGKILL) };
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(wait_line(&alive), "alive");
    assert!(!is_dead(pgrun_pid) && !is_dead(pgid), "the run did not survive its caller's group");
    assert!(!scratch.path("signals").exists(), "the run got {:?}", fs::read_to_string(scratch.path("signals")));
    files.cancel();
}

/// Without --pidfile or --output-file, or with --detach or
/// --die-with-parent: a usage error (125), nothing run, no file made.
#[test]
fn detach_after_needs_its_files_and_refuses_detach_and_die_with_parent() {
    let scratch = Scratch::new();
    let marker = scratch.path("ran");
    let files = Files::new(&scratch);
    let (pid, log) = (files.pidfile.as_str(), files.output.as_str());
    let touch = format!("touch {}", marker.display());
    for (what, options, says) in [
        ("without --pidfile", vec!["--output-file", log], "--pidfile"),
        ("without --output-file", vec!["-p", pid], "--output-file"),
        ("with --detach", vec!["-p", pid, "--output-file", log, "--detach"], "--detach"),
        ("with --die-with-parent", vec!["-p", pid, "--output-file", log, "--die-with-parent"], "--die-with-parent"),
    ] {
        let mut args = vec!["--detach-after", "1"];
        args.extend(options);
        args.extend(["--", "sh", "-c", &touch]);
        let out = run(&mut pgrun(&args));
        assert_status(&out, 125, what);
        assert!(out.stdout.is_empty(), "{what}");
        let err = stderr_of(&out);
        assert!(err.starts_with("pgrun: ") && err.contains(says), "{what}: {err}");
        let names: Vec<_> = fs::read_dir(scratch.dir()).unwrap().collect();
        assert!(names.is_empty(), "{what}: files made: {names:?}");
    }
}

/// A caller in a terminal: until the hand-off the output reaches the
/// terminal; after it, the terminal hanging up (its master closed) does
/// not reach the run, and nothing of the run holds the terminal.
#[test]
fn after_the_hand_off_the_terminal_hanging_up_does_not_reach_the_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let files = Files::new(&scratch);
    let dir = scratch.sh();
    let payload = format!(
        "trap 'echo hup >> {dir}/signals' HUP; echo started; \
         while [ ! -e {dir}/gate ]; do sleep 0.05; done; echo alive > {dir}/alive; exec sleep 300"
    );
    let caller_script = format!(
        "{pgrun} --detach-after 0.3 -p {pid} --output-file {log} -- sh -c \"{payload}\"; \
         echo $? > {dir}/rc; exec sleep 300",
        pgrun = pgrun_path(),
        pid = files.pidfile,
        log = files.output,
    );
    let pty = openpty_cloexec(None);
    let tag = Tag::new("terminal");
    let mut cmd = Command::new("sh");
    let slave = || Stdio::from(pty.slave.try_clone().unwrap());
    tag.on(with_controlling_terminal(cmd.args(["-c", &caller_script]).stdin(slave()).stdout(slave()).stderr(slave())));
    let caller = guard.spawn(&mut cmd);
    drop(cmd);
    let caller_pid = guard.child(caller).id() as i32;
    guard.record_group(caller_pid);
    assert_eq!(wait_line(&scratch.path("rc")), "122");
    let (pgrun_pid, pgid) = files.record(&mut guard);
    // What reached the terminal: the command's line, then pgrun's.
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("from byte") {
        let n = nix::unistd::read(&pty.master, &mut buf).expect("read the terminal");
        assert!(n > 0, "the terminal ended: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&seen).starts_with("started\r\n"), "{}", String::from_utf8_lossy(&seen));
    let slave_path = fs::read_link(format!("/proc/{caller_pid}/fd/0")).unwrap();
    for pid in [pgrun_pid, pgid] {
        for fd in fs::read_dir(format!("/proc/{pid}/fd")).unwrap().flatten() {
            assert_ne!(fs::read_link(fd.path()).ok(), Some(slave_path.clone()), "{pid} holds the terminal");
        }
    }
    drop(pty);
    assert_eq!(guard.wait(caller), 128 + libc::SIGHUP, "the caller's shell got the hang-up");
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(wait_line(&scratch.path("alive")), "alive");
    assert!(!is_dead(pgrun_pid) && !is_dead(pgid), "the run did not survive the hang-up");
    assert!(!scratch.path("signals").exists(), "the run got {:?}", fs::read_to_string(scratch.path("signals")));
    files.cancel();
}

/// After the hand-off the guard watches the run as for any run: the
/// supervising pgrun SIGKILLed, the guard stops the run and removes its
/// pid file.
#[test]
fn after_the_hand_off_the_guard_stops_the_run_if_pgrun_is_killed() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let files = Files::new(&scratch);
    let tag = Tag::new("guard");
    let out = run(tag.on(&mut files.command("0.3", &[], "exec sleep 300")));
    assert_status(&out, 122, "handed off");
    let (pgrun_pid, pgid) = files.record(&mut guard);
    send(pgrun_pid, libc::SIGKILL);
    wait_dead(pgid);
    eventually("the guard to remove the pid file", || !Path::new(&files.pidfile).exists());
}

/// Until the hand-off the run is attached: the caller's pgrun SIGKILLed
/// (a harness's own timeout) stops the run, as the guard stops an ordinary
/// run whose pgrun is killed, rather than leaving it unwatched in the
/// background.
#[test]
fn the_callers_pgrun_killed_before_the_hand_off_stops_the_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let files = Files::new(&scratch);
    let tag = Tag::new("killed");
    let mut cmd = files.command("60", &[], "exec sleep 300");
    let caller = guard.spawn(tag.on(&mut cmd).stdout(Stdio::null()).stderr(Stdio::null()));
    let caller_pid = guard.child(caller).id() as i32;
    let pidfile = Path::new(&files.pidfile);
    eventually("the run to be published", || fs::read_to_string(pidfile).is_ok_and(|s| s.ends_with('\n')));
    let (pgrun_pid, pgid) = files.record(&mut guard);
    send(caller_pid, libc::SIGKILL);
    assert_eq!(guard.wait(caller), 128 + libc::SIGKILL);
    wait_dead(pgid);
    wait_dead(pgrun_pid);
    assert!(!pidfile.exists(), "the pid file was left");
    assert_eq!(json(Path::new(&files.report))["reason"], "cancelled");
}

/// A run that never starts gives the caller what an ordinary run would:
/// 127 for a missing command, 125 for a pid file another run holds, each
/// with its line, and no output file made.
#[test]
fn a_run_that_never_starts_comes_back_as_an_ordinary_one() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let files = Files::new(&scratch);
    let tag = Tag::new("never");
    let mut missing = pgrun(["--detach-after", "30", "-p", &files.pidfile, "--output-file", &files.output]);
    let out = run(tag.on(missing.args(["--", "pgrun-no-such-command"])));
    assert_status(&out, 127, "a missing command");
    assert!(stderr_of(&out).contains("cannot run 'pgrun-no-such-command'"), "{}", stderr_of(&out));
    assert!(!Path::new(&files.output).exists(), "an output file was made");
    // A pid file held by a live run.
    let (holder, _) = start_published(&mut guard, Path::new(&files.pidfile), &[], "exec sleep 300");
    let other = scratch.path("other.log");
    let mut held = pgrun(["--detach-after", "30", "-p", &files.pidfile, "--output-file", other.to_str().unwrap()]);
    let out = run(tag.on(held.args(["--", "true"])));
    assert_status(&out, 125, "a pid file held by another run");
    assert!(stderr_of(&out).contains("is held by a live run"), "{}", stderr_of(&out));
    assert!(!other.exists(), "an output file was made");
    files.cancel();
    guard.wait(holder);
}

/// A TERM to the caller before DUR is a cancel under way: the caller
/// waits it out as any run's pgrun does (the command's own status once
/// its trap lets it end), rather than saying at DUR that the run it is
/// stopping is still running and exiting 122.
#[test]
fn a_cancel_under_way_at_dur_is_waited_out_not_handed_off() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let files = Files::new(&scratch);
    let tag = Tag::new("cancel-at-dur");
    let dir = scratch.sh();
    let payload = format!(
        "trap 'echo > {dir}/termed; while [ ! -e {dir}/gate ]; do sleep 0.05; done; exit 7' TERM; \
         echo > {dir}/started; while :; do sleep 0.05; done"
    );
    let log = scratch.path("caller.err");
    let mut cmd = files.command("3", &["-v"], &payload);
    let caller = guard.spawn(tag.on(&mut cmd).stdout(Stdio::null()).stderr(fs::File::create(&log).unwrap()));
    let caller_pid = guard.child(caller).id() as i32;
    wait_line(&scratch.path("started"));
    let pidfile = Path::new(&files.pidfile);
    eventually("the run to be published", || fs::read_to_string(pidfile).is_ok_and(|s| s.ends_with('\n')));
    let (pgrun_pid, _) = files.record(&mut guard);
    send(caller_pid, libc::SIGTERM);
    wait_line(&scratch.path("termed"));
    // DUR passes with the cancel under way: the caller says which way it
    // went (its `-v` line, or the hand-off's).
    let said = |text: &str| fs::read_to_string(&log).unwrap_or_default().contains(text);
    eventually("the caller to decide at DUR", || said("no hand-off after 3s") || said("still running after"));
    assert!(!said("still running after"), "a run being cancelled was handed off as still running");
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(guard.wait(caller), 7, "the caller's status is the cancelled command's own");
    wait_dead(pgrun_pid);
    assert!(!pidfile.exists(), "the pid file was left");
}

/// A signal that comes with the hand-off is not passed on: a TERM to the
/// caller once it has asked at DUR (held there by the test until the
/// relay has let go and answered) does not stop the run it then says is
/// still running.
#[test]
fn a_signal_at_the_hand_off_does_not_reach_the_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let files = Files::new(&scratch);
    let tag = Tag::new("signal-at-hand-off");
    let gate = scratch.path("gate");
    let mut cmd = files.command("0.3", &[], "exec sleep 300");
    cmd.env("PGRUN_TEST_PAUSE", format!("let-go-asked={}", gate.display()));
    let caller = guard.spawn(tag.on(&mut cmd).stdout(Stdio::null()).stderr(Stdio::null()));
    let caller_pid = guard.child(caller).id() as i32;
    let reached = format!("{}.reached", gate.display());
    eventually("the caller to ask the relay to let go", || Path::new(&reached).exists());
    let (pgrun_pid, pgid) = files.record(&mut guard);
    send(caller_pid, libc::SIGTERM);
    // The relay has let go once the supervising pgrun's stdout is /dev/null.
    let stdout = format!("/proc/{pgrun_pid}/fd/1");
    eventually("the relay to let go", || fs::read_link(&stdout).is_ok_and(|p| p == Path::new("/dev/null")));
    fs::write(&gate, "").unwrap();
    assert_eq!(guard.wait(caller), 122, "handed off");
    // A TERM passed on would have ended the run within moments (wait: 0);
    // it lives on.
    let waited = run(&mut pgrun(["wait", "--timeout", "1", &files.pidfile]));
    assert_status(&waited, 124, "wait on the handed-off run");
    assert!(!is_dead(pgid), "the run was stopped by the caller's signal");
    files.cancel();
}

/// A TERM that comes once the caller has asked at DUR, while the run is
/// still being prepared (DUR 0, the supervising pgrun held by the test
/// before the command starts), is passed on as for any attached run: the
/// run is cancelled before it starts (143, no run), not handed off.
#[test]
fn a_cancel_after_dur_before_the_answer_is_waited_out() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let files = Files::new(&scratch);
    let tag = Tag::new("cancel-before-answer");
    let gate = scratch.path("gate");
    let mut cmd = files.command("0", &[], "exec sleep 300");
    cmd.env("PGRUN_TEST_PAUSE", format!("guard-started={}", gate.display()));
    let caller = guard.spawn(tag.on(&mut cmd).stdout(Stdio::null()).stderr(Stdio::null()));
    let caller_pid = guard.child(caller).id() as i32;
    let reached = format!("{}.reached", gate.display());
    eventually("the supervising pgrun to be held before the start", || Path::new(&reached).exists());
    let supervisor = descendants(caller_pid).into_iter().find(|&p| ppid(p) == Some(caller_pid)).unwrap();
    guard.record(supervisor);
    send(caller_pid, libc::SIGTERM);
    // Passed on: pending (blocked) at the supervising pgrun.
    let pending = || {
        let status = fs::read_to_string(format!("/proc/{supervisor}/status")).unwrap_or_default();
        let mask = status.lines().find_map(|l| l.strip_prefix("ShdPnd:")).unwrap_or("0").trim().to_string();
        u64::from_str_radix(&mask, 16).unwrap_or(0) & (1 << (libc::SIGTERM - 1)) != 0
    };
    eventually("the TERM to reach the supervising pgrun", pending);
    fs::write(&gate, "").unwrap();
    assert_eq!(guard.wait(caller), 143, "the caller's status is the cancelled run's");
    wait_dead(supervisor);
    assert!(!Path::new(&files.pidfile).exists(), "the pid file was left");
    eventually("nothing of the run left", || tag.processes().is_empty());
}

/// The supervising pgrun killed before the hand-off: the caller says so
/// (125), without claiming the run was never published, and the guard
/// stops the run.
#[test]
fn the_supervising_pgrun_killed_before_the_hand_off_is_said_as_it_is() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let files = Files::new(&scratch);
    let tag = Tag::new("supervisor-killed");
    let log = scratch.path("caller.err");
    let mut cmd = files.command("60", &[], "exec sleep 300");
    let caller = guard.spawn(tag.on(&mut cmd).stdout(Stdio::null()).stderr(fs::File::create(&log).unwrap()));
    let pidfile = Path::new(&files.pidfile);
    eventually("the run to be published", || fs::read_to_string(pidfile).is_ok_and(|s| s.ends_with('\n')));
    let (pgrun_pid, pgid) = files.record(&mut guard);
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(caller), 125);
    let said = fs::read_to_string(&log).unwrap();
    assert!(said.contains("was killed by signal KILL"), "{said}");
    assert!(!said.contains("before the run was published"), "{said}");
    wait_dead(pgid);
}

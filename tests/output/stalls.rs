//! Destinations that stop taking output: a stalled reader or a full
//! terminal never deafens pgrun to its timeout or SIGTERM, a full
//! non-blocking stdout loses nothing, and once the run is gone only pgrun
//! waits for the reader; and a command that writes now and then wakes
//! pgrun only for its output.

use super::{expected_text, lines, require_strace, with_marker};
use crate::util::*;
use std::fs;
use std::io::Read;
use std::process::{Command, Stdio};

/// How many bytes the pipe behind `fd` holds, and how many it can hold.
fn pipe_fill(fd: &impl std::os::fd::AsRawFd) -> (usize, usize) {
    let mut held: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int; F_GETPIPE_SZ reads nothing.
    let (r, capacity) = unsafe {
        (libc::ioctl(fd.as_raw_fd(), libc::FIONREAD as _, &mut held), libc::fcntl(fd.as_raw_fd(), libc::F_GETPIPE_SZ))
    };
    assert!(r == 0 && capacity > 0, "FIONREAD/F_GETPIPE_SZ: {}", std::io::Error::last_os_error());
    (held as usize, capacity as usize)
}

/// Wait until the pipe that `probe` (a copy of the write end pgrun was
/// given) writes to takes no more: pgrun has filled it.
fn wait_unwritable(probe: std::io::PipeWriter) {
    use std::os::fd::AsRawFd;
    eventually("pgrun's stdout pipe to fill", || {
        let mut p = libc::pollfd { fd: probe.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
        // SAFETY: one valid pollfd, no waiting.
        unsafe { libc::poll(&mut p, 1, 0) == 0 }
    });
}

#[test]
fn a_stalled_reader_neither_deafens_the_timeout_nor_sigterm() {
    // The command fills pgrun's stdout (a pipe the test holds and does not
    // read) exactly, then writes one byte more: pgrun has that byte to
    // write and nowhere to put it. It must still hear its timeout, and
    // SIGTERM, and stop the command; then it writes the byte once the
    // reader reads, and exits as the run ended.
    for how in ["sigterm", "timeout"] {
        // The timeout must come once the byte is written (`wrote`): if it
        // came first (a busy host), the run is made again with a longer one
        // (only "timeout" can loop).
        for (attempt, timeout) in SHORT_TIMEOUTS.iter().enumerate() {
            let scratch = Scratch::new();
            let dir = scratch.sh();
            let mut guard = Guard::new();
            let (mut reader, writer) = widened_pipe();
            let (_, capacity) = pipe_fill(&reader);
            let payload = format!(
                "echo $$ > {dir}/pid; head -c {capacity} /dev/zero; while [ ! -e {dir}/go ]; do sleep 0.01; done; \
                 printf x; echo > {dir}/wrote; exec sleep 300"
            );
            let mut a = vec!["--max-output", "4M"];
            if how == "timeout" {
                a.extend(["-t", timeout]);
            }
            a.extend(["--", "sh", "-c", &payload]);
            let index = guard.spawn(pgrun(&a).stdout(writer).stderr(Stdio::null()));
            let pid = wait_pid(&scratch.path("pid"), &mut guard);
            // (An early timeout can end the command before it fills the pipe.)
            eventually("pgrun's stdout pipe to fill", || {
                let (held, capacity) = pipe_fill(&reader);
                held == capacity || is_dead(pid)
            });
            fs::write(scratch.path("go"), "").unwrap();
            if how == "sigterm" {
                wait_line(&scratch.path("wrote"));
                send(guard.child(index).id() as i32, libc::SIGTERM);
            }
            eventually(&format!("{how}: the command stopped while pgrun's reader stalls"), || is_dead(pid));
            if !scratch.path("wrote").exists() {
                assert!(attempt + 1 < SHORT_TIMEOUTS.len(), "{how}: the command never wrote its byte");
                reader.read_to_end(&mut Vec::new()).unwrap();
                guard.wait(index);
                continue;
            }
            assert!(guard.child(index).try_wait().unwrap().is_none(), "{how}: pgrun exited with output still owed");
            let mut all = Vec::new();
            reader.read_to_end(&mut all).unwrap();
            assert_eq!(guard.wait(index), if how == "timeout" { 124 } else { 143 }, "{how}");
            assert!(all[..capacity].iter().all(|&b| b == 0), "{how}");
            assert_eq!(&all[capacity..], b"x", "{how}");
            break;
        }
    }
}

#[test]
fn a_non_blocking_stdout_that_is_full_loses_nothing() {
    // The caller (as Node or asyncio harnesses do) hands pgrun a pipe with
    // O_NONBLOCK set, and reads only after the command is done: pgrun's
    // writes meet EAGAIN, which means "wait", not "the reader left".
    let scratch = Scratch::new();
    let dir = scratch.sh();
    // More than pgrun's stdout pipe holds (1 MiB, widened by pgrun), whole
    // and cut (1200K).
    let data = lines(125_000); // 1.5 MB
    let file = scratch.path("data");
    fs::write(&file, &data).unwrap();
    for size in ["4M", "1200K"] {
        let mut guard = Guard::new();
        let report = scratch.path("report.json");
        let (mut reader, writer) = widened_pipe();
        let probe = writer.try_clone().unwrap();
        {
            use std::os::fd::AsRawFd;
            // SAFETY: plain fcntl on the write end this test owns.
            let set = unsafe {
                let flags = libc::fcntl(writer.as_raw_fd(), libc::F_GETFL);
                libc::fcntl(writer.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK)
            };
            assert_eq!(set, 0, "O_NONBLOCK: {}", std::io::Error::last_os_error());
        }
        let payload = format!("echo $$ > {dir}/pid; cat {}", file.display());
        let index = guard.spawn(
            pgrun(["--max-output", size, "--report", report.to_str().unwrap(), "--", "sh", "-c", &payload])
                .stdout(writer)
                .stderr(Stdio::piped()),
        );
        let pid = wait_pid(&scratch.path("pid"), &mut guard);
        wait_unwritable(probe);
        // On Linux the whole stream fits in the inner pipe and pgrun's
        // ring, so the command ends while the test reads nothing; the
        // portable path's 64 KiB inner pipe holds it up until the test reads.
        if !cfg!(feature = "posix-fallback") {
            eventually("the command to end", || is_dead(pid));
        }
        // Read slowly: pgrun meets a full pipe again and again.
        let mut all = Vec::new();
        let mut piece = vec![0u8; 16 * 1024];
        loop {
            let n = reader.read(&mut piece).unwrap();
            if n == 0 {
                break;
            }
            all.extend_from_slice(&piece[..n]);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut stderr = String::new();
        guard.child(index).stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        assert_eq!(guard.wait(index), 0, "{size}: {stderr}");
        let want = expected_text(&data, if size == "4M" { 4 << 20 } else { 1200 << 10 });
        assert!(all == want, "{size}: {} bytes out, {} expected; stderr: {stderr}", all.len(), want.len());
        assert_eq!(json(&report)["output"]["stdout"]["bytes"], data.len(), "{size}");
    }
}

#[test]
fn once_the_run_is_gone_a_stalled_reader_holds_only_pgrun() {
    // The reader of pgrun's stdout stops reading; the command has written
    // more than that pipe holds and ended. The run is over: the pid file is
    // withdrawn, status says so, and the guard is released, while pgrun
    // still holds output for the reader (and gives it all once it reads).
    let scratch = Scratch::new();
    let dir = scratch.sh();
    let mut guard = Guard::new();
    let pidfile = scratch.path("run.pid");
    let p = pidfile.to_str().unwrap();
    let (mut reader, writer) = widened_pipe();
    let probe = writer.try_clone().unwrap();
    // The head fits in pgrun's stdout pipe, head and tail do not: the
    // command ends, and pgrun holds the rest for the reader.
    let (_, capacity) = pipe_fill(&reader);
    let (size, produced) = (capacity * 3 / 2, capacity * 8);
    let payload =
        format!("echo $$ > {dir}/pid; while [ ! -e {dir}/go ]; do sleep 0.01; done; head -c {produced} /dev/zero");
    let size_arg = size.to_string();
    let index = guard.spawn(pgrun(["-p", p, "--max-output", &size_arg, "--", "sh", "-c", &payload]).stdout(writer));
    let pgrun_pid = guard.child(index).id() as i32;
    let pid = wait_pid(&scratch.path("pid"), &mut guard);
    let guard_pid = guard_of(pgrun_pid);
    fs::write(scratch.path("go"), "").unwrap();
    eventually("the command to end", || is_dead(pid));
    eventually("the pid file to be withdrawn while pgrun holds output", || !pidfile.exists());
    let status = run(&mut pgrun(["status", p]));
    assert_status(&status, 3, "status once the run is gone");
    // cancel finds no run to stop (nor a group number to trust).
    let cancel = run(&mut pgrun(["cancel", "--wait-start", "0", p]));
    assert_status(&cancel, 1, "cancel once the run is gone");
    assert!(!scratch.path("run.pid.cancel").exists(), "cancel left its marker");
    eventually("the guard to be released", || is_dead(guard_pid));
    wait_unwritable(probe);
    assert!(guard.child(index).try_wait().unwrap().is_none(), "pgrun did not wait for its reader");
    let mut all = Vec::new();
    reader.read_to_end(&mut all).unwrap();
    assert_eq!(guard.wait(index), 0);
    let half = vec![0u8; size / 2];
    assert!(all == with_marker(&half, produced - 2 * half.len(), &half), "{} bytes", all.len());
}

#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path writes a terminal as a pipe: PIPE_BUF after POLLOUT, which a full terminal can hold"
)]
fn a_terminal_that_stops_taking_output_does_not_deafen_the_timeout() {
    // pgrun's stdout is a terminal nobody reads (the test holds the pty's
    // master and reads nothing). Lines expand on the way (ONLCR), so the
    // terminal can have less room left than one PIPE_BUF write, and still
    // poll writable: a write must then take what fits, not wait for the rest.
    // The timeout must come once the command has written its megabyte
    // (`done`), far more than the terminal holds: if it came first (a busy
    // host), the run is made again with a longer one.
    for (attempt, timeout) in SHORT_TIMEOUTS.iter().enumerate() {
        let scratch = Scratch::new();
        let dir = scratch.sh();
        let mut guard = Guard::new();
        let pty = openpty_cloexec(None);
        let payload = format!("echo $$ > {dir}/pid; yes | head -c 1000000; echo > {dir}/done; exec sleep 300");
        let index = guard.spawn(
            pgrun(["--max-output", "4M", "-t", timeout, "--", "sh", "-c", &payload])
                .stdout(pty.slave)
                .stderr(Stdio::null())
                .stdin(Stdio::null()),
        );
        let pid = wait_pid(&scratch.path("pid"), &mut guard);
        eventually("the command stopped while the terminal takes nothing", || is_dead(pid));
        let mut master = fs::File::from(pty.master);
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            // Ends with EIO once every slave fd is closed.
            let mut buf = [0u8; 65536];
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                all.extend_from_slice(&buf[..n]);
            }
            all
        });
        assert_eq!(guard.wait(index), 124);
        let all = reader.join().unwrap();
        if !scratch.path("done").exists() {
            assert!(attempt + 1 < SHORT_TIMEOUTS.len(), "the command never wrote its megabyte");
            continue;
        }
        assert_eq!(all.len(), 1_500_000, "every line, with its newline made CR LF");
        return;
    }
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path neither splices nor rests")]
fn a_command_that_writes_now_and_then_wakes_pgrun_only_for_its_output() {
    // A line every 10 ms (a build log, a test runner): pgrun wakes for each
    // line and for nothing else. A rest after each line (it gathers nothing
    // from a writer this slow) would wake pgrun a second time per line.
    // Only a busy stream rests at all: the command first writes 1.5 MiB at
    // once, in the head of a cut that splices them all.
    require_strace();
    let scratch = Scratch::new();
    let trace = scratch.path("trace");
    let lines = 40;
    let burst = 3 << 19;
    let payload = format!(
        "head -c {burst} /dev/zero; i=0; while [ $i -lt {lines} ]; do echo tick $i; sleep 0.01; i=$((i+1)); done"
    );
    // pgrun's own process only (no -f): the guard and the command are not traced.
    let mut cmd = Command::new("strace");
    cmd.args(["-qq", "-e", "trace=poll,ppoll,splice", "-o", trace.to_str().unwrap(), pgrun_path()]);
    cmd.args(["--max-output", "8M", "--", "sh", "-c", &payload]).stdin(Stdio::null());
    let out = run(&mut cmd);
    assert_status(&out, 0, "a command that writes now and then");
    let mut want = vec![0u8; burst];
    want.extend((0..lines).map(|i| format!("tick {i}\n")).collect::<String>().bytes());
    assert!(out.stdout == want, "{} bytes out, {} expected", out.stdout.len(), want.len());
    let trace = fs::read_to_string(&trace).unwrap();
    // The lines' part of the trace: from the first splice of a line (the
    // burst's are 4 KiB or more).
    let splice_of_a_line = |l: &str| {
        l.starts_with("splice(")
            && l.rsplit("= ").next().and_then(|n| n.trim().parse::<usize>().ok()).is_some_and(|n| n < 16)
    };
    let lines_part: Vec<&str> = trace.lines().skip_while(|l| !splice_of_a_line(l)).collect();
    assert!(!lines_part.is_empty(), "no line was spliced:\n{trace}");
    // A wait with a limit that ran out: a wake-up nothing asked for (a
    // zero limit only asks whether an fd is ready, it does not wait).
    let timed_out: Vec<&str> = lines_part
        .iter()
        .copied()
        .filter(|l| l.ends_with("= 0 (Timeout)") && !l.contains("{tv_sec=0, tv_nsec=0}") && !l.contains("], 0)"))
        .collect();
    assert!(
        timed_out.len() < lines / 4,
        "{} timed-out waits for {lines} lines:\n{}",
        timed_out.len(),
        timed_out.join("\n")
    );
}

//! `--output-file PATH`: a complete copy of stdout and stderr, in the order
//! pgrun read them, next to the streams' own destinations (whole, or
//! bounded by `--max-output`); nothing read lost from it whatever ends the
//! run; the report path's checks before the start; mode 0644; the report's
//! `output.file` and `bytes`; a failed write to it said once, the run going on.

use crate::util::*;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::process::{Command, Stdio};

/// A payload whose order is deterministic: it alternates stdout and stderr
/// lines, and writes each only once the file holds everything before it
/// (so pgrun has read it). Then 1 MiB to stdout and, once that is in the
/// file, 1 MiB to stderr. Exits 3 if the file falls behind for a minute, 4
/// if it ever holds something else.
const ORDERED: &str = r#"import os, sys, time
path = sys.argv[1]
expect = b''
def settle():
    deadline = time.time() + 60
    while True:
        try:
            got = open(path, 'rb').read()
        except FileNotFoundError:
            got = b''
        if got == expect:
            return
        if not expect.startswith(got):
            sys.exit(4)
        if time.time() > deadline:
            sys.exit(3)
        time.sleep(0.002)
def put(fd, data):
    global expect
    out = sys.stdout.buffer if fd == 1 else sys.stderr.buffer
    out.write(data)
    out.flush()
    expect += data
    settle()
for i in range(40):
    put(1 + i % 2, ('%s %d\n' % ('out' if i % 2 == 0 else 'err', i)).encode())
put(1, bytes(range(256)) * 4096)
put(2, bytes(reversed(range(256))) * 4096)
"#;

/// What [`ORDERED`] writes: (the file's bytes, stdout's, stderr's).
fn ordered_streams() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let (mut all, mut out, mut err) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..40 {
        let line = format!("{} {i}\n", if i % 2 == 0 { "out" } else { "err" }).into_bytes();
        all.extend_from_slice(&line);
        if i % 2 == 0 { out.extend_from_slice(&line) } else { err.extend_from_slice(&line) }
    }
    let big_out: Vec<u8> = (0..=255u8).collect::<Vec<_>>().repeat(4096);
    let big_err: Vec<u8> = (0..=255u8).rev().collect::<Vec<_>>().repeat(4096);
    all.extend_from_slice(&big_out);
    all.extend_from_slice(&big_err);
    out.extend_from_slice(&big_out);
    err.extend_from_slice(&big_err);
    (all, out, err)
}

fn ordered_args<'a>(file: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["--output-file", file];
    a.extend_from_slice(extra);
    a.extend(["--", python3(), "-c", ORDERED, file]);
    a
}

#[test]
fn the_file_gets_both_streams_in_read_order_and_the_streams_stay_whole() {
    let scratch = Scratch::new();
    let file = scratch.path("out.log");
    let report = scratch.path("report.json");
    let f = file.to_str().unwrap();
    let out = run(pgrun(ordered_args(f, &["--report", report.to_str().unwrap()])).stdin(Stdio::null()));
    assert_status(&out, 0, "ordered payload");
    let (all, stdout, stderr) = ordered_streams();
    assert!(out.stdout == stdout, "stdout is not byte-identical ({} bytes, want {})", out.stdout.len(), stdout.len());
    assert!(out.stderr == stderr, "stderr is not byte-identical: {}", String::from_utf8_lossy(&out.stderr[..200]));
    assert!(fs::read(&file).unwrap() == all, "the file is not both streams in read order");
    let r = json(&report);
    assert_eq!(r["output"]["file"], f, "{r}");
    assert_eq!(r["output"]["stdout"]["bytes"], stdout.len() as u64, "{r}");
    assert_eq!(r["output"]["stderr"]["bytes"], stderr.len() as u64, "{r}");
    assert_eq!(r["output"]["stdout"]["omitted"], 0, "{r}");
    assert!(r["output"].get("file_error").is_none(), "{r}");
}

#[test]
fn the_file_gets_both_streams_in_read_order_whatever_stdout_is() {
    // stderr a pipe (tee'd on Linux), stdout a regular file or /dev/null
    // (read and written: tee needs a pipe): the file still gets both in
    // read order, and stdout its bytes. (stdout a pipe: the test above.)
    let scratch = Scratch::new();
    let file = scratch.path("out.log");
    let f = file.to_str().unwrap();
    let regular = scratch.path("stdout");
    let (all, stdout, stderr) = ordered_streams();
    for dest in [regular.to_str().unwrap(), "/dev/null"] {
        let out = run(Command::new("sh")
            .args(["-c", "out=$1; shift; exec \"$@\" > \"$out\"", "sh", dest, pgrun_path()])
            .args(ordered_args(f, &[]))
            .stdin(Stdio::null()));
        assert_status(&out, 0, dest);
        assert!(out.stderr == stderr, "{dest}: stderr is not byte-identical");
        assert!(fs::read(&file).unwrap() == all, "{dest}: the file is not both streams in read order");
    }
    assert!(fs::read(&regular).unwrap() == stdout, "stdout, a regular file, is not byte-identical");
}

#[test]
fn with_max_output_the_file_is_complete_and_the_streams_are_bounded() {
    let scratch = Scratch::new();
    let file = scratch.path("out.log");
    let report = scratch.path("report.json");
    let f = file.to_str().unwrap();
    let out =
        run(pgrun(ordered_args(f, &["--max-output", "1K", "--report", report.to_str().unwrap()])).stdin(Stdio::null()));
    assert_status(&out, 0, "ordered payload");
    let (all, stdout, stderr) = ordered_streams();
    assert!(fs::read(&file).unwrap() == all, "the file is not both streams in read order");
    for (got, whole) in [(&out.stdout, &stdout), (&out.stderr, &stderr)] {
        assert!(got.len() < 1100, "a stream is not bounded: {} bytes", got.len());
        assert!(got.starts_with(&whole[..512]) && got.ends_with(&whole[whole.len() - 512..]));
        let omitted = format!("[pgrun: {} bytes omitted]\n", whole.len() - 1024);
        assert!(String::from_utf8_lossy(got).contains(&omitted), "{}", String::from_utf8_lossy(got));
    }
    let r = json(&report);
    assert_eq!(r["output"]["file"], f, "{r}");
    assert_eq!(r["output"]["stdout"]["bytes"], stdout.len() as u64, "{r}");
    assert_eq!(r["output"]["stderr"]["omitted"], stderr.len() as u64 - 1024, "{r}");
}

/// Writes numbered lines to stdout (odd) and stderr (even) until stopped,
/// logging each number after writing it.
fn endless_writer(dir: &str) -> String {
    format!(
        "echo $$ > {dir}/pid; i=0; while :; do i=$((i+1)); echo \"line $i\"; echo $i >> {dir}/log; \
         i=$((i+1)); echo \"line $i\" >&2; echo $i >> {dir}/log; done"
    )
}

#[test]
fn timeout_cancel_and_sigterm_lose_nothing_from_the_file() {
    for how in ["timeout", "cancel", "sigterm"] {
        // The timeout must come after 2000 lines, mid-stream: retried with a
        // longer one if it came before (only "timeout" can loop).
        for (attempt, timeout) in SHORT_TIMEOUTS.iter().enumerate() {
            let scratch = Scratch::new();
            let dir = scratch.sh();
            let mut guard = Guard::new();
            let file = scratch.path("out.log");
            let report = scratch.path("report.json");
            let pidfile = scratch.path("run.pid");
            let mut a = vec!["--output-file", file.to_str().unwrap(), "--report", report.to_str().unwrap()];
            if how == "timeout" {
                a.extend(["-t", timeout]);
            }
            a.extend(["-p", pidfile.to_str().unwrap(), "--", "sh", "-c"]);
            let payload = endless_writer(&dir);
            a.push(&payload);
            let index = guard.spawn(pgrun(&a).stdout(Stdio::piped()).stderr(Stdio::piped()));
            let mut readers = Vec::new();
            let stdout: Box<dyn Read + Send> = Box::new(guard.child(index).stdout.take().unwrap());
            let stderr: Box<dyn Read + Send> = Box::new(guard.child(index).stderr.take().unwrap());
            for mut stream in [stdout, stderr] {
                readers.push(std::thread::spawn(move || {
                    let mut all = Vec::new();
                    stream.read_to_end(&mut all).unwrap();
                    all
                }));
            }
            wait_pid(&scratch.path("pid"), &mut guard);
            stop_mid_stream(how, &mut guard, index, scratch.dir(), &pidfile);
            let err = readers.pop().unwrap().join().unwrap();
            let out = readers.pop().unwrap().join().unwrap();
            let logged = last_logged(scratch.dir()).unwrap_or(0);
            if logged <= 2000 {
                assert!(attempt + 1 < SHORT_TIMEOUTS.len(), "{how}: not 2000 lines in {timeout} s");
                continue;
            }
            // The file interleaves the streams as pgrun read them (two pipes:
            // no order between them), each stream's lines complete and in
            // order: lines 1..=n in all, n the last logged or the next.
            let text = String::from_utf8(fs::read(&file).unwrap()).unwrap();
            let n = text.lines().count() as u64;
            assert!(n == logged || n == logged + 1, "{how}: the file has {n} lines, the log says {logged}");
            let of = |odd: u64| (1..=n).filter(|i| i % 2 == odd).map(|i| format!("line {i}\n")).collect::<String>();
            let in_file = |odd: u64| {
                text.lines()
                    .filter(|l| l[5..].parse::<u64>().unwrap() % 2 == odd)
                    .map(|l| format!("{l}\n"))
                    .collect::<String>()
            };
            assert!(in_file(1) == of(1) && in_file(0) == of(0), "{how}: the file lacks lines or has them out of order");
            assert!(out == of(1).into_bytes(), "{how}: stdout is not the odd lines");
            assert!(err == of(0).into_bytes(), "{how}: stderr is not the even lines");
            let r = json(&report);
            assert_eq!(
                r["output"]["stdout"]["bytes"].as_u64().unwrap() + r["output"]["stderr"]["bytes"].as_u64().unwrap(),
                text.len() as u64,
                "{r}"
            );
            break;
        }
    }
}

#[test]
fn the_file_is_mode_0644_whatever_the_umask() {
    let scratch = Scratch::new();
    let file = scratch.path("out.log");
    let script = format!("umask 077; exec {} --output-file {} -- echo hi", pgrun_path(), file.display());
    let out = run(Command::new("sh").args(["-c", &script]).stdin(Stdio::null()));
    assert_status(&out, 0, "umask 077");
    assert_eq!(out.stdout, b"hi\n");
    assert_eq!(fs::read(&file).unwrap(), b"hi\n");
    assert_eq!(fs::metadata(&file).unwrap().permissions().mode() & 0o7777, 0o644);
    // An existing file is truncated.
    fs::write(&file, "a much longer old content\n").unwrap();
    let out = run(Command::new("sh").args(["-c", &script]).stdin(Stdio::null()));
    assert_status(&out, 0, "again");
    assert_eq!(fs::read(&file).unwrap(), b"hi\n");
}

/// A failure found before the start: 125, and `-v` never said the command started.
fn assert_never_started(out: &std::process::Output, what: &str) {
    assert_status(out, 125, what);
    let said = stderr_of(out);
    assert!(!said.contains("started '"), "{what}: the command was started before pgrun failed: {said}");
    assert!(said.starts_with("pgrun: ") && said.contains("output file"), "{what}: {said}");
}

#[test]
fn bad_paths_are_refused_before_the_command_runs() {
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    let w = witness.to_str().unwrap();
    let target = scratch.path("target");
    fs::write(&target, "keep\n").unwrap();
    let link = scratch.path("link");
    symlink(&target, &link).unwrap();
    let missing = scratch.path("no/such/folder/out.log");
    let long = scratch.path(&"a".repeat(300));
    let folder = scratch.dir().to_str().unwrap().to_string();
    for (what, path) in [
        ("a missing folder", missing.to_str().unwrap()),
        ("a symlink", link.to_str().unwrap()),
        ("a folder", folder.as_str()),
        ("a name too long", long.to_str().unwrap()),
    ] {
        let out = run(pgrun(["-v", "--output-file", path, "--", "touch", w]).stdin(Stdio::null()));
        assert_never_started(&out, what);
    }
    assert_eq!(fs::read(&target).unwrap(), b"keep\n", "the symlink's target was written");

    if require(Capability::MountNamespaces) {
        for (what, mount) in [
            ("a read-only file system", "mount -t tmpfs -o ro tmpfs {f}"),
            (
                "a full file system",
                "mount -t tmpfs -o size=16k tmpfs {f} && (dd if=/dev/zero of={f}/fill bs=4k 2>/dev/null || true)",
            ),
        ] {
            let fs_dir = scratch.path("fs");
            let _ = fs::create_dir(&fs_dir);
            let script = format!(
                "{} && exec {pg} -v --output-file {f}/out.log -- touch {w}",
                mount.replace("{f}", fs_dir.to_str().unwrap()),
                f = fs_dir.display(),
                pg = pgrun_path()
            );
            let out = run(Command::new("unshare").args(["--mount", "--", "sh", "-c", &script]).stdin(Stdio::null()));
            assert_never_started(&out, what);
        }
    }
    assert!(!witness.exists(), "a command ran although pgrun failed");
}

fn require_strace() {
    let ok = Command::new("strace").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(ok.is_ok_and(|s| s.success()), "this test needs strace (6.1 or later) to inject a syscall failure");
}

/// The command of [`failed_file_write`]: "first" reaches the file before
/// "second" is written. (The file takes its place only once the command
/// has started: the first looks may find none.)
fn first_then_the_rest(f: &str) -> String {
    format!(
        "echo first; while [ \"$(cat {f} 2>/dev/null)\" != first ]; do sleep 0.01; done; echo second; echo third >&2; \
         echo fourth"
    )
}

/// pgrun's second `syscall` on the output file fails with ENOSPC (strace
/// `-P`); pgrun's stdout is a pipe, or (`stdout_file`) that regular file.
/// Returns pgrun's stdout.
fn failed_file_write(syscall: &str, stdout_file: Option<&std::path::Path>) -> Vec<u8> {
    require_strace();
    let scratch = Scratch::new();
    let file = scratch.path("out.log");
    let f = file.to_str().unwrap();
    let report = scratch.path("report.json");
    let inject = format!("inject={syscall}:error=ENOSPC:when=2");
    let mut cmd = match stdout_file {
        Some(path) => {
            let mut sh = Command::new("sh");
            sh.args(["-c", "out=$1; shift; exec \"$@\" > \"$out\"", "sh", path.to_str().unwrap(), "strace"]);
            sh
        }
        None => Command::new("strace"),
    };
    let out = run(cmd
        .args(["-qq", "-o", "/dev/null", "-P", f, "-e", &format!("trace={syscall}"), "-e", &inject])
        .args([pgrun_path(), "--output-file", f, "--report", report.to_str().unwrap(), "--", "sh", "-c"])
        .arg(first_then_the_rest(f))
        .stdin(Stdio::null()));
    let stderr = stderr_of(&out);
    assert_status(&out, 0, "the run goes on");
    let said: Vec<&str> = stderr.lines().filter(|l| l.starts_with("pgrun: ")).collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].contains(f) && said[0].contains("No space left on device"), "{stderr}");
    assert_eq!(stderr.lines().filter(|l| !l.starts_with("pgrun: ")).collect::<Vec<_>>(), ["third"], "{stderr}");
    assert_eq!(fs::read(&file).unwrap(), b"first\n");
    let r = json(&report);
    let error = r["output"]["file_error"].as_str().unwrap_or_else(|| panic!("no file_error in the report: {r}"));
    assert!(error.contains("No space left on device"), "{r}");
    assert_eq!(r["output"]["stdout"]["bytes"], 20, "{r}");
    assert!(r["output"]["stdout"].get("error").is_none(), "{r}");
    match stdout_file {
        Some(path) => fs::read(path).unwrap(),
        None => out.stdout,
    }
}

#[test]
fn a_failed_write_to_the_file_is_said_once_and_the_run_goes_on() {
    // stdout a regular file: each read is written to the output file.
    let scratch = Scratch::new();
    let stdout = scratch.path("stdout");
    assert_eq!(failed_file_write("write", Some(&stdout)), b"first\nsecond\nfourth\n");
}

#[test]
#[cfg_attr(not(target_os = "linux"), ignore = "splice(2) is Linux's")]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path reads and writes (the test above)")]
fn a_failed_splice_into_the_file_is_said_once_and_the_run_goes_on() {
    // stdout a pipe: the bytes are tee'd on to it and spliced into the file.
    assert_eq!(failed_file_write("splice", None), b"first\nsecond\nfourth\n");
}

#[test]
fn a_stalled_stdout_holds_up_neither_the_file_nor_stderr_nor_sigterm() {
    // pgrun's stdout is a pipe the test holds and does not read: once it is
    // full, pgrun stops reading the command's stdout (the command waits, as
    // on a direct pipe), but stderr still flows, into the file too, and
    // SIGTERM is still heard. When the reader reads, it gets every byte
    // pgrun read, as the file did; the caller's pipe keeps its flags.
    let scratch = Scratch::new();
    let dir = scratch.sh();
    let file = scratch.path("out.log");
    let errors = scratch.path("stderr");
    let report = scratch.path("report.json");
    let mut guard = Guard::new();
    let (mut reader, writer) = std::io::pipe().unwrap();
    let probe = writer.try_clone().unwrap();
    let payload = format!(
        "echo $$ > {dir}/pid; head -c 64M /dev/zero & i=0; while [ $i -lt 3000 ]; do i=$((i+1)); echo \"err $i\" >&2; \
         done; exec sleep 300"
    );
    let a = ["--output-file", file.to_str().unwrap(), "--report", report.to_str().unwrap(), "--", "sh", "-c", &payload];
    let index = guard.spawn(pgrun(a).stdout(writer).stderr(fs::File::create(&errors).unwrap()));
    let pid = wait_pid(&scratch.path("pid"), &mut guard);
    let want_err: String = (1..=3000).map(|i| format!("err {i}\n")).collect();
    eventually("all of stderr in the file while stdout stalls", || {
        let got = fs::read(&file).unwrap_or_default();
        got.iter().filter(|&&b| b != 0).count() == want_err.len()
    });
    {
        use std::os::fd::AsRawFd;
        let mut p = libc::pollfd { fd: probe.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
        // SAFETY: one valid pollfd, no waiting.
        assert_eq!(unsafe { libc::poll(&mut p, 1, 0) }, 0, "pgrun's stdout pipe is not full: the test is void");
        // SAFETY: F_GETFL reads the flags of an fd we own.
        let flags = unsafe { libc::fcntl(probe.as_raw_fd(), libc::F_GETFL) };
        assert!(flags >= 0 && flags & libc::O_NONBLOCK == 0, "the caller's pipe was made non-blocking");
    }
    drop(probe);
    send(guard.child(index).id() as i32, libc::SIGTERM);
    eventually("the command to stop while pgrun's reader stalls", || is_dead(pid));
    assert!(guard.child(index).try_wait().unwrap().is_none(), "pgrun exited with output still owed");
    let mut stdout = Vec::new();
    reader.read_to_end(&mut stdout).unwrap();
    assert_eq!(guard.wait(index), 143);
    let in_file = fs::read(&file).unwrap();
    let zeros = in_file.iter().filter(|&&b| b == 0).count();
    assert!(stdout.len() == zeros && stdout.iter().all(|&b| b == 0), "stdout is not what the file has of it");
    let text: Vec<u8> = in_file.iter().copied().filter(|&b| b != 0).collect();
    assert!(text == want_err.as_bytes(), "the file's stderr lines are not complete and in order");
    assert!(fs::read(&errors).unwrap() == want_err.as_bytes(), "stderr is not byte-identical");
    let r = json(&report);
    assert_eq!(r["output"]["stdout"]["bytes"], zeros as u64, "{r}");
}

// Found by the second attack round: when the reader of pgrun's stdout left
// (EPIPE on a write), the stream was closed without reading what the inner
// pipe still held: bytes the command had written (its writes succeeded) were
// missing from the output file and from the report's count.
#[test]
fn a_reader_that_leaves_loses_nothing_the_command_wrote_from_the_file() {
    let scratch = Scratch::new();
    let dir = scratch.sh();
    let file = scratch.path("out.log");
    let report = scratch.path("report.json");
    let mut guard = Guard::new();
    let (reader, writer) = std::io::pipe().unwrap();
    // Writes what fits in the pipes (pgrun's stdout pipe, pgrun's buffer
    // and the inner pipe: 1 MiB on Linux, the default 64 KiB on the
    // portable path), then waits for `go` and exits without writing more:
    // the reader leaves while the bytes wait. (The portable path finds the
    // reader gone by POLLERR, which drained the pipe before as now: only
    // the Linux path, EPIPE from a tee or splice, could lose the bytes.)
    let total = if cfg!(feature = "posix-fallback") { 120_000 } else { 900_000 };
    let payload = format!(
        "import os, time\n\
         n = 0\n\
         while n < {total}:\n    \
             n += os.write(1, b'x' * min(10000, {total} - n))\n\
         open('{dir}/count.tmp', 'w').write(str(n) + '\\n'); os.rename('{dir}/count.tmp', '{dir}/count')\n\
         while not os.path.exists('{dir}/go'):\n    \
             time.sleep(0.01)\n"
    );
    let a = [
        "--output-file",
        file.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--",
        python3(),
        "-c",
        &payload,
    ];
    let index = guard.spawn(pgrun(a).stdout(writer));
    let wrote: u64 = wait_line(&scratch.path("count")).parse().unwrap();
    drop(reader);
    fs::write(scratch.path("go"), b"").unwrap();
    assert_eq!(guard.wait(index), 0);
    let in_file = fs::read(&file).unwrap().len() as u64;
    assert_eq!(in_file, wrote, "the output file lacks bytes the command wrote");
    let r = json(&report);
    assert_eq!(r["output"]["stdout"]["bytes"], wrote, "{r}");
}

#[test]
fn the_file_cannot_be_the_pid_file_the_marker_or_the_report() {
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    let pidfile = scratch.path("job.pid");
    let marker = format!("{}/./job.pid.cancel", scratch.sh());
    let report = scratch.path("r.json");
    let p = pidfile.to_str().unwrap();
    for (same, what) in
        [(p, "the pid file"), (marker.as_str(), "the cancel marker"), (report.to_str().unwrap(), "the report")]
    {
        let out = run(pgrun(["-p", p, "--report", report.to_str().unwrap(), "--output-file", same, "--", "touch"])
            .arg(&witness)
            .stdin(Stdio::null()));
        assert_status(&out, 125, what);
        assert!(stderr_of(&out).contains(&format!("names {what}")), "{}", stderr_of(&out));
    }
    assert!(!witness.exists());
}

#[test]
fn a_run_refused_for_a_live_pid_file_leaves_the_live_runs_file_alone() {
    let scratch = Scratch::new();
    let dir = scratch.sh();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let file = scratch.path("out.log");
    let (p, f) = (pidfile.to_str().unwrap(), file.to_str().unwrap());
    let payload = format!("echo $$ > {dir}/pid; echo hello; exec sleep 300");
    let index = guard.spawn(pgrun(["-p", p, "--output-file", f, "--", "sh", "-c", &payload]).stdout(Stdio::null()));
    wait_pid(&scratch.path("pid"), &mut guard);
    eventually("hello in the file", || fs::read(&file).unwrap_or_default() == b"hello\n");
    let out = run(pgrun(["-p", p, "--output-file", f, "--", "true"]).stdin(Stdio::null()));
    assert_status(&out, 125, "a second run on a live pid file");
    assert_eq!(fs::read(&file).unwrap(), b"hello\n", "the refused run truncated the live run's output file");
    assert_status(&run(&mut pgrun(["cancel", p])), 0, "cancel");
    assert_eq!(guard.wait(index), 143);
}

/// The names in the test's folder other than `keep` (what pgrun left:
/// the output file, its temporary file).
fn left_besides(scratch: &Scratch, keep: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(scratch.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !keep.contains(&name.as_str()))
        .collect();
    names.sort();
    names
}

#[test]
fn a_run_that_never_starts_leaves_an_existing_file_as_it_was_and_creates_none() {
    // 127 (no such command), 126 (not executable), 125 (pgrun panics with
    // everything prepared, right before the spawn), 143 (a cancel marker
    // found before the start); each once with an output file already there
    // (its content kept) and once without (none made), and no temporary
    // file left beside it.
    let scratch = Scratch::new();
    let file = scratch.path("out.log");
    let f = file.to_str().unwrap();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let plain = scratch.path("plain");
    fs::write(&plain, "echo no\n").unwrap();
    fs::set_permissions(&plain, fs::Permissions::from_mode(0o644)).unwrap();
    let cases: [(&str, i32, Vec<&str>, Option<&str>); 4] = [
        ("not found", 127, vec!["--output-file", f, "--", "pgrun-test-no-such-command"], None),
        ("not executable", 126, vec!["--output-file", f, "--", plain.to_str().unwrap()], None),
        ("a panic before the spawn", 125, vec!["--output-file", f, "--", "echo", "ran"], Some("panic-before-spawn")),
        ("cancelled before the start", 143, vec!["-p", p, "--output-file", f, "--", "echo", "ran"], None),
    ];
    let mut failed = Vec::new();
    for (what, code, args, hook) in &cases {
        for existing in [true, false] {
            // Every case runs: the message says which of them failed.
            let case = std::panic::AssertUnwindSafe(|| {
                if existing {
                    fs::write(&file, "the last run's output\n").unwrap();
                }
                if *code == 143 {
                    fs::write(scratch.path("job.pid.cancel"), "").unwrap();
                }
                let mut cmd = pgrun(args);
                cmd.stdin(Stdio::null());
                if let Some(hook) = hook {
                    cmd.env("PGRUN_TEST_HOOK", hook);
                }
                let out = run(&mut cmd);
                assert_status(&out, *code, what);
                assert!(!String::from_utf8_lossy(&out.stdout).contains("ran"), "{what}: the command ran");
                if existing {
                    assert_eq!(fs::read(&file).unwrap(), b"the last run's output\n", "{what}: the file was changed");
                    fs::remove_file(&file).unwrap();
                } else {
                    assert!(!file.exists(), "{what}: an output file was created");
                }
                eventually(&format!("{what}: nothing of the output file left"), || {
                    left_besides(&scratch, &["plain"]).is_empty()
                });
            });
            if let Err(e) = std::panic::catch_unwind(case) {
                let _ = fs::remove_file(&file);
                let _ = fs::remove_file(scratch.path("job.pid.cancel"));
                failed
                    .push(format!("existing {existing}: {}", e.downcast_ref::<String>().cloned().unwrap_or_default()));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn a_pgrun_killed_before_the_start_leaves_the_file_as_it_was() {
    // pgrun stopped with everything prepared (the guard forked, the
    // command not yet), then SIGKILLed: the guard removes the temporary
    // file, the output file stays as it was, or absent.
    for existing in [true, false] {
        let scratch = Scratch::new();
        let file = scratch.path("out.log");
        let pause = scratch.path("pause");
        let ran = scratch.path("ran");
        if existing {
            fs::write(&file, "the last run's output\n").unwrap();
        }
        let mut guard = Guard::new();
        let payload = format!("touch {}", ran.display());
        let mut cmd = pgrun(["--output-file", file.to_str().unwrap(), "--", "sh", "-c", &payload]);
        cmd.env("PGRUN_TEST_PAUSE", format!("guard-started={}", pause.display())).stdin(Stdio::null());
        let index = guard.spawn(&mut cmd);
        let reached = scratch.path("pause.reached");
        eventually("pgrun paused before the spawn", || reached.exists());
        let temps = left_besides(&scratch, &["out.log", "pause.reached"]);
        assert!(temps.len() == 1 && temps[0].starts_with(".out.log.pgrun-"), "not one temporary file: {temps:?}");
        assert_eq!(file.exists(), existing, "the output file was touched before the start");
        send(guard.child(index).id() as i32, libc::SIGKILL);
        assert_eq!(guard.wait(index), 128 + libc::SIGKILL);
        eventually("the guard to remove the temporary file", || {
            left_besides(&scratch, &["out.log", "pause.reached"]).is_empty()
        });
        if existing {
            assert_eq!(fs::read(&file).unwrap(), b"the last run's output\n");
        } else {
            assert!(!file.exists(), "an output file was created");
        }
        assert!(!ran.exists(), "the command ran");
    }
}

//! `--max-output SIZE`: byte-identical short streams, head + marker + tail
//! for long ones, cuts on character boundaries, bounded memory, nothing read
//! ever lost, and a caller never held up by a process outside the run.

use crate::util::*;
use std::fs;
use std::io::Read;
use std::process::{Command, Stdio};

/// What the contract says a stream becomes, for valid UTF-8 input: the head
/// is the longest whole-character prefix of SIZE/2 bytes, the tail starts at
/// the first character boundary of the last SIZE/2 bytes.
fn expected_text(data: &str, size: usize) -> Vec<u8> {
    if data.len() <= size {
        return data.as_bytes().to_vec();
    }
    let half = size / 2;
    let head = (0..=half).rev().find(|&i| data.is_char_boundary(i)).unwrap();
    let tail = (data.len() - half..=data.len()).find(|&i| data.is_char_boundary(i)).unwrap();
    with_marker(&data.as_bytes()[..head], tail - head, &data.as_bytes()[tail..])
}

fn with_marker(head: &[u8], omitted: usize, tail: &[u8]) -> Vec<u8> {
    let mut out = head.to_vec();
    if !head.is_empty() && !head.ends_with(b"\n") {
        out.push(b'\n');
    }
    out.extend_from_slice(format!("[pgrun: {omitted} bytes omitted]\n").as_bytes());
    out.extend_from_slice(tail);
    out
}

/// A payload that writes FILE to stdout one byte per write(2) (dd's block
/// of one byte: a read and a write each; a tenth of python3's start-up).
fn byte_by_byte(file: &std::path::Path) -> Vec<String> {
    vec!["dd".into(), format!("if={}", file.display()), "bs=1".into(), "status=none".into()]
}

fn pgrun_output(args: &[String]) -> (Vec<u8>, Vec<u8>) {
    let out = run(&mut pgrun(args));
    assert_status(&out, 0, &format!("{args:?}"));
    (out.stdout, out.stderr)
}

fn args(size: &str, report: Option<&std::path::Path>, command: &[String]) -> Vec<String> {
    let mut a = vec!["--max-output".to_string(), size.to_string()];
    if let Some(r) = report {
        a.extend(["--report".to_string(), r.to_str().unwrap().to_string()]);
    }
    a.push("--".into());
    a.extend_from_slice(command);
    a
}

fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i:06}\n")).collect()
}

#[test]
fn exactly_size_is_identical_and_longer_streams_keep_head_marker_and_tail() {
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let size = 1200; // 100 lines of 12 bytes
    for (n, what) in [(100, "exactly SIZE"), (0, "SIZE+1"), (1000, "10xSIZE")] {
        let mut data = lines(n);
        if n == 0 {
            data = lines(100) + "x";
        }
        let file = scratch.path("data");
        fs::write(&file, &data).unwrap();
        let cat = vec!["cat".to_string(), file.to_str().unwrap().to_string()];
        let (stdout, stderr) = pgrun_output(&args(&size.to_string(), Some(&report), &cat));
        assert!(stderr.is_empty(), "{what}: stderr {}", String::from_utf8_lossy(&stderr));
        let want = expected_text(&data, size);
        assert_eq!(String::from_utf8_lossy(&stdout), String::from_utf8_lossy(&want), "{what}");
        let r = json(&report);
        assert_eq!(r["output"]["stdout"]["bytes"], data.len(), "{what}");
        let omitted = data.len().saturating_sub(stdout.len()) as u64;
        let omitted = if data.len() > size { (data.len() - 2 * (size / 2)) as u64 } else { omitted };
        assert_eq!(r["output"]["stdout"]["omitted"], omitted, "{what}");
        assert_eq!(r["output"]["stderr"]["bytes"], 0);
        if data.len() > size {
            let text = String::from_utf8(stdout).unwrap();
            let last_line = &data[data[..data.len() - 1].rfind('\n').map_or(0, |i| i + 1)..];
            assert!(text.ends_with(last_line), "{what}: last line cut");
            assert!(text.contains(&format!("\n[pgrun: {omitted} bytes omitted]\n")));
        }
    }
    // Without the flag the report says nothing about output.
    let out = run(&mut pgrun(["--report", report.to_str().unwrap(), "--", "true"]));
    assert_status(&out, 0, "no flag");
    assert!(json(&report)["output"].is_null());
}

#[test]
fn a_long_stream_passes_in_bounded_memory() {
    // 64 MiB: 32 times the bound below (a gigabyte proved no more and cost
    // 1.5 s of CPU); pgrun's own buffers (one 256 KiB read, the ring) are
    // far smaller, and kept everything would be far larger.
    const STREAM: u64 = 64 << 20;
    const SIZE: u64 = 1 << 20;
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let payload = format!("yes 'the quick brown fox jumps over the lazy dog' | head -c {STREAM}");
    // The same binary relaying nothing: what pgrun itself takes (a debug
    // build maps several MiB of code), so that the bound is on what the
    // stream adds.
    let baseline = peak_memory_at_exit(&scratch, &mut guard, &["--", "true"], |_| {});
    let mut out = Vec::new();
    let peak =
        peak_memory_at_exit(&scratch, &mut guard, &["--max-output", "1M", "--", "sh", "-c", &payload], |stdout| {
            out = stdout
        });
    assert!(
        peak < baseline + SIZE + (1 << 20),
        "peak RSS {peak} bytes, {} over pgrun's own {baseline}: more than SIZE + 1 MiB",
        peak - baseline
    );
    assert!(peak < SIZE + 8 * (1 << 20), "peak RSS {peak} bytes");
    let text = String::from_utf8(out).unwrap();
    let line = "the quick brown fox jumps over the lazy dog\n";
    // 64 MiB is not a whole number of lines: the stream ends mid-line.
    let (head, tail) = text.split_once("[pgrun: ").unwrap();
    assert_eq!(head.len(), (SIZE / 2) as usize + 1, "head plus the added newline");
    assert!(line.repeat(20000).starts_with(&head[..head.len() - 1]));
    let (count, tail) = tail.split_once(" bytes omitted]\n").unwrap();
    assert_eq!(count.parse::<u64>().unwrap(), STREAM - SIZE);
    assert_eq!(tail.len(), (SIZE / 2) as usize);
    let cut = STREAM as usize % line.len();
    assert!(tail.ends_with(&line[..cut]), "last (partial) line intact");
}

#[test]
fn multibyte_characters_across_either_cut_are_never_split() {
    let scratch = Scratch::new();
    let size = 40; // head and tail 20 bytes
    for ch in ['é', '€', '🦀'] {
        let w = ch.len_utf8();
        for at in 0..w {
            // The character starts `at` bytes before the head's end, and
            // another `at` bytes before the tail's nominal start.
            let head = format!("{}{ch}", "a".repeat(20 - at));
            let middle = "m".repeat(30);
            let tail = format!("{ch}{}\n", "z".repeat(19 + at - w));
            let data = format!("{head}{middle}{tail}");
            assert_eq!(data.len() - 20 - at, head.len() + middle.len(), "the tail's character is placed");
            let file = scratch.path("data");
            fs::write(&file, &data).unwrap();
            let (stdout, _) = pgrun_output(&args(&size.to_string(), None, &byte_by_byte(&file)));
            let want = expected_text(&data, size);
            assert_eq!(String::from_utf8_lossy(&stdout), String::from_utf8_lossy(&want), "{ch} at {at}");
            assert!(std::str::from_utf8(&stdout).is_ok(), "{ch} at {at}: invalid UTF-8 out");
        }
    }
}

#[test]
fn bytes_that_start_no_character_pass_as_they_are_at_both_cuts() {
    let scratch = Scratch::new();
    let size = 40;
    let never: Vec<Vec<u8>> = vec![
        vec![0x01],
        vec![0x85],
        vec![0xC0],
        vec![0xC1],
        vec![0xF5],
        vec![0xFF],
        vec![0xE0, 0x80],
        vec![0xF0, 0x80],
        vec![0xED, 0xA0],
        vec![0xF4, 0x90],
    ];
    for bad in never {
        // At the end of the head: written as is, the head is 20 bytes.
        let mut data = vec![b'a'; 20 - bad.len()];
        data.extend_from_slice(&bad);
        data.extend(std::iter::repeat_n(b'm', 30));
        // At the start of the tail (a continuation byte there is skipped,
        // by the contract's tail rule; the others start the tail).
        let tail_start = data.len();
        data.extend_from_slice(&bad);
        data.extend(std::iter::repeat_n(b'z', 20 - bad.len()));
        let file = scratch.path("data");
        fs::write(&file, &data).unwrap();
        let (stdout, _) = pgrun_output(&args(&size.to_string(), None, &byte_by_byte(&file)));
        let skip = if bad[0] & 0xC0 == 0x80 { 1 } else { 0 };
        let want = with_marker(&data[..20], tail_start + skip - 20, &data[tail_start + skip..]);
        assert_eq!(stdout, want, "{bad:02X?}");
    }
    // A prefix that can still become a character, at the very end of a
    // stream, is written when the stream ends: short and long streams.
    for data in [b"ab\xF0\x9F\x98".to_vec(), [vec![b'x'; 100], b"\xE2\x82".to_vec()].concat()] {
        let file = scratch.path("data");
        fs::write(&file, &data).unwrap();
        let (stdout, _) = pgrun_output(&args(&size.to_string(), None, &byte_by_byte(&file)));
        assert!(stdout.ends_with(&data[data.len() - 2..]), "held prefix lost: {stdout:02X?}");
    }
}

#[test]
fn head_bytes_are_written_before_the_stream_ends_invalid_ones_included() {
    let scratch = Scratch::new();
    let dir = scratch.sh();
    let mut guard = Guard::new();
    // The head ends in FF, which starts nothing: it must come out while
    // the command still runs (it waits for the test's go file).
    let payload = format!("printf 'abcdefghi\\377'; while [ ! -e {dir}/go ]; do sleep 0.01; done; printf 'later'");
    let index = guard.spawn(pgrun(["--max-output", "20", "--", "sh", "-c", &payload]).stdout(Stdio::piped()));
    let mut stdout = guard.child(index).stdout.take().unwrap();
    let mut got = vec![0u8; 10];
    stdout.read_exact(&mut got).unwrap();
    assert_eq!(got, b"abcdefghi\xFF");
    fs::write(scratch.path("go"), "").unwrap();
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    assert_eq!(rest, b"later");
    assert_eq!(guard.wait(index), 0);
}

/// A payload that writes numbered lines until stopped and logs each number
/// after writing it (appending, so a stop mid-write leaves the earlier
/// lines), so the log never claims more than was written.
fn endless_writer(dir: &str) -> String {
    format!("echo $$ > {dir}/pid; i=0; while :; do i=$((i+1)); echo \"line $i\"; echo $i >> {dir}/log; done")
}

/// The output of a stopped endless writer: the head is the stream's start,
/// and the tail ends with the last line the log names (or the one after,
/// written just before the stop).
fn check_nothing_lost(stdout: &[u8], dir: &std::path::Path, report: &std::path::Path) {
    let logged = last_logged(dir).expect("a log");
    let text = String::from_utf8(stdout.to_vec()).unwrap();
    let (head, _) = text.split_once("[pgrun: ").expect("a marker");
    let all: String = (1..=logged + 1).map(|i| format!("line {i}\n")).collect();
    let start = &all[..2048];
    let newline = if start.ends_with('\n') { "" } else { "\n" };
    assert_eq!(head, format!("{start}{newline}"), "the head is the stream's first SIZE/2 bytes");
    let last = text.lines().last().unwrap();
    let n: u64 = last.strip_prefix("line ").expect("whole last line").parse().unwrap();
    assert!(n == logged || n == logged + 1, "last line {n}, log says {logged}");
    assert!(text.ends_with('\n'));
    let written: usize = (1..=n).map(|i| format!("line {i}\n").len()).sum();
    assert_eq!(json(report)["output"]["stdout"]["bytes"], written as u64);
}

#[test]
fn timeout_cancel_and_sigterm_mid_stream_lose_nothing() {
    for how in ["timeout", "cancel", "sigterm"] {
        // The timeout must come after 2000 lines, mid-stream: retried with a
        // longer one if it came before (only "timeout" can loop).
        for (attempt, timeout) in SHORT_TIMEOUTS.iter().enumerate() {
            let scratch = Scratch::new();
            let dir = scratch.sh();
            let mut guard = Guard::new();
            let report = scratch.path("report.json");
            let pidfile = scratch.path("run.pid");
            let mut a = vec!["--max-output", "4K", "--report", report.to_str().unwrap()];
            if how == "timeout" {
                a.extend(["-t", timeout]);
            }
            a.extend(["-p", pidfile.to_str().unwrap(), "--", "sh", "-c"]);
            let payload = endless_writer(&dir);
            a.push(&payload);
            let index = guard.spawn(pgrun(&a).stdout(Stdio::piped()));
            let mut stdout = guard.child(index).stdout.take().unwrap();
            let reader = std::thread::spawn(move || {
                let mut all = Vec::new();
                stdout.read_to_end(&mut all).unwrap();
                all
            });
            wait_pid(&scratch.path("pid"), &mut guard);
            stop_mid_stream(how, &mut guard, index, scratch.dir(), &pidfile);
            let stdout = reader.join().unwrap();
            if last_logged(scratch.dir()) <= Some(2000) {
                assert!(attempt + 1 < SHORT_TIMEOUTS.len(), "{how}: not 2000 lines in {timeout} s");
                continue;
            }
            check_nothing_lost(&stdout, scratch.dir(), &report);
            break;
        }
    }
}

#[test]
fn what_the_pipe_still_holds_when_the_run_ends_is_written() {
    let scratch = Scratch::new();
    let dir = scratch.sh();
    let mut guard = Guard::new();
    // The test reads nothing until the command is gone, so pgrun's stdout
    // fills, pgrun stops reading the head, and the rest of the command's
    // output is still in the inner pipe when the group ends.
    // On Linux, more than pgrun's stdout pipe (64 KiB) and one read (256
    // KiB) hold, less than the inner pipe (1 MiB, pgrun widens it) holds
    // besides. The portable path's 64 KiB inner pipe leaves no such room:
    // there the test only checks that nothing is lost.
    let bytes = if cfg!(feature = "posix-fallback") { 100_000 } else { 600_000 };
    let payload = format!("echo $$ > {dir}/pid; yes | head -c {bytes}");
    let index = guard.spawn(pgrun(["--max-output", "1M", "--", "sh", "-c", &payload]).stdout(Stdio::piped()));
    let pid = wait_pid(&scratch.path("pid"), &mut guard);
    wait_dead(pid);
    let mut stdout = guard.child(index).stdout.take().unwrap();
    let mut all = Vec::new();
    stdout.read_to_end(&mut all).unwrap();
    assert_eq!(guard.wait(index), 0);
    assert_eq!(all.len(), bytes, "bytes left in the pipe were lost");
    assert!(all.chunks(2).all(|c| c == b"y\n"));
}

#[test]
fn an_escaped_holder_of_the_pipe_does_not_hold_up_a_capturing_caller() {
    let scratch = Scratch::new();
    let dir = scratch.sh();
    let mut guard = Guard::new();
    // The command leaves a process outside its group that keeps the inner
    // stdout and stderr open; pgrun ends with the group and the caller's
    // pipes close with pgrun. `--contain group`: in tree mode (the default)
    // pgrun would stop the escaped process, which must live here.
    let harness = format!(
        "import subprocess,sys\n\
         r = subprocess.run([sys.argv[1], '--contain', 'group', '--max-output', '1K', '--', 'sh', '-c',\n\
             'echo start; setsid sh -c \"echo \\\\$\\\\$ > {dir}/escaped.pid; exec sleep 300\" & \
              while [ ! -s {dir}/escaped.pid ]; do sleep 0.01; done; echo end'],\n\
             capture_output=True, timeout=60)\n\
         sys.stdout.write(r.stdout.decode())"
    );
    let out = run(Command::new(python3()).args(["-c", &harness, pgrun_path()]).stdin(Stdio::null()));
    let escaped = wait_pid(&scratch.path("escaped.pid"), &mut guard);
    assert_status(&out, 0, "harness");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "start\nend\n");
    assert!(!is_dead(escaped), "the escaped process was stopped: the test proves nothing");
}

#[test]
fn stdout_and_stderr_have_their_own_budgets() {
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let payload = "i=0; while [ $i -lt 200 ]; do i=$((i+1)); echo \"out $i\"; echo \"err $i\" >&2; done";
    let (stdout, stderr) = pgrun_output(&args("100", Some(&report), &["sh".into(), "-c".into(), payload.into()]));
    let all_out: String = (1..=200).map(|i| format!("out {i}\n")).collect();
    let all_err: String = (1..=200).map(|i| format!("err {i}\n")).collect();
    assert_eq!(String::from_utf8_lossy(&stdout), String::from_utf8_lossy(&expected_text(&all_out, 100)));
    assert_eq!(String::from_utf8_lossy(&stderr), String::from_utf8_lossy(&expected_text(&all_err, 100)));
    let r = json(&report);
    assert_eq!(r["output"]["stdout"]["bytes"], all_out.len());
    assert_eq!(r["output"]["stderr"]["bytes"], all_err.len());
}

#[test]
fn stdin_and_other_fds_still_pass_through() {
    let scratch = Scratch::new();
    let three = scratch.path("three");
    let script = format!(
        "printf 'typed input' | {} --max-output 100 -- sh -c 'cat; echo fd3 >&3' 3>{}",
        pgrun_path(),
        three.display()
    );
    let out = run(Command::new("sh").args(["-c", &script]).stdin(Stdio::null()));
    assert_status(&out, 0, "pass-through");
    assert_eq!(out.stdout, b"typed input");
    assert_eq!(fs::read_to_string(&three).unwrap(), "fd3\n");
}

#[test]
fn a_reader_that_leaves_stops_the_relay_not_the_run() {
    let scratch = Scratch::new();
    let dir = scratch.sh();
    let report = scratch.path("report.json");
    // `head -c 10` leaves; yes then gets SIGPIPE, as without pgrun, and the
    // run goes on to its end.
    let script = format!(
        "{} --max-output 1M --report {} -- sh -c 'yes; echo $? > {dir}/status; echo after >&2' | head -c 10 >/dev/null",
        pgrun_path(),
        report.display()
    );
    let out = run(Command::new("sh").args(["-c", &script]).stdin(Stdio::null()));
    assert_status(&out, 0, "pipeline");
    assert_eq!(fs::read_to_string(scratch.path("status")).unwrap(), "141\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "after\n");
    let r = json(&report);
    assert_eq!(r["exit_code"], 0);
    assert!(r["output"]["stdout"]["bytes"].as_u64().unwrap() >= 10, "{r}");
    assert_eq!(r["output"]["stderr"]["bytes"], 6);
}

/// Read `reader` up to and including its first newline, then drop it (the
/// reader leaves, as `head -1` does).
fn read_one_line_and_leave(mut reader: std::io::PipeReader) {
    let mut byte = [0u8; 1];
    loop {
        assert_eq!(reader.read(&mut byte).unwrap(), 1, "pgrun's stdout ended before a line");
        if byte[0] == b'\n' {
            return;
        }
    }
}

#[test]
fn a_reader_that_leaves_after_the_head_is_written_still_ends_the_writer() {
    // `pgrun --max-output SIZE -- yes | head -1`: the head is written, the
    // reader reads a line and leaves, and from then on pgrun only keeps
    // bytes in its ring, never writing. It must still notice the reader
    // left and close the pipe, so yes gets SIGPIPE (141) at once, as
    // without pgrun; whether the head was all read (1K) or not (64K).
    for size in ["1K", "64K"] {
        let mut guard = Guard::new();
        let (reader, writer) = std::io::pipe().unwrap();
        let index = guard.spawn(pgrun(["--max-output", size, "--", "yes"]).stdout(writer).stderr(Stdio::null()));
        read_one_line_and_leave(reader);
        assert_eq!(guard.wait(index), 141, "{size}: yes's SIGPIPE");
    }
}

#[test]
fn a_reader_that_leaves_after_the_head_ends_only_its_stream() {
    // As above, with an output file and stderr: the command learns its
    // stdout reader left (141), stderr is still relayed, and the file has
    // every byte pgrun read from stdout (as many as the report says) and
    // stderr's.
    let scratch = Scratch::new();
    let dir = scratch.sh();
    let report = scratch.path("report.json");
    let file = scratch.path("out");
    let mut guard = Guard::new();
    let (reader, writer) = std::io::pipe().unwrap();
    let payload = format!("yes; echo $? > {dir}/status; echo after >&2");
    let index = guard.spawn(
        pgrun(["--max-output", "1K", "--output-file", file.to_str().unwrap(), "--report", report.to_str().unwrap()])
            .args(["--", "sh", "-c", &payload])
            .stdout(writer)
            .stderr(Stdio::piped()),
    );
    read_one_line_and_leave(reader);
    let status = guard.wait(index);
    let mut stderr = String::new();
    guard.child(index).stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(stderr, "after\n");
    assert_eq!(fs::read_to_string(scratch.path("status")).unwrap(), "141\n");
    // The file has both streams: stdout's bytes, then stderr's line.
    let copied = fs::read(&file).unwrap();
    let stdout = copied.strip_suffix(b"after\n").expect("stderr's line last in the file");
    assert_eq!(json(&report)["output"]["stdout"]["bytes"], stdout.len(), "the file has every byte read");
    assert!(stdout.len() > 1024 && stdout.chunks(2).all(|c| c == b"y\n" || c == b"y"), "{} bytes", stdout.len());
}

#[test]
fn size_zero_and_bad_sizes_are_usage_errors() {
    for bad in ["0", "1kb", "1.5M", "-1", "M"] {
        let scratch = Scratch::new();
        let marker = scratch.path("ran");
        let out = run(&mut pgrun(["--max-output", bad, "--", "touch", marker.to_str().unwrap()]));
        assert_status(&out, 125, bad);
        assert!(!marker.exists(), "{bad}: the command ran");
        assert!(stderr_of(&out).starts_with("pgrun: "));
    }
}

/// Run pgrun with `args`, stdout read into memory (handed to `take`), and
/// return its peak resident memory (VmHWM: this process alone, reset at
/// exec), read while pgrun waits at its test-only pause right before it
/// exits, after everything is written.
fn peak_memory_at_exit(scratch: &Scratch, guard: &mut Guard, args: &[&str], take: impl FnOnce(Vec<u8>)) -> u64 {
    let at_exit = Pause::new(scratch, "exit");
    let _ = fs::remove_file(scratch.path("gate-exit"));
    let _ = fs::remove_file(scratch.path("gate-exit.reached"));
    let index = guard.spawn(at_exit.arm(&mut pgrun(args)).stdout(Stdio::piped()).stderr(Stdio::null()));
    let pid = guard.child(index).id() as i32;
    let mut stdout = guard.child(index).stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        stdout.read_to_end(&mut all).unwrap();
        all
    });
    at_exit.wait_reached();
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let hwm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmHWM in /proc/PID/status");
    at_exit.release();
    assert_eq!(guard.wait(index), 0, "pgrun {args:?}");
    take(reader.join().unwrap());
    hwm_kib * 1024
}

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

/// strace, for the tests that inject syscall failures; a clear failure if
/// the machine lacks it.
fn require_strace() {
    let ok = Command::new("strace").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(ok.is_ok_and(|s| s.success()), "this test needs strace (6.1 or later) to inject a syscall failure");
}

#[test]
fn a_failed_read_of_the_commands_output_is_said_and_reported() {
    // EIO on the relay's read of the command's stdout: the output is cut
    // short, which pgrun must say (one line, naming the stream and the
    // error) and report, not pass off as the whole stream. (SIZE 32: no
    // head byte is far enough from the cut to be spliced, so pgrun reads.)
    require_strace();
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let trace = scratch.path("trace");
    // The command writes "hello" and waits until pgrun has read it or
    // closed the pipe: nothing else (its exit, a SIGCHLD) comes first.
    let command = "import os, select, fcntl, termios, array\n\
                   os.write(1, b'hello')\n\
                   p = select.poll()\n\
                   p.register(1, 0)\n\
                   held = array.array('i', [1])\n\
                   while held[0] > 0 and not p.poll(10):\n    fcntl.ioctl(1, termios.FIONREAD, held)\n";
    let pgrun_args = ["--max-output", "32", "--report", report.to_str().unwrap(), "--", python3(), "-c", command];
    // Which of pgrun's reads (its own, not its children's) is the relay's
    // first: count them in a traced run.
    let dry = run(Command::new("strace")
        .args(["-qq", "-e", "trace=read", "-o", trace.to_str().unwrap(), pgrun_path()])
        .args(pgrun_args)
        .stdin(Stdio::null()));
    assert_status(&dry, 0, "traced run");
    assert_eq!(dry.stdout, b"hello");
    let reads = fs::read_to_string(&trace).unwrap();
    let nth = 1 + reads
        .lines()
        .position(|l| l.contains(", \"hello\", "))
        .unwrap_or_else(|| panic!("no read of the command's output in:\n{reads}"));
    let inject = format!("inject=read:error=EIO:when={nth}");
    let out = run(Command::new("strace")
        .args(["-qq", "-o", "/dev/null", "-e", "trace=read", "-e", &inject, pgrun_path()])
        .args(pgrun_args)
        .stdin(Stdio::null()));
    let stderr = stderr_of(&out);
    assert_status(&out, 0, "the command's status stands");
    assert_eq!(out.stdout, b"", "{stderr}");
    let said: Vec<&str> = stderr.lines().collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].starts_with("pgrun: cannot read the command's stdout: "), "{stderr}");
    assert!(said[0].contains("Input/output error") && said[0].contains("EIO"), "{stderr}");
    let r = json(&report);
    let error = r["output"]["stdout"]["error"].as_str().unwrap_or_else(|| panic!("no error in the report: {r}"));
    assert!(error.contains("Input/output error"), "{r}");
    assert!(r["output"]["stderr"].get("error").is_none(), "{r}");
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
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path writes a terminal as a pipe: PIPE_BUF after POLLOUT, which a full terminal can hold"
)]
fn a_write_error_in_the_last_flush_is_added_to_the_report() {
    // The report is written once the run is withdrawn, before pgrun writes
    // the output it still holds. Should that last flush fail (here: the
    // terminal pgrun writes to hangs up, EIO), the report is written again
    // with the error.
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let mut guard = Guard::new();
    // The master close-on-exec from the start: no process spawned meanwhile
    // (by any test) may hold it, or closing it would not hang up the terminal.
    use nix::fcntl::OFlag;
    let master = nix::pty::posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC).expect("posix_openpt");
    nix::pty::grantpt(&master).expect("grantpt");
    nix::pty::unlockpt(&master).expect("unlockpt");
    let name = nix::pty::ptsname_r(&master).expect("ptsname_r");
    use std::os::unix::fs::OpenOptionsExt;
    let slave = fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOCTTY).open(name).unwrap();
    // A 12K head fits in the terminal; the 12K tail and marker do not. All
    // of it fits in the inner pipe (64 KiB on the portable path): the
    // command ends even if the terminal takes less.
    let index = guard.spawn(
        pgrun(["--max-output", "24K", "--report", report.to_str().unwrap(), "--", "head", "-c", "60000", "/dev/zero"])
            .stdout(slave)
            .stderr(Stdio::piped()),
    );
    eventually("the report, before the last flush", || report.exists());
    assert!(json(&report)["output"]["stdout"]["error"].is_null(), "{}", json(&report));
    assert!(guard.child(index).try_wait().unwrap().is_none(), "pgrun did not wait for the terminal");
    drop(master);
    let status = guard.wait(index);
    let mut stderr = String::new();
    guard.child(index).stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(status, 0, "{stderr}");
    assert!(stderr.contains("cannot write the command's stdout"), "{stderr}");
    let r = json(&report);
    let error = r["output"]["stdout"]["error"].as_str().unwrap_or_else(|| panic!("no error in the report: {r}"));
    assert!(error.contains("EIO"), "{r}");
    assert_eq!(r["output"]["stdout"]["bytes"], 60000, "{r}");
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

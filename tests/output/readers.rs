//! The relay and the processes at its ends: an escaped holder of the pipe
//! does not hold up a capturing caller, stdin and other fds pass through
//! untouched, and a reader that leaves (at once, or after the head) ends
//! only its stream: the command gets SIGPIPE as without pgrun, the run and
//! the other stream go on.

use crate::util::*;
use std::fs;
use std::io::Read;
use std::process::{Command, Stdio};

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

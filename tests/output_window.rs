//! `pgrun output FILE`: windows of a run's output file, each sentence of
//! the contract's "Output windows" section against the built binary, and
//! the details its man page settles (SIZE at least 4, a line longer than
//! the window, a character the file ends inside).

use crate::util::*;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// `pgrun output ARGS... FILE`, run to its end.
fn output(args: &[&str], file: &Path) -> Output {
    run(pgrun(["output"]).args(args).arg(file))
}

/// `--json`'s object, with the exit status checked.
fn window(args: &[&str], file: &Path, status: i32) -> serde_json::Value {
    let out = output(&[args, &["--json"]].concat(), file);
    assert_status(&out, status, &format!("output {args:?}"));
    let text = String::from_utf8(out.stdout).expect("JSON is UTF-8");
    assert!(text.ends_with('\n') && text.lines().count() == 1, "not one line: {text:?}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn file_with(scratch: &Scratch, name: &str, bytes: &[u8]) -> PathBuf {
    let path = scratch.path(name);
    fs::write(&path, bytes).unwrap();
    path
}

fn append(path: &Path, bytes: &[u8]) {
    fs::OpenOptions::new().append(true).open(path).unwrap().write_all(bytes).unwrap();
}

/// Whether process `pid` sleeps in poll (its main thread's wait channel):
/// an `output --wait` that has looked and now waits for a change.
fn waiting(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/wchan")).is_ok_and(|w| w.contains("poll"))
}

/// How often process `pid`'s main thread has been switched out: it went
/// to sleep (or was preempted) once more for each.
fn switches(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> u64 {
        status.lines().find_map(|l| l.strip_prefix(name)).map_or(0, |v| v.trim().parse().unwrap_or(0))
    };
    field("voluntary_ctxt_switches:") + field("nonvoluntary_ctxt_switches:")
}

/// Start `pgrun output ARGS... FILE` (stdout piped) and return once it
/// waits.
fn spawn_waiter(guard: &mut Guard, args: &[&str], file: &Path) -> usize {
    let index = guard.spawn(pgrun(["output"]).args(args).arg(file).stdout(Stdio::piped()).stderr(Stdio::piped()));
    let pid = guard.child(index).id();
    eventually("output --wait to wait", || waiting(pid));
    index
}

/// A waiter's exit status and stdout, once it has ended.
fn finish(guard: &mut Guard, index: usize) -> (i32, Vec<u8>) {
    let status = guard.wait(index);
    let mut out = Vec::new();
    guard.child(index).stdout.take().unwrap().read_to_end(&mut out).unwrap();
    (status, out)
}

/// A detached run writing to `NAME.log`, published at `NAME.pid`.
fn detached(guard: &mut Guard, scratch: &Scratch, name: &str, payload: &str) -> (PathBuf, PathBuf) {
    detached_with(guard, scratch, name, &[], payload)
}

/// [`detached`], with more options for the run.
fn detached_with(
    guard: &mut Guard,
    scratch: &Scratch,
    name: &str,
    extra: &[&str],
    payload: &str,
) -> (PathBuf, PathBuf) {
    let (pidfile, log) = (scratch.path(&format!("{name}.pid")), scratch.path(&format!("{name}.log")));
    let out = run(pgrun(["--detach"])
        .args(extra)
        .arg("-p")
        .arg(&pidfile)
        .arg("--output-file")
        .arg(&log)
        .args(["--", "sh", "-c", payload]));
    assert_status(&out, 0, "--detach");
    // A short run may be over already, its pid file gone.
    if let Ok(pgid) = fs::read_to_string(&pidfile).unwrap_or_default().trim().parse::<i32>() {
        guard.record_group(pgid);
    }
    if let Some(holder) = lock_holder(&pidfile) {
        guard.record(holder);
    }
    (pidfile, log)
}

#[test]
fn the_window_starts_at_n_and_holds_at_most_size_bytes_64k_by_default() {
    let scratch = Scratch::new();
    let data: Vec<u8> = (0..100_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let file = file_with(&scratch, "out.log", &data);
    let out = output(&[], &file);
    assert_status(&out, 0, "output");
    assert!(out.stdout == data[..65536], "default window: {} bytes", out.stdout.len());
    let out = output(&["--since", "99990", "--max", "4K"], &file);
    assert!(out.stdout == data[99990..], "to the end");
    let out = output(&["--since", "1000", "--max", "10"], &file);
    assert!(out.stdout == data[1000..1010]);
}

#[test]
fn paging_from_next_gives_the_file_whole_and_no_window_splits_a_character() {
    let scratch = Scratch::new();
    let text: String = (0..400).map(|i| ["a", "é", "€", "😀", "\n"][i % 5]).collect();
    let file = file_with(&scratch, "out.log", text.as_bytes());
    let mut since = 0u64;
    let mut got = Vec::new();
    loop {
        let w = window(&["--since", &since.to_string(), "--max", "7"], &file, 0);
        let piece = w["text"].as_str().unwrap();
        assert!(piece.len() <= 7 && !piece.contains('\u{FFFD}'), "a split character: {piece:?}");
        got.extend_from_slice(piece.as_bytes());
        assert_eq!(w["next"].as_u64().unwrap(), since + piece.len() as u64, "{w}");
        since = w["next"].as_u64().unwrap();
        if w["eof"] == true {
            break;
        }
        assert!(!piece.is_empty(), "no progress at {since}");
    }
    assert!(got == text.as_bytes());
}

#[test]
fn bytes_that_can_never_be_a_character_pass_as_they_are() {
    let scratch = Scratch::new();
    // E2 82 then 'x': no character; the limit falls right after E2 82.
    let file = file_with(&scratch, "out.log", b"abcd\xE2\x82xyz");
    let out = output(&["--max", "6"], &file);
    assert!(out.stdout == b"abcd\xE2\x82", "{:?}", out.stdout);
    // A whole character at the same place goes to the next window.
    let file = file_with(&scratch, "ok.log", "abcd€xyz".as_bytes());
    let out = output(&["--max", "6"], &file);
    assert!(out.stdout == b"abcd", "{:?}", out.stdout);
}

#[test]
fn tail_holds_the_last_size_bytes_from_a_character_and_says_what_it_skipped() {
    let scratch = Scratch::new();
    // 10 x, "é" (C3 A9), "abc": the last 4 bytes start inside the é.
    let file = file_with(&scratch, "out.log", "xxxxxxxxxxéabc".as_bytes());
    let w = window(&["--tail", "4"], &file, 0);
    assert_eq!(
        (w["skipped"].as_u64(), w["text"].as_str(), w["next"].as_u64()),
        (Some(12), Some("abc"), Some(15)),
        "{w}"
    );
    let w = window(&["--tail", "5"], &file, 0);
    assert_eq!((w["skipped"].as_u64(), w["text"].as_str()), (Some(10), Some("éabc")), "{w}");
    let w = window(&["--since", "3", "--tail", "5"], &file, 0);
    assert_eq!((w["since"].as_u64(), w["skipped"].as_u64()), (Some(3), Some(7)), "{w}");
    // Plain: the bytes alone.
    assert!(output(&["--tail", "5"], &file).stdout == "éabc".as_bytes());
}

#[test]
fn plain_mode_writes_the_bytes_exactly_and_nothing_else() {
    let scratch = Scratch::new();
    let data: Vec<u8> = (0..=255u8).chain(b"no newline at the end".iter().copied()).collect();
    let file = file_with(&scratch, "out.log", &data);
    let out = output(&["--max", "1M"], &file);
    assert_status(&out, 0, "output");
    assert!(out.stdout == data, "the bytes differ");
    assert!(out.stderr.is_empty(), "{}", stderr_of(&out));
}

#[test]
fn json_is_one_object_with_exactly_the_contracts_fields() {
    let scratch = Scratch::new();
    let file = file_with(&scratch, "out.log", b"ok \xFF\xFE\xE2\x82 end\n");
    let w = window(&[], &file, 0);
    let mut keys: Vec<&str> = w.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["eof", "next", "run", "since", "skipped", "text"]);
    // Each byte that is not valid UTF-8 is one U+FFFD.
    assert_eq!(w["text"], "ok \u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD} end\n");
    assert_eq!((w["since"].as_u64(), w["next"].as_u64(), w["skipped"].as_u64()), (Some(0), Some(12), Some(0)));
    assert_eq!((w["eof"].as_bool(), w["run"].is_null()), (Some(true), true), "{w}");
    let w = window(&["--max", "4"], &file, 0);
    assert_eq!((w["next"].as_u64(), w["eof"].as_bool()), (Some(4), Some(false)), "{w}");
}

#[test]
fn run_says_whether_the_run_is_still_published() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let go = scratch.path("go");
    let payload = format!("echo hi; while [ ! -e {} ]; do sleep 0.01; done", go.display());
    let (pidfile, log) = detached(&mut guard, &scratch, "job", &payload);
    eventually("the run's first line", || fs::read(&log).unwrap_or_default() == b"hi\n");
    let pid = pidfile.to_str().unwrap();
    assert_eq!(window(&["--pidfile", pid], &log, 0)["run"], "running");
    fs::write(&go, b"").unwrap();
    eventually("the run's end", || !pidfile.exists());
    let w = window(&["--pidfile", pid], &log, 0);
    assert_eq!((w["run"].as_str(), w["text"].as_str()), (Some("over"), Some("hi\n")), "{w}");
}

#[test]
fn wait_returns_when_bytes_come_past_n() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let file = file_with(&scratch, "out.log", b"old\n");
    let waiter = spawn_waiter(&mut guard, &["--wait", "60", "--since", "4", "--json"], &file);
    append(&file, b"new\n");
    let (status, out) = finish(&mut guard, waiter);
    assert_eq!(status, 0);
    let w: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!((w["text"].as_str(), w["next"].as_u64()), (Some("new\n"), Some(8)), "{w}");
}

#[test]
fn wait_returns_1_when_the_run_is_over_first() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let go = scratch.path("go");
    let payload = format!("printf 'x\\n'; while [ ! -e {} ]; do sleep 0.01; done", go.display());
    let (pidfile, log) = detached(&mut guard, &scratch, "job", &payload);
    eventually("the run's line", || fs::read(&log).unwrap_or_default() == b"x\n");
    let waiter = spawn_waiter(
        &mut guard,
        &["--wait", "60", "--since", "2", "--pidfile", pidfile.to_str().unwrap(), "--json"],
        &log,
    );
    fs::write(&go, b"").unwrap();
    let (status, out) = finish(&mut guard, waiter);
    assert_eq!(status, 1, "{}", String::from_utf8_lossy(&out));
    let w: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!((w["run"].as_str(), w["text"].as_str(), w["next"].as_u64()), (Some("over"), Some(""), Some(2)), "{w}");
    // Over before the call: at once.
    assert_status(&output(&["--wait", "60", "--since", "2", "--pidfile", pidfile.to_str().unwrap()], &log), 1, "over");
}

#[test]
fn wait_learns_of_a_run_whose_pgrun_was_killed() {
    // Its lock is let go of with its pid file left in place (no guard
    // removes it): over.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let (pidfile, log) = detached_with(&mut guard, &scratch, "job", &["--no-guard"], "sleep 300");
    let holder = lock_holder(&pidfile).expect("a live run");
    let waiter = spawn_waiter(&mut guard, &["--wait", "60", "--pidfile", pidfile.to_str().unwrap()], &log);
    send(holder, libc::SIGKILL);
    let (status, _) = finish(&mut guard, waiter);
    assert_eq!(status, 1);
    assert!(pidfile.exists(), "the pid file was removed: the test no longer shows the lock's release");
}

#[test]
fn wait_returns_124_when_dur_passes_first() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let (pidfile, log) = detached(&mut guard, &scratch, "job", "sleep 300");
    let w = window(&["--wait", "0.3", "--pidfile", pidfile.to_str().unwrap()], &log, 124);
    assert_eq!((w["run"].as_str(), w["text"].as_str()), (Some("running"), Some("")), "{w}");
    // --wait 0 looks once.
    let file = file_with(&scratch, "empty.log", b"");
    assert_status(&output(&["--wait", "0"], &file), 124, "--wait 0");
    append(&file, b"x");
    assert_status(&output(&["--wait", "0"], &file), 0, "--wait 0 with a byte");
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path looks in ticks")]
fn wait_sleeps_while_nothing_comes() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let file = file_with(&scratch, "out.log", b"");
    let waiter = spawn_waiter(&mut guard, &["--wait", "60"], &file);
    let pid = guard.child(waiter).id();
    let before = switches(pid);
    // Time passes for the waiter: another output waits out its DUR.
    let other = file_with(&scratch, "other.log", b"");
    assert_status(&output(&["--wait", "0.3"], &other), 124, "the clock");
    assert_eq!(switches(pid), before, "the waiter woke while nothing came");
    append(&file, b"x");
    assert_eq!(finish(&mut guard, waiter), (0, b"x".to_vec()));
}

#[test]
fn until_returns_once_a_matching_line_has_come_and_the_window_ends_after_it() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let file = file_with(&scratch, "out.log", b"ready before N\n");
    let waiter = spawn_waiter(&mut guard, &["--wait", "60", "--since", "15", "--until", "^ready", "--json"], &file);
    let pid = guard.child(waiter).id();
    let before = switches(pid);
    append(&file, b"starting\nrea");
    // Not a line yet, and "starting" does not match: it looks, and waits on.
    eventually("the waiter to look at the new bytes and wait again", || switches(pid) > before && waiting(pid));
    append(&file, b"dy on 8000\nmore\n");
    let (status, out) = finish(&mut guard, waiter);
    assert_eq!(status, 0);
    let w: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(w["text"], "starting\nready on 8000\n", "{w}");
    assert_eq!((w["next"].as_u64(), w["eof"].as_bool()), (Some(38), Some(false)), "{w}");
}

#[test]
fn until_without_its_line_ends_with_the_status_that_says_why() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let file = file_with(&scratch, "out.log", b"one\ntwo\nthr");
    // DUR passed: the window ends after its last whole line.
    let w = window(&["--wait", "0.2", "--until", "ready"], &file, 124);
    assert_eq!((w["text"].as_str(), w["next"].as_u64()), (Some("one\ntwo\n"), Some(8)), "{w}");
    // The run was over first: 1; its last line counts whole then.
    let (pidfile, log) = detached(&mut guard, &scratch, "job", "printf 'a\\nb\\nready'");
    eventually("the run's end", || !pidfile.exists());
    let pid = pidfile.to_str().unwrap();
    let w = window(&["--wait", "60", "--until", "^ready$", "--pidfile", pid], &log, 0);
    assert_eq!(w["text"], "a\nb\nready", "{w}");
    let w = window(&["--wait", "60", "--until", "never", "--pidfile", pid], &log, 1);
    assert_eq!(w["text"], "a\nb\nready", "{w}");
}

#[test]
fn until_with_a_line_longer_than_the_window_gives_its_last_size_bytes() {
    let scratch = Scratch::new();
    let long = format!("{}READY\n", "x".repeat(100));
    let file = file_with(&scratch, "out.log", format!("head\n{long}tail\n").as_bytes());
    let w = window(&["--wait", "1", "--until", "READY$", "--max", "16"], &file, 0);
    assert_eq!(w["text"], "xxxxxxxxxxREADY\n", "{w}");
    assert_eq!((w["skipped"].as_u64(), w["next"].as_u64()), (Some(5 + 100 - 10), Some(5 + 106)), "{w}");
}

#[test]
fn a_character_the_file_ends_inside_waits_for_its_end_or_the_runs() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    // The run writes "ab" and the first two bytes of a €, then waits.
    let go = scratch.path("go");
    let payload = format!("printf 'ab\\342\\202'; while [ ! -e {} ]; do sleep 0.01; done", go.display());
    let (pidfile, log) = detached(&mut guard, &scratch, "job", &payload);
    eventually("the run's bytes", || fs::read(&log).unwrap_or_default().len() == 4);
    let pid = pidfile.to_str().unwrap();
    let w = window(&["--pidfile", pid], &log, 0);
    assert_eq!((w["text"].as_str(), w["next"].as_u64(), w["eof"].as_bool()), (Some("ab"), Some(2), Some(true)), "{w}");
    fs::write(&go, b"").unwrap();
    eventually("the run's end", || !pidfile.exists());
    // Over: they can never become a character, and pass.
    let out = run(pgrun(["output", "--pidfile", pid]).arg(&log));
    assert!(out.stdout == b"ab\xE2\x82", "{:?}", out.stdout);
}

#[test]
fn errors_are_one_line_and_125() {
    let scratch = Scratch::new();
    let file = file_with(&scratch, "out.log", b"12345");
    let fifo = scratch.path("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let cases: [(&[&str], PathBuf, &str); 6] = [
        (&[], scratch.path("missing"), "No such file or directory"),
        (&[], scratch.dir().to_path_buf(), "is not a regular file"),
        (&[], fifo, "is not a regular file"),
        (&["--since", "6"], file.clone(), "beyond the end"),
        (&["--max", "3"], file.clone(), "at least 4"),
        (&["--wait", "1", "--until", "(x"], file.clone(), "invalid --until REGEX"),
    ];
    for (args, path, says) in cases {
        let out = output(args, &path);
        assert_status(&out, 125, &format!("{args:?} {}", path.display()));
        let err = stderr_of(&out);
        assert!(err.starts_with("pgrun: ") && err.lines().count() == 1 && err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
    // N at the end is no error: an empty window.
    assert_eq!(window(&["--since", "5"], &file, 0)["eof"], true);
}

/// `strace -f -o LOG pgrun ARGS...`, run to its end; the log's lines.
fn straced(scratch: &Scratch, args: &[&str], file: &Path) -> (Output, String) {
    let log = scratch.path("strace.log");
    let out = run(Command::new("strace")
        .args(["-f", "-qq", "-o"])
        .arg(&log)
        .arg("--")
        .arg(pgrun_path())
        .arg("output")
        .args(args)
        .arg(file)
        .stdin(Stdio::null()));
    (out, fs::read_to_string(&log).unwrap_or_default())
}

#[test]
fn output_only_reads_and_never_signals() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let (pidfile, log) = detached(&mut guard, &scratch, "job", "echo hi; sleep 300");
    eventually("the run's line", || fs::read(&log).unwrap_or_default() == b"hi\n");
    let before = (fs::read(&log).unwrap(), fs::metadata(&log).unwrap().modified().unwrap());
    // Without --pidfile the pid file beside FILE is never looked at.
    let (out, trace) = straced(&scratch, &["--wait", "0.2", "--since", "3"], &log);
    assert_status(&out, 124, "output --wait");
    assert!(!trace.contains("job.pid"), "the pid file was looked at:\n{trace}");
    // With it, the run ends while output waits: still no signal, no file
    // made or removed, FILE as it was.
    let pid = pidfile.to_str().unwrap();
    let holder = lock_holder(&pidfile).unwrap();
    let waiter = guard.spawn(
        Command::new("strace")
            .args(["-f", "-qq", "-o"])
            .arg(scratch.path("wait.log"))
            .args(["--", pgrun_path(), "output", "--wait", "60", "--since", "3", "--pidfile", pid])
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
    );
    let strace = guard.child(waiter).id() as i32;
    let mut output = 0;
    eventually("the waiter to wait", || {
        output = descendants(strace).into_iter().find(|&p| ppid(p) == Some(strace)).unwrap_or(0);
        output > 0 && waiting(output as u32)
    });
    send(holder, libc::SIGTERM);
    assert_eq!(guard.wait(waiter), 1);
    let trace = fs::read_to_string(scratch.path("wait.log")).unwrap();
    for call in ["kill(", "pidfd_send_signal(", "unlink", "rename", "mkdir", "O_CREAT", "O_WRONLY", "O_RDWR"] {
        let line = trace.lines().find(|l| l.contains(call) && !l.contains("--- SIG"));
        assert!(line.is_none(), "output made a call it must not: {line:?}");
    }
    assert_eq!((fs::read(&log).unwrap(), fs::metadata(&log).unwrap().modified().unwrap()), before, "FILE changed");
}

/// A FILE that is not a regular file is refused before it is opened,
/// named itself or through a symlink: an open alone can act (it lets a
/// FIFO's waiting writer through, arms a watchdog, rewinds a tape).
#[test]
fn a_file_that_is_not_regular_is_refused_unopened() {
    let scratch = Scratch::new();
    let fifo = scratch.path("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let link = scratch.path("link");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    for path in [&fifo, &link] {
        let (out, trace) = straced(&scratch, &[], path);
        assert_status(&out, 125, &format!("output {}", path.display()));
        assert!(stderr_of(&out).contains("is not a regular file"), "{}", stderr_of(&out));
        let opened = trace.lines().find(|l| l.contains("open") && l.contains(scratch.sh().as_str()));
        assert!(opened.is_none(), "output opened what it refuses: {opened:?}");
    }
}

/// A window that DUR ended without its line (124) holds only whole lines:
/// none at all where no newline came past N yet, and none cut by SIZE.
/// Paging on from `next`, a line written in two pieces around a call's DUR
/// is then still matched whole, from its start.
#[test]
fn until_that_timed_out_gives_no_part_of_a_line_so_the_next_call_sees_it_whole() {
    let scratch = Scratch::new();
    let file = file_with(&scratch, "out.log", b"rea");
    let w = window(&["--wait", "0.2", "--until", "^ready$"], &file, 124);
    assert_eq!((w["text"].as_str(), w["next"].as_u64(), w["eof"].as_bool()), (Some(""), Some(0), Some(false)), "{w}");
    append(&file, b"dy\n");
    let w = window(&["--wait", "0.2", "--until", "^ready$", "--since", "0"], &file, 0);
    assert_eq!(w["text"], "ready\n", "{w}");
    // A window cut by SIZE inside a line ends after the line before it.
    let file = file_with(&scratch, "cut.log", b"one\nxxxxxxxxrea");
    let w = window(&["--wait", "0.2", "--until", "^x+ready$", "--max", "10"], &file, 124);
    assert_eq!((w["text"].as_str(), w["next"].as_u64()), (Some("one\n"), Some(4)), "{w}");
    append(&file, b"dy\n");
    let w = window(&["--wait", "0.2", "--until", "^x+ready$", "--since", "4"], &file, 0);
    assert_eq!(w["text"], "xxxxxxxxready\n", "{w}");
}

/// FILE replaced while output waits (a new run with the same
/// `--output-file` renames its file into place): its offsets are not the
/// ones N counts, and the old file will never grow. output says so (125)
/// at once, rather than waiting out DUR on a file nobody writes.
#[test]
fn wait_says_when_file_is_replaced_under_it() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let file = file_with(&scratch, "out.log", b"old\n");
    let waiter = spawn_waiter(&mut guard, &["--wait", "10", "--since", "4", "--json"], &file);
    let new = file_with(&scratch, "new.log", b"another run's output\n");
    fs::rename(&new, &file).unwrap();
    let status = guard.wait(waiter);
    let mut err = String::new();
    guard.child(waiter).stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(status, 125, "{err}");
    assert!(err.starts_with("pgrun: ") && err.lines().count() == 1 && err.contains("was replaced"), "{err}");
}

/// The run ends between output finding it live and watching its pid file
/// (held there by the test, the run cancelled meanwhile): the pid file is
/// gone, which says the run is over (1), not an error (125).
#[test]
fn wait_on_a_run_that_ends_as_it_is_found_says_it_is_over() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let (pidfile, log) = detached(&mut guard, &scratch, "job", "echo hi; exec sleep 300");
    eventually("the run's line", || fs::read(&log).unwrap_or_default() == b"hi\n");
    let gate = scratch.path("gate");
    let pid = pidfile.to_str().unwrap();
    let mut cmd = pgrun(["output", "--wait", "30", "--since", "3", "--pidfile", pid]);
    cmd.arg(&log).env("PGRUN_TEST_PAUSE", format!("output-found={}", gate.display()));
    let waiter = guard.spawn(cmd.stdout(Stdio::null()).stderr(Stdio::piped()));
    eventually("output to find the run", || Path::new(&format!("{}.reached", gate.display())).exists());
    assert_status(&run(&mut pgrun(["cancel", pid])), 0, "cancel");
    assert!(!pidfile.exists());
    fs::write(&gate, "").unwrap();
    let status = guard.wait(waiter);
    let mut err = String::new();
    guard.child(waiter).stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(status, 1, "{err}");
}

//! What the caller's stdout and stderr hold at the hand-off: exactly the
//! output file's first N bytes (a stalled reader included), and the
//! hand-off line on a line of its own, after a newline of pgrun's where
//! the caller's stderr (the destination it shares with stdout, under
//! `2>&1`) ended mid-line.

use super::{Files, handed_off_at, to_the_end};
use crate::util::*;
use std::fs;
use std::process::Stdio;

/// A caller that does not read its stdout at DUR (a full pipe; a full
/// socket, which pgrun writes from its own buffer, so that bytes are
/// owed) does not hold up the hand-off: N is the first byte its stdout
/// lacks, so that what it got is exactly the file up to N.
#[test]
fn a_stalled_reader_gets_exactly_the_file_up_to_n() {
    for socket in [false, true] {
        let scratch = Scratch::new();
        let mut guard = Guard::new();
        let files = Files::new(&scratch);
        let tag = Tag::new(&format!("stalled-{socket}"));
        let payload = "i=0; while :; do echo \"out $i\"; i=$((i+1)); done";
        let (reader, writer): (Box<dyn std::io::Read + Send>, std::os::fd::OwnedFd) = if socket {
            let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            (Box::new(a), b.into())
        } else {
            let (a, b) = std::io::pipe().unwrap();
            (Box::new(a), b.into())
        };
        let mut cmd = files.command("1", &[], payload);
        tag.on(&mut cmd).stdout(writer).stderr(Stdio::piped());
        let caller = guard.spawn(&mut cmd);
        drop(cmd);
        // Read only once pgrun has returned.
        assert_eq!(guard.wait(caller), 122, "a run still going after DUR");
        files.record(&mut guard);
        let stderr = guard.child(caller).stderr.take().unwrap();
        let stderr = String::from_utf8_lossy(&to_the_end(stderr, "the caller's stderr")).into_owned();
        let n = handed_off_at(&stderr, &files, "1s") as usize;
        let got = to_the_end(reader, "the caller's stdout");
        eventually("the output file to grow past N", || fs::metadata(&files.output).unwrap().len() as usize > n + 100);
        files.cancel();
        let file = fs::read(&files.output).unwrap();
        assert!(!got.is_empty(), "socket {socket}: the caller got nothing");
        assert_eq!(got.len(), n, "socket {socket}: the caller's stdout got {} bytes, N is {n}", got.len());
        assert!(file[..n] == got[..], "socket {socket}: the caller's stdout is not the file up to N");
    }
}

/// A caller whose stdout reader stalls while its stderr reader reads (a
/// pipe, then a socket, which pgrun writes from its own buffer, each
/// shrunk so that the command's stdout fills it): the command writes more
/// than that to stdout, then to stderr, and the hand-off comes once the
/// output file holds stderr's first bytes. What the caller got on both
/// streams is then exactly the file's first N bytes, each stream's bytes
/// among them, in order: stderr's bytes past the stalled stdout's wait
/// for it rather than reach the caller and come again after N. `pgrun
/// output --since N` gives the rest: every line once, none missing.
#[test]
fn a_stalled_stdout_holds_stderr_back_so_that_n_stays_exact() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    // Each stream's own bytes: stdout's lines of digits, dots and
    // newlines, stderr's of letters ending in ';' (the streams can be told
    // apart byte by byte, wherever a take ends).
    let (lines_out, lines_err) = (600, 200);
    let dots = ".".repeat(64);
    let want_out: String = (1..=lines_out).map(|i| format!("o{i:06}{dots}\n")).collect();
    let letters = |i: u32| format!("{i:06}").bytes().map(|b| char::from(b - b'0' + b'A')).collect::<String>();
    let want_err: String = (1..=lines_err).map(|i| format!("e{};", letters(i))).collect();
    let of_stdout = |b: &u8| b"o0123456789.\n".contains(b);
    for socket in [false, true] {
        let scratch = Scratch::new();
        let mut guard = Guard::new();
        let files = Files::new(&scratch);
        let tag = Tag::new(&format!("order-{socket}"));
        let written = scratch.path("written");
        let payload = format!(
            "seq -f 'o%06g{dots}' 1 {lines_out}; seq -f 'e%06g' 1 {lines_err} | tr '0-9\\n' 'A-J;' >&2; \
             echo > {}; exec sleep 300",
            written.display()
        );
        let (reader, writer): (Box<dyn Read + Send>, std::os::fd::OwnedFd) = if socket {
            let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            let size: libc::c_int = 4096;
            // SAFETY: setsockopt on a socket this test made, with a c_int
            // of the size given; the kernel's minimum applies.
            let set = unsafe {
                let len = std::mem::size_of_val(&size) as libc::socklen_t;
                libc::setsockopt(b.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, (&raw const size).cast(), len)
            };
            assert_eq!(set, 0, "SO_SNDBUF");
            (Box::new(a), b.into())
        } else {
            let (a, b) = std::io::pipe().unwrap();
            // SAFETY: fcntl on a pipe this test made, empty: one page.
            assert!(unsafe { libc::fcntl(a.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) } > 0, "F_SETPIPE_SZ");
            (Box::new(a), b.into())
        };
        let pause = Pause::new(&scratch, "let-go");
        let mut cmd = files.command("0.2", &[], &payload);
        pause.arm(tag.on(&mut cmd)).stdout(writer).stderr(Stdio::piped());
        let caller = guard.spawn(&mut cmd);
        drop(cmd);
        let caller_stderr = guard.child(caller).stderr.take().unwrap();
        let caller_stderr = std::thread::spawn(move || to_the_end(caller_stderr, "the caller's stderr"));
        // DUR has passed; the hand-off waits until the command has written
        // everything and pgrun has taken stderr's first bytes.
        pause.wait_reached();
        wait_line(&written);
        eventually("stderr's first bytes in the output file", || fs::read(&files.output).unwrap().contains(&b'e'));
        pause.release();
        assert_eq!(guard.wait(caller), 122, "socket {socket}: a run still going after DUR");
        files.record(&mut guard);
        let got_err = String::from_utf8(caller_stderr.join().unwrap()).unwrap();
        let got_out = to_the_end(reader, "the caller's stdout");
        let line = got_err.find("pgrun: ").unwrap_or_else(|| panic!("no pgrun line: {got_err:?}"));
        let n = handed_off_at(&got_err[line..], &files, "200ms") as usize;
        // stderr's bytes hold no newline: the hand-off line begins after one
        // of pgrun's, if stderr got any.
        let got_err = match got_err[..line].strip_suffix('\n') {
            Some(got) => got.as_bytes(),
            None if line == 0 => b"",
            None => panic!("socket {socket}: no newline before the line: {got_err:?}"),
        };
        let total = want_out.len() + want_err.len();
        eventually("the rest of the output in the file", || {
            fs::metadata(&files.output).unwrap().len() as usize == total
        });
        files.cancel();
        let file = fs::read(&files.output).unwrap();
        let stdout_of = |bytes: &[u8]| -> Vec<u8> { bytes.iter().copied().filter(of_stdout).collect() };
        let stderr_of = |bytes: &[u8]| -> Vec<u8> { bytes.iter().copied().filter(|b| !of_stdout(b)).collect() };
        assert_eq!(stdout_of(&file), want_out.as_bytes(), "socket {socket}: the file's stdout");
        assert_eq!(stderr_of(&file), want_err.as_bytes(), "socket {socket}: the file's stderr");
        assert!(!got_out.is_empty() && got_out.len() < want_out.len(), "socket {socket}: stdout did not stall");
        let (before, after) = file.split_at(n);
        assert!(
            stdout_of(before) == got_out,
            "socket {socket}: the caller's stdout ({} bytes) is not the file's up to N = {n}",
            got_out.len()
        );
        assert!(
            stderr_of(before) == got_err,
            "socket {socket}: the caller's stderr is not the file's up to N = {n}: got {:?}, the file's up to N {:?}",
            String::from_utf8_lossy(got_err),
            String::from_utf8_lossy(&stderr_of(before))
        );
        let window = run(&mut pgrun(["output", "--since", &n.to_string(), "--max", "1M", &files.output]));
        assert_status(&window, 0, "pgrun output --since N");
        assert!(window.stdout == after, "socket {socket}: pgrun output --since N is not the file from N");
    }
}

/// What the caller's stdout and stderr (one pipe if `shared`: `2>&1`) got
/// of a run (given `extra` options) whose command writes with `payload`
/// (`total` bytes in all),
/// then waits, handed off after 300 ms once the output file holds all of
/// it; and the hand-off line it then says, as the contract words it.
fn caller_got(extra: &[&str], payload: &str, total: u64, shared: bool) -> (Vec<u8>, Vec<u8>, String) {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let files = Files::new(&scratch);
    let tag = Tag::new("line");
    let written = scratch.path("written");
    let payload = format!("{payload}; echo > {}; exec sleep 300", written.display());
    let pause = Pause::new(&scratch, "let-go");
    let mut cmd = files.command("0.3", extra, &payload);
    pause.arm(tag.on(&mut cmd));
    let shared_reader = if shared {
        let (reader, writer) = std::io::pipe().unwrap();
        cmd.stdout(writer.try_clone().unwrap()).stderr(writer);
        Some(reader)
    } else {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        None
    };
    let caller = guard.spawn(&mut cmd);
    drop(cmd);
    let (out, err) = match shared_reader {
        Some(reader) => (None, std::thread::spawn(move || to_the_end(reader, "the caller's stdout and stderr"))),
        None => {
            let child = guard.child(caller);
            let (out, err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
            let out = std::thread::spawn(move || to_the_end(out, "the caller's stdout"));
            (Some(out), std::thread::spawn(move || to_the_end(err, "the caller's stderr")))
        }
    };
    pause.wait_reached();
    wait_line(&written);
    eventually("the output in the file", || fs::metadata(&files.output).unwrap().len() == total);
    pause.release();
    assert_eq!(guard.wait(caller), 122, "a run still going after DUR");
    files.record(&mut guard);
    files.cancel();
    let line = format!(
        "pgrun: still running after 300ms: pid file {}, output {} from byte {total}\n",
        files.pidfile, files.output
    );
    let err = err.join().unwrap();
    let stderr = String::from_utf8_lossy(&err);
    assert_eq!(handed_off_at(&stderr, &files, "300ms"), total, "N");
    (out.map_or_else(Vec::new, |out| out.join().unwrap()), err, line)
}

/// The command's stderr ended mid-line: the hand-off line begins a line of
/// its own, after a newline.
#[test]
fn the_hand_off_line_begins_a_line_after_stderr_ends_mid_line() {
    let (stdout, stderr, line) = caller_got(&[], "printf abc >&2", 3, false);
    assert_eq!(String::from_utf8_lossy(&stderr), format!("abc\n{line}"));
    assert_eq!(stdout, b"");
}

/// The command's stderr ended with a newline: no blank line before the
/// hand-off line.
#[test]
fn the_hand_off_line_adds_no_blank_line_after_a_whole_line() {
    let (_, stderr, line) = caller_got(&[], "printf 'abc\\n' >&2", 4, false);
    assert_eq!(String::from_utf8_lossy(&stderr), format!("abc\n{line}"));
}

/// Under `2>&1` the caller's stderr is its stdout: stdout's bytes ending
/// mid-line there put the hand-off line after a newline too.
#[test]
fn the_hand_off_line_begins_a_line_after_stdout_ends_mid_line_on_one_destination() {
    let (_, both, line) = caller_got(&[], "printf abc", 3, true);
    assert_eq!(String::from_utf8_lossy(&both), format!("abc\n{line}"));
}

/// stdout ending mid-line is no matter for a stderr of its own: no newline
/// before the hand-off line there.
#[test]
fn stdout_ending_mid_line_adds_no_newline_to_a_stderr_of_its_own() {
    let (stdout, stderr, line) = caller_got(&[], "printf abc", 3, false);
    assert_eq!(stdout, b"abc");
    assert_eq!(String::from_utf8_lossy(&stderr), line);
}

/// Under `--max-output` the caller's stderr got the head (10 bytes of 20),
/// not what the file holds: the head's last byte is what counts.
#[test]
fn under_max_output_the_hand_off_line_goes_by_the_heads_last_byte() {
    let cut = ["--max-output", "20"];
    let (_, stderr, line) = caller_got(&cut, "printf '123456789\\nabcdefghij' >&2", 20, false);
    assert_eq!(String::from_utf8_lossy(&stderr), format!("123456789\n{line}"), "a head ending a line");
    let (_, stderr, line) = caller_got(&cut, "printf 'abcdefghijklmnopqr\\n' >&2", 19, false);
    assert_eq!(String::from_utf8_lossy(&stderr), format!("abcdefghij\n{line}"), "a head ending mid-line");
}

/// A line of pgrun's own after the command's bytes (`--verbose`) ends the
/// line: no blank line before the hand-off line.
#[test]
fn after_a_line_of_pgruns_own_the_hand_off_line_adds_no_blank_line() {
    let (_, stderr, line) = caller_got(&["--verbose"], "printf abc >&2", 3, false);
    let stderr = String::from_utf8_lossy(&stderr);
    assert!(stderr.contains("abcpgrun: "), "no verbose line after the command's bytes: {stderr:?}");
    assert!(stderr.ends_with(&format!("file\n{line}")) && !stderr.contains("\n\n"), "{stderr:?}");
}

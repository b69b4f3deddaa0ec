//! `--stdin-pipe` and `pgrun send`: each sentence of the contract's
//! "Input: `--stdin-pipe` and `pgrun send`" section against the built
//! binary, on both paths (Linux reaches the pipe through the supervising
//! pgrun's fds, the portable path through a folder beside the pid file:
//! what only that folder does is `send_portable.rs`'s).

use crate::util::*;
use std::fs;
use std::path::Path;
use std::process::{Output, Stdio};

/// `pgrun send ARGS... PIDFILE`.
fn send(pidfile: &Path, args: &[&str]) -> Output {
    run(pgrun(["send"]).args(args).arg(pidfile))
}

/// `pgrun send PIDFILE TEXT`.
fn send_to(pidfile: &Path, text: &str) -> Output {
    run(&mut pgrun(["send", pidfile.to_str().unwrap(), text]))
}

/// `pgrun send PIDFILE TEXT`, with status 0.
fn send_text(pidfile: &Path, text: &str) {
    assert_status(&send_to(pidfile, text), 0, &format!("send {text:?}"));
}

/// `pgrun -p PIDFILE --stdin-pipe -- sh -c PAYLOAD`, started with stdin on
/// /dev/null (so the command would read end-of-file at once from pgrun's
/// own stdin), published.
fn start_piped(guard: &mut Guard, pidfile: &Path, payload: &str) -> usize {
    start_published(guard, pidfile, &["--stdin-pipe"], payload).0
}

#[test]
fn stdin_pipe_needs_a_pidfile() {
    let out = run(&mut pgrun(["--stdin-pipe", "--", "true"]));
    assert_status(&out, 125, "--stdin-pipe without --pidfile");
    assert!(stderr_of(&out).contains("--pidfile"), "{}", stderr_of(&out));
}

#[test]
fn sends_reach_the_command_in_order_and_only_eof_ends_its_input() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let out = scratch.path("out");
    let index = start_piped(&mut guard, &pidfile, &format!("cat > {}; echo ended >> {0}", out.display()));
    send_text(&pidfile, "one\n");
    // Read, and not at its end: pgrun's own stdin (/dev/null) would have ended it.
    eventually("the first send read", || fs::read_to_string(&out).unwrap_or_default() == "one\n");
    let file = scratch.path("two");
    fs::write(&file, "two\n").unwrap();
    assert_status(&send(&pidfile, &["--file", file.to_str().unwrap()]), 0, "send --file");
    // Its own stdin when neither TEXT nor --file is given.
    let mut from_stdin = pgrun(["send", pidfile.to_str().unwrap()]);
    from_stdin.stdin(
        fs::File::open({
            let f = scratch.path("three");
            fs::write(&f, "three\n").unwrap();
            f
        })
        .unwrap(),
    );
    assert_status(&run(&mut from_stdin), 0, "send from stdin");
    eventually("three sends read", || fs::read_to_string(&out).unwrap_or_default() == "one\ntwo\nthree\n");
    assert!(guard.child(index).try_wait().unwrap().is_none(), "the run ended before --eof");
    let out_eof = run(&mut pgrun(["send", "--eof", pidfile.to_str().unwrap(), "last\n"]));
    assert_status(&out_eof, 0, "send --eof TEXT");
    assert_eq!(guard.wait(index), 0, "cat did not end at --eof");
    assert_eq!(fs::read_to_string(&out).unwrap(), "one\ntwo\nthree\nlast\nended\n");
}

#[test]
fn eof_alone_only_closes_the_pipe_and_a_later_send_is_refused() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let out = scratch.path("out");
    let index = start_piped(&mut guard, &pidfile, &format!("cat > {}; echo ended >> {0}; sleep 300", out.display()));
    // --eof alone reads nothing from send's stdin: a stdin that never ends
    // (a pipe held open here) does not hold it up.
    let (_reader, _writer) = std::io::pipe().unwrap();
    let mut eof = pgrun(["send", "--eof", pidfile.to_str().unwrap()]);
    eof.stdin(_reader);
    assert_status(&run(&mut eof), 0, "send --eof");
    assert_eq!(wait_line(&out), "ended");
    let again = send_to(&pidfile, "x");
    assert_status(&again, 125, "send after --eof");
    assert!(stderr_of(&again).contains("closed"), "{}", stderr_of(&again));
    assert!(guard.child(index).try_wait().unwrap().is_none());
}

/// Writes of 4096 bytes from senders at once: the command reads whole
/// blocks, never two senders' bytes mixed within one.
#[test]
fn writes_of_at_most_4096_bytes_are_never_interleaved() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let out = scratch.path("out");
    let go = scratch.path("go");
    // The command reads nothing until told: the senders fill the pipe and
    // then contend for each block of room as it drains.
    let payload = format!("while [ ! -e {} ]; do sleep 0.01; done; cat > {}", go.display(), out.display());
    let index = start_piped(&mut guard, &pidfile, &payload);
    const SENDERS: usize = 4;
    const EACH: usize = 64 * 4096;
    let mut senders = Vec::new();
    for i in 0..SENDERS {
        let file = scratch.path(&format!("from{i}"));
        fs::write(&file, vec![b'a' + i as u8; EACH]).unwrap();
        let mut cmd = pgrun(["send", "--file", file.to_str().unwrap(), pidfile.to_str().unwrap()]);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        senders.push(guard.spawn(&mut cmd));
    }
    fs::write(&go, "").unwrap();
    for s in senders {
        assert_eq!(guard.wait(s), 0, "a sender failed");
    }
    assert_status(&send(&pidfile, &["--eof"]), 0, "send --eof");
    assert_eq!(guard.wait(index), 0);
    let bytes = fs::read(&out).unwrap();
    assert_eq!(bytes.len(), SENDERS * EACH);
    for (n, block) in bytes.chunks(4096).enumerate() {
        assert!(block.iter().all(|b| *b == block[0]), "block {n} mixes senders' bytes");
    }
    for i in 0..SENDERS {
        assert_eq!(bytes.iter().filter(|b| **b == b'a' + i as u8).count(), EACH, "sender {i}'s bytes");
    }
}

#[test]
fn a_command_that_reads_nothing_makes_send_time_out_saying_how_much_was_written() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    start_piped(&mut guard, &pidfile, "sleep 300");
    let file = scratch.path("mib");
    fs::write(&file, vec![b'x'; 1 << 20]).unwrap();
    let out = send(&pidfile, &["--timeout", "1", "--file", file.to_str().unwrap()]);
    assert_status(&out, 124, "send --timeout 1 of 1 MiB to a command that reads nothing");
    let err = stderr_of(&out);
    let written: usize = err
        .split(": ")
        .nth(2)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no byte count in {err:?}"));
    assert!(written > 0 && written < 1 << 20 && written.is_multiple_of(4096), "{written} bytes: {err}");
    assert!(err.contains("bytes written to the stdin pipe"), "{err}");
}

#[test]
fn no_live_run_is_1() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("p");
    let out = send_to(&pidfile, "x");
    assert_status(&out, 1, "send with no pid file");
    assert!(stderr_of(&out).starts_with("pgrun: no live run at"), "{}", stderr_of(&out));
    fs::write(&pidfile, "999999\n").unwrap();
    assert_status(&send_to(&pidfile, "x"), 1, "send to a stale pid file");
}

#[test]
fn a_run_without_a_stdin_pipe_is_125() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    start_published(&mut guard, &pidfile, &[], "sleep 300");
    let out = send_to(&pidfile, "x");
    assert_status(&out, 125, "send to a run without --stdin-pipe");
    assert!(stderr_of(&out).contains("has no stdin pipe"), "{}", stderr_of(&out));
}

#[test]
fn a_command_that_closed_its_stdin_is_125() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let closed = scratch.path("closed");
    start_piped(&mut guard, &pidfile, &format!("exec 0<&-; echo > {}; sleep 300", closed.display()));
    wait_line(&closed);
    let out = send_to(&pidfile, "x");
    assert_status(&out, 125, "send to a command with no stdin");
    assert!(stderr_of(&out).contains("no longer reads its stdin"), "{}", stderr_of(&out));
}

#[test]
fn another_users_send_is_refused() {
    if !require(Capability::UnprivilegedUser) {
        return;
    }
    let scratch = Scratch::new();
    open_up(scratch.dir(), false);
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let out = scratch.path("out");
    start_piped(&mut guard, &pidfile, &format!("cat > {}", out.display()));
    let refused = run(&mut as_nobody(pgrun_path(), &["send", pidfile.to_str().unwrap(), "x"]));
    assert_status(&refused, 125, "send as nobody");
    assert!(stderr_of(&refused).contains("another user's run"), "{}", stderr_of(&refused));
    if cfg!(feature = "posix-fallback") {
        // Nor through the folder's FIFO directly: nobody cannot enter it.
        let folder = crate::send_portable::stdin_folder(&pidfile);
        let fifo = folder.join("in");
        let wrote = run(&mut as_nobody("sh", &["-c", &format!("printf theirs > {}", fifo.display())]));
        assert_ne!(code_of(wrote.status), 0, "nobody could write to {}", fifo.display());
    } else {
        // Nor through the pgrun's fds directly: the kernel refuses them to nobody.
        let holder = lock_holder(&pidfile).expect("a live run");
        let fds = format!("/proc/{holder}/fd");
        let looked = run(&mut as_nobody("ls", &[&fds]));
        assert_ne!(code_of(looked.status), 0, "nobody could list {fds}");
    }
    send_text(&pidfile, "mine");
    eventually("the owner's send", || fs::read_to_string(&out).unwrap_or_default() == "mine");
    // Nothing was created beside the pid file for senders to open (on the
    // portable path, but the folder only the run's user can enter).
    let mut names: Vec<String> =
        fs::read_dir(scratch.dir()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    let folder = crate::send_portable::stdin_folder(&pidfile);
    let folder_name = folder.file_name().unwrap().to_string_lossy().into_owned();
    let want: Vec<&str> =
        if cfg!(feature = "posix-fallback") { vec![&folder_name, "out", "p"] } else { vec!["out", "p"] };
    assert_eq!(names, want);
}

#[test]
fn a_detached_run_has_its_stdin_pipe() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let out = scratch.path("out");
    let started = run(pgrun(["--detach", "--stdin-pipe", "-p"]).arg(&pidfile).args([
        "--",
        "sh",
        "-c",
        &format!("cat > {}; echo ended >> {0}", out.display()),
    ]));
    assert_status(&started, 0, "--detach --stdin-pipe");
    let pgid: i32 = fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    guard.record_group(pgid);
    let holder = lock_holder(&pidfile).expect("a live run");
    guard.record(holder);
    send_text(&pidfile, "hi\n");
    assert_status(&send(&pidfile, &["--eof"]), 0, "send --eof");
    wait_dead(holder);
    assert_eq!(fs::read_to_string(&out).unwrap(), "hi\nended\n");
}

/// `--eof` returns once the supervising pgrun has closed its end, and
/// `--timeout` bounds that wait too: a pgrun held stopped does not close
/// it, and send says so with 124; continued, it closes it.
#[test]
fn eof_waits_for_the_pgrun_to_close_its_end_within_the_timeout() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let out = scratch.path("out");
    let index = start_piped(&mut guard, &pidfile, &format!("cat > {}; echo ended >> {0}", out.display()));
    let holder = lock_holder(&pidfile).expect("a live run");
    guard.record(holder);
    crate::util::send(holder, libc::SIGSTOP);
    eventually("pgrun stopped", || state(holder).as_deref() == Some("T"));
    let eof = send_eof_within(&pidfile, "0.5");
    crate::util::send(holder, libc::SIGCONT);
    assert_status(&eof, 124, "send --eof to a stopped pgrun");
    assert!(stderr_of(&eof).contains("did not close the stdin pipe"), "{}", stderr_of(&eof));
    // The request stands: continued, pgrun closes its end and cat ends.
    assert_eq!(guard.wait(index), 0);
    assert_eq!(fs::read_to_string(&out).unwrap(), "ended\n");
}

fn send_eof_within(pidfile: &Path, timeout: &str) -> Output {
    run(&mut pgrun(["send", "--eof", "--timeout", timeout, pidfile.to_str().unwrap()]))
}

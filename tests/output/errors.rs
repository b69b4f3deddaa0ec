//! Errors on the relay's way: a failed read of the command's output (EIO,
//! injected with strace) and a failed last flush (a terminal that hangs
//! up) are each said in one line and added to the report, never passed off
//! as the whole stream.

use super::require_strace;
use crate::util::*;
use std::fs;
use std::io::Read;
use std::process::{Command, Stdio};

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

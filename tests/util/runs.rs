//! Runs in the background: starting pgrun until its pid file is
//! published, a `pgrun wait` once it waits, reading a child's stderr up to a
//! line, the next run on a pid file, and test-only pauses of pgrun at a
//! named step.

use super::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Start `pgrun -p PIDFILE ARGS... -- sh -c PAYLOAD` in the background and
/// wait until its pid file is published. Returns the child's index and the
/// group id it published.
pub fn start_published(guard: &mut Guard, pidfile: &Path, extra: &[&str], payload: &str) -> (usize, i32) {
    start_published_from(guard, pidfile, &mut published_run(pidfile, extra, payload))
}

/// [`start_published`], with SIGTERM ignored from the command's first
/// instruction ([`with_ignored`]): a command that ignores TERM with no
/// `trap` for a signal sent right after the publication to race.
pub fn start_published_ignoring_term(guard: &mut Guard, pidfile: &Path, extra: &[&str], payload: &str) -> (usize, i32) {
    let mut cmd = published_run(pidfile, extra, payload);
    start_published_from(guard, pidfile, with_ignored(&mut cmd, libc::SIGTERM))
}

pub(super) fn published_run(pidfile: &Path, extra: &[&str], payload: &str) -> Command {
    let mut args: Vec<&str> = vec!["-p", pidfile.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", payload]);
    pgrun(&args)
}

pub(super) fn start_published_from(guard: &mut Guard, pidfile: &Path, cmd: &mut Command) -> (usize, i32) {
    let index = guard.spawn(cmd);
    let pgid: i32 = wait_line(pidfile).parse().expect("pid file holds a number");
    guard.record(pgid);
    guard.record_group(pgid);
    (index, pgid)
}

/// Spawn `pgrun wait -v ARGS...` (stdout and stderr piped) and return once
/// it has found the live run and is waiting for it (its verbose line says
/// so). The rest of its stderr stays in the pipe.
pub fn spawn_waiting(guard: &mut Guard, args: &[&str]) -> usize {
    let mut all = vec!["wait", "-v"];
    all.extend_from_slice(args);
    let index = guard.spawn(pgrun(&all).stdout(Stdio::piped()).stderr(Stdio::piped()));
    read_stderr_until(guard, index, "waiting for pgrun");
    index
}

/// Read child `index`'s stderr (piped) until a line contains `what`; the
/// rest stays in the pipe (one byte at a time: nothing after the line is
/// taken).
pub fn read_stderr_until(guard: &mut Guard, index: usize, what: &str) {
    let stderr = guard.child(index).stderr.as_mut().expect("stderr piped");
    let mut line = Vec::new();
    loop {
        let mut byte = [0u8];
        let n = std::io::Read::read(stderr, &mut byte).expect("read stderr");
        assert!(n == 1, "ended before saying {what:?}: {}", String::from_utf8_lossy(&line));
        line.push(byte[0]);
        if byte[0] == b'\n' {
            if String::from_utf8_lossy(&line).contains(what) {
                return;
            }
            line.clear();
        }
    }
}

/// Start the next run on pid file `pidfile` (a `touch` of a witness file
/// in `scratch`) and say whether its command ran: 0 and the witness made,
/// or 143 (a request left at the marker path cancelled it before its
/// start) and none.
pub fn next_run_runs(scratch: &Scratch, pidfile: &str) -> bool {
    let witness = scratch.path("ran");
    let out = run(pgrun(["-p", pidfile, "--", "touch", witness.to_str().unwrap()]).stdin(Stdio::null()));
    let ran = witness.exists();
    assert_status(&out, if ran { 0 } else { 143 }, "the next run on the pid file");
    ran
}

/// A test-only pause of pgrun at a named step (see `src/test_hook.rs`):
/// the environment entry that asks for it, a way to know pgrun got there,
/// and a way to let it go on.
pub struct Pause {
    gate: PathBuf,
    step: &'static str,
}

impl Pause {
    pub fn new(scratch: &Scratch, step: &'static str) -> Self {
        Pause { gate: scratch.path(&format!("gate-{step}")), step }
    }
    /// Ask `cmd` (a pgrun) to pause at the step.
    pub fn arm<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env("PGRUN_TEST_PAUSE", format!("{}={}", self.step, self.gate.display()))
    }
    /// Wait until pgrun has reached the step and is waiting there.
    pub fn wait_reached(&self) {
        let reached = PathBuf::from(format!("{}.reached", self.gate.display()));
        eventually(&format!("pgrun to reach step {}", self.step), || reached.exists());
    }
    /// Let pgrun go on.
    pub fn release(&self) {
        fs::write(&self.gate, b"").expect("open the gate");
    }
}

//! Processes the tests start beside or as their commands: the canary (a
//! bystander that logs any signal it gets), the fifo siblings of the
//! children-file race tests, and the endless writer stopped mid-stream.

use super::*;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

/// A bystander: a process in a group of its own that logs every catchable
/// signal it receives to `canary.log` (and so must end the test alive with
/// an empty log). Returns its pid (= its group id).
pub fn spawn_canary(guard: &mut Guard, scratch: &Scratch) -> i32 {
    use std::os::unix::process::CommandExt;
    let script = canary_script(scratch);
    let ready = scratch.path("canary.ready");
    let mut cmd = Command::new(python3());
    cmd.args(["-c", &script]).stdin(Stdio::null()).process_group(0);
    let (pid, _) = guard.spawn_reaped(&mut cmd);
    guard.record_group(pid);
    wait_line(&ready);
    pid
}

/// The canary's Python program: log every catchable signal to
/// `canary.log`, write `canary.ready`, wait.
pub fn canary_script(scratch: &Scratch) -> String {
    let log = scratch.path("canary.log");
    let ready = scratch.path("canary.ready");
    format!(
        "import signal, os\n\
         def note(n, f):\n    open({log:?}, 'a').write(signal.Signals(n).name + '\\n')\n\
         for s in signal.valid_signals():\n    \
             try: signal.signal(s, note)\n    \
             except (OSError, ValueError): pass\n\
         open({ready:?}, 'w').write('ready\\n')\n\
         while True: signal.pause()\n",
        log = log.display().to_string(),
        ready = ready.display().to_string()
    )
}

/// The canary is alive and has received no signal.
pub fn assert_canary_untouched(scratch: &Scratch, canary: i32) {
    assert!(!is_dead(canary), "the bystander {canary} was killed");
    let log = fs::read_to_string(scratch.path("canary.log")).unwrap_or_default();
    assert!(log.is_empty(), "the bystander {canary} received signals: {log:?}");
}

/// The children-file race tests' siblings: makes `dir/fifo` and returns the
/// shell lines that fork 12 processes blocked reading it, each pid appended
/// to `dir/siblings` (the payload then appends `done`; see
/// [`fifo_siblings`]).
pub fn fork_fifo_siblings(scratch: &Scratch) -> String {
    let fifo = scratch.path("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let dir = scratch.sh();
    format!("for i in 1 2 3 4 5 6 7 8 9 10 11 12; do cat {dir}/fifo >/dev/null & echo $! >> {dir}/siblings; done")
}

/// The siblings of [`fork_fifo_siblings`]: waits for the payload's `done`
/// line in `dir/siblings`, records the pids with `guard`, and returns them.
pub fn fifo_siblings(scratch: &Scratch, guard: &mut Guard) -> Vec<i32> {
    eventually("the 12 siblings", || {
        fs::read_to_string(scratch.path("siblings")).unwrap_or_default().ends_with("done\n")
    });
    let siblings: Vec<i32> =
        fs::read_to_string(scratch.path("siblings")).unwrap().lines().filter_map(|l| l.parse().ok()).collect();
    assert_eq!(siblings.len(), 12);
    for &pid in &siblings {
        guard.record(pid);
    }
    siblings
}

/// End [`fifo_siblings`]'s processes (EOF on the fifo) and wait until their
/// parent has reaped them.
pub fn end_fifo_siblings(scratch: &Scratch, siblings: &[i32]) {
    drop(fs::OpenOptions::new().write(true).open(scratch.path("fifo")).unwrap());
    for &pid in siblings {
        eventually("a sibling reaped", || !Path::new(&format!("/proc/{pid}")).exists());
    }
}

/// The last whole line of an endless writer's log (`DIR/log`: it appends
/// each line's number after writing the line).
pub fn last_logged(dir: &Path) -> Option<u64> {
    let log = fs::read_to_string(dir.join("log")).ok()?;
    log.strip_suffix('\n').unwrap_or("").rsplit('\n').next()?.parse().ok()
}

/// Stop the endless writer run `index` (published at `pidfile`) the way
/// `how` says, mid-stream: "timeout" (its `-t` ends it), "cancel" or
/// "sigterm" (once the writer has logged 2000 lines); then wait for pgrun
/// and check its status (124 for the timeout, else 143).
pub fn stop_mid_stream(how: &str, guard: &mut Guard, index: usize, dir: &Path, pidfile: &Path) {
    if how != "timeout" {
        eventually("a long stream", || last_logged(dir) > Some(2000));
    }
    match how {
        "cancel" => assert_status(&run(&mut pgrun(["cancel", pidfile.to_str().unwrap()])), 0, "cancel"),
        "sigterm" => send(guard.child(index).id() as i32, libc::SIGTERM),
        _ => {}
    }
    let code = guard.wait(index);
    assert_eq!(code, if how == "timeout" { 124 } else { 143 }, "{how}");
}

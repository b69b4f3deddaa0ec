//! `--die-with-parent`: the caller's death is a cancel; the exit of the
//! caller's *thread* that started pgrun is not.

use crate::util::*;
use std::fs;
use std::process::Command;

/// A Python parent that starts pgrun (from a thread that then ends, if
/// `from_thread`, once the command runs: so pgrun has armed its watch),
/// reports pgrun's pid, and exits when `exit` exists.
fn parent_script(scratch: &Scratch, from_thread: bool) -> String {
    let dir = scratch.sh();
    format!(
        "import os, subprocess, threading, time\n\
         def start():\n    \
             p = subprocess.Popen(['{pgrun}', '-v', '--die-with-parent', '--report', '{dir}/r.json', '--', 'sh', '-c',\n        \
                 'echo $$ > {dir}/cmd.pid; exec sleep 300'], stderr=open('{dir}/pgrun.log', 'w'))\n    \
             open('{dir}/pgrun.pid', 'w').write('%d\\n' % p.pid)\n    \
             while not os.path.exists('{dir}/cmd.pid'): time.sleep(0.01)\n\
         if {from_thread}:\n    \
             t = threading.Thread(target=start); t.start(); t.join()\n    \
             open('{dir}/thread.done', 'w').write('done\\n')\n\
         else:\n    \
             start()\n\
         while not os.path.exists('{dir}/exit'): time.sleep(0.01)\n\
         os._exit(0)\n",
        pgrun = pgrun_path(),
        from_thread = if from_thread { "True" } else { "False" },
    )
}

#[test]
fn the_parent_process_exiting_cancels_the_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let (parent, done) = guard.spawn_reaped(Command::new(python3()).args(["-c", &parent_script(&scratch, false)]));
    let pgrun_pid = wait_pid(&scratch.path("pgrun.pid"), &mut guard);
    let command = wait_pid(&scratch.path("cmd.pid"), &mut guard);
    fs::write(scratch.path("exit"), "").unwrap();
    assert_eq!(done.recv().unwrap(), 0, "the parent {parent}");
    wait_dead(pgrun_pid);
    eventually("the report", || scratch.path("r.json").exists());
    assert_eq!(json(&scratch.path("r.json"))["reason"], "cancelled");
    assert!(is_dead(command), "the command outlived its cancelled run");
}

#[test]
fn a_parent_thread_exiting_does_not_cancel_the_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let (_, done) = guard.spawn_reaped(Command::new(python3()).args(["-c", &parent_script(&scratch, true)]));
    let pgrun_pid = wait_pid(&scratch.path("pgrun.pid"), &mut guard);
    let command = wait_pid(&scratch.path("cmd.pid"), &mut guard);
    wait_line(&scratch.path("thread.done"));
    if !cfg!(feature = "posix-fallback") {
        // The kernel's parent-death signal came, and pgrun looked and
        // carried on.
        eventually("pgrun to see the thread exit", || {
            fs::read_to_string(scratch.path("pgrun.log")).unwrap_or_default().contains("parent thread exited")
        });
    }
    assert!(!is_dead(pgrun_pid) && !is_dead(command), "the run was stopped by a thread's exit");
    assert!(!scratch.path("r.json").exists());
    // Now the parent process itself exits: that does cancel.
    fs::write(scratch.path("exit"), "").unwrap();
    assert_eq!(done.recv().unwrap(), 0);
    wait_dead(pgrun_pid);
    eventually("the report", || scratch.path("r.json").exists());
    assert_eq!(json(&scratch.path("r.json"))["reason"], "cancelled");
}

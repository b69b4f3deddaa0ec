//! Other users and PID namespaces: a pid file written in another PID
//! namespace is never read as a host group, another user's lock or marker
//! fakes nothing (no live run, no cancel, no pending request), and status by
//! another user sees the same namespace.

use super::stale_file;
use crate::util::run as run_cmd;
use crate::util::*;
use std::fs;
use std::process::{Command, Stdio};

#[test]
fn a_pid_file_in_a_pid_namespace_is_never_read_as_a_host_group() {
    if !require(Capability::PidNamespaces) {
        return;
    }
    // The container's run gets, inside its namespace, the number that the
    // bystander's group has on the host (ns_last_pid makes that exact).
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let report = scratch.path("r.json");
    let script = format!(
        "echo {} > /proc/sys/kernel/ns_last_pid && exec {} -p {p} --report {} -- sleep 300",
        // The guard takes the next pid, the command the one after it.
        canary - 2,
        pgrun_path(),
        report.display()
    );
    let mut container = Command::new("unshare");
    container.args(["--pid", "--fork", "--mount-proc", "--", "sh", "-c", &script]).stdin(Stdio::null());
    let container = guard.spawn(&mut container);
    assert_eq!(wait_line(&pidfile), canary.to_string(), "the container's group has the bystander's number");
    let holder = lock_holder(&pidfile).expect("the container's pgrun holds the pid file");
    guard.record(holder);

    let out = run_cmd(&mut pgrun(["status", "--json", p]));
    assert_status(&out, 0, "status from the host");
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(state["pid"], holder, "{state}");
    assert_eq!(state["other_pid_namespace"], true, "{state}");
    assert!(state["processes"].is_null(), "the host's group {canary} was counted: {state}");

    let out = run_cmd(&mut pgrun(["cancel", p]));
    assert_status(&out, 0, "cancel from the host");
    assert_eq!(guard.wait(container), 143, "the container's run was stopped through its pgrun");
    assert_eq!(json(&report)["reason"], "cancelled");
    assert_canary_untouched(&scratch, canary);
}

#[test]
fn another_users_read_lock_fakes_nothing() {
    if !require(Capability::UnprivilegedUser) {
        return;
    }
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    open_up(scratch.dir(), false);
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let drop_box = scratch.path("box");
    fs::create_dir(&drop_box).unwrap();
    open_up(&drop_box, true);

    // nobody read-locks a range of the (root-owned, 0644) pid file.
    let lock_as_nobody = |guard: &mut Guard, start: u64, len: u64, name: &str| -> i32 {
        let ready = drop_box.join(name);
        let script = format!(
            "import fcntl, signal, os\n\
             def note(n, f): open({log:?}, 'a').write('signalled\\n')\n\
             signal.signal(signal.SIGTERM, note)\n\
             f = open({p:?})\n\
             fcntl.lockf(f, fcntl.LOCK_SH | fcntl.LOCK_NB, {len}, {start})\n\
             open({ready:?}, 'w').write(str(os.getpid()) + '\\n')\n\
             while True: signal.pause()\n",
            log = drop_box.join(format!("{name}.log")).display().to_string(),
            ready = ready.display().to_string(),
        );
        // The system python: a per-user install (pyenv) is not nobody's.
        let mut cmd = as_nobody("/usr/bin/python3", &["-c", &script]);
        let (pid, _) = guard.spawn_reaped(&mut cmd);
        let locker: i32 = wait_line(&ready).parse().unwrap();
        guard.record(locker);
        assert_eq!(locker, pid, "setpriv execs python3");
        pid
    };

    stale_file(&pidfile, canary);
    let first = lock_as_nobody(&mut guard, 0, 1, "first");
    let out = run_cmd(&mut pgrun(["status", p]));
    assert_status(&out, 1, "a read lock on byte 0 is not a live run");
    let out = run_cmd(&mut pgrun(["cancel", "--wait-start", "0.2", p]));
    assert_status(&out, 1, "cancel of a stale file, no run appearing");
    assert!(!drop_box.join("first.log").exists(), "cancel signalled the other user's process");
    assert!(!is_dead(first));
    assert!(!pidfile.exists(), "the stale file is removed");

    stale_file(&pidfile, canary);
    let _second = lock_as_nobody(&mut guard, 0, 1, "second");
    let witness = scratch.path("ran");
    let out = run_cmd(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 0, "a run replaces a file another user read-locks");
    assert!(witness.exists());

    // A lock over the claim byte blocks starters: refused, naming the process.
    stale_file(&pidfile, canary);
    let third = lock_as_nobody(&mut guard, 0, 0, "third");
    let out = run_cmd(&mut pgrun(["-p", p, "--", "true"]));
    assert_status(&out, 125, "claim byte held by another user");
    assert!(stderr_of(&out).contains(&format!("process {third} of another user")), "{}", stderr_of(&out));
    assert_canary_untouched(&scratch, canary);
}

#[test]
fn another_users_marker_is_ignored() {
    if !require(Capability::UnprivilegedUser) {
        return;
    }
    let scratch = Scratch::new();
    open_up(scratch.dir(), true); // a sticky, world-writable folder like /tmp
    let sd = scratch.sh();
    let out =
        run_cmd(&mut as_nobody("sh", &["-c", &format!("touch {sd}/job.pid.cancel && mkdir {sd}/dir.pid.cancel")]));
    assert_status(&out, 0, "nobody drops markers");
    for name in ["job.pid", "dir.pid"] {
        let pidfile = scratch.path(name);
        let witness = scratch.path(&format!("{name}.ran"));
        let out =
            run_cmd(&mut pgrun(["-v", "-p", pidfile.to_str().unwrap(), "--", "touch", witness.to_str().unwrap()]));
        assert_status(&out, 0, "another user's marker cancels nothing");
        assert!(witness.exists());
        assert!(stderr_of(&out).contains("ignoring cancel marker"), "{}", stderr_of(&out));
        let out = run_cmd(&mut pgrun(["status", pidfile.to_str().unwrap()]));
        assert_status(&out, 3, "not running, no pending cancel");
        assert!(String::from_utf8_lossy(&out.stdout).contains("ignoring cancel marker"));
    }
}

#[test]
fn status_by_another_user_sees_the_same_pid_namespace() {
    if !require(Capability::UnprivilegedUser) {
        return;
    }
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    open_up(scratch.dir(), false);
    let pidfile = scratch.path("job.pid");
    let _ = start_published(&mut guard, &pidfile, &[], "exec sleep 300");
    let out = run_cmd(&mut as_nobody(pgrun_path(), &["status", "--json", pidfile.to_str().unwrap()]));
    assert_status(&out, 0, "status as nobody");
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(state["other_pid_namespace"], false, "{state}");
    // The portable build counts no processes (no /proc) for anyone.
    if !cfg!(feature = "posix-fallback") {
        assert!(state["processes"].as_u64().is_some_and(|n| n >= 1), "{state}");
    }
}

#[test]
fn keep_pending_cannot_lean_on_another_users_marker() {
    if !require(Capability::UnprivilegedUser) {
        return;
    }
    let scratch = Scratch::new();
    open_up(scratch.dir(), true);
    let pidfile = scratch.path("job.pid");
    let marker = scratch.path("job.pid.cancel");
    let out = run_cmd(&mut as_nobody("touch", &[marker.to_str().unwrap()]));
    assert_status(&out, 0, "nobody drops a marker");
    let out = run_cmd(&mut pgrun(["cancel", "--keep-pending", "--wait-start", "0.2", pidfile.to_str().unwrap()]));
    assert_status(&out, 125, "a cancel that cannot be left pending must not say it is");
    assert!(stderr_of(&out).contains("uid 65534"), "{}", stderr_of(&out));
}

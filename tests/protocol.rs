//! The pid file protocol under races, other users and PID namespaces: a
//! starting run is never taken for a live one, two runs never share a pid
//! file, another user cannot fake a live run or a cancel, a cancel is never
//! lost, and nothing outside the run is ever signalled. Windows found by
//! reading are held open with the test-only pauses (`Pause`).

use crate::util::run as run_cmd;
use crate::util::*;
use std::fs;
use std::os::unix::fs::symlink;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// A stale pid file naming the bystander's group, as a crashed run leaves it.
fn stale_file(path: &std::path::Path, pgid: i32) {
    fs::write(path, format!("{pgid}\n")).unwrap();
}

#[test]
fn a_starting_run_is_not_live_and_cancel_never_trusts_the_old_group() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    stale_file(&pidfile, canary);

    let claimed = Pause::new(&scratch, "claimed");
    let report = scratch.path("r.json");
    let witness = scratch.path("ran");
    let run = guard.spawn(claimed.arm(&mut pgrun([
        "-p",
        p,
        "--report",
        report.to_str().unwrap(),
        "--",
        "touch",
        witness.to_str().unwrap(),
    ])));
    claimed.wait_reached();

    // While the run holds only its claim, nobody may take it for live.
    let out = run_cmd(&mut pgrun(["status", "--json", p]));
    assert_status(&out, 3, "status of a claimed file");
    let state: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(state["state"], "not-running", "{state}");
    assert_eq!(state["starting"], true, "{state}");

    let canceller = guard.spawn(pgrun(["cancel", p]).stderr(Stdio::piped()));
    eventually("cancel to drop its marker", || scratch.path("job.pid.cancel").exists());
    claimed.release();

    assert_eq!(guard.wait(run), 143, "the run was cancelled before it started");
    assert_eq!(json(&report)["reason"], "cancelled-before-start", "pgrun itself exited and wrote its report");
    assert!(!witness.exists(), "the command ran");
    assert_eq!(guard.wait(canceller), 0, "cancel kept the run from starting");
    assert!(!scratch.path("job.pid.cancel").exists(), "marker left behind");
    assert_canary_untouched(&scratch, canary);
}

#[test]
fn sigterm_to_a_starting_run_is_a_cancel_not_a_death() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    stale_file(&pidfile, canary);
    let opened = Pause::new(&scratch, "claim-opened");
    let report = scratch.path("r.json");
    let witness = scratch.path("ran");
    let run = guard.spawn(opened.arm(&mut pgrun([
        "-p",
        pidfile.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--",
        "touch",
        witness.to_str().unwrap(),
    ])));
    opened.wait_reached();
    send(guard.child(run).id() as i32, libc::SIGTERM);
    opened.release();
    assert_eq!(guard.wait(run), 143);
    assert_eq!(json(&report)["reason"], "cancelled-before-start", "pgrun exited by itself, report written");
    assert!(!witness.exists());
    assert_canary_untouched(&scratch, canary);
}

#[test]
fn two_starters_never_share_a_pid_file() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    stale_file(&pidfile, canary);
    let dir = scratch.sh();

    // A claims the stale file; B has opened the same (old) inode.
    let a_claimed = Pause::new(&scratch, "claimed");
    let a = guard.spawn(a_claimed.arm(&mut pgrun([
        "-p",
        p,
        "--",
        "sh",
        "-c",
        &format!("echo $$ > {dir}/a; exec sleep 300"),
    ])));
    a_claimed.wait_reached();
    let b_opened = Pause::new(&scratch, "claim-opened");
    let b_witness = scratch.path("b-ran");
    let b = guard
        .spawn(b_opened.arm(&mut pgrun(["-p", p, "--", "touch", b_witness.to_str().unwrap()])).stderr(Stdio::piped()));
    b_opened.wait_reached();

    // A publishes and lets go of the old inode; only then does B try it.
    a_claimed.release();
    let a_pid = guard.child(a).id() as i32;
    let a_group = wait_pid(&scratch.path("a"), &mut guard);
    guard.record_group(a_group);
    eventually("A to publish", || lock_holder(&pidfile) == Some(a_pid));
    b_opened.release();

    assert_eq!(guard.wait(b), 125, "B must see A's live run and refuse");
    let mut said = String::new();
    std::io::Read::read_to_string(&mut guard.child(b).stderr.take().unwrap(), &mut said).unwrap();
    assert!(said.contains("held by a live run"), "B said: {said:?}");
    assert!(!b_witness.exists(), "B's command ran");
    assert_eq!(wait_line(&pidfile), a_group.to_string(), "the pid file still names A's group");
    assert_eq!(lock_holder(&pidfile), Some(a_pid), "A still holds it");

    assert_status(&run_cmd(&mut pgrun(["cancel", p])), 0, "cancel A");
    assert_eq!(guard.wait(a), 143);
    assert_canary_untouched(&scratch, canary);
}

#[test]
fn a_stale_pid_file_does_not_lose_a_cancel() {
    // The run has opened the stale file when cancel arrives and removes it;
    // cancel must then keep its marker and wait for the run to start.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    stale_file(&pidfile, canary);
    let opened = Pause::new(&scratch, "claim-opened");
    let witness = scratch.path("ran");
    let run = guard.spawn(opened.arm(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()])));
    opened.wait_reached();

    let canceller = guard.spawn(&mut pgrun(["cancel", p]));
    eventually("cancel to remove the stale pid file", || !pidfile.exists());
    assert!(scratch.path("job.pid.cancel").exists(), "cancel withdrew its marker while a run was starting");
    opened.release();

    assert_eq!(guard.wait(run), 143, "the run must not start");
    assert!(!witness.exists(), "the command ran: the cancel was lost");
    assert_eq!(guard.wait(canceller), 0);
    assert!(!scratch.path("job.pid.cancel").exists());
    assert_canary_untouched(&scratch, canary);
}

#[test]
fn a_marker_that_appears_after_the_check_before_the_start_stops_the_run_and_is_consumed() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let report = scratch.path("r.json");
    let dir = scratch.sh();
    let checked = Pause::new(&scratch, "marker-checked");
    let mut cmd = pgrun(["-p", p, "--report", report.to_str().unwrap(), "--"]);
    cmd.args(["sh", "-c", &format!("echo $$ > {dir}/me; exec sleep 300")]);
    let run = guard.spawn(checked.arm(&mut cmd));
    checked.wait_reached();
    fs::write(scratch.path("job.pid.cancel"), "").unwrap();
    checked.release();

    assert_eq!(guard.wait(run), 143, "the marker found right after publishing stops the run");
    let r = json(&report);
    assert_eq!(r["reason"], "cancelled");
    let group = r["pgid"].as_i64().expect("the command ran") as i32;
    assert!(is_dead(group), "the command outlived pgrun");
    assert!(!scratch.path("job.pid.cancel").exists(), "the marker was left behind to cancel the next run");
    let witness = scratch.path("next");
    assert_status(&run_cmd(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()])), 0, "the next run");
    assert!(witness.exists());
}

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

/// pgrun's `-v` says "started 'PROGRAM'" as soon as the command runs: a
/// failure found before the start never says it.
fn assert_never_started(out: &std::process::Output, what: &str) {
    assert_status(out, 125, what);
    let said = stderr_of(out);
    assert!(!said.contains("started '"), "{what}: the command was started before pgrun failed: {said}");
}

#[test]
fn failures_are_found_before_the_command_starts() {
    if !require(Capability::UnprivilegedUser) {
        return;
    }
    if !require(Capability::MountNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let sd = scratch.sh();
    let witness = scratch.path("ran");
    let w = witness.to_str().unwrap();

    // A pid file name longer than NAME_MAX (a name that fits, and so its
    // temporary name, is published: see publish.rs).
    let long = scratch.path(&"a".repeat(256));
    let out = run_cmd(&mut pgrun(["-v", "-p", long.to_str().unwrap(), "--", "touch", w]));
    assert_never_started(&out, "name too long");
    assert!(stderr_of(&out).contains("File name too long"), "{}", stderr_of(&out));

    // No fd left for the pid file. The shell holds 0-2 only: an fd the
    // suite's process held without close-on-exec at the spawn (a test
    // running alongside, or whoever started the suite) would take the one
    // fd the loader needs (exit 127, "libgcc_s.so.1: Error 24").
    let mut sh = Command::new("sh");
    sh.args(["-c", &format!("ulimit -n 4; exec {} -v -p {sd}/job.pid -- touch {w}", pgrun_path())]);
    // SAFETY: close_range is a plain syscall, async-signal-safe.
    unsafe {
        sh.pre_exec(|| {
            libc::close_range(3, libc::c_uint::MAX, 0);
            Ok(())
        })
    };
    let out = run_cmd(&mut sh);
    assert_never_started(&out, "ulimit -n 4");

    // A full file system (a tiny tmpfs, in a mount namespace of our own).
    let full = scratch.path("full");
    fs::create_dir(&full).unwrap();
    let script = format!(
        "mount -t tmpfs -o size=16k tmpfs {f} && (dd if=/dev/zero of={f}/fill bs=4k 2>/dev/null || true) && \
         exec {pg} -v -p {f}/job.pid -- touch {w}",
        f = full.display(),
        pg = pgrun_path()
    );
    let out = run_cmd(Command::new("unshare").args(["--mount", "--", "sh", "-c", &script]));
    assert_never_started(&out, "full file system");
    assert!(stderr_of(&out).contains("No space left"), "{}", stderr_of(&out));

    // A folder the user cannot write, for the pid file and for the report.
    open_up(scratch.dir(), false);
    let drop_box = scratch.path("box");
    fs::create_dir(&drop_box).unwrap();
    open_up(&drop_box, true);
    let nobody_witness = drop_box.join("ran");
    let nw = nobody_witness.to_str().unwrap();
    let pf = format!("{sd}/job.pid");
    let out = run_cmd(&mut as_nobody(pgrun_path(), &["-v", "-p", &pf, "--", "touch", nw]));
    assert_never_started(&out, "pid file in a read-only folder");
    let rp = format!("{sd}/r.json");
    let out = run_cmd(&mut as_nobody(pgrun_path(), &["-v", "--report", &rp, "--", "touch", nw]));
    assert_never_started(&out, "report in a read-only folder");
    assert!(stderr_of(&out).contains("pgrun: cannot prepare report"), "{}", stderr_of(&out));

    assert!(!witness.exists() && !nobody_witness.exists(), "a command ran although pgrun failed");
}

#[test]
fn the_marker_cannot_be_the_pid_file() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let link = scratch.path("link");
    symlink("job.pid", &link).unwrap();
    let dotted = format!("{}/./job.pid", scratch.sh());
    let witness = scratch.path("ran");
    for marker in [p, dotted.as_str(), link.to_str().unwrap()] {
        let out = run_cmd(&mut pgrun(["-p", p, "--cancel-file", marker, "--", "touch", witness.to_str().unwrap()]));
        assert_status(&out, 125, marker);
        assert!(stderr_of(&out).contains("names the pid file itself"), "{}", stderr_of(&out));
        assert_status(&run_cmd(&mut pgrun(["cancel", "--cancel-file", marker, p])), 125, marker);
        assert_status(&run_cmd(&mut pgrun(["status", "--cancel-file", marker, p])), 125, marker);
    }
    assert!(!witness.exists());
}

#[test]
fn cancel_in_a_read_only_folder_still_stops_a_live_run() {
    if !require(Capability::MountNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let (index, _) = start_published(&mut guard, &pidfile, &[], "exec sleep 300");
    let d = scratch.sh();
    let script =
        format!("mount --bind {d} {d} && mount -o remount,bind,ro {d} && exec {} cancel {d}/job.pid", pgrun_path());
    let out = run_cmd(Command::new("unshare").args(["--mount", "--", "sh", "-c", &script]));
    assert_status(&out, 0, "cancel without a marker");
    assert_eq!(guard.wait(index), 143);
}

#[test]
fn cancel_with_a_wait_start_too_large_to_represent_waits() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let canceller = guard.spawn(&mut pgrun(["cancel", "--wait-start", "99999999999999999999d", p]));
    eventually("cancel to drop its marker", || scratch.path("job.pid.cancel").exists());
    assert!(guard.child(canceller).try_wait().unwrap().is_none(), "cancel returned at once");
    let witness = scratch.path("ran");
    let out = run_cmd(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 143, "the run found the marker");
    assert_eq!(guard.wait(canceller), 0);
}

#[test]
fn cancel_continues_a_stopped_pgrun() {
    // A pgrun stopped as a job (here by SIGSTOP) must still act on cancel.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let (index, pgid) = start_published(&mut guard, &pidfile, &[], "exec sleep 300");
    let pgrun_pid = guard.child(index).id() as i32;
    send(pgrun_pid, libc::SIGSTOP);
    eventually("pgrun to stop", || state(pgrun_pid).as_deref() == Some("T"));
    let canceller = guard.spawn(&mut pgrun(["cancel", pidfile.to_str().unwrap()]));
    assert_eq!(guard.wait(index), 143, "the stopped pgrun ran its stop sequence");
    assert_eq!(guard.wait(canceller), 0);
    assert!(is_dead(pgid));
}

#[test]
fn names_planted_at_the_temporary_pid_file_path_do_not_block_a_run() {
    if !require(Capability::UnprivilegedUser) {
        return;
    }
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    open_up(scratch.dir(), true); // sticky and world-writable, like /tmp
    let pidfile = scratch.path("job.pid");
    let claimed = Pause::new(&scratch, "claimed");
    let dir = scratch.sh();
    let run = guard.spawn(claimed.arm(&mut pgrun([
        "-p",
        pidfile.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &format!("echo ran > {dir}/ran"),
    ])));
    claimed.wait_reached();
    // nobody knows pgrun's pid and plants a folder it cannot remove at the
    // temporary name the pid file would be written under.
    let planted = scratch.path(&format!(".job.pid.pgrun-{}.tmp", guard.child(run).id()));
    let p = planted.to_str().unwrap();
    let out = run_cmd(&mut as_nobody("sh", &["-c", &format!("mkdir {p} && touch {p}/x")]));
    assert_status(&out, 0, "nobody plants a folder");
    claimed.release();
    assert_eq!(guard.wait(run), 0, "the run must not be blocked by another user's planted name");
    assert_eq!(wait_line(&scratch.path("ran")), "ran");
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

#[test]
fn a_stale_file_removed_behind_a_starting_runs_back_is_not_replaced_over_a_new_one() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    stale_file(&pidfile, canary);
    let spawned = Pause::new(&scratch, "spawned");
    let a = guard.spawn(spawned.arm(&mut pgrun(["-p", p, "--", "sleep", "300"])));
    spawned.wait_reached();
    // Somebody removes the stale file by hand, and another program (no
    // pgrun: those wait for A) writes a file there.
    fs::remove_file(&pidfile).unwrap();
    fs::write(&pidfile, "not a run\n").unwrap();
    spawned.release();
    assert_eq!(guard.wait(a), 125, "A must not replace a file it did not claim");
    assert_eq!(fs::read_to_string(&pidfile).unwrap(), "not a run\n");
    assert_canary_untouched(&scratch, canary);
}

#[test]
fn a_run_starting_after_a_stale_file_was_removed_waits_for_the_one_that_claimed_it() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    stale_file(&pidfile, canary);
    let dir = scratch.sh();
    let spawned = Pause::new(&scratch, "spawned");
    let a = guard.spawn(spawned.arm(&mut pgrun([
        "-p",
        p,
        "--",
        "sh",
        "-c",
        &format!("echo $$ > {dir}/a; exec sleep 300"),
    ])));
    spawned.wait_reached();
    let a_group = wait_pid(&scratch.path("a"), &mut guard);
    guard.record_group(a_group);
    // Somebody removes the stale file by hand; B finds no file.
    fs::remove_file(&pidfile).unwrap();
    let b_said = scratch.path("b.err");
    let b_witness = scratch.path("b-ran");
    let b = guard.spawn(
        pgrun(["-v", "-p", p, "--", "touch", b_witness.to_str().unwrap()]).stderr(fs::File::create(&b_said).unwrap()),
    );
    eventually("B to wait for A (or to end)", || {
        fs::read_to_string(&b_said).unwrap_or_default().contains("another run is starting")
            || guard.child(b).try_wait().unwrap().is_some()
    });
    assert!(guard.child(b).try_wait().unwrap().is_none(), "B ended while A was starting");
    assert!(!pidfile.exists(), "B published while A was starting");
    spawned.release();
    assert_eq!(guard.wait(b), 125, "B must refuse A's live run: {}", fs::read_to_string(&b_said).unwrap());
    assert!(!b_witness.exists(), "B's command ran");
    assert_eq!(wait_line(&pidfile), a_group.to_string(), "A published its own file");
    assert_eq!(lock_holder(&pidfile), Some(guard.child(a).id() as i32));
    assert_status(&run_cmd(&mut pgrun(["cancel", p])), 0, "cancel A");
    assert_eq!(guard.wait(a), 143);
    assert_canary_untouched(&scratch, canary);
}

#[test]
fn a_cancel_without_a_marker_still_waits_for_a_live_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let nowhere = scratch.path("missing/job.cancel");
    let mut canceller = pgrun([
        "cancel",
        "-v",
        "--wait-start",
        "60",
        "--cancel-file",
        nowhere.to_str().unwrap(),
        pidfile.to_str().unwrap(),
    ]);
    let canceller = guard.spawn(canceller.stderr(Stdio::piped()));
    let mut first = String::new();
    let mut err = std::io::BufReader::new(guard.child(canceller).stderr.take().unwrap());
    std::io::BufRead::read_line(&mut err, &mut first).unwrap();
    assert!(first.contains("cannot create cancel marker"), "{first}");
    // Not start_published: the canceller may stop the run before this test
    // gets to read its pid file.
    let run = guard.spawn(&mut pgrun(["-p", pidfile.to_str().unwrap(), "--", "sleep", "300"]));
    assert_eq!(guard.wait(canceller), 0, "the live run was found and stopped");
    assert_eq!(guard.wait(run), 143);
    // A run whose marker could never exist refuses to start.
    let out = run_cmd(&mut pgrun([
        "-p",
        pidfile.to_str().unwrap(),
        "--cancel-file",
        nowhere.to_str().unwrap(),
        "--",
        "true",
    ]));
    assert_status(&out, 125, "marker folder missing");
    assert!(stderr_of(&out).contains("cancel marker folder"), "{}", stderr_of(&out));
}

#[test]
fn answers_that_cannot_be_written_are_failures() {
    let scratch = Scratch::new();
    let full = || fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let out = pgrun(["--version"]).stdout(full()).output().unwrap();
    assert_eq!(code_of(out.status), 125, "--version to a full disk");
    let out = pgrun(["status", scratch.path("job.pid").to_str().unwrap()]).stdout(full()).output().unwrap();
    assert_eq!(code_of(out.status), 4, "status to a full disk");
    let out = run_cmd(&mut pgrun(["cancel"]));
    assert_status(&out, 125, "cancel without a pid file");
    assert!(stderr_of(&out).contains("<PIDFILE>"), "the message names what is missing: {}", stderr_of(&out));
}

#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path has no pidfds: it signals by number, as the man page says"
)]
fn cancel_never_signals_a_group_that_took_over_the_number() {
    // cancel --force stops a stale run's group it is not the parent of. If
    // that group ends and its number is taken by a new, unrelated group
    // while cancel waits out a grace, cancel must not signal the newcomer.
    // In a PID namespace of our own, ns_last_pid hands the number over,
    // while cancel is held stopped so that it cannot look in between.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = format!(
        r#"setsid {py} -c 'import os, signal
signal.signal(signal.SIGTERM, lambda n, f: open("term.log", "a").write("TERM\n"))
open("g.pid", "w").write(str(os.getpid()) + "\n")
while True: signal.pause()' &
while [ ! -s g.pid ]; do sleep 0.01; done
G=$(cat g.pid)
echo "$G" > stale.pid
{pg} cancel -v --force --wait-start 0 stale.pid 2> cancel.log &
C=$!
until [ -s term.log ]; do sleep 0.01; done
kill -STOP "$C"
kill -KILL "$G"; wait "$G" 2>/dev/null
"#,
        pg = pgrun_path(),
        py = python3()
    );
    let after = "kill -CONT \"$C\"\nwait \"$C\"; echo \"cancel=$?\"\n";
    let script = format!("{before}{HAND_OVER}{after}");
    assert_number_handed_over_untouched(&scratch, &script, "cancel=0", "cancel.log");
}

/// The shell fragment that starts a published run (`$R`: its pgrun; `$G`:
/// its group) and holds its pgrun at the step `run-gone`: the group has
/// ended, the record is not withdrawn yet (in life, a long final flush of
/// --max-output). `touch gate` lets it go on. `options`: pgrun's own.
fn run_held_once_gone(options: &str) -> String {
    format!(
        r#"PGRUN_TEST_PAUSE=run-gone=gate {pg} {options} -p job.pid -- sh -c 'echo $$ > g.pid; until [ -e go ]; do sleep 0.01; done' &
R=$!
while [ ! -s g.pid ] || [ ! -s job.pid ]; do sleep 0.01; done
G=$(cat g.pid)
touch go
until [ -e gate.reached ]; do sleep 0.01; done
"#,
        pg = pgrun_path()
    )
}

#[test]
fn cancel_never_signals_a_group_that_took_over_the_number_after_the_run_ended() {
    // A run whose group is gone but whose pgrun still holds the lock (here
    // held at the step `run-gone`; in life, a long final flush of
    // --max-output) is found live by cancel, which TERMs that pgrun and waits
    // for it. Meanwhile the group's number is handed to an unrelated process.
    // pgrun then ends normally and withdraws its record: the run is over,
    // and cancel must not adopt the group that now has the number.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = run_held_once_gone("");
    let after = format!(
        r#"{pg} cancel -v job.pid 2> cancel.log &
C=$!
until grep -q "sending TERM to pgrun" cancel.log; do sleep 0.01; done
touch gate
wait "$R"
wait "$C"; echo "cancel=$?"
"#,
        pg = pgrun_path()
    );
    let script = format!("{before}{HAND_OVER}{after}");
    assert_number_handed_over_untouched(&scratch, &script, "cancel=0", "cancel.log");
}

#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path has no subreaper: it signals by number, as the man page says"
)]
fn cancel_never_adopts_a_group_that_took_over_the_number_before_pgrun_died() {
    // cancel finds a pgrun finishing after its group ended (the number
    // already handed to a newcomer); that pgrun (no guard) is then SIGKILLed
    // before it withdraws its record. The record is left in place, but the
    // group cancel would "finish" was not the run's when cancel found it.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = run_held_once_gone("--no-guard");
    let after = format!(
        r#"{pg} cancel -v job.pid 2> cancel.log &
C=$!
until grep -q "sending TERM to pgrun" cancel.log; do sleep 0.01; done
kill -KILL "$R"
wait "$C"; echo "cancel=$?"
"#,
        pg = pgrun_path()
    );
    let script = format!("{before}{HAND_OVER}{after}");
    assert_number_handed_over_untouched(&scratch, &script, "cancel=0", "cancel.log");
}

#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path has no subreaper: it signals by number, as the man page says"
)]
fn cancel_timeout_never_kills_a_group_that_took_over_the_number_while_pgrun_finishes() {
    // As above, but cancel's --timeout passes while that pgrun still holds
    // the lock: the group it would SIGKILL "itself" is no longer the run's.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = run_held_once_gone("");
    let after = format!(
        r#"{pg} cancel -v --timeout 0.3 job.pid 2> cancel.log
echo "cancel=$?"
touch gate
wait "$R"
"#,
        pg = pgrun_path()
    );
    let script = format!("{before}{HAND_OVER}{after}");
    assert_number_handed_over_untouched(&scratch, &script, "cancel=0", "cancel.log");
}

#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path has no subreaper: it counts by number, as the man page says"
)]
fn status_never_counts_a_group_that_took_over_the_number_while_pgrun_finishes() {
    // While a pgrun finishes after its group ended, status says "running"
    // (the lock is held) but must not count the newcomer that took the
    // group's number as a process of the run.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = run_held_once_gone("");
    let after = format!(
        r#"{pg} status --json job.pid > status.json 2> status.log
grep -o '"processes":[^,}}]*' status.json
touch gate
wait "$R"
"#,
        pg = pgrun_path()
    );
    let script = format!("{before}{HAND_OVER}{after}");
    assert_number_handed_over_untouched(&scratch, &script, "\"processes\":0", "status.log");
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "tree mode needs Linux")]
fn pgrun_never_signals_a_group_that_took_over_the_number_of_its_own() {
    // Tree mode: the command's group ends while an escaped descendant that
    // ignores TERM keeps the run going. The group's number is then handed
    // to an unrelated process (ns_last_pid, in a PID namespace of our own);
    // pgrun's next step must reach the escapee, never the newcomer.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = format!(
        r#"{pg} -v --contain tree -t 1 -k 2 -- sh -c 'setsid sh -c "trap \"\" TERM; exec sleep 300" & echo $$ > g.pid; exec sleep 300' 2> run.log &
R=$!
while [ ! -s g.pid ]; do sleep 0.01; done
G=$(cat g.pid)
until grep -q "process group $G is empty" run.log; do sleep 0.01; done
"#,
        pg = pgrun_path()
    );
    let script = format!("{before}{HAND_OVER}wait \"$R\"; echo \"run=$?\"\n");
    assert_number_handed_over_untouched(&scratch, &script, "run=124", "run.log");
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the guard's ground truth is Linux's (PR_SET_PDEATHSIG)")]
fn pgrun_killed_while_it_flushes_held_output_leaves_the_guard_nothing_to_stop() {
    // --max-output and a reader that never reads: the run is gone but pgrun
    // still holds output for the reader (the head fits in the FIFO, which
    // pgrun widens as F_SETPIPE_SZ 1031 does here, head and tail do not). By then the record is withdrawn
    // and the guard released, so when the group's number has gone to an
    // unrelated process and pgrun is SIGKILLed, the guard stops nothing.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = format!(
        r#"mkfifo out
sleep 300 < out &
C=$("$PYTHON3" -c 'import fcntl, os
fd = os.open("out", os.O_RDWR)
try: fcntl.fcntl(fd, 1031, 1 << 20)
except OSError: pass
print(fcntl.fcntl(fd, 1032))')
{pg} -v -p run.pid --max-output $((C * 3 / 2)) -- sh -c "echo \$\$ > g.pid; head -c $((C * 8)) /dev/zero" > out 2> run.log &
R=$!
while [ ! -s g.pid ]; do sleep 0.01; done
G=$(cat g.pid)
while [ -e /proc/$G ]; do sleep 0.01; done
while [ -e run.pid ]; do sleep 0.01; done
[ -e /proc/$R ] || echo "pgrun-ended-early"
KIDS=$(cat /proc/$R/task/$R/children)
"#,
        pg = pgrun_path()
    );
    let after = r#"kill -KILL "$R"; wait "$R"; echo "run=$?"
for k in $KIDS; do
  while [ -e /proc/$k ] && ! grep -q '^State:.*Z' /proc/$k/status 2>/dev/null; do sleep 0.01; done
done
"#;
    let script = format!("{before}{HAND_OVER}{after}");
    assert_number_handed_over_untouched(&scratch, &script, "run=137", "run.log");
}

/// Shell lines that hand the number of the group `$G` (ended and reaped)
/// to the canary: the next pid in the namespace is `$G`, and the canary
/// takes it with a new session, so a new group with that number appears.
pub(crate) const HAND_OVER: &str = r#"echo $((G - 1)) > /proc/sys/kernel/ns_last_pid
setsid "$PYTHON3" canary.py &
until [ -e canary.ready ]; do sleep 0.01; done
[ "$(cat /proc/$G/comm)" = "${PYTHON3##*/}" ] || echo "number-not-reused"
"#;

/// Run `script` as PID 1 of a PID namespace of our own (everything in it
/// dies with it). `timeout -s KILL` bounds its polling loops, before the
/// suite's own deadline: unshare ignores TERM, and killing unshare kills
/// the namespace (--kill-child), so nothing can outlive a failed test. The script hands a
/// group's number to the canary and prints `number-not-reused` if that
/// failed, `want` (the stopper's exit) and `canary-alive`. The canary must
/// be alive and have received nothing; `log` is the stopper's -v output.
pub(crate) fn assert_number_handed_over_untouched(scratch: &Scratch, script: &str, want: &str, log: &str) {
    fs::write(scratch.path("canary.py"), canary_script(scratch)).unwrap();
    let script = format!("cd {}\n{script}[ -e /proc/$G ] && echo canary-alive\n", scratch.sh());
    let script = script.as_str();
    let mut ns = Command::new("timeout");
    ns.args([
        "-s",
        "KILL",
        "25",
        "unshare",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--",
        "sh",
        "-c",
        script,
    ])
    .env("PYTHON3", python3())
    .stdin(Stdio::null());
    let out = run_cmd(&mut ns);
    let said = String::from_utf8_lossy(&out.stdout);
    let log = fs::read_to_string(scratch.path(log)).unwrap_or_default();
    assert!(!said.contains("number-not-reused"), "the test could not hand the number over: {said}");
    assert!(said.contains(want), "{said}\nlog: {log}");
    assert!(said.contains("canary-alive"), "the newcomer was killed: {said}\nlog: {log}");
    let signals = fs::read_to_string(scratch.path("canary.log")).unwrap_or_default();
    assert!(signals.is_empty(), "the newcomer got {signals:?}; log: {log}");
}

#[test]
fn a_second_starter_on_an_absent_pid_file_waits_for_the_first_and_refuses() {
    // No pid file yet: A has started its command and not published it; B
    // must neither run its command nor disturb A.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let dir = scratch.sh();
    let spawned = Pause::new(&scratch, "spawned");
    let a = guard.spawn(spawned.arm(&mut pgrun([
        "-p",
        p,
        "--",
        "sh",
        "-c",
        &format!("echo $$ > {dir}/a; exec sleep 300"),
    ])));
    spawned.wait_reached();
    let a_group = wait_pid(&scratch.path("a"), &mut guard);
    guard.record_group(a_group);

    let b_said = scratch.path("b.err");
    let b_witness = scratch.path("b-ran");
    let b = guard.spawn(
        pgrun(["-v", "-p", p, "--", "touch", b_witness.to_str().unwrap()]).stderr(fs::File::create(&b_said).unwrap()),
    );
    eventually("B to wait for A (or to end)", || {
        fs::read_to_string(&b_said).unwrap_or_default().contains("another run is starting")
            || guard.child(b).try_wait().unwrap().is_some()
    });
    assert!(!b_witness.exists(), "B's command ran while A was starting");
    assert!(guard.child(b).try_wait().unwrap().is_none(), "B ended while A was starting");

    spawned.release();
    assert_eq!(guard.wait(b), 125, "B must see A's live run and refuse: {}", fs::read_to_string(&b_said).unwrap());
    assert!(fs::read_to_string(&b_said).unwrap().contains("held by a live run"));
    assert!(!b_witness.exists(), "B's command ran");
    let a_pid = guard.child(a).id() as i32;
    assert_eq!(wait_line(&pidfile), a_group.to_string(), "the pid file names A's group");
    assert_eq!(lock_holder(&pidfile), Some(a_pid), "A holds it");
    assert_status(&run_cmd(&mut pgrun(["cancel", p])), 0, "cancel A");
    assert_eq!(guard.wait(a), 143, "A ran undisturbed until cancelled");
}

#[test]
fn of_eight_starters_on_an_absent_pid_file_exactly_one_runs_its_command() {
    for round in 0..3 {
        let scratch = Scratch::new();
        let mut guard = Guard::new();
        let pidfile = scratch.path("job.pid");
        let p = pidfile.to_str().unwrap();
        let ran = scratch.path("ran");
        let payload = format!("echo $$ >> {}; exec sleep 300", ran.display());
        let starters: Vec<usize> =
            (0..8).map(|_| guard.spawn(pgrun(["-p", p, "--", "sh", "-c", &payload]).stderr(Stdio::null()))).collect();
        // The winner's command runs until cancelled, so every other starter
        // meets either its claim or its live pid file.
        let mut refused = 0;
        eventually("seven starters to end", || {
            refused = starters.iter().filter(|&&i| guard.child(i).try_wait().unwrap().is_some()).count();
            refused >= 7
        });
        // The losers may refuse on the winner's claim, before its command
        // has started: wait for its line (no other starter is left to add
        // one).
        eventually("the winner's command to start", || fs::read_to_string(&ran).is_ok_and(|l| l.ends_with('\n')));
        let lines = fs::read_to_string(&ran).unwrap_or_default();
        for pid in lines.lines().filter_map(|l| l.parse().ok()) {
            guard.record(pid);
            guard.record_group(pid);
        }
        let winners: Vec<usize> =
            starters.iter().copied().filter(|&i| guard.child(i).try_wait().unwrap().is_none()).collect();
        assert_eq!(lines.lines().count(), 1, "round {round}: commands started: {lines:?}");
        assert_eq!(winners.len(), 1, "round {round}: one pgrun still runs");
        for &i in &starters {
            if i != winners[0] {
                assert_eq!(guard.wait(i), 125, "round {round}: a loser's exit status");
            }
        }
        assert_status(&run_cmd(&mut pgrun(["cancel", p])), 0, "cancel the winner");
        assert_eq!(guard.wait(winners[0]), 143);
        let left: Vec<_> = fs::read_dir(scratch.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("ran")], "round {round}: files left");
    }
}

#[test]
fn a_starting_name_left_by_a_killed_starter_is_taken_over_and_another_users_blocks() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let starting = scratch.path(".job.pid.pgrun-starting.tmp");
    let dir = scratch.sh();
    let spawned = Pause::new(&scratch, "spawned");
    // Without a guard: a guard would remove the starting name itself.
    let a = guard.spawn(spawned.arm(&mut pgrun([
        "--no-guard",
        "-p",
        p,
        "--",
        "sh",
        "-c",
        &format!("echo $$ > {dir}/a; exec sleep 300"),
    ])));
    spawned.wait_reached();
    let a_group = wait_pid(&scratch.path("a"), &mut guard);
    guard.record_group(a_group);
    assert!(starting.exists(), "A holds the starting name");
    send(guard.child(a).id() as i32, libc::SIGKILL);
    assert_eq!(guard.wait(a), 128 + libc::SIGKILL);
    assert!(starting.exists(), "a SIGKILLed starter leaves its starting name");
    assert!(!pidfile.exists());

    let witness = scratch.path("ran");
    let out = run_cmd(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 0, "a leftover starting name is taken over");
    assert!(witness.exists());
    assert!(!starting.exists() && !pidfile.exists(), "nothing left");

    if !require(Capability::UnprivilegedUser) {
        return;
    }
    // Another user's (here root's, the run being nobody's): it can be
    // neither locked nor removed, and is named.
    open_up(scratch.dir(), true);
    fs::write(&starting, "").unwrap();
    let s = starting.to_str().unwrap();
    let ran2 = scratch.path("ran2");
    let out = run_cmd(&mut as_nobody(pgrun_path(), &["-p", p, "--", "touch", ran2.to_str().unwrap()]));
    assert_status(&out, 125, "another user's starting name");
    assert!(stderr_of(&out).contains("is blocked") && stderr_of(&out).contains(s), "{}", stderr_of(&out));
    assert!(!ran2.exists());
}

#[test]
fn a_file_that_appears_before_the_starting_name_was_taken_is_claimed_again() {
    // A found no pid file; by the time it holds the starting name, another
    // program has put a (stale) one there. A must look again and claim it,
    // not fail at publication with its command already started.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let p = pidfile.to_str().unwrap();
    let starting = Pause::new(&scratch, "starting");
    let witness = scratch.path("ran");
    let a = guard.spawn(starting.arm(&mut pgrun(["-p", p, "--", "touch", witness.to_str().unwrap()])));
    starting.wait_reached();
    stale_file(&pidfile, canary);
    starting.release();
    assert_eq!(guard.wait(a), 0, "A claims the stale file and runs");
    assert!(witness.exists());
    assert!(!pidfile.exists(), "A replaced the stale file and removed its own at exit");
    let left: Vec<_> =
        fs::read_dir(scratch.dir()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(!left.iter().any(|n| n.contains("pgrun")), "temporary names left: {left:?}");
    assert_canary_untouched(&scratch, canary);
}

//! A cgroup from the user's own systemd, for real: run by
//! `tests/vm-user-systemd.sh` as an ordinary user (uid 1000) in one boot
//! of a VM with a real systemd and its user manager, whose login cgroup
//! is not delegated. `#[ignore]`d in a plain `cargo test`: on a host
//! without a user manager they fail (the fallbacks are tested on the host,
//! tests/user_scope.rs). Each test checks that no `pgrun-*` unit is left
//! in the user manager once its run is over.

use crate::util::*;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const VM: &str = "needs a systemd user manager: run by tests/vm-user-systemd.sh in a VM";

/// The units of the user manager whose names start `pgrun-`, any state.
fn pgrun_units() -> Vec<String> {
    let out = Command::new("systemctl")
        .args(["--user", "list-units", "--all", "--plain", "--no-legend", "pgrun-*"])
        .stderr(Stdio::inherit())
        .output()
        .expect("systemctl");
    assert!(out.status.success(), "systemctl --user list-units failed");
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.split_whitespace().next().map(String::from)).collect()
}

/// Once a run is over, its scope goes: the user manager stops and collects
/// it when it is empty (it may take a moment after pgrun's exit).
fn assert_no_unit_left() {
    eventually("the user manager to collect every pgrun scope", || pgrun_units().is_empty());
}

/// The cgroup line of `cat /proc/self/cgroup` run through pgrun: the
/// command's cgroup, which must be a leaf in a scope of pgrun's own.
fn leaf_in_scope(out: &Output, what: &str) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    let path = text.lines().find_map(|l| l.strip_prefix("0::")).unwrap_or_else(|| panic!("{what}: {text}"));
    let parts: Vec<&str> = path.rsplitn(3, '/').collect();
    assert!(
        parts.len() == 3
            && parts[1].starts_with("pgrun-")
            && parts[1].ends_with(".scope")
            && parts[0].starts_with("pgrun-")
            && !parts[0].contains("-self-")
            && parts[2].ends_with("/app.slice"),
        "{what}: the command is not in a leaf of a pgrun scope in app.slice: {path}"
    );
    path.to_string()
}

#[test]
#[ignore = "needs a systemd user manager: run by tests/vm-user-systemd.sh in a VM"]
fn contain_cgroup_gets_a_leaf_in_a_scope_of_its_own() {
    assert!(!pgrun_units().iter().any(|u| u.starts_with("pgrun-")), "{VM}");
    let scratch = Scratch::new();
    let report = scratch.path("r.json");
    let out = run(&mut pgrun([
        "--contain",
        "cgroup",
        "--report",
        report.to_str().unwrap(),
        "--",
        "cat",
        "/proc/self/cgroup",
    ]));
    assert_status(&out, 0, "--contain cgroup");
    assert!(out.stderr.is_empty(), "{}", stderr_of(&out));
    leaf_in_scope(&out, "--contain cgroup");
    let r = json(&report);
    assert_eq!(r["contain"], "cgroup", "{r}");
    assert_eq!(r["cgroup_via"], "user-systemd", "{r}");
    assert_eq!(r["cgroup_left"], serde_json::Value::Null, "{r}");
    assert_no_unit_left();
}

#[test]
#[ignore = "needs a systemd user manager: run by tests/vm-user-systemd.sh in a VM"]
fn auto_takes_the_user_managers_scope() {
    let scratch = Scratch::new();
    let report = scratch.path("r.json");
    let out =
        run(&mut pgrun(["--contain", "auto", "--report", report.to_str().unwrap(), "--", "cat", "/proc/self/cgroup"]));
    assert_status(&out, 0, "--contain auto");
    leaf_in_scope(&out, "--contain auto");
    assert_eq!(json(&report)["contain"], "cgroup");
    assert_no_unit_left();
}

/// The limits are set in the run's leaf inside the scope, with the
/// controllers the scope is given (`Delegate=yes`).
#[test]
#[ignore = "needs a systemd user manager: run by tests/vm-user-systemd.sh in a VM"]
fn the_limits_are_set_in_the_leaf_in_the_scope() {
    let show =
        "f=/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup); cat /proc/self/cgroup $f/memory.max $f/pids.max $f/cpu.max";
    let out = run(&mut pgrun(["--memory-max", "64M", "--pids-max", "20", "--cpus", "0.5", "--", "sh", "-c", show]));
    assert_status(&out, 0, "limits");
    leaf_in_scope(&out, "limits");
    let text = String::from_utf8_lossy(&out.stdout);
    let values: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(values, ["67108864", "20", "50000 100000"], "{text}");
    assert_no_unit_left();
}

/// A memory hog with a bystander child: the kernel's out-of-memory kill in
/// the leaf ends the whole run, as in any cgroup.
#[test]
#[ignore = "needs a systemd user manager: run by tests/vm-user-systemd.sh in a VM"]
fn memory_max_ends_the_run_with_reason_oom() {
    let scratch = Scratch::new();
    let report = scratch.path("r.json");
    let sleeper = scratch.path("sleeper");
    let hog = "sleep 300 & echo $! > \"$1\"; dd if=/dev/zero of=/dev/null bs=256M count=1; wait";
    let out = run(&mut pgrun([
        "--memory-max",
        "64M",
        "--report",
        report.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        hog,
        "hog",
        sleeper.to_str().unwrap(),
    ]));
    assert_status(&out, 137, "--memory-max 64M");
    let r = json(&report);
    assert_eq!(r["reason"], "oom", "{r}");
    assert!(r["resources"]["oom_kills"].as_u64().is_some_and(|n| n >= 1), "{r}");
    let pid: i32 = wait_line(&sleeper).parse().unwrap();
    assert!(is_dead(pid), "the bystander {pid} outlived the run");
    assert_no_unit_left();
}

/// `--pids-max` bounds the run's tasks: forks past it fail (in a
/// subshell, which a failed fork ends), and the leaf counts the refusals.
#[test]
#[ignore = "needs a systemd user manager: run by tests/vm-user-systemd.sh in a VM"]
fn pids_max_makes_forks_fail() {
    let count = "f=/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup); \
                 (for i in 1 2 3 4 5 6 7 8 9 10; do sleep 300 & done) 2>/dev/null; \
                 cat $f/pids.current; sed -n 's/^max //p' $f/pids.events";
    let out = run(&mut pgrun(["--pids-max", "4", "--", "sh", "-c", count]));
    let text = String::from_utf8_lossy(&out.stdout);
    let numbers: Vec<u64> = text.split_whitespace().filter_map(|n| n.parse().ok()).collect();
    let [current, refused] = numbers[..] else { panic!("{text} {}", stderr_of(&out)) };
    assert!(current <= 4, "{current} tasks under --pids-max 4");
    assert!(refused >= 1, "no fork was refused: {text}");
    assert_no_unit_left();
}

/// A process that left the command's group for a session of its own is
/// still in the leaf: the timeout's stop reaches it.
#[test]
#[ignore = "needs a systemd user manager: run by tests/vm-user-systemd.sh in a VM"]
fn an_escapee_is_stopped_with_the_run() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let payload = format!("setsid sleep 300 & echo $! > {dir}/escapee; exec sleep 300");
    let index = guard.spawn(&mut pgrun(["--contain", "cgroup", "--timeout", "1", "--", "sh", "-c", &payload]));
    let escapee = wait_pid(&scratch.path("escapee"), &mut guard);
    assert_eq!(guard.wait(index), 124);
    assert!(is_dead(escapee), "the escapee {escapee} outlived the run");
    assert_no_unit_left();
}

/// pgrun SIGKILLed: its guard stops what is left, escapee included, and
/// the scope goes once they are gone.
#[test]
#[ignore = "needs a systemd user manager: run by tests/vm-user-systemd.sh in a VM"]
fn the_guard_stops_an_escapee_after_pgrun_is_killed() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let payload = format!("setsid sleep 300 & echo $! > {dir}/escapee; exec sleep 300");
    let index =
        guard.spawn(&mut pgrun(["--contain", "cgroup", "-p", pidfile.to_str().unwrap(), "--", "sh", "-c", &payload]));
    let escapee = wait_pid(&scratch.path("escapee"), &mut guard);
    wait_line(&pidfile);
    let pgrun_pid = lock_holder(&pidfile).expect("pgrun holds the pid file");
    let keeper = guard_of(pgrun_pid);
    guard.record(keeper);
    send(pgrun_pid, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    wait_dead(keeper);
    assert!(is_dead(escapee), "the guard left the escapee {escapee} running");
    assert!(!Path::new(&pidfile).exists(), "the guard left the pid file");
    assert_no_unit_left();
}

/// `pgrun cancel` of a run in a user scope: the run ends as cancelled and
/// the scope goes.
#[test]
#[ignore = "needs a systemd user manager: run by tests/vm-user-systemd.sh in a VM"]
fn a_cancelled_run_leaves_no_scope() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let payload = format!("echo $$ > {dir}/me; exec sleep 300");
    let index =
        guard.spawn(&mut pgrun(["--contain", "cgroup", "-p", pidfile.to_str().unwrap(), "--", "sh", "-c", &payload]));
    let me = wait_pid(&scratch.path("me"), &mut guard);
    wait_line(&pidfile);
    let out = run(&mut pgrun(["cancel", pidfile.to_str().unwrap()]));
    assert_status(&out, 0, "cancel");
    assert_eq!(guard.wait(index), 143);
    assert!(is_dead(me), "the command {me} outlived the cancel");
    assert_no_unit_left();
}

/// A run in a user scope that its `--timeout` ends, with a member that
/// ignores TERM (so the run ends by the final `cgroup.kill`): 124, the
/// member gone, and the scope goes.
#[test]
#[ignore = "needs a systemd user manager: run by tests/vm-user-systemd.sh in a VM"]
fn a_timed_out_run_leaves_no_scope() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let payload = format!("trap '' TERM; sh -c 'trap \"\" TERM; echo $$ > {dir}/child; exec sleep 300' & wait");
    let index = guard.spawn(&mut pgrun(["--contain", "cgroup", "-t", "2", "-k", "1", "--", "sh", "-c", &payload]));
    let child = wait_pid(&scratch.path("child"), &mut guard);
    assert_eq!(guard.wait(index), 124);
    assert!(is_dead(child), "the member {child} that ignored TERM outlived the timeout");
    assert_no_unit_left();
}

/// `sh -c SCRIPT` in a scope of the user's systemd delegated to the user
/// (`systemd-run --user --scope -p Delegate=yes`): a cgroup pgrun may
/// write to. The script ends by exec'ing pgrun.
fn in_delegated_scope(script: &str) -> Command {
    let mut cmd = Command::new("systemd-run");
    cmd.args(["--user", "--scope", "--quiet", "-p", "Delegate=yes", "--", "sh", "-c", script]);
    cmd.stdin(Stdio::null());
    cmd
}

/// A delegated cgroup pgrun may write to, but that other processes share:
/// the limit's controller cannot be enabled there, which is said (125);
/// the user's systemd is not asked for another scope (it is asked only
/// where pgrun may not make a cgroup), and nobody is moved.
#[test]
#[ignore = "needs a systemd user manager: run by tests/vm-user-systemd.sh in a VM"]
fn a_shared_delegated_cgroup_is_125_and_no_scope_is_asked_for() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let witness = scratch.path("ran");
    let dir = scratch.sh();
    let script = format!(
        "sleep 300 </dev/null >/dev/null 2>&1 & echo $! > {dir}/other; exec '{}' -v --pids-max 10 -- touch {dir}/ran",
        pgrun_path()
    );
    let out = run(&mut in_delegated_scope(&script));
    let sleeper = wait_pid(&scratch.path("other"), &mut guard);
    assert_status(&out, 125, "--pids-max in a shared delegated cgroup");
    let err = stderr_of(&out);
    assert!(err.contains("needs the pids controller") && err.contains("share it with pgrun"), "{err}");
    assert!(!err.contains("user's systemd") && !err.contains("session bus"), "the user manager was asked: {err}");
    assert!(!witness.exists(), "the command ran");
    assert!(!is_dead(sleeper), "the other process {sleeper} was stopped");
    send(sleeper, libc::SIGKILL);
    wait_dead(sleeper);
    assert_no_unit_left();
}

/// A delegated cgroup pgrun may write to, without the memory controller
/// (a cgroup made inside the scope, whose `subtree_control` enables
/// nothing): `--memory-max` is 125 naming it, no scope is asked for, and
/// the leaf pgrun made to find out is removed again.
#[test]
#[ignore = "needs a systemd user manager: run by tests/vm-user-systemd.sh in a VM"]
fn a_delegated_cgroup_lacking_a_controller_is_125_and_no_scope_is_asked_for() {
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    let dir = scratch.sh();
    let script = format!(
        "d=/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/inner; mkdir $d && echo $$ > $d/cgroup.procs || exit 99; \
         echo $d > {dir}/inner; exec '{}' -v --memory-max 64M -- touch {dir}/ran",
        pgrun_path()
    );
    let out = run(&mut in_delegated_scope(&script));
    assert_status(&out, 125, "--memory-max in a delegated cgroup without the memory controller");
    let err = stderr_of(&out);
    assert!(err.contains("needs the memory controller") && err.contains("does not offer"), "{err}");
    assert!(!err.contains("user's systemd") && !err.contains("session bus"), "the user manager was asked: {err}");
    assert!(!witness.exists(), "the command ran");
    // Unless the scope is gone already (its cgroups with it).
    let inner = wait_line(&scratch.path("inner"));
    let left: Vec<_> =
        std::fs::read_dir(&inner).into_iter().flatten().flatten().filter(|e| e.path().is_dir()).collect();
    assert!(left.is_empty(), "cgroups left in {inner}: {left:?}");
    assert_no_unit_left();
}

//! `--contain cgroup` under faults: the leaf's files failing, the leaf
//! removed under a run, its name taken by another run, its removal refused,
//! and the errors on the way to it (fd exhaustion). The cases need a
//! writable cgroup2 hierarchy (`Capability::Cgroup2`); those that inject a
//! syscall failure need strace.

use crate::util::*;
use std::process::{Command, Stdio};

/// `pgrun ARGS` under `strace -f -qq` with `strace_args` (filters and
/// injections) before it; fails with a clear message if strace is missing.
fn under_strace(strace_args: &[&str], args: &[&str]) -> Command {
    let found = Command::new("strace").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(found.is_ok_and(|s| s.success()), "this test needs strace (6.1 or later) on PATH");
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-o", "/dev/null"]).args(strace_args).arg(pgrun_path()).args(args);
    cmd.stdin(Stdio::null());
    cmd
}

/// pgrun's own lines on stderr (strace adds its own notes there).
fn pgrun_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("pgrun:")).collect()
}

/// A leaf name of this test's own (`PGRUN_TEST_LEAF_NAME`), and the path
/// of its `cgroup.events`, for strace's `-P`.
fn fixed_leaf() -> (String, String) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("pgrun-test-{}-{n}", std::process::id());
    let (_, own) = cgroup2_folders().expect("a cgroup2 mount");
    let events = own.join(&name).join("cgroup.events").display().to_string();
    (name, events)
}

fn cgroup_here() -> bool {
    !cfg!(feature = "posix-fallback") && require(Capability::Cgroup2)
}

#[test]
fn fd_exhaustion_while_finding_the_cgroup_is_reported_as_such() {
    if !cgroup_here() {
        return;
    }
    for file in ["/proc/self/mountinfo", "/proc/self/cgroup"] {
        let scratch = Scratch::new();
        let witness = scratch.path("ran");
        let out = run(&mut under_strace(
            &["-P", file, "-e", "trace=openat", "-e", "inject=openat:error=EMFILE"],
            &["--contain", "cgroup", "--", "touch", witness.to_str().unwrap()],
        ));
        assert_status(&out, 125, &format!("EMFILE opening {file}"));
        let err = stderr_of(&out);
        let lines = pgrun_lines(&err);
        assert_eq!(lines.len(), 1, "one line expected: {err}");
        assert!(
            lines[0].starts_with("pgrun: --contain cgroup: ") && lines[0].contains("Too many open files"),
            "EMFILE opening {file} not reported as such: {err}"
        );
        assert!(!witness.exists(), "the command ran");
    }
}

/// The CPU time (user + system, in clock ticks) process `pid` has used.
fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat(5), counted after the command name.
    fields.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
        + fields.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
}

/// Watch `pid` for two seconds of wall time (polled, not slept in one go)
/// and fail if it used half of that on the CPU: a loop that never blocks.
fn assert_not_spinning(pid: i32, what: &str) {
    let hz = 100; // USER_HZ on Linux
    let before = cpu_ticks(pid);
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(2) && !is_dead(pid) {
        if cpu_ticks(pid) - before > hz {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let used = cpu_ticks(pid).saturating_sub(before);
    assert!(used <= hz, "{what}: pgrun {pid} used {used} ticks of CPU in 2 s: it spins");
}

/// A payload that starts `esc`, a process in a session (so a group) of its
/// own that stays in the leaf and lives until `go` exists, writes pgrun's
/// pid to `pgrun.pid` and its own to `leader.pid`, and exits.
fn leave_an_escapee(dir: &str) -> String {
    format!(
        "echo $PPID > {dir}/pgrun.pid; echo $$ > {dir}/leader.pid; \
         setsid sh -c 'echo $$ > {dir}/esc.pid; while [ ! -e {dir}/go ]; do sleep 0.02; done' & \
         while [ ! -s {dir}/esc.pid ]; do sleep 0.01; done"
    )
}

#[test]
fn an_unreadable_cgroup_events_is_not_taken_as_empty_by_the_supervisor_and_it_does_not_spin() {
    if !cgroup_here() {
        return;
    }
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let report = scratch.path("r.json");
    // Every read of cgroup.events (pread) fails: the leaf's state is only
    // known from cgroup.procs.
    let (leaf, events) = fixed_leaf();
    let mut cmd = under_strace(
        &["-e", "trace=pread64", "-P", &events, "-e", "inject=pread64:error=EIO"],
        &["--contain", "cgroup", "--wait-group", "--report", report.to_str().unwrap(), "--", "sh", "-c"],
    );
    cmd.env("PGRUN_TEST_LEAF_NAME", &leaf).arg(leave_an_escapee(&dir)).stderr(Stdio::null());
    let index = guard.spawn(&mut cmd);
    let pgrun_pid = wait_pid(&scratch.path("pgrun.pid"), &mut guard);
    let escapee = wait_pid(&scratch.path("esc.pid"), &mut guard);
    // The command has exited; pgrun waits for the escapee (--wait-group).
    assert_not_spinning(pgrun_pid, "draining with cgroup.events unreadable");
    assert!(!is_dead(pgrun_pid), "pgrun ended while a member of its leaf lives");
    std::fs::write(scratch.path("go"), "").unwrap();
    assert_eq!(guard.wait(index), 0);
    assert!(is_dead(escapee));
    assert_eq!(json(&report)["contain"], "cgroup");
}

#[test]
fn an_unreadable_cgroup_events_is_not_taken_as_empty_by_the_guard() {
    if !cgroup_here() {
        return;
    }
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let (leaf, events) = fixed_leaf();
    let mut cmd = under_strace(
        &["-e", "trace=pread64", "-P", &events, "-e", "inject=pread64:error=EIO"],
        &["--contain", "cgroup", "--wait-group", "--", "sh", "-c"],
    );
    cmd.env("PGRUN_TEST_LEAF_NAME", &leaf).arg(leave_an_escapee(&dir)).stderr(Stdio::null());
    guard.spawn(&mut cmd);
    let pgrun_pid = wait_pid(&scratch.path("pgrun.pid"), &mut guard);
    let escapee = wait_pid(&scratch.path("esc.pid"), &mut guard);
    // The command has exited and pgrun has reaped it: the group is gone,
    // only the escapee is left, in the leaf.
    let leader = wait_pid(&scratch.path("leader.pid"), &mut guard);
    eventually("pgrun to reap the command", || !std::path::Path::new(&format!("/proc/{leader}")).exists());
    send(pgrun_pid, libc::SIGKILL);
    // The guard stops the leaf: the escapee does not outlive it.
    eventually("the guard to stop the escapee", || is_dead(escapee));
}

#[test]
fn a_leaf_removed_under_the_run_ends_the_wait_without_spinning() {
    if !cgroup_here() {
        return;
    }
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let mount = cgroup2_folders().expect("a cgroup2 mount").0.display().to_string();
    // The command moves itself to the leaf's parent, removes the leaf (now
    // empty), then exits.
    let payload = format!(
        "echo $PPID > {dir}/pgrun.pid; cg=$(sed -n 's/^0:://p' /proc/self/cgroup); \
         echo $$ > {mount}${{cg%/*}}/cgroup.procs && rmdir {mount}$cg && echo $cg > {dir}/removed"
    );
    let report = scratch.path("r.json");
    let log = scratch.path("stderr.log");
    let mut cmd = pgrun(["--contain", "cgroup", "--report", report.to_str().unwrap(), "--", "sh", "-c", &payload]);
    cmd.stderr(std::fs::File::create(&log).unwrap());
    let index = guard.spawn(&mut cmd);
    let pgrun_pid = wait_pid(&scratch.path("pgrun.pid"), &mut guard);
    wait_line(&scratch.path("removed"));
    assert_not_spinning(pgrun_pid, "with its leaf removed");
    assert_eq!(guard.wait(index), 0, "{}", std::fs::read_to_string(&log).unwrap_or_default());
    let err = std::fs::read_to_string(&log).unwrap();
    let lines = pgrun_lines(&err);
    assert!(
        lines.len() == 1 && lines[0].starts_with("pgrun: warning: ") && lines[0].contains("removed"),
        "one warning that the leaf was removed expected: {err}"
    );
    assert!(json(&report)["cgroup_left"].is_null(), "{}", json(&report));
}

/// The cgroup v2 path a payload wrote (`cat /proc/self/cgroup > FILE`).
fn cgroup_line(path: &std::path::Path) -> String {
    eventually(&format!("{} to be written", path.display()), || {
        std::fs::read_to_string(path).is_ok_and(|t| t.lines().any(|l| l.starts_with("0::")))
    });
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().find_map(|l| l.strip_prefix("0::")).unwrap().to_string()
}

/// Start `sh -c SCRIPT` as PID 1 of a PID namespace of its own (so the
/// first process it starts is PID 2 there), bounded by `timeout -s KILL`
/// before the suite's deadline (unshare ignores TERM; --kill-child takes
/// the namespace with it).
fn in_pid_namespace(guard: &mut Guard, script: &str) -> usize {
    let mut ns = Command::new("timeout");
    ns.args(["-s", "KILL", "25", "unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--", "sh", "-c"])
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    guard.spawn(&mut ns)
}

#[test]
fn leaf_names_do_not_collide_across_pid_namespaces_and_no_run_touches_the_others_leaf() {
    if !cgroup_here() || !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let mount = cgroup2_folders().expect("a cgroup2 mount").0;
    // In each namespace pgrun is PID 2: both would be `pgrun-2`. The
    // command notes its cgroup and pgrun's pid, and runs until `go-X`; the
    // namespace's PID 1 waits for `end-X` after pgrun returns, so that it
    // does not take the guard down with it.
    let script = |x: &str| {
        format!(
            "{pgrun} --contain cgroup --report {dir}/r-{x}.json -- sh -c \
             'echo $PPID > {dir}/ns-pid-{x}; cat /proc/self/cgroup > {dir}/cg-{x}; \
             while [ ! -e {dir}/go-{x} ]; do sleep 0.01; done'; \
             echo $? > {dir}/exit-{x}; while [ ! -e {dir}/end-{x} ]; do sleep 0.01; done",
            pgrun = pgrun_path()
        )
    };
    let a = in_pid_namespace(&mut guard, &script("a"));
    let leaf_a = cgroup_line(&scratch.path("cg-a"));
    let b = in_pid_namespace(&mut guard, &script("b"));
    let leaf_b = cgroup_line(&scratch.path("cg-b"));
    let ns_pids = (wait_line(&scratch.path("ns-pid-a")), wait_line(&scratch.path("ns-pid-b")));
    assert_eq!(ns_pids.0, ns_pids.1, "the two pgruns do not share a pid: the names would not collide");
    assert_ne!(leaf_a, leaf_b, "two runs share a leaf");
    for leaf in [&leaf_a, &leaf_b] {
        assert!(leaf.contains(&format!("/pgrun-{}-", ns_pids.0)), "{leaf}");
    }
    let folder = |leaf: &str| mount.join(leaf.trim_start_matches('/'));

    // pgrun A is SIGKILLed: its guard stops A's run and removes A's leaf,
    // and nothing else.
    let pgrun_a = descendants(guard.child(a).id() as i32)
        .into_iter()
        .find(|&p| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "pgrun"))
        .expect("pgrun A");
    send(pgrun_a, libc::SIGKILL);
    eventually("A's guard to remove A's leaf", || !folder(&leaf_a).exists());
    assert_eq!(wait_line(&scratch.path("exit-a")), "137");
    std::fs::write(scratch.path("end-a"), "").unwrap();
    assert_eq!(guard.wait(a), 0);
    let procs_b = std::fs::read_to_string(folder(&leaf_b).join("cgroup.procs")).unwrap_or_default();
    assert!(!procs_b.trim().is_empty(), "B's run was stopped with A's");

    // B goes on, ends normally, and removes its own leaf.
    std::fs::write(scratch.path("go-b"), "").unwrap();
    assert_eq!(wait_line(&scratch.path("exit-b")), "0");
    assert!(!folder(&leaf_b).exists(), "B's leaf {leaf_b} was left");
    std::fs::write(scratch.path("end-b"), "").unwrap();
    assert_eq!(guard.wait(b), 0);
    assert_eq!(json(&scratch.path("r-b.json"))["reason"], "exited");
}

#[test]
fn a_taken_leaf_name_is_never_adopted() {
    if !cgroup_here() {
        return;
    }
    // The name's first choice (fixed by the test hook) exists already, as
    // somebody else's cgroup with a process in it: the run takes another
    // name, and leaves that cgroup and its process alone.
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let (name, _) = fixed_leaf();
    let (_, own) = cgroup2_folders().unwrap();
    let theirs = own.join(&name);
    std::fs::create_dir(&theirs).unwrap();
    let mut sleeper = Command::new("sleep");
    let (tenant, _) = guard.spawn_reaped(sleeper.arg("300"));
    std::fs::write(theirs.join("cgroup.procs"), tenant.to_string()).unwrap();
    let report = scratch.path("r.json");
    let mut cmd = pgrun(["--contain", "cgroup", "--timeout", "0.2", "--report", report.to_str().unwrap()]);
    cmd.args(["--", "sh", "-c", &format!("cat /proc/self/cgroup > {dir}/cg; exec sleep 300")]);
    let out = run(cmd.env("PGRUN_TEST_LEAF_NAME", &name));
    assert_status(&out, 124, "a run whose first leaf name was taken");
    let leaf = cgroup_line(&scratch.path("cg"));
    assert!(!leaf.ends_with(&format!("/{name}")), "the run adopted {name}");
    assert!(!is_dead(tenant), "the other cgroup's process was killed");
    assert!(theirs.is_dir(), "the other cgroup was removed");
    send(tenant, libc::SIGKILL);
    wait_dead(tenant);
    eventually("the test's cgroup to be empty", || std::fs::remove_dir(&theirs).is_ok());
}

/// Run `pgrun --contain cgroup --report R -- true` with the leaf's rmdir
/// failing as `inject` says; returns its output, the report and the leaf.
fn run_with_rmdir_failing(scratch: &Scratch, inject: &str) -> (std::process::Output, serde_json::Value, String) {
    let (leaf, events) = fixed_leaf();
    let folder = events.trim_end_matches("/cgroup.events").to_string();
    let report = scratch.path("r.json");
    let mut cmd = under_strace(
        &["-e", "trace=rmdir", "-P", &folder, "-e", inject],
        &["--contain", "cgroup", "--report", report.to_str().unwrap(), "--", "true"],
    );
    let out = run(cmd.env("PGRUN_TEST_LEAF_NAME", &leaf));
    (out, json(&report), folder)
}

#[test]
fn a_leaf_that_cannot_be_removed_is_warned_about_and_reported() {
    if !cgroup_here() {
        return;
    }
    for (errno, inject) in [("EBUSY", "inject=rmdir:error=EBUSY"), ("EACCES", "inject=rmdir:error=EACCES")] {
        let scratch = Scratch::new();
        let (out, report, folder) = run_with_rmdir_failing(&scratch, inject);
        let left = std::path::Path::new(&folder).is_dir();
        if left {
            let _ = std::fs::remove_dir(&folder);
        }
        assert_status(&out, 0, errno);
        let err = stderr_of(&out);
        let lines = pgrun_lines(&err);
        assert!(
            lines.len() == 1
                && lines[0].starts_with("pgrun: warning: ")
                && lines[0].contains(&folder)
                && lines[0].contains(errno),
            "{errno}: one warning naming {folder} and the error expected: {err}"
        );
        assert_eq!(report["cgroup_left"], folder.as_str(), "{errno}: {report}");
        assert!(left, "{errno}: the leaf was removed after all");
    }
}

#[test]
fn a_leaf_removal_refused_once_with_ebusy_is_tried_again() {
    if !cgroup_here() {
        return;
    }
    let scratch = Scratch::new();
    let (out, report, folder) = run_with_rmdir_failing(&scratch, "inject=rmdir:error=EBUSY:when=1");
    let left = std::path::Path::new(&folder).is_dir();
    if left {
        let _ = std::fs::remove_dir(&folder);
    }
    assert_status(&out, 0, "rmdir EBUSY once");
    assert!(pgrun_lines(&stderr_of(&out)).is_empty(), "{}", stderr_of(&out));
    assert!(!left, "the leaf was left after one EBUSY");
    assert!(report["cgroup_left"].is_null(), "{report}");
}

#[test]
fn status_counts_what_is_in_the_runs_own_leaf_and_nothing_in_a_leaf_named_like_it() {
    if !cgroup_here() {
        return;
    }
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let pidfile = scratch.path("job.pid");
    let payload = format!(
        "cat /proc/self/cgroup > {dir}/cg; sleep 300 & echo $! > {dir}/sleep.pid; echo ready > {dir}/ready; \
         wait; exit 0"
    );
    let (index, _) = start_published(&mut guard, &pidfile, &["--contain", "cgroup"], &payload);
    wait_line(&scratch.path("ready"));
    let holder = guard.child(index).id();
    let (mount, own) = cgroup2_folders().unwrap();
    let run_leaf = mount.join(cgroup_line(&scratch.path("cg")).trim_start_matches('/'));
    // A process of the test's moved into the run's leaf: part of the run
    // (the stop will kill it), though neither in the group nor pgrun's
    // descendant: only the leaf says it belongs.
    let (joined, _) = guard.spawn_reaped(Command::new("sleep").arg("300"));
    std::fs::write(run_leaf.join("cgroup.procs"), joined.to_string()).unwrap();
    // A decoy with the name the leaf had before names were unique, holding
    // two processes that are not the run's.
    let decoy = own.join(format!("pgrun-{holder}"));
    std::fs::create_dir(&decoy).unwrap();
    let mut tenants = Vec::new();
    for _ in 0..2 {
        let (tenant, _) = guard.spawn_reaped(Command::new("sleep").arg("300"));
        std::fs::write(decoy.join("cgroup.procs"), tenant.to_string()).unwrap();
        tenants.push(tenant);
    }
    let out = run(&mut pgrun(["status", pidfile.to_str().unwrap()]));
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    for tenant in tenants {
        send(tenant, libc::SIGKILL);
        wait_dead(tenant);
    }
    eventually("the decoy to be empty", || std::fs::remove_dir(&decoy).is_ok());
    // The run ends: its command exits, the joined process is stopped with
    // the rest of the leaf, and the leaf is removed.
    send(wait_pid(&scratch.path("sleep.pid"), &mut guard), libc::SIGKILL);
    assert_eq!(guard.wait(index), 0);
    assert!(is_dead(joined), "the process in the run's leaf outlived the run");
    assert!(!run_leaf.exists(), "the run's leaf was left");
    assert!(said.contains("3 processes"), "sh, sleep and the joined process expected: {said}");
}

#[test]
fn the_guard_acts_only_on_the_leaf_it_was_handed_not_on_a_new_cgroup_with_its_name() {
    if !cgroup_here() {
        return;
    }
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let (name, _) = fixed_leaf();
    let (_, own) = cgroup2_folders().unwrap();
    let leaf = own.join(&name);
    // The command moves itself to the leaf's parent and removes the leaf,
    // then waits (still the run's group, no longer in any leaf of pgrun's).
    let payload = format!(
        "echo $PPID > {dir}/pgrun.pid; echo $$ > {parent}/cgroup.procs && rmdir {leaf} && echo moved > {dir}/moved; \
         exec sleep 300",
        parent = own.display(),
        leaf = leaf.display()
    );
    let mut cmd = pgrun(["--contain", "cgroup", "--", "sh", "-c", &payload]);
    guard.spawn(cmd.env("PGRUN_TEST_LEAF_NAME", &name).stderr(Stdio::null()));
    let pgrun_pid = wait_pid(&scratch.path("pgrun.pid"), &mut guard);
    wait_line(&scratch.path("moved"));
    // Somebody else's cgroup now has the leaf's name, with a process in it.
    std::fs::create_dir(&leaf).unwrap();
    let (tenant, _) = guard.spawn_reaped(Command::new("sleep").arg("300"));
    std::fs::write(leaf.join("cgroup.procs"), tenant.to_string()).unwrap();
    // `moved` is written just before the exec of sleep: polled for.
    let (command, pgrun_guard) = (descendant_named(pgrun_pid, "sleep"), guard_of(pgrun_pid));
    send(pgrun_pid, libc::SIGKILL);
    // The guard stops the run's group, and nothing in the new cgroup.
    eventually("the guard to finish", || is_dead(pgrun_guard));
    assert!(is_dead(command), "the guard left the command running");
    let still_there = !is_dead(tenant) && leaf.is_dir();
    if !is_dead(tenant) {
        send(tenant, libc::SIGKILL);
        wait_dead(tenant);
    }
    eventually("the test's cgroup to be gone", || std::fs::remove_dir(&leaf).is_ok() || !leaf.exists());
    assert!(still_there, "the guard killed in or removed {}, a cgroup it was not handed", leaf.display());
}

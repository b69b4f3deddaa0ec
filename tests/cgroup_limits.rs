//! `--memory-max`, `--pids-max`, `--cpus` for real. They need a cgroup v2
//! hierarchy with the memory, pids and cpu controllers enabled for the
//! suite's own cgroup, which a hybrid host (this project's CI machine)
//! cannot offer: the tests are `#[ignore]`d in a plain `cargo test` and run
//! by `tests/vm-cgroup-limits.sh` in one boot of a unified-cgroup-v2 VM,
//! which `.ci/run` calls. Run with `--ignored` anywhere else, they fail
//! unless the controllers are there.

use crate::util::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const VM: &str = "needs the memory, pids and cpu cgroup controllers: run by tests/vm-cgroup-limits.sh in a VM";

/// The suite's own cgroup folder, which must hand memory, pids and cpu
/// down to the cgroups made below it.
fn own_cgroup() -> PathBuf {
    let (_, own) = cgroup2_folders().expect("a cgroup2 mount");
    let enabled = fs::read_to_string(own.join("cgroup.subtree_control")).unwrap_or_default();
    for c in ["memory", "pids", "cpu"] {
        assert!(
            enabled.split_whitespace().any(|e| e == c),
            "the {c} controller is not enabled in {}/cgroup.subtree_control ({enabled:?}): {VM}",
            own.display()
        );
    }
    own
}

/// A cgroup made for one test under the suite's own; removed (with what
/// pgrun left in it) when dropped.
struct TestCgroup(PathBuf);

impl TestCgroup {
    fn new(name: &str) -> Self {
        let dir = own_cgroup().join(format!("pgrun-limits-test-{}-{name}", std::process::id()));
        fs::create_dir(&dir).expect("create a test cgroup");
        TestCgroup(dir)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // Deepest first; only empty cgroups can be removed.
        fn remove(dir: &Path) {
            for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    remove(&entry.path());
                }
            }
            let _ = fs::remove_dir(dir);
        }
        remove(&self.0);
    }
}

/// `sh -c 'echo $$ > CGROUP/cgroup.procs; [BEFORE;] exec pgrun ARGS'`:
/// pgrun started inside `cgroup` (the shell moves itself, then becomes
/// pgrun).
fn pgrun_in(cgroup: &Path, before: &str, args: &[&str]) -> Command {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))).collect();
    let script = format!(
        "echo $$ > '{}/cgroup.procs' || exit 99; {before} exec '{}' {}",
        cgroup.display(),
        pgrun_path(),
        quoted.join(" ")
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script]).stdin(std::process::Stdio::null());
    default_signals(&mut cmd);
    cmd
}

/// Run to completion within a deadline fit for an emulated VM (the
/// suite's is for the host); kills what it started if it does not end.
fn run_slow(mut cmd: Command) -> std::process::Output {
    use std::process::Stdio;
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(180)) {
        Ok(out) => out.expect("wait"),
        Err(_) => {
            for descendant in descendants(pid) {
                // SAFETY: kill takes plain integers; a live descendant of our child.
                unsafe { libc::kill(descendant, libc::SIGKILL) };
            }
            // SAFETY: our own child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{cmd:?} did not finish within 180 s");
        }
    }
}

/// A memory hog with a bystander child: the whole run ends with it.
const HOG: &str = "sleep 300 & echo $! > \"$1\"; python3 -c \"b = b'x' * (256 << 20)\"; wait";

fn assert_oom_ended_the_run(out: &std::process::Output, report: &Path, sleeper: &Path, what: &str) {
    assert_status(out, 137, what);
    let r = json(report);
    assert_eq!(r["reason"], "oom", "{what}: {r}");
    assert_eq!(r["status"]["signal"], "KILL", "{what}: {r}");
    // The kernel's KILL, not pgrun's (members still dying when the command
    // was reaped may have been sent the first step as stragglers).
    let sent = r["signals"].as_array().cloned().unwrap_or_default();
    assert!(sent.iter().all(|s| s["signal"] != "KILL"), "{what}: pgrun sent KILL: {r}");
    let res = &r["resources"];
    assert!(res["oom_kills"].as_u64().is_some_and(|n| n >= 1), "{what}: {r}");
    assert!(res["memory_peak_bytes"].as_u64().is_some_and(|b| ((60 << 20)..=(64 << 20)).contains(&b)), "{what}: {r}");
    let pid: i32 = wait_line(sleeper).parse().unwrap();
    assert!(is_dead(pid), "{what}: the bystander {pid} outlived the run");
}

#[test]
#[ignore = "needs the memory, pids and cpu cgroup controllers: run by tests/vm-cgroup-limits.sh in a VM"]
fn a_memory_hog_under_memory_max_ends_the_whole_run_with_reason_oom() {
    own_cgroup();
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let sleeper = scratch.path("sleeper");
    let out = run_slow(pgrun([
        "--memory-max",
        "64M",
        "--report",
        report.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        HOG,
        "hog",
        sleeper.to_str().unwrap(),
    ]));
    assert_oom_ended_the_run(&out, &report, &sleeper, "--memory-max 64M");
    assert_eq!(json(&report)["contain"], "cgroup");
}

#[test]
#[ignore = "needs the memory, pids and cpu cgroup controllers: run by tests/vm-cgroup-limits.sh in a VM"]
fn pids_max_makes_forks_fail_and_the_run_still_ends_cleanly() {
    own_cgroup();
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    // Forks sleepers until a fork fails (dash then gives up: exit 2); the
    // sleepers are stopped with the run.
    let bomb = "while :; do sleep 300 </dev/null >/dev/null 2>&1 & done";
    let out = run_slow(pgrun(["--pids-max", "8", "--report", report.to_str().unwrap(), "--", "sh", "-c", bomb]));
    assert_status(&out, 2, "--pids-max 8");
    assert!(stderr_of(&out).contains("Cannot fork"), "{}", stderr_of(&out));
    let r = json(&report);
    assert_eq!(r["resources"]["pids_peak"], 8, "{r}");
    assert_eq!(r["stragglers"], 7, "8 tasks: sh and 7 sleepers: {r}");
    assert_eq!(r["unstopped"], 0, "{r}");
    assert_eq!(r["reason"], "exited", "{r}");
}

#[test]
#[ignore = "needs the memory, pids and cpu cgroup controllers: run by tests/vm-cgroup-limits.sh in a VM"]
fn cpus_throttles_a_burner() {
    own_cgroup();
    // Three seconds of wall time spinning (a shell loop: python starts
    // slowly in an emulated VM), then the timeout: the CPU time the leaf
    // counted, with 0.2 CPUs and without (generous margins).
    let spin = |extra: &[&str]| -> u64 {
        let scratch = Scratch::new();
        let report = scratch.path("report.json");
        let mut args = vec!["--contain", "cgroup", "--timeout", "3", "-k", "1", "--report", report.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.extend(["--", "sh", "-c", "while :; do :; done"]);
        let out = run_slow(pgrun(&args));
        assert_status(&out, 124, &format!("{args:?}"));
        let r = json(&report);
        r["resources"]["user_ms"].as_u64().unwrap() + r["resources"]["system_ms"].as_u64().unwrap()
    };
    let throttled = spin(&["--cpus", "0.2"]);
    let free = spin(&[]);
    assert!(throttled < 1500, "--cpus 0.2 used {throttled} ms of CPU in 3 s");
    assert!(free > 2 * throttled, "unthrottled {free} ms, throttled {throttled} ms: no difference");
}

#[test]
#[ignore = "needs the memory, pids and cpu cgroup controllers: run by tests/vm-cgroup-limits.sh in a VM"]
fn a_missing_controller_is_125_naming_it() {
    own_cgroup();
    // A cgroup whose parent hands nothing down: no controller in it.
    let outer = TestCgroup::new("none");
    let inner = outer.path().join("inner");
    fs::create_dir(&inner).unwrap();
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    let out = run(&mut pgrun_in(&inner, "", &["--memory-max", "64M", "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 125, "no memory controller");
    let err = stderr_of(&out);
    assert!(err.contains("needs the memory controller") && err.contains("(none in its cgroup.controllers)"), "{err}");
    // pgrun may write there: the user's systemd is not asked for a scope.
    assert!(!err.contains("session bus") && !err.contains("user's systemd"), "{err}");
    // Named after what was typed, and what to do about it.
    assert!(err.starts_with("pgrun: --memory-max needs") && !err.contains("--contain"), "{err}");
    assert!(err.contains("-p Delegate=yes pgrun") && err.contains("--rlimit as=SIZE"), "{err}");
    assert!(!witness.exists(), "the command ran");
}

#[test]
#[ignore = "needs the memory, pids and cpu cgroup controllers: run by tests/vm-cgroup-limits.sh in a VM"]
fn a_shared_cgroup_is_125_and_nothing_is_moved() {
    own_cgroup();
    let shared = TestCgroup::new("shared");
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    let other = scratch.path("other");
    let mut guard = Guard::new();
    // A sleeper shares the cgroup with pgrun.
    let before = format!("sleep 300 </dev/null >/dev/null 2>&1 & echo $! > '{}';", other.display());
    let out =
        run(&mut pgrun_in(shared.path(), &before, &["--pids-max", "5", "--", "touch", witness.to_str().unwrap()]));
    let sleeper = wait_pid(&other, &mut guard);
    assert_status(&out, 125, "a shared cgroup");
    let err = stderr_of(&out);
    assert!(err.contains("needs the pids controller") && err.contains("share it with pgrun"), "{err}");
    assert!(!err.contains("session bus") && !err.contains("user's systemd"), "{err}");
    assert!(err.contains("systemd-run --user --scope -p Delegate=yes pgrun"), "{err}");
    assert!(!witness.exists(), "the command ran");
    let procs = fs::read_to_string(shared.path().join("cgroup.procs")).unwrap();
    assert_eq!(procs.trim(), sleeper.to_string(), "the other process was moved");
    send(sleeper, libc::SIGKILL);
    wait_dead(sleeper);
}

#[test]
#[ignore = "needs the memory, pids and cpu cgroup controllers: run by tests/vm-cgroup-limits.sh in a VM"]
fn pgrun_alone_in_its_cgroup_moves_itself_and_the_limits_work() {
    own_cgroup();
    let alone = TestCgroup::new("alone");
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let sleeper = scratch.path("sleeper");
    let out = run_slow(pgrun_in(
        alone.path(),
        "",
        &[
            "--memory-max",
            "64M",
            "--report",
            report.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            HOG,
            "hog",
            sleeper.to_str().unwrap(),
        ],
    ));
    assert_oom_ended_the_run(&out, &report, &sleeper, "pgrun alone in its cgroup");
    // The limit worked, so memory was enabled; at pgrun's exit its own leaf
    // is gone with the run's, and the cgroup is as pgrun found it (so the
    // harness can remove it).
    assert_left_as_found(alone.path());
}

/// The cgroup a test put pgrun in holds no cgroup of pgrun's, and its
/// subtree_control enables nothing pgrun enabled (memory, pids, cpu were
/// not enabled there before: the test cgroups start empty).
fn assert_left_as_found(cgroup: &Path) {
    let left: Vec<String> = fs::read_dir(cgroup)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
    let enabled = fs::read_to_string(cgroup.join("cgroup.subtree_control")).unwrap();
    assert!(enabled.trim().is_empty(), "controllers left enabled: {enabled:?}");
    fs::remove_dir(cgroup).expect("the harness's cgroup can be removed");
    fs::create_dir(cgroup).expect("made again, for the test's own clean-up");
}

/// pgrun alone in its cgroup moved into a leaf of its own; SIGKILLed
/// during the run, its guard (the last process in that leaf) stops the
/// run, removes the run's leaf and leaves pgrun's own the same way.
#[test]
#[ignore = "needs the memory, pids and cpu cgroup controllers: run by tests/vm-cgroup-limits.sh in a VM"]
fn pgrun_killed_in_a_leaf_of_its_own_leaves_it_to_the_guard() {
    own_cgroup();
    let alone = TestCgroup::new("alone-killed");
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let payload = format!("echo $$ > {dir}/me; exec sleep 300");
    let mut cmd =
        pgrun_in(alone.path(), "", &["--pids-max", "50", "-p", pidfile.to_str().unwrap(), "--", "sh", "-c", &payload]);
    let index = guard.spawn(&mut cmd);
    let me = wait_pid(&scratch.path("me"), &mut guard);
    wait_line(&pidfile);
    let pgrun = lock_holder(&pidfile).expect("pgrun holds the pid file");
    let the_guard = guard_of(pgrun);
    guard.record(the_guard);
    send(pgrun, libc::SIGKILL);
    assert_eq!(guard.wait(index), 137);
    wait_dead(the_guard);
    assert!(is_dead(me), "the guard left the command running");
    assert_left_as_found(alone.path());
}

/// Issue 30 #7: a `--memory-max` below what the command's exec needs. The
/// exec failed for lack of memory, and so did the child's write saying so:
/// pgrun took the silence for "the exec worked", and the run ended 127,
/// "exited", without a word (`1`); or the kernel's E2BIG for pages it could
/// not get was "Argument list too long", 126 (`16K`). Neither is the
/// command's: the command never runs, and the run ends either as pgrun's
/// failure to create the process (125, one line) or, where the kernel's
/// out-of-memory killer ended the process (in its exec), as any run it
/// ends (137, reason `oom`). (The same failures injected on the host:
/// tests/faults_sys.rs.)
#[test]
#[ignore = "needs the memory, pids and cpu cgroup controllers: run by tests/vm-cgroup-limits.sh in a VM"]
fn a_memory_max_too_small_for_the_exec_is_never_the_commands_failure() {
    own_cgroup();
    for limit in ["1", "16K"] {
        let scratch = Scratch::new();
        let report = scratch.path("report.json");
        let witness = scratch.path("ran");
        let args =
            ["--memory-max", limit, "--report", report.to_str().unwrap(), "--", "touch", witness.to_str().unwrap()];
        let out = run_slow(pgrun(args));
        let err = stderr_of(&out);
        let r = json(&report);
        let what = format!("--memory-max {limit}: status {:?}, stderr {err:?}, report {r}", out.status);
        assert!(!witness.exists(), "{what}: the command ran");
        match out.status.code() {
            Some(125) => {
                assert!(err.starts_with("pgrun: cannot start 'touch': ") && err.lines().count() == 1, "{what}");
                assert_eq!(r["reason"], "error", "{what}");
            }
            Some(137) => {
                assert_eq!(r["reason"], "oom", "{what}");
                assert!(r["resources"]["oom_kills"].as_u64().is_some_and(|n| n >= 1), "{what}");
            }
            _ => panic!("{what}"),
        }
    }
}

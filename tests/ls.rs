//! `pgrun ls DIR`: the runs published in a folder, each sentence of the
//! contract's "The runs in a folder" section against the built binary.

use crate::util::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn ls(args: &[&str], dir: &Path) -> Output {
    run(pgrun(["ls"]).args(args).arg(dir))
}

/// `pgrun ls --json DIR`'s array, with status 0.
fn ls_json(dir: &Path) -> Vec<serde_json::Value> {
    let out = ls(&["--json"], dir);
    assert_status(&out, 0, "ls --json");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.ends_with('\n') && text.lines().count() == 1, "not one line: {text:?}");
    serde_json::from_str::<serde_json::Value>(&text).unwrap().as_array().expect("an array").clone()
}

/// A detached run of `sh -c PAYLOAD` published at `DIR/NAME`; its group
/// id.
fn detached(guard: &mut Guard, pidfile: &Path, payload: &str) -> i32 {
    let out = run(pgrun(["--detach", "-p"]).arg(pidfile).args(["--", "sh", "-c", payload]));
    assert_status(&out, 0, "--detach");
    let pgid: i32 = fs::read_to_string(pidfile).unwrap().trim().parse().unwrap();
    guard.record_group(pgid);
    if let Some(holder) = lock_holder(pidfile) {
        guard.record(holder);
    }
    pgid
}

/// A folder with what a folder of runs holds besides pid files.
fn with_other_files(scratch: &Scratch) -> PathBuf {
    let dir = scratch.path("runs");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("job.json"), b"{\"exit_code\": 0}\n").unwrap();
    fs::write(dir.join("job.log"), b"hello\n").unwrap();
    fs::write(dir.join("no-newline"), b"4242").unwrap();
    fs::write(dir.join("empty"), b"").unwrap();
    fs::create_dir(dir.join("folder")).unwrap();
    dir
}

#[test]
fn it_lists_every_regular_file_whose_content_is_a_pid_files_and_nothing_else() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = with_other_files(&scratch);
    let live = dir.join("live.pid");
    let pgid = detached(&mut guard, &live, "sleep 300");
    // A stale record: a group id nobody holds the lock of.
    fs::write(dir.join("old.pid"), b"999999\n").unwrap();
    // A symlink to a pid file is not a regular file there.
    std::os::unix::fs::symlink(&live, dir.join("link.pid")).unwrap();
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let runs = ls_json(&dir);
    let named: Vec<&str> = runs.iter().map(|r| r["pidfile"].as_str().unwrap()).collect();
    assert_eq!(named, [dir.join("live.pid").to_str().unwrap(), dir.join("old.pid").to_str().unwrap()], "{runs:?}");
    assert_eq!((runs[0]["state"].as_str(), runs[0]["pgid"].as_i64()), (Some("running"), Some(i64::from(pgid))));
    assert_eq!((runs[1]["state"].as_str(), runs[1]["pgid"].as_i64()), (Some("stale"), Some(999999)));
}

#[test]
fn each_run_has_its_state_pgid_pgrun_pid_processes_age_and_leaders_command_as_status_gives_them() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.path("runs");
    fs::create_dir(&dir).unwrap();
    let pidfile = dir.join("job.pid");
    let pgid = detached(&mut guard, &pidfile, "sleep 300 & sleep 300; wait");
    eventually("two sleeps in the group", || descendants(pgid).len() == 2);
    let status = run(pgrun(["status", "--json"]).arg(&pidfile));
    assert_status(&status, 0, "status");
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let runs = ls_json(&dir);
    assert_eq!(runs.len(), 1);
    let listed = &runs[0];
    // Every field of status's object, the same (but the age, which grew).
    for (key, value) in status.as_object().unwrap() {
        if key != "uptime_ms" {
            assert_eq!(&listed[key], value, "{key}: ls {listed}, status {status}");
        }
    }
    assert!(listed["uptime_ms"].as_u64().unwrap() >= status["uptime_ms"].as_u64().unwrap(), "{listed}");
    // (The portable path counts no processes: null, as status says.)
    let processes = if cfg!(feature = "posix-fallback") { "" } else { "3 processes, " };
    if !cfg!(feature = "posix-fallback") {
        assert_eq!(listed["processes"], 3, "{listed}");
    }
    assert_eq!(listed["command"], serde_json::json!(["sh", "-c", "sleep 300 & sleep 300; wait"]), "{listed}");
    assert_eq!(listed["pid"].as_i64(), lock_holder(&pidfile).map(i64::from));
    // The text line says the same.
    let out = ls(&[], &dir);
    let line = String::from_utf8(out.stdout).unwrap();
    let want = format!("job.pid  running  pgid {pgid}, pgrun pid {}, {processes}up ", listed["pid"]);
    assert!(line.starts_with(&want) && line.trim_end().ends_with("s  sh -c sleep 300 & sleep 300; wait"), "{line}");
    // Stopping: a cancel marker beside a live pid file, as status says.
    fs::write(dir.join("job.pid.cancel"), b"").unwrap();
    assert_eq!(ls_json(&dir)[0]["state"], "stopping");
    fs::remove_file(dir.join("job.pid.cancel")).unwrap();
    // A stale record has no processes, no command, no age.
    fs::write(dir.join("old.pid"), b"999999\n").unwrap();
    let runs = ls_json(&dir);
    assert_eq!(runs[1]["state"], "stale");
    assert!(runs[1]["command"].is_null() && runs[1]["processes"].is_null() && runs[1]["pid"].is_null(), "{}", runs[1]);
}

#[test]
fn one_line_each_sorted_by_name() {
    let scratch = Scratch::new();
    let dir = with_other_files(&scratch);
    for name in ["b.pid", "c.pid", "a.pid", "B.pid"] {
        fs::write(dir.join(name), b"999999\n").unwrap();
    }
    let out = ls(&[], &dir);
    assert_status(&out, 0, "ls");
    let text = String::from_utf8(out.stdout).unwrap();
    let names: Vec<&str> = text.lines().map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(names, ["B.pid", "a.pid", "b.pid", "c.pid"], "{text}");
    assert!(text.lines().all(|l| l.contains("  stale  pgid 999999")), "{text}");
}

#[test]
fn none_listed_is_status_0_and_an_unreadable_folder_125() {
    let scratch = Scratch::new();
    let dir = with_other_files(&scratch);
    let out = ls(&[], &dir);
    assert_status(&out, 0, "ls of no runs");
    assert!(out.stdout.is_empty(), "{:?}", out.stdout);
    assert!(ls_json(&dir).is_empty());
    for bad in [scratch.path("missing"), dir.join("job.log")] {
        let out = ls(&[], &bad);
        assert_status(&out, 125, &bad.display().to_string());
        let err = stderr_of(&out);
        assert!(err.starts_with("pgrun: cannot list folder ") && err.lines().count() == 1, "{err}");
    }
}

#[test]
fn it_reads_only_the_runs_own_processes_never_signals_and_changes_nothing() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = with_other_files(&scratch);
    let pgid = detached(&mut guard, &dir.join("job.pid"), "sleep 300 & sleep 300; wait");
    eventually("two sleeps in the group", || descendants(pgid).len() == 2);
    let holder = lock_holder(&dir.join("job.pid")).unwrap();
    // Another pgrun, published elsewhere: ls must not look at it.
    let elsewhere = scratch.path("elsewhere.pid");
    let other = detached(&mut guard, &elsewhere, "sleep 300");
    let other_holder = lock_holder(&elsewhere).unwrap();
    fs::write(dir.join("old.pid"), format!("{other}\n")).unwrap();
    let before = listing(&dir);
    let log = scratch.path("strace.log");
    let out = run(Command::new("strace")
        .args(["-f", "-qq", "-o"])
        .arg(&log)
        .args(["--", pgrun_path(), "ls"])
        .arg(&dir)
        .stdin(Stdio::null()));
    assert_status(&out, 0, "strace pgrun ls");
    let trace = fs::read_to_string(&log).unwrap();
    // The processes it read of: the run's (its pgrun, what it started).
    let own: Vec<i32> = [holder].into_iter().chain(descendants(holder)).collect();
    let mut read = Vec::new();
    for line in trace.lines() {
        if let Some(rest) = line.split("\"/proc/").nth(1) {
            let pid = rest.split('/').next().unwrap();
            if let Ok(pid) = pid.parse::<i32>() {
                read.push(pid);
            }
        }
        // kill(PID, 0) only asks whether a process exists (the portable
        // path asks so of the run's group): it sends nothing.
        // (strace splits a call that another thread interrupts: `kill(-N, 0
        // <unfinished ...>`.)
        let probe = line.contains("kill(") && (line.contains(", 0)") || line.contains(", 0 <unfinished"));
        for call in ["kill(", "pidfd_send_signal(", "unlink", "rename", "mkdir", "O_CREAT", "O_WRONLY", "O_RDWR"] {
            assert!(!line.contains(call) || line.contains("--- SIG") || probe, "ls made a call it must not: {line}");
        }
    }
    let strangers: Vec<i32> = read.iter().copied().filter(|p| !own.contains(p) && *p != out_pid(&trace)).collect();
    assert!(strangers.is_empty(), "ls read /proc of {strangers:?}, not the run's own {own:?}");
    assert!(!read.contains(&other_holder) && !read.contains(&other), "it looked at the run published elsewhere");
    assert!(read.contains(&holder), "it did not look at the run's pgrun: {read:?}");
    assert_eq!(listing(&dir), before, "the folder changed");
}

/// The pid of the traced pgrun (the first pid in strace's log).
fn out_pid(trace: &str) -> i32 {
    trace.split_whitespace().next().and_then(|p| p.parse().ok()).unwrap_or(0)
}

/// The folder's names, kinds, sizes and times.
fn listing(dir: &Path) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut out: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = fs::symlink_metadata(e.path()).unwrap();
            (e.file_name().to_string_lossy().into_owned(), meta.len(), meta.modified().unwrap())
        })
        .collect();
    out.sort();
    out
}

/// A command that bears the guard's name (`pgrun-guard`, a copy of sleep)
/// is counted as the run's, in tree mode too: only pgrun's own fork under
/// that name is its guard. (Tree mode and the counts of a run's
/// processes are Linux's.)
#[cfg(not(feature = "posix-fallback"))]
#[test]
fn a_command_named_like_the_guard_is_counted() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("p");
    let named = scratch.path("pgrun-guard");
    fs::copy("/bin/sleep", &named).unwrap();
    let payload = format!("exec {} 300", named.display());
    start_published(&mut guard, &pidfile, &["--contain", "tree"], &payload);
    let listed = ls_json(scratch.dir());
    assert_eq!(listed[0]["processes"].as_u64(), Some(1), "{listed:?}");
    let out = ls(&[], scratch.dir());
    assert_status(&out, 0, "ls");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(", 1 process,"), "{text}");
}

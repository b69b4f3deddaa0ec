//! A finished run's outcome, at once: a run removes its old report before
//! it publishes, the report names the pid file, and `wait --report` and
//! `cancel --report` answer at once for a run that is over; without a
//! report, their "no run" line says how long they waited.

use crate::util::*;
use std::fs;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// Far longer than any test here may take: a reader that sat out its
/// `--wait-start` would fail the test.
const LONG_WAIT_START: &str = "120";

/// A reader's answer "at once": well under [`LONG_WAIT_START`], with room
/// for a busy host.
const AT_ONCE: Duration = Duration::from_secs(20);

fn reader(mode: &str, args: &[&str]) -> (Output, Duration) {
    let mut all = vec![mode];
    all.extend_from_slice(args);
    let started = Instant::now();
    let out = run(pgrun(&all).stdout(Stdio::piped()).stderr(Stdio::piped()));
    (out, started.elapsed())
}

/// Run `sh -c PAYLOAD` to its end with `-p PIDFILE --report REPORT`;
/// its exit status.
fn finished_run(pidfile: &Path, report: &Path, payload: &str) -> i32 {
    let out =
        run(pgrun(["-p", pidfile.to_str().unwrap(), "--report", report.to_str().unwrap(), "--", "sh", "-c", payload])
            .stdout(Stdio::null())
            .stderr(Stdio::piped()));
    code_of(out.status)
}

/// The pid file's name as a report gives it: absolute, its folder resolved.
fn absolute(path: &Path) -> String {
    let folder = fs::canonicalize(path.parent().unwrap()).unwrap();
    folder.join(path.file_name().unwrap()).to_str().unwrap().to_string()
}

#[test]
fn a_run_removes_an_old_report_before_it_publishes_its_pid_file() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let report = scratch.path("job.json");
    fs::write(&report, "{\"exit_code\": 0, \"pgid\": 1, \"pidfile\": null}\n").unwrap();
    // Held before the spawn, so before it publishes: the old report is
    // gone already, and no pid file is there yet.
    let held = Pause::new(&scratch, "guard-started");
    let dir = scratch.sh();
    let payload = format!("echo ready > {dir}/ready; while [ ! -e {dir}/gate ]; do sleep 0.05; done; exit 3");
    let mut cmd =
        pgrun(["-p", pidfile.to_str().unwrap(), "--report", report.to_str().unwrap(), "--", "sh", "-c", &payload]);
    let index = guard.spawn(held.arm(&mut cmd));
    held.wait_reached();
    assert!(!report.exists(), "the old report was still there before the run published");
    assert!(!pidfile.exists(), "the run published before the step it was held at");
    held.release();
    let pgid: i32 = wait_line(&pidfile).parse().unwrap();
    guard.record(pgid);
    guard.record_group(pgid);
    wait_line(&scratch.path("ready"));
    assert!(!report.exists(), "a report appeared while the run was live");
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(guard.wait(index), 3);
    // The report present now, with no run published, is this run's.
    let written = json(&report);
    assert_eq!(written["pgid"], pgid, "{written}");
    assert_eq!(written["exit_code"], 3, "{written}");
}

#[test]
fn the_report_names_the_pid_file_by_its_absolute_path_or_null() {
    let scratch = Scratch::new();
    let report = scratch.path("job.json");
    // A relative pid file, given from the scratch folder.
    let out = run(pgrun(["-p", "job.pid", "--report", "job.json", "--", "true"]).current_dir(scratch.dir()));
    assert_status(&out, 0, "run");
    assert_eq!(json(&report)["pidfile"], absolute(&scratch.path("job.pid")), "{}", json(&report));
    // No pid file: null.
    let out = run(&mut pgrun(["--report", report.to_str().unwrap(), "--", "true"]));
    assert_status(&out, 0, "run");
    let written = json(&report);
    assert!(written.get("pidfile").is_some_and(serde_json::Value::is_null), "{written}");
}

#[test]
fn wait_report_answers_at_once_with_the_status_of_a_run_that_is_over() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let report = scratch.path("job.json");
    assert_eq!(finished_run(&pidfile, &report, "exit 3"), 3);
    let (out, took) = reader(
        "wait",
        &["--wait-start", LONG_WAIT_START, "--report", report.to_str().unwrap(), pidfile.to_str().unwrap()],
    );
    assert_status(&out, 3, "wait --report of a run over");
    assert!(took < AT_ONCE, "wait sat out --wait-start: {took:?}");
    // Another spelling of the same pid file is the same run.
    let (out, _) = reader(
        "wait",
        &["--wait-start", "0", "--report", report.to_str().unwrap(), &format!("{}/./job.pid", scratch.sh())],
    );
    assert_status(&out, 3, "wait --report by another spelling");
    // A timed-out run: its own status, 124.
    assert_eq!(
        run(pgrun([
            "-p",
            pidfile.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
            "-t",
            "0.2",
            "--",
            "sleep",
            "60"
        ])
        .stderr(Stdio::null()))
        .status
        .code(),
        Some(124)
    );
    let (out, took) = reader(
        "wait",
        &["--wait-start", LONG_WAIT_START, "--report", report.to_str().unwrap(), pidfile.to_str().unwrap()],
    );
    assert_status(&out, 124, "wait --report of a timed-out run");
    assert!(took < AT_ONCE, "wait sat out --wait-start: {took:?}");
}

#[test]
fn cancel_report_of_a_run_that_is_over_is_1_at_once_and_leaves_no_marker() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let report = scratch.path("job.json");
    assert_eq!(finished_run(&pidfile, &report, "exit 0"), 0);
    let before = fs::read(&report).unwrap();
    let (out, took) = reader(
        "cancel",
        &["--wait-start", LONG_WAIT_START, "--report", report.to_str().unwrap(), pidfile.to_str().unwrap()],
    );
    assert_status(&out, 1, "cancel --report of a run over");
    assert!(took < AT_ONCE, "cancel sat out --wait-start: {took:?}");
    let err = stderr_of(&out);
    assert!(err.starts_with("pgrun: ") && err.lines().count() == 1 && err.contains("over"), "{err}");
    assert!(!scratch.path("job.pid.cancel").exists(), "cancel left a marker");
    assert_eq!(fs::read(&report).unwrap(), before, "cancel changed the report");
    // The next run at the pid file is not cancelled by anything left.
    assert_eq!(finished_run(&pidfile, &report, "exit 5"), 5);
}

#[test]
fn a_report_of_another_pid_file_says_nothing_of_this_one() {
    let scratch = Scratch::new();
    let report = scratch.path("other.json");
    assert_eq!(finished_run(&scratch.path("other.pid"), &report, "exit 3"), 3);
    let pidfile = scratch.path("job.pid");
    for mode in ["wait", "cancel"] {
        let (out, took) =
            reader(mode, &["--wait-start", "0.3", "--report", report.to_str().unwrap(), pidfile.to_str().unwrap()]);
        assert_status(&out, 1, mode);
        assert!(took >= Duration::from_millis(300), "{mode} did not wait --wait-start: {took:?}");
        let err = stderr_of(&out);
        assert!(err.starts_with(&format!("pgrun: no run at {}", pidfile.display())), "{mode}: {err}");
        assert!(err.contains("waited 300ms"), "{mode}: {err}");
    }
    assert!(!scratch.path("job.pid.cancel").exists(), "cancel left its marker");
}

#[test]
fn a_report_that_names_a_stale_pid_file_is_said_as_an_earlier_runs() {
    // A run to its end wrote the report; then a stale pid file (a run of
    // no report's, SIGKILLed without a guard) lies at the same path. The
    // report is not that run's: wait says the file is stale, and cancel,
    // which removes it and waits for a run to start, must not say the
    // report does not name it.
    let scratch = Scratch::new();
    let (pidfile, report) = (scratch.path("job.pid"), scratch.path("r.json"));
    assert_eq!(finished_run(&pidfile, &report, "exit 3"), 3);
    let pgid = json(&report)["pgid"].as_i64().unwrap();
    fs::write(&pidfile, format!("{pgid}\n")).unwrap();
    let (out, _) = reader("wait", &["--report", report.to_str().unwrap(), pidfile.to_str().unwrap()]);
    assert_status(&out, 1, "wait");
    assert!(stderr_of(&out).contains("the pid file is stale"), "{}", stderr_of(&out));
    let (out, _) =
        reader("cancel", &["--wait-start", "0.3", "--report", report.to_str().unwrap(), pidfile.to_str().unwrap()]);
    assert_status(&out, 1, "cancel");
    let err = stderr_of(&out);
    assert!(err.contains("a stale pid file was removed"), "{err}");
    assert!(
        err.contains(&format!("report {} is an earlier run's", report.display())) && !err.contains("does not name it"),
        "{err}"
    );
    assert!(!pidfile.exists() && !scratch.path("job.pid.cancel").exists());
}

#[test]
fn a_reader_with_no_run_says_how_long_it_waited_and_how_to_skip_that() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    for (mode, wait_start, said) in [("wait", "1", "1s"), ("cancel", "0.3", "300ms")] {
        let (out, _) = reader(mode, &["--wait-start", wait_start, pidfile.to_str().unwrap()]);
        assert_status(&out, 1, mode);
        assert_eq!(
            stderr_of(&out),
            format!(
                "pgrun: no run at {} (waited {said} for one to start; --wait-start 0 if it may be over already)\n",
                pidfile.display()
            ),
            "{mode}"
        );
    }
}

#[test]
fn a_wait_whose_timeout_ends_the_wait_for_a_start_says_how_long_it_really_waited() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let (out, took) = reader("wait", &["--wait-start", LONG_WAIT_START, "--timeout", "0.3", pidfile.to_str().unwrap()]);
    assert_status(&out, 1, "wait");
    assert!(took < AT_ONCE, "wait sat out --wait-start: {took:?}");
    assert_eq!(
        stderr_of(&out),
        format!(
            "pgrun: no run at {} (waited 300ms for one to start; --wait-start 0 if it may be over already)\n",
            pidfile.display()
        )
    );
}

#[test]
fn wait_report_of_a_run_withdrawn_answers_before_its_pgrun_exits() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let report = scratch.path("job.json");
    // pgrun held right after it withdrew its pid file (its report
    // written): no run is published, and pgrun has not exited.
    let held = Pause::new(&scratch, "withdrawn");
    let mut cmd =
        pgrun(["-p", pidfile.to_str().unwrap(), "--report", report.to_str().unwrap(), "--", "sh", "-c", "exit 4"]);
    let index = guard.spawn(held.arm(&mut cmd));
    held.wait_reached();
    let (out, took) = reader(
        "wait",
        &["--wait-start", LONG_WAIT_START, "--report", report.to_str().unwrap(), pidfile.to_str().unwrap()],
    );
    assert_status(&out, 4, "wait --report of a run withdrawn");
    assert!(took < AT_ONCE, "wait sat out --wait-start: {took:?}");
    assert!(guard.child(index).try_wait().unwrap().is_none(), "pgrun was not held");
    held.release();
    assert_eq!(guard.wait(index), 4);
}

#[test]
fn a_report_path_that_is_a_live_runs_pid_file_is_refused_and_nothing_runs() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let live = scratch.path("live.pid");
    let dir = scratch.sh();
    let (index, pgid) = start_published(&mut guard, &live, &[], "sleep 300");
    let out = run(pgrun([
        "-p",
        scratch.path("job.pid").to_str().unwrap(),
        "--report",
        live.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &format!("touch {dir}/ran"),
    ])
    .stderr(Stdio::piped()));
    assert_status(&out, 125, "a report path that is a live run's pid file");
    let err = stderr_of(&out);
    assert!(err.starts_with("pgrun: ") && err.lines().count() == 1 && err.contains("live.pid"), "{err}");
    assert!(!scratch.path("ran").exists(), "the command ran");
    assert_eq!(wait_line(&live), pgid.to_string(), "the live run's pid file was touched");
    assert_status(&run(&mut pgrun(["cancel", live.to_str().unwrap()])), 0, "cancel");
    assert_eq!(guard.wait(index), 143);
}

#[test]
fn a_report_path_another_live_run_uses_is_refused_and_nothing_is_lost() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let report = scratch.path("shared.json");
    let first = scratch.path("first.pid");
    let dir = scratch.sh();
    let payload = format!("echo ready > {dir}/ready; while [ ! -e {dir}/gate ]; do sleep 0.05; done; exit 3");
    let (index, _) = start_published(&mut guard, &first, &["--report", report.to_str().unwrap()], &payload);
    wait_line(&scratch.path("ready"));
    // A second run given the same report, by another spelling: refused
    // before anything runs, the first run's report path left alone.
    fs::write(&report, "left by someone\n").unwrap();
    let second = scratch.path("second.pid");
    let out = run(pgrun([
        "-p",
        second.to_str().unwrap(),
        "--report",
        &format!("{dir}/./shared.json"),
        "--",
        "sh",
        "-c",
        &format!("touch {dir}/ran"),
    ])
    .stderr(Stdio::piped()));
    assert_status(&out, 125, "a report path another live run uses");
    let err = stderr_of(&out);
    assert!(err.starts_with("pgrun: ") && err.lines().count() == 1 && err.contains("shared.json"), "{err}");
    assert!(err.contains("another live run"), "{err}");
    assert!(!scratch.path("ran").exists(), "the command ran");
    assert!(!second.exists(), "the refused run left its pid file");
    assert_eq!(fs::read_to_string(&report).unwrap(), "left by someone\n", "the refused run touched the report");
    // The first run ends and writes its report; then the path is free.
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(guard.wait(index), 3);
    assert_eq!(json(&report)["exit_code"], 3);
    assert_eq!(finished_run(&second, &report, "exit 5"), 5);
    assert_eq!(json(&report)["pidfile"], absolute(&second));
}

#[test]
fn a_run_that_marks_its_report_as_another_run_takes_it_looks_again_and_stops() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let report = scratch.path("shared.json");
    let dir = scratch.sh();
    // The first run has looked for another run's mark (none yet) and is
    // held before it takes its own; a second run marks the path meanwhile.
    let looked = Pause::new(&scratch, "report-looked");
    let mut cmd = pgrun(["--report", report.to_str().unwrap(), "--", "sh", "-c", &format!("touch {dir}/first")]);
    let first = guard.spawn(looked.arm(cmd.stderr(Stdio::piped())));
    looked.wait_reached();
    let payload = format!("echo ready > {dir}/ready; while [ ! -e {dir}/gate ]; do sleep 0.05; done");
    let (second, _) =
        start_published(&mut guard, &scratch.path("second.pid"), &["--report", report.to_str().unwrap()], &payload);
    wait_line(&scratch.path("ready"));
    looked.release();
    assert_eq!(guard.wait(first), 125, "the run that looked first, then found the other's mark");
    let mut err = String::new();
    std::io::Read::read_to_string(guard.child(first).stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("another live run"), "{err}");
    assert!(!scratch.path("first").exists(), "its command ran");
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(guard.wait(second), 0);
    assert_eq!(json(&report)["pidfile"], absolute(&scratch.path("second.pid")));
}

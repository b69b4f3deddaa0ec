//! `--idle-timeout DUR`: the run is stopped as by a timeout (124,
//! `--preserve-status`, report reason `idle-timeout`) once the command has
//! written nothing to stdout or stderr for DUR; each read moves the one
//! deadline; and the streams, which now go through pgrun, lose nothing.

use crate::util::*;
use std::time::Duration;

fn report_args(report: &std::path::Path) -> Vec<String> {
    vec!["--report".into(), report.to_str().unwrap().into()]
}

/// pgrun's arguments for `options`, a report at `report`, and `sh -c script`.
fn idle_run(options: &[&str], report: &std::path::Path, script: &str) -> Vec<String> {
    let mut a: Vec<String> = options.iter().map(|o| o.to_string()).collect();
    a.extend(report_args(report));
    a.extend(["--".into(), "sh".into(), "-c".into(), script.into()]);
    a
}

/// `sh -c` writing a line every 100 ms, `n` times, to `fd`.
fn chatty(n: u32, fd: u32) -> String {
    format!("i=0; while [ $i -lt {n} ]; do echo tick $i >&{fd}; sleep 0.1; i=$((i+1)); done")
}

#[test]
fn an_idle_command_is_stopped_after_about_dur() {
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let a = idle_run(&["--idle-timeout", "700ms"], &report, "echo started; exec sleep 300");
    let out = run(&mut pgrun(&a));
    assert_status(&out, 124, "idle command");
    assert_eq!(out.stdout, b"started\n");
    let r = json(&report);
    assert_eq!(r["reason"], "idle-timeout", "{r}");
    assert_eq!(r["signals"][0]["signal"], "TERM", "{r}");
    let sent_at = r["signals"][0]["at_ms"].as_u64().unwrap();
    assert!((700..10_000).contains(&sent_at), "TERM sent at {sent_at} ms for an idle timeout of 700 ms: {r}");
    assert_eq!(r["output"]["stdout"]["bytes"], 8, "{r}");
    assert_eq!(r["output"]["stdout"]["omitted"], 0, "{r}");
}

#[test]
fn a_chatty_command_outlives_the_idle_timeout_on_stdout_or_on_stderr() {
    for fd in [1, 2] {
        let scratch = Scratch::new();
        let report = scratch.path("report.json");
        // 15 lines 100 ms apart: at least 1.5 s, past the idle timeout of
        // 1 s, which each line moves.
        let a = idle_run(&["--idle-timeout", "1s"], &report, &chatty(15, fd));
        let started = std::time::Instant::now();
        let out = run(&mut pgrun(&a));
        assert_status(&out, 0, &format!("chatty command on fd {fd}"));
        assert!(started.elapsed() >= Duration::from_millis(1500));
        let r = json(&report);
        assert_eq!(r["reason"], "exited", "fd {fd}: {r}");
        assert!(r["signals"].as_array().unwrap().is_empty(), "fd {fd}: {r}");
        let lines: String = (0..15).map(|i| format!("tick {i}\n")).collect();
        let (got, other) = if fd == 1 { (&out.stdout, &out.stderr) } else { (&out.stderr, &out.stdout) };
        assert_eq!(String::from_utf8_lossy(got), lines, "fd {fd}");
        assert!(other.is_empty(), "fd {fd}: {}", String::from_utf8_lossy(other));
    }
}

#[test]
fn preserve_status_applies_to_the_idle_timeout() {
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let dir = scratch.sh();
    let payload = format!("trap 'exit 7' TERM; touch {dir}/ready; sleep 300 & wait");
    let a = idle_run(&["--idle-timeout", "500ms", "--preserve-status"], &report, &payload);
    let out = run(&mut pgrun(&a));
    assert_status(&out, 7, "idle timeout with --preserve-status");
    assert!(scratch.path("ready").exists(), "the trap was never set");
    let r = json(&report);
    assert_eq!(r["reason"], "idle-timeout", "{r}");
    assert_eq!(r["status"]["code"], 7, "{r}");
}

#[test]
fn idle_output_passes_whole_and_with_max_output_bounded_byte_exact() {
    let scratch = Scratch::new();
    let data = scratch.path("data");
    let file = scratch.path("out.log");
    // 4 MiB of numbered lines on stdout, then (once the output file holds
    // them, so that the file's order is known) on stderr, then silence
    // until the idle timeout.
    let text: String = (0..200_000).map(|i| format!("{i:019}\n")).collect();
    std::fs::write(&data, &text).unwrap();
    let payload = format!(
        "cat {d} && until [ $(wc -c < {f}) -ge {n} ]; do sleep 0.01; done && cat {d} >&2 && exec sleep 300",
        d = data.display(),
        f = file.display(),
        n = text.len()
    );
    for max_output in [None, Some(1000usize)] {
        let report = scratch.path("report.json");
        let mut a = vec!["--idle-timeout".to_string(), "700ms".into()];
        if let Some(size) = max_output {
            a.extend(["--max-output".into(), size.to_string()]);
        }
        a.extend(["--output-file".into(), file.to_str().unwrap().into()]);
        a.extend(report_args(&report));
        a.extend(["--".into(), "sh".into(), "-c".into(), payload.clone()]);
        let out = run(&mut pgrun(&a));
        assert_status(&out, 124, &format!("{max_output:?}"));
        let want = match max_output {
            None => text.as_bytes().to_vec(),
            Some(size) => {
                let half = size / 2;
                let mut w = text.as_bytes()[..half].to_vec();
                if !w.ends_with(b"\n") {
                    w.push(b'\n');
                }
                w.extend_from_slice(format!("[pgrun: {} bytes omitted]\n", text.len() - 2 * half).as_bytes());
                w.extend_from_slice(&text.as_bytes()[text.len() - half..]);
                w
            }
        };
        assert!(out.stdout == want, "{max_output:?}: stdout differs ({} bytes, want {})", out.stdout.len(), want.len());
        assert!(out.stderr == want, "{max_output:?}: stderr differs ({} bytes, want {})", out.stderr.len(), want.len());
        // The output file loses nothing either: both streams, whole.
        let copied = std::fs::read(&file).unwrap();
        assert!(copied == [text.as_bytes(), text.as_bytes()].concat(), "{max_output:?}: the output file differs");
        let r = json(&report);
        assert_eq!(r["reason"], "idle-timeout", "{r}");
        assert_eq!(r["output"]["stdout"]["bytes"], text.len(), "{r}");
        assert_eq!(r["output"]["stderr"]["bytes"], text.len(), "{r}");
    }
}

#[test]
fn the_timeout_still_applies_to_a_chatty_command() {
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let a = idle_run(&["--idle-timeout", "5s", "--timeout", "700ms"], &report, &chatty(1000, 1));
    let out = run(&mut pgrun(&a));
    assert_status(&out, 124, "timeout with an idle timeout");
    assert_eq!(json(&report)["reason"], "timeout");
}

#[test]
fn bad_idle_timeouts_are_usage_errors() {
    for bad in ["", "-1", "1x", "inf", "1e3"] {
        let out = run(&mut pgrun(["--idle-timeout", bad, "--", "true"]));
        assert_status(&out, 125, &format!("--idle-timeout {bad:?}"));
    }
    // 0 is no idle timeout, as for --timeout: the output passes untouched.
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let out = run(&mut pgrun(["--idle-timeout", "0", "--report", report.to_str().unwrap(), "--", "sleep", "0.3"]));
    assert_status(&out, 0, "--idle-timeout 0");
    assert!(json(&report)["output"].is_null());
}

#[test]
fn a_reader_that_leaves_stops_the_whole_stream_relay_not_the_run() {
    // Without --max-output the stream passes whole (spliced pipe to pipe
    // on Linux): `head -c 10` leaving still gives the command SIGPIPE, as
    // without pgrun, and the run goes on.
    let scratch = Scratch::new();
    let dir = scratch.sh();
    let report = scratch.path("report.json");
    let script = format!(
        "{} --idle-timeout 30 --report {} -- sh -c 'yes; echo $? > {dir}/status; echo after >&2' | head -c 10 >/dev/null",
        pgrun_path(),
        report.display()
    );
    let out = run(std::process::Command::new("sh").args(["-c", &script]).stdin(std::process::Stdio::null()));
    assert_status(&out, 0, "pipeline");
    assert_eq!(std::fs::read_to_string(scratch.path("status")).unwrap(), "141\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "after\n");
    let r = json(&report);
    assert_eq!(r["reason"], "exited", "{r}");
    assert!(r["output"]["stdout"]["bytes"].as_u64().unwrap() >= 10, "{r}");
    assert_eq!(r["output"]["stderr"]["bytes"], 6, "{r}");
}

#[test]
fn a_command_held_up_by_a_stalled_reader_is_idle_and_loses_nothing() {
    // pgrun's stdout is a pipe the test does not read: once it is full,
    // pgrun reads no more, the command blocks in write(2), nothing more is
    // read, and the idle timeout fires (pgrun is not deaf while it waits
    // for room, and does not spin either). Everything read is then written
    // once the reader reads.
    use std::io::Read;
    let scratch = Scratch::new();
    let dir = scratch.sh();
    let report = scratch.path("report.json");
    let mut guard = Guard::new();
    let (mut reader, writer) = std::io::pipe().unwrap();
    let total = 8 * 1024 * 1024;
    let payload = format!("echo $$ > {dir}/pid; exec head -c {total} /dev/zero");
    let args = ["--idle-timeout", "3", "--report", report.to_str().unwrap(), "--", "sh", "-c", &payload];
    let index = guard.spawn(pgrun(args).stdout(writer).stderr(std::process::Stdio::null()));
    let pid = wait_pid(&scratch.path("pid"), &mut guard);
    eventually("pgrun's stdout pipe to fill", || pipe_is_full(&reader));
    eventually("the idle timeout to stop the held-up command", || is_dead(pid));
    // 3 s of waiting for room cost next to no CPU (a loop that polled the
    // readable source over and over would burn most of them).
    let cpu = cpu_ticks(guard.child(index).id() as i32);
    assert!(cpu < 50, "pgrun used {cpu} ticks of CPU while its reader stalled");
    let mut all = Vec::new();
    reader.read_to_end(&mut all).unwrap();
    assert_eq!(guard.wait(index), 124);
    let r = json(&report);
    assert_eq!(r["reason"], "idle-timeout", "{r}");
    assert!(all.len() < total, "the command was not held up: {} bytes", all.len());
    assert_eq!(r["output"]["stdout"]["bytes"], all.len(), "{r}");
    assert!(all.iter().all(|&b| b == 0));
}

/// Whether the pipe behind `reader` holds as much as it can.
fn pipe_is_full(reader: &std::io::PipeReader) -> bool {
    use std::os::fd::AsRawFd;
    let mut held: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int; F_GETPIPE_SZ reads nothing.
    let (r, capacity) = unsafe {
        (
            libc::ioctl(reader.as_raw_fd(), libc::FIONREAD as _, &mut held),
            libc::fcntl(reader.as_raw_fd(), libc::F_GETPIPE_SZ),
        )
    };
    assert!(r == 0 && capacity > 0, "FIONREAD/F_GETPIPE_SZ: {}", std::io::Error::last_os_error());
    held == capacity
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn output_waiting_behind_a_rest_of_the_relay_is_no_idleness() {
    // PGRUN_TEST_HOOK=long-rest (debug builds): a source pgrun caught up
    // with twice within 2 s rests 2 s, longer than the idle timeout. The
    // command writes a line every 100 ms and is never idle for 700 ms: the
    // lines that wait in the pipe behind the rest count, and the run ends
    // as the command does. (The real rest is 200 us: an idle timeout below
    // that stopped a command that never stopped writing.)
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let a = idle_run(&["--idle-timeout", "700ms"], &report, &chatty(20, 1));
    let out = run(pgrun(&a).env("PGRUN_TEST_HOOK", "long-rest"));
    assert_status(&out, 0, "a chatty command behind a long rest");
    let r = json(&report);
    assert_eq!(r["reason"], "exited", "{r}");
    let lines: String = (0..20).map(|i| format!("tick {i}\n")).collect();
    assert_eq!(String::from_utf8_lossy(&out.stdout), lines);
}

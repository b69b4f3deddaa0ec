//! Loops over many runs of one thing: starts raced by cancels at random
//! small delays, starts under a reader of the pid file, every exit status.
//! The default suite runs a few rounds of each; the long target (`cargo test
//! --features long-tests --test long`) runs them at full size, to hunt the
//! rare interleavings.

use crate::util::*;
use std::fs;
use std::process::Stdio;

/// A small deterministic generator for the race delays (no rand crate).
fn delays(n: usize) -> Vec<u64> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 10 == 0 { 0 } else { x % 5_001 } // microseconds, 0 included
        })
        .collect()
}

/// Starts cancelled 0-5 ms after they began (20 here, 200 in the long
/// target): each run is cancelled (143), each cancel says so (0), nothing is
/// left.
#[test]
fn stress_starts_cancelled_after_0_to_5_ms() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let dir = scratch.sh();
    let pids = scratch.path("pids");
    for (i, delay) in delays(rounds(20, 200)).into_iter().enumerate() {
        let pidfile = scratch.path(&format!("run{i}.pid"));
        let payload = format!("echo $$ >> {dir}/pids; exec sleep 300");
        let runner =
            guard.spawn(pgrun(["-p", pidfile.to_str().unwrap(), "--", "sh", "-c", &payload]).stderr(Stdio::null()));
        std::thread::sleep(std::time::Duration::from_micros(delay));
        let out = run(&mut pgrun(["cancel", "--wait-start", "20", pidfile.to_str().unwrap()]));
        let run_status = guard.wait(runner);
        let cancel_status = code_of(out.status);
        assert_eq!(
            (cancel_status, run_status),
            (0, 143),
            "iteration {i} (delay {delay}us): cancel {cancel_status} ({}), run {run_status}",
            stderr_of(&out)
        );
        assert!(!pidfile.exists(), "iteration {i}: pid file left");
        assert!(!scratch.path(&format!("run{i}.pid.cancel")).exists(), "iteration {i}: marker left");
    }
    for line in fs::read_to_string(&pids).unwrap_or_default().lines() {
        let pid: i32 = line.parse().unwrap();
        guard.record(pid);
        assert!(is_dead(pid), "pid {pid} survived its cancel");
    }
    let leftovers: Vec<_> = fs::read_dir(scratch.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), usize::from(pids.exists()), "files left: {leftovers:?}");
}

/// Starts racing cancels 0-1 ms apart (40 rounds here, 600 in the long
/// target), each over a stale pid file that
/// names a bystander: half with one cancel started after the run, half with
/// two cancels and a status started before it. No cancel is lost, every
/// cancel reports the run gone, nothing is left, the bystander is untouched.
#[test]
fn stress_starts_racing_cancels_over_a_stale_pid_file() {
    use std::io::BufRead;
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let pidfile = scratch.path("job.pid");
    let marker = scratch.path("job.pid.cancel");
    let p = pidfile.to_str().unwrap();
    let mut seed: u64 = 0x5eed;
    let mut jitter = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        std::thread::sleep(std::time::Duration::from_micros((seed >> 33) % 1000));
    };
    let start = |guard: &mut Guard| guard.spawn(pgrun(["-p", p, "--", "sleep", "300"]).stderr(Stdio::piped()));
    let cancel = |guard: &mut Guard| guard.spawn(pgrun(["cancel", "-v", p]).stderr(Stdio::piped()));
    for round in 0..rounds(40, 600) {
        // A stale pid file naming the bystander's group, as a crashed run leaves it.
        fs::write(&pidfile, format!("{canary}\n")).unwrap();
        let (run, cancels, status) = if round % 2 == 0 {
            let run = start(&mut guard);
            jitter();
            let c = cancel(&mut guard);
            let err = std::io::BufReader::new(guard.child(c).stderr.take().unwrap());
            (run, vec![(c, err)], None)
        } else {
            let cancels = vec![cancel(&mut guard), cancel(&mut guard)];
            let status = guard.spawn(pgrun(["status", p]).stdout(Stdio::null()));
            // Both cancels have their marker in place (created or found):
            // a cancel that arrives after the run is over has nothing to
            // cancel, which is not the race under test.
            let mut readers = Vec::new();
            for &c in &cancels {
                let mut first = String::new();
                let mut err = std::io::BufReader::new(guard.child(c).stderr.take().unwrap());
                err.read_line(&mut first).unwrap();
                assert!(first.contains("cancel marker"), "round {round}: cancel said {first:?}");
                readers.push((c, err));
            }
            jitter();
            let run = start(&mut guard);
            (run, readers, Some(status))
        };
        let code = guard.wait(run);
        let mut said = String::new();
        if let Some(mut err) = guard.child(run).stderr.take() {
            std::io::Read::read_to_string(&mut err, &mut said).unwrap();
        }
        assert_eq!(code, 143, "round {round}: the run was not cancelled: {said}");
        for (c, mut err) in cancels {
            let mut said = String::new();
            std::io::Read::read_to_string(&mut err, &mut said).unwrap();
            assert_eq!(guard.wait(c), 0, "round {round}: cancel: {said}");
        }
        if let Some(status) = status {
            let code = guard.wait(status);
            assert!([0, 1, 3].contains(&code), "round {round}: status exited {code}");
        }
        assert!(!pidfile.exists(), "round {round}: pid file left");
        assert!(!marker.exists(), "round {round}: marker left");
    }
    assert_canary_untouched(&scratch, canary);
}

/// Starts one after another (20 here, 100 in the long target) while a
/// thread reads the pid file as fast as it can: every read is a whole line.
#[test]
fn a_reader_never_sees_a_partial_pid_file_across_many_starts() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (pidfile, stop) = (pidfile.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut seen, mut bad) = (0, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(text) = fs::read_to_string(&pidfile) {
                    seen += 1;
                    let ok = text.ends_with('\n') && text.trim_end().parse::<u32>().is_ok_and(|n| n > 1);
                    if !ok {
                        bad.push(text);
                    }
                }
            }
            (seen, bad)
        })
    };
    let script = format!(
        "for i in $(seq {}); do {} -p {} -- sh -c 'i=0; while [ $i -lt 50 ]; do i=$((i+1)); done' || exit 1; done",
        rounds(20, 100),
        pgrun_path(),
        pidfile.display()
    );
    let out = run(std::process::Command::new("sh").args(["-c", &script]));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (seen, bad) = reader.join().unwrap();
    assert_status(&out, 0, "the runs");
    assert!(bad.is_empty(), "partial pid files seen: {bad:?}");
    assert!(seen > 0, "the reader never saw a pid file; the test proves nothing");
}

/// Every exit status passes through pgrun as it is: all 256 in the long
/// target; here the edges and the values pgrun gives itself or reads as a
/// death by signal (0-3, 124-130, 137, 143, 254, 255) and a few between.
#[test]
fn every_exit_code_passes_through() {
    let codes = if full_size() {
        (0..=255).map(|n| n.to_string()).collect::<Vec<_>>().join(" ")
    } else {
        "0 1 2 3 7 42 64 99 123 124 125 126 127 128 129 130 137 143 200 254 255".to_string()
    };
    // One shell runs pgrun once for each: cheaper than a test process each.
    let script = format!(
        "for n in {codes}; do {} -- sh -c \"exit $n\"; got=$?; [ $got = $n ] || echo \"$n -> $got\"; done",
        pgrun_path()
    );
    let out = run(std::process::Command::new("sh").args(["-c", &script]));
    assert_status(&out, 0, "loop");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "codes that did not pass through");
}

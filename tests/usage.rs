//! What a newcomer meets on the command line: `-h` naming every option
//! they may need, a misspelt option's tip, help into a pipe that closes
//! early, a negative duration, and the sizes `head -c` and Docker take.

use crate::util::*;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Stdio;

#[test]
fn short_help_lists_the_limits_and_generate() {
    let out = run(&mut pgrun(["-h"]));
    assert_status(&out, 0, "-h");
    let short = String::from_utf8(out.stdout).unwrap();
    for option in ["--memory-max <SIZE>", "--pids-max <N>", "--cpus <X>", "--generate <WHAT>"] {
        assert!(short.contains(option), "-h lacks {option}:\n{short}");
    }
}

/// The first line pgrun says to `args` (a usage error: 125, and the
/// command, which would create `witness`, never ran).
fn usage_error(args: &[&str]) -> String {
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--", "touch", witness.to_str().unwrap()]);
    let out = run(&mut pgrun(&all));
    assert_status(&out, 125, &format!("{all:?}"));
    assert!(!witness.exists(), "{all:?} ran the command");
    let err = stderr_of(&out);
    assert!(err.ends_with("\nTry 'pgrun --help' for more information.\n"), "{all:?}: {err}");
    err.lines().next().unwrap_or_default().to_string()
}

#[test]
fn a_misspelt_option_gets_the_tip_of_the_one_meant() {
    // The first is a line the quick reader (quick_args) hands to clap for
    // its unknown option; the others start like a line it reads itself.
    for (args, meant) in [
        (&["--timout", "5"][..], "--timeout"),
        (&["--timeout", "5", "--kil-after", "1"][..], "--kill-after"),
        (&["-v", "--contian", "tree"][..], "--contain"),
        (&["--memory-mx", "1G"][..], "--memory-max"),
    ] {
        let first = usage_error(args);
        let wrong = args.iter().find(|a| a.starts_with("--") && **a != "--timeout").unwrap();
        assert_eq!(
            first,
            format!("pgrun: unexpected argument '{wrong}' found (tip: a similar argument exists: '{meant}')"),
            "{args:?}"
        );
    }
}

#[test]
fn a_negative_duration_is_named_as_such() {
    for args in [
        &["--timeout", "-1"][..],
        &["-t", "-1.5"],
        &["--timeout=-1"],
        &["--timeout", "-5s"],
        &["--kill-after", "-250ms"],
        &["--idle-timeout", "-2m"],
    ] {
        let first = usage_error(args);
        assert!(first.contains("a duration cannot be negative"), "{args:?}: {first}");
    }
    for sub in [["cancel", "--timeout", "-1", "p"], ["wait", "--wait-start", "-1", "p"]] {
        let out = run(&mut pgrun(sub));
        assert_status(&out, 125, &format!("{sub:?}"));
        assert!(stderr_of(&out).contains("a duration cannot be negative"), "{sub:?}: {}", stderr_of(&out));
    }
    // A missing value is still said as one.
    let out = run(&mut pgrun(["--timeout"]));
    assert!(stderr_of(&out).contains("a value is required for '--timeout <DUR>'"), "{}", stderr_of(&out));
}

/// A pipe whose read end is already closed: what `pgrun --help | head -1`
/// leaves pgrun once head has its line, every time.
fn closed_pipe() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two fds pipe2 writes; close-on-exec,
    // so no process another test spawns meanwhile holds the write end.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both fds are fresh and ours; the read end is closed at once.
    unsafe {
        libc::close(fds[0]);
        OwnedFd::from_raw_fd(fds[1])
    }
}

#[test]
fn help_version_and_generate_into_a_closed_pipe_exit_0_quietly() {
    for args in [&["--help"][..], &["-h"], &["--version"], &["cancel", "--help"], &["--generate", "man"]] {
        for sigpipe in [libc::SIG_IGN, libc::SIG_DFL] {
            let mut cmd = pgrun(args);
            cmd.stdout(Stdio::from(closed_pipe()));
            // SAFETY: signal(2) is async-signal-safe.
            unsafe {
                cmd.pre_exec(move || {
                    libc::signal(libc::SIGPIPE, sigpipe);
                    Ok(())
                })
            };
            // (Not util's run, which would pipe stdout: these end at once.)
            let out = cmd.stderr(Stdio::piped()).output().expect("spawn pgrun");
            assert_status(&out, 0, &format!("{args:?} into a closed pipe"));
            assert_eq!(stderr_of(&out), "", "{args:?} into a closed pipe");
        }
    }
    // As a shell sees it.
    let out = run(std::process::Command::new("bash")
        .args(["-c", &format!("set -o pipefail; '{}' --help | head -1 >/dev/null", pgrun_path())]));
    assert_status(&out, 0, "pgrun --help | head -1");
    assert_eq!(stderr_of(&out), "");
}

#[test]
fn sizes_take_what_head_and_docker_take() {
    // --max-output: the size is the budget, so a stream one byte longer
    // than it is cut (the marker appears) and one of exactly it is not.
    for (size, bytes) in [
        ("1k", 1024),
        ("1K", 1024),
        ("1KiB", 1024),
        ("1kB", 1000),
        ("1KB", 1000),
        ("2m", 2 << 20),
        ("1MiB", 1 << 20),
        ("1MB", 1_000_000),
    ] {
        for (len, cut) in [(bytes, false), (bytes + 1, true)] {
            let out = run(&mut pgrun(["--max-output", size, "--", "head", "-c", &len.to_string(), "/dev/zero"]));
            assert_status(&out, 0, size);
            let said = String::from_utf8_lossy(&out.stdout).contains("bytes omitted]");
            assert_eq!(said, cut, "--max-output {size} with {len} bytes");
        }
    }
    // --rlimit's byte limits: what the command's process gets.
    for (size, bytes) in [("512m", 512u64 << 20), ("2g", 2 << 30), ("1GiB", 1 << 30), ("64MB", 64_000_000)] {
        let read = "import resource; print(resource.getrlimit(resource.RLIMIT_FSIZE)[0])";
        let out = run(&mut pgrun(["--rlimit", &format!("fsize={size}"), "--", python3(), "-c", read]));
        assert_status(&out, 0, size);
        let got = String::from_utf8_lossy(&out.stdout).trim().parse::<u64>().unwrap();
        assert_eq!(got, bytes, "--rlimit fsize={size}");
    }
    // What stays refused, with one message for every option.
    for bad in ["1.5G", "1b", "1kb", "1 K", "1T", "0"] {
        for option in ["--max-output", "--memory-max"] {
            let first = usage_error(&[option, bad]);
            assert!(first.contains(&format!("invalid value '{bad}' for '{option} <SIZE>'")), "{option} {bad}: {first}");
        }
    }
    assert!(usage_error(&["--max-output", "2x"]).contains("e.g. 4096, 64K, 512m, 2G, 1MiB, 1kB"));
}

//! Every row of the exit-status table, and bad input refused before anything runs.

use crate::util::*;

#[test]
fn death_by_signal_is_128_plus_n() {
    for (sig, want) in [("TERM", 143), ("KILL", 137), ("INT", 130), ("USR1", 138)] {
        let out = run(&mut pgrun(["--", "sh", "-c", &format!("kill -{sig} $$")]));
        assert_status(&out, want, sig);
    }
}

#[test]
fn not_found_is_127_and_not_executable_is_126() {
    let scratch = Scratch::new();
    let out = run(&mut pgrun(["--", "pgrun-test-no-such-command"]));
    assert_status(&out, 127, "not found");
    assert_eq!(stderr_of(&out), "pgrun: cannot run 'pgrun-test-no-such-command': No such file or directory\n");

    let plain = scratch.path("not-executable");
    std::fs::write(&plain, "echo hi\n").unwrap();
    let out = run(&mut pgrun([plain.as_os_str()]));
    assert_status(&out, 126, "not executable");
    assert!(stderr_of(&out).starts_with("pgrun: cannot run "), "{}", stderr_of(&out));

    let out = run(&mut pgrun([scratch.dir().as_os_str()]));
    assert_status(&out, 126, "a directory");
}

#[test]
fn timeout_is_124_and_preserve_status_keeps_the_commands() {
    let out = run(&mut pgrun(["--timeout", "0.2", "--", "sleep", "30"]));
    assert_status(&out, 124, "timeout");
    let out = run(&mut pgrun(["--timeout", "0.2", "--preserve-status", "--", "sleep", "30"]));
    assert_status(&out, 143, "preserve-status, killed by TERM");
    // TERM blocked until the handler is in place: it cannot come too early.
    let handler = "import os, signal, subprocess\n\
                   signal.signal(signal.SIGTERM, lambda *a: os._exit(7))\n\
                   signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])\n\
                   child = subprocess.Popen(['sleep', '30'])\n\
                   child.wait()\n";
    let mut cmd = pgrun(["--timeout", "0.2", "--preserve-status", "--", python3(), "-c", handler]);
    let out = run(with_blocked(&mut cmd, &[libc::SIGTERM]));
    assert_status(&out, 7, "preserve-status, handled TERM");
    let out = run(&mut pgrun(["--timeout", "0", "--", "true"]));
    assert_status(&out, 0, "timeout 0 means none");
}

#[test]
fn bad_input_is_125_and_runs_nothing() {
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    let touch = ["touch", witness.to_str().unwrap()];
    let cases: &[&[&str]] = &[
        &["--timeout", "-1"],
        &["--timeout", "1e3"],
        &["--timeout", "inf"],
        &["--timeout", "5S"],
        &["--timeout", " 5"],
        &["--timeout", "0x10"],
        &["-k", "abc"],
        &["--signal", "SIG15"],
        &["--signal", "0"],
        &["--signal", "NOPE"],
        &["--signal", "999"],
        &["--escalate", "TERM/2s/3s"],
        &["--escalate", "INT/KILL", "-s", "TERM"],
        &["--no-such-flag"],
        &["--timeout"],
    ];
    for case in cases {
        let mut args: Vec<&str> = case.to_vec();
        if *case != ["--timeout"] {
            args.push("--");
            args.extend(touch);
        }
        let out = run(&mut pgrun(&args));
        assert_status(&out, 125, &format!("{args:?}"));
        let err = stderr_of(&out);
        assert!(err.starts_with("pgrun: "), "{args:?}: {err}");
        assert!(!witness.exists(), "{args:?} ran the command");
    }
    let out = run(&mut pgrun(Vec::<&str>::new()));
    assert_status(&out, 125, "no command");
}

#[test]
fn a_bad_grace_in_escalate_is_named_as_a_duration() {
    // After a signal a token that starts like a number is a grace: the
    // usage error names it as an invalid duration, not an invalid signal.
    for (escalate, bad) in [("TERM/1e3", "1e3"), ("TERM/5S/KILL", "5S"), ("leader:TERM/.5x/KILL", ".5x")] {
        let out = run(&mut pgrun(["--escalate", escalate, "--", "true"]));
        assert_status(&out, 125, escalate);
        let err = stderr_of(&out);
        assert!(err.contains(&format!("invalid duration '{bad}'")), "{escalate}: {err}");
        assert!(!err.contains("signal"), "{escalate}: {err}");
    }
    // A number where a signal must stand is still a bad signal.
    let out = run(&mut pgrun(["--escalate", "TERM/2s/3s", "--", "true"]));
    assert_status(&out, 125, "two graces in a row");
    assert!(stderr_of(&out).contains("signal"), "{}", stderr_of(&out));
}

#[test]
fn help_and_version_go_to_stdout_with_status_0() {
    let out = run(&mut pgrun(["--help"]));
    assert_status(&out, 0, "--help");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("Exit status") && help.contains("124"), "{help}");
    let out = run(&mut pgrun(["--version"]));
    assert_status(&out, 0, "--version");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("pgrun "));
}

#[test]
fn a_program_named_like_a_subcommand_runs_after_double_dash() {
    let out = run(&mut pgrun(["--", "cancel"]));
    assert_status(&out, 127, "program named cancel");
    assert!(stderr_of(&out).contains("cannot run 'cancel'"), "{}", stderr_of(&out));
}

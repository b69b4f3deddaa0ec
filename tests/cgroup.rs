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

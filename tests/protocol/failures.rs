//! Failures of the protocol are found before the command starts, and an
//! answer that cannot be written is a failure.

use crate::util::run as run_cmd;
use crate::util::*;
use std::fs;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// pgrun's `-v` says "started 'PROGRAM'" as soon as the command runs: a
/// failure found before the start never says it.
fn assert_never_started(out: &std::process::Output, what: &str) {
    assert_status(out, 125, what);
    let said = stderr_of(out);
    assert!(!said.contains("started '"), "{what}: the command was started before pgrun failed: {said}");
}

#[test]
fn failures_are_found_before_the_command_starts() {
    if !require(Capability::UnprivilegedUser) {
        return;
    }
    if !require(Capability::MountNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let sd = scratch.sh();
    let witness = scratch.path("ran");
    let w = witness.to_str().unwrap();

    // A pid file name longer than NAME_MAX (a name that fits, and so its
    // temporary name, is published: see publish.rs).
    let long = scratch.path(&"a".repeat(256));
    let out = run_cmd(&mut pgrun(["-v", "-p", long.to_str().unwrap(), "--", "touch", w]));
    assert_never_started(&out, "name too long");
    assert!(stderr_of(&out).contains("File name too long"), "{}", stderr_of(&out));

    // No fd left for the pid file. The shell holds 0-2 only: an fd the
    // suite's process held without close-on-exec at the spawn (a test
    // running alongside, or whoever started the suite) would take the one
    // fd the loader needs (exit 127, "libgcc_s.so.1: Error 24").
    let mut sh = Command::new("sh");
    sh.args(["-c", &format!("ulimit -n 4; exec {} -v -p {sd}/job.pid -- touch {w}", pgrun_path())]);
    // SAFETY: close_range is a plain syscall, async-signal-safe.
    unsafe {
        sh.pre_exec(|| {
            libc::close_range(3, libc::c_uint::MAX, 0);
            Ok(())
        })
    };
    let out = run_cmd(&mut sh);
    assert_never_started(&out, "ulimit -n 4");

    // A full file system (a tiny tmpfs, in a mount namespace of our own).
    let full = scratch.path("full");
    fs::create_dir(&full).unwrap();
    let script = format!(
        "mount -t tmpfs -o size=16k tmpfs {f} && (dd if=/dev/zero of={f}/fill bs=4k 2>/dev/null || true) && \
         exec {pg} -v -p {f}/job.pid -- touch {w}",
        f = full.display(),
        pg = pgrun_path()
    );
    let out = run_cmd(Command::new("unshare").args(["--mount", "--", "sh", "-c", &script]));
    assert_never_started(&out, "full file system");
    assert!(stderr_of(&out).contains("No space left"), "{}", stderr_of(&out));

    // A folder the user cannot write, for the pid file and for the report.
    open_up(scratch.dir(), false);
    let drop_box = scratch.path("box");
    fs::create_dir(&drop_box).unwrap();
    open_up(&drop_box, true);
    let nobody_witness = drop_box.join("ran");
    let nw = nobody_witness.to_str().unwrap();
    let pf = format!("{sd}/job.pid");
    let out = run_cmd(&mut as_nobody(pgrun_path(), &["-v", "-p", &pf, "--", "touch", nw]));
    assert_never_started(&out, "pid file in a read-only folder");
    let rp = format!("{sd}/r.json");
    let out = run_cmd(&mut as_nobody(pgrun_path(), &["-v", "--report", &rp, "--", "touch", nw]));
    assert_never_started(&out, "report in a read-only folder");
    assert!(stderr_of(&out).contains("pgrun: cannot prepare report"), "{}", stderr_of(&out));

    assert!(!witness.exists() && !nobody_witness.exists(), "a command ran although pgrun failed");
}

#[test]
fn answers_that_cannot_be_written_are_failures() {
    let scratch = Scratch::new();
    let full = || fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let out = pgrun(["--version"]).stdout(full()).output().unwrap();
    assert_eq!(code_of(out.status), 125, "--version to a full disk");
    let out = pgrun(["status", scratch.path("job.pid").to_str().unwrap()]).stdout(full()).output().unwrap();
    assert_eq!(code_of(out.status), 4, "status to a full disk");
    let out = run_cmd(&mut pgrun(["cancel"]));
    assert_status(&out, 125, "cancel without a pid file");
    assert!(stderr_of(&out).contains("<PIDFILE>"), "the message names what is missing: {}", stderr_of(&out));
}

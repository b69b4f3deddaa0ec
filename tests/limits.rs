//! `--rlimit NAME=SOFT[:HARD]`: the limit is the command's from its first
//! instruction (set in its process before exec), in every mode; a name,
//! value or limit that cannot be had is 125 before anything runs, whether
//! pgrun finds it before the spawn or the child's `setrlimit` does.

use crate::util::*;
use std::process::{Command, Stdio};

/// pgrun's own hard limit of `resource` (the command inherits it).
fn own_hard(resource: libc::__rlimit_resource_t) -> u64 {
    // SAFETY: a zeroed rlimit for getrlimit to fill.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a valid resource and a writable rlimit.
    assert_eq!(unsafe { libc::getrlimit(resource, &mut limit) }, 0);
    limit.rlim_max
}

fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn nofile_is_the_commands_soft_and_hard_limit() {
    let hard = own_hard(libc::RLIMIT_NOFILE);
    for (mode, limit, want) in [
        ("group", "nofile=64", "64 64".to_string()),
        ("group", "nofile=64:128", "64 128".to_string()),
        ("group", "nofile=50:", format!("50 {hard}")),
        ("tree", "nofile=64:", format!("64 {hard}")),
    ] {
        // --setsid too: both ways pgrun detaches the command.
        for setsid in [false, true] {
            let mut args = vec!["--contain", mode, "--rlimit", limit];
            if setsid {
                args.push("--setsid");
            }
            args.extend(["--", "sh", "-c", "echo $(ulimit -Sn) $(ulimit -Hn)"]);
            if cfg!(feature = "posix-fallback") {
                args[1] = "group";
            }
            let out = run(&mut pgrun(&args));
            assert_status(&out, 0, limit);
            assert_eq!(stdout_of(&out).trim(), want, "{args:?}");
        }
    }
}

#[test]
fn core_and_byte_sizes() {
    let read = "import resource; print(*resource.getrlimit(resource.RLIMIT_CORE))";
    for (limit, want) in [("core=0", "0 0"), ("core=1M:2M", "1048576 2097152"), ("core=1KB", "1000 1000")] {
        let out = run(&mut pgrun(["--rlimit", limit, "--", python3(), "-c", read]));
        assert_status(&out, 0, limit);
        assert_eq!(stdout_of(&out).trim(), want, "{limit}");
    }
    // A later setting of the same limit replaces an earlier one.
    let out = run(&mut pgrun(["--rlimit", "core=0", "--rlimit", "core=4K", "--", python3(), "-c", read]));
    assert_eq!(stdout_of(&out).trim(), "4096 4096");
}

#[test]
fn a_burner_under_cpu_1_is_ended_by_the_kernel() {
    let scratch = Scratch::new();
    let report = scratch.path("report.json");
    let out = run(&mut pgrun([
        "--rlimit",
        "cpu=1",
        "--report",
        report.to_str().unwrap(),
        "--",
        python3(),
        "-c",
        "while True: pass",
    ]));
    // SIGXCPU at the soft limit (152), or SIGKILL where the soft limit is
    // the hard one too (137): either way the kernel ended it.
    let code = code_of(out.status);
    assert!(code == 152 || code == 137, "exit {code}: {}", stderr_of(&out));
    let r = json(&report);
    assert_eq!(r["reason"], "signaled", "{r}");
    assert!(r["signals"].as_array().is_some_and(Vec::is_empty), "pgrun sent a signal: {r}");
    // It did use (about) its second of CPU: the kernel checks the limit
    // on its tick, and the split into user and system time is sampled.
    let used = r["resources"]["user_ms"].as_u64().unwrap_or(0) + r["resources"]["system_ms"].as_u64().unwrap_or(0);
    assert!(used >= 500, "{used} ms of CPU: {r}");
}

/// `pgrun ARGS -- touch WITNESS`, which must exit 125 with one `pgrun: `
/// line containing `says`, and not run the command.
fn refused(args: &[&str], says: &str) {
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    let mut all = args.to_vec();
    all.extend(["--", "touch", witness.to_str().unwrap()]);
    let out = run(&mut pgrun(&all));
    assert_status(&out, 125, &format!("{args:?}"));
    let err = stderr_of(&out);
    assert!(err.starts_with("pgrun: ") && err.contains(says), "{args:?}: {err}");
    assert!(!witness.exists(), "{args:?}: the command ran");
}

#[test]
fn bad_names_and_values_are_125_before_anything_runs() {
    for (limit, says) in [
        ("foo=1", "'foo' is not a resource limit"),
        ("NOFILE=1", "is not a resource limit"),
        ("nofile", "is not NAME=SOFT[:HARD]"),
        ("nofile=", "is not a number"),
        ("nofile=:", "gives no value"),
        ("nofile=abc", "is not a number"),
        ("nofile=1K", "is not a number"),
        ("nofile=2:1", "the soft limit 2 is above the hard limit 1"),
        ("core=1T", "is not a size"),
        ("core=-1", "is not a size"),
        ("cpu=1x", "invalid duration"),
        ("nproc=18446744073709551615", "out of range"),
    ] {
        refused(&["--rlimit", limit], says);
    }
    // A soft limit above the hard limit pgrun has (no privilege needed to
    // see that it cannot be).
    let above = format!("nofile={}:", own_hard(libc::RLIMIT_NOFILE) + 1);
    refused(&["--rlimit", &above], "is above the hard limit");
    // A hard limit below the soft limit pgrun has, which it would keep.
    refused(&["--rlimit", "nofile=:1"], "is above the hard limit 1");
}

#[test]
fn raising_a_hard_limit_without_privilege_is_125() {
    if !require(Capability::UnprivilegedUser) {
        return;
    }
    let scratch = Scratch::new();
    open_up(scratch.dir(), true);
    let witness = scratch.path("ran");
    let above = format!("nofile=:{}", own_hard(libc::RLIMIT_NOFILE) + 1);
    let out = run(&mut as_nobody(pgrun_path(), &["--rlimit", &above, "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 125, "raising the hard limit as nobody");
    assert!(stderr_of(&out).contains("cannot raise the hard limit"), "{}", stderr_of(&out));
    assert!(!witness.exists(), "the command ran");
}

/// What only the kernel refuses is refused in the child, before exec, and
/// reported through the exec-status pipe: 125 too, and the command never
/// runs. (strace makes the child's setrlimit fail: its first prlimit64;
/// the count is per process.)
#[test]
fn a_limit_the_child_cannot_set_is_125_before_the_command_runs() {
    let found = Command::new("strace").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(found.is_ok_and(|s| s.success()), "this test needs strace (6.1 or later) on PATH");
    if cfg!(not(target_os = "linux")) {
        return;
    }
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=prlimit64", "-e", "inject=prlimit64:error=EPERM:when=1"])
        .arg(pgrun_path())
        .args(["--no-guard", "--rlimit", "nofile=64", "--", "touch", witness.to_str().unwrap()])
        .stdin(Stdio::null());
    let out = run(&mut cmd);
    assert_status(&out, 125, "setrlimit refused in the child");
    let err = stderr_of(&out);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("pgrun:")).collect();
    assert_eq!(lines, ["pgrun: cannot start 'touch': setting --rlimit nofile: Operation not permitted"], "{err}");
    assert!(!witness.exists(), "the command ran");
}

/// Arguments really too long for the command's exec stay the command's
/// failure, 126 (pgrun takes an E2BIG for a short argument list for the
/// out-of-memory it is, 125: tests/faults_sys.rs). A stack limit of 256K
/// leaves the command's exec the kernel's floor of 128 KiB for its
/// arguments, and 30000 of them take about 400 KiB (pgrun's own exec, under
/// the suite's stack limit, takes them).
#[test]
fn arguments_too_long_for_the_commands_exec_are_126() {
    if cfg!(not(target_os = "linux")) {
        return;
    }
    let numbers: Vec<String> = (1..=30_000).map(|n| n.to_string()).collect();
    let mut args = vec!["--rlimit", "stack=256K", "--", "/bin/true"];
    args.extend(numbers.iter().map(String::as_str));
    let out = run(&mut pgrun(&args));
    assert_status(&out, 126, "arguments too long");
    let err = stderr_of(&out);
    assert_eq!(err.trim_end(), "pgrun: cannot run '/bin/true': Argument list too long", "{err}");
}

/// The cgroup limits need the run's cgroup leaf: with `--contain group` or
/// `tree` they are an error, and bad values are usage errors; all 125
/// before anything runs. (The limits themselves: tests/cgroup_limits.rs, in
/// a VM.)
#[test]
fn cgroup_limits_without_a_leaf_or_with_bad_values_are_125() {
    for (args, says) in [
        (
            &["--contain", "tree", "--memory-max", "64M"][..],
            "--memory-max limits the run's cgroup: it needs --contain cgroup, not --contain tree",
        ),
        (
            &["--contain", "group", "--pids-max", "5"][..],
            "--pids-max limits the run's cgroup: it needs --contain cgroup, not --contain group",
        ),
        (&["--contain", "tree", "--cpus", "0.5"][..], "--cpus limits the run's cgroup"),
        (&["--memory-max", "0"][..], "at least 1 byte"),
        (&["--pids-max", "0"][..], "not a number of tasks"),
        (&["--cpus", "0"][..], "below the smallest share of CPU"),
        (&["--cpus=-1"][..], "not a number of CPUs"),
    ] {
        refused(args, says);
    }
}

/// A limit where pgrun may not have the controller it needs (as the user
/// nobody, pgrun can neither enable it nor create a cgroup): the error
/// names the option the user typed, not `--contain cgroup` (which the
/// limit only implies), and says what to do: where delegation is had, and
/// what bounds memory without cgroups.
#[test]
fn a_limit_that_cannot_be_had_says_what_to_do() {
    if cfg!(feature = "posix-fallback") || !require(Capability::Cgroup2) || !require(Capability::UnprivilegedUser) {
        return;
    }
    let scratch = Scratch::new();
    open_up(scratch.dir(), true);
    let witness = scratch.path("ran");
    let out = run(&mut as_nobody(pgrun_path(), &["--memory-max", "64M", "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 125, "--memory-max as nobody");
    assert!(!witness.exists(), "the command ran");
    let err = stderr_of(&out);
    let first = err.lines().next().unwrap_or_default();
    assert!(first.starts_with("pgrun: --memory-max needs "), "{err}");
    for advice in ["systemd-run --user --scope -p Delegate=yes pgrun", "a unit with Delegate=yes", "--rlimit as=SIZE"] {
        assert!(first.contains(advice), "no {advice:?} in: {first}");
    }
    assert!(!err.contains("--contain"), "{err}");
}

//! What the command inherits: fds, signal mask and ignored signals, bytes on
//! stdio, and its own group (or session) while pgrun stays in the caller's.

use crate::util::*;
use std::fs;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// `(SigBlk, SigIgn)` of `/proc/self/status` as `cmd` sees them, every
/// signal included: also the C library's reserved ones (32 .. SIGRTMIN-1),
/// which glibc's posix_spawn would mark ignored unless told not to.
fn signal_masks(cmd: &mut Command) -> (u64, u64) {
    let out = run(cmd);
    assert_status(&out, 0, "status reader");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mask = |name: &str| {
        let line = text.lines().find(|l| l.starts_with(name)).expect(name);
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    (mask("SigBlk:"), mask("SigIgn:"))
}

fn bit(signal: i32) -> u64 {
    1u64 << (signal - 1)
}

/// Make the caller ignore USR1 and RTMIN+1 (and PIPE and CHLD if asked) and
/// block USR2, HUP and RTMAX.
fn with_caller_signals(cmd: &mut Command, ignore_pipe: bool) -> &mut Command {
    let (rt_ignored, rt_blocked) = (libc::SIGRTMIN() + 1, libc::SIGRTMAX());
    // SAFETY: only async-signal-safe calls on stack data between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // The C library's reserved signals at their defaults, with a
            // raw rt_sigaction (glibc's sigaction refuses them): the test
            // runner itself may have them ignored, having been started by a
            // posix_spawn.
            let default = [0usize; 4]; // handler SIG_DFL, no flags, empty mask
            for signal in 32..libc::SIGRTMIN() {
                libc::syscall(libc::SYS_rt_sigaction, signal, default.as_ptr(), std::ptr::null_mut::<u8>(), 8usize);
            }
            libc::signal(libc::SIGUSR1, libc::SIG_IGN);
            // pgrun takes SIGCHLD's default back for itself (it could not
            // learn the command's status otherwise): the command still gets
            // it ignored.
            libc::signal(libc::SIGCHLD, if ignore_pipe { libc::SIG_IGN } else { libc::SIG_DFL });
            libc::signal(rt_ignored, libc::SIG_IGN);
            libc::signal(libc::SIGPIPE, if ignore_pipe { libc::SIG_IGN } else { libc::SIG_DFL });
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR2);
            libc::sigaddset(&mut set, libc::SIGHUP);
            libc::sigaddset(&mut set, rt_blocked);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            Ok(())
        })
    }
}

#[test]
fn signal_mask_and_ignored_signals_pass_through_exactly() {
    // With PIPE and CHLD ignored, pgrun takes the fork path; without, the
    // posix_spawn one.
    for ignore_pipe in [false, true] {
        let direct = signal_masks(with_caller_signals(
            default_signals(Command::new("cat").arg("/proc/self/status")),
            ignore_pipe,
        ));
        let through = signal_masks(with_caller_signals(&mut pgrun(["--", "cat", "/proc/self/status"]), ignore_pipe));
        assert_eq!(through, direct, "ignore_pipe={ignore_pipe}: (blocked, ignored) {through:x?} != {direct:x?}");
        // The caller's settings are really there, so equality means something.
        let (blocked, ignored) = direct;
        let want_ignored = bit(libc::SIGUSR1) | bit(libc::SIGRTMIN() + 1);
        assert_eq!(ignored & want_ignored, want_ignored, "{ignored:x}");
        assert_eq!(ignored & bit(libc::SIGPIPE) != 0, ignore_pipe, "{ignored:x}");
        assert_eq!(ignored & bit(libc::SIGCHLD) != 0, ignore_pipe, "{ignored:x}");
        assert_eq!(ignored & (bit(32) | bit(33)), 0, "the C library's signals: {ignored:x}");
        let want_blocked = bit(libc::SIGUSR2) | bit(libc::SIGHUP) | bit(libc::SIGRTMAX());
        assert_eq!(blocked & want_blocked, want_blocked, "{blocked:x}");
    }
}

#[test]
fn the_c_librarys_own_signals_blocked_by_the_caller_stay_blocked() {
    // A caller (not a glibc program, or one using the raw syscall) can
    // block 32 and 33, which glibc's sigprocmask neither shows nor sets.
    let block_reserved = |cmd: &mut Command| {
        // SAFETY: rt_sigprocmask is a raw, async-signal-safe syscall.
        unsafe {
            cmd.pre_exec(|| {
                let set: u64 = (1 << 31) | (1 << 32) | (1 << (libc::SIGUSR2 - 1));
                if libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, &set, std::ptr::null::<u64>(), 8) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    };
    let mut direct = Command::new("cat");
    direct.arg("/proc/self/status");
    default_signals(&mut direct);
    block_reserved(&mut direct);
    let (want, _) = signal_masks(&mut direct);
    assert_eq!(want & (bit(32) | bit(33)), bit(32) | bit(33), "the caller really blocked them: {want:x}");
    for extra in [&[][..], &["--setsid"][..]] {
        let mut args = extra.to_vec();
        args.extend(["--", "cat", "/proc/self/status"]);
        let mut through = pgrun(args);
        block_reserved(&mut through);
        let (got, _) = signal_masks(&mut through);
        assert_eq!(got, want, "{extra:?}: blocked {got:x} != {want:x}");
    }
}

#[test]
fn an_inherited_fd_reaches_the_command_and_none_of_pgruns_does() {
    let scratch = Scratch::new();
    let file = fs::File::create(scratch.path("fd3")).unwrap();
    let fd3 = std::os::fd::AsRawFd::as_raw_fd(&file);
    let give_fd3 = move |cmd: &mut Command| {
        // SAFETY: dup2 is async-signal-safe; fd3 stays open in the parent.
        unsafe {
            cmd.pre_exec(move || {
                // dup2 onto itself keeps FD_CLOEXEC, so clear it explicitly.
                if libc::dup2(fd3, 3) < 0 || libc::fcntl(3, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    };
    let mut cmd = pgrun(["--", "sh", "-c", "echo through-fd3 >&3"]);
    give_fd3(&mut cmd);
    assert_status(&run(&mut cmd), 0, "write to fd 3");
    assert_eq!(fs::read_to_string(scratch.path("fd3")).unwrap(), "through-fd3\n");

    // The fds `ls` sees through pgrun are exactly those it sees without it.
    let list = |cmd: &mut Command| String::from_utf8(run(cmd).stdout).unwrap();
    let mut direct = Command::new("ls");
    direct.arg("/proc/self/fd").stdin(Stdio::null());
    give_fd3(&mut direct);
    let mut through = pgrun(["--", "ls", "/proc/self/fd"]);
    give_fd3(&mut through);
    let (direct, through) = (list(&mut direct), list(&mut through));
    assert!(direct.contains("3\n"), "{direct}");
    assert_eq!(through, direct);
}

#[test]
fn stdio_is_byte_exact_with_no_pipes_in_between() {
    let bytes: Vec<u8> = (0..=255u8).chain(b"no trailing newline".iter().copied()).collect();
    let mut child =
        pgrun(["--", "cat"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&bytes).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.stdout, bytes);
    assert_eq!(out.stderr, b"");

    // The command's stdout is the very pipe pgrun was given, not a copy.
    let out = run(&mut pgrun(["--", "sh", "-c", "readlink /proc/$$/fd/1; readlink /proc/$PPID/fd/1"]));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0], lines[1]);
}

#[test]
fn command_gets_a_new_group_and_pgrun_stays_in_the_callers() {
    let out = run(&mut pgrun(["--", "sh", "-c", "ps -o pid=,pgid=,sid= -p $$ -p $PPID"]));
    assert_status(&out, 0, "ps");
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<i32>> =
        text.lines().map(|l| l.split_whitespace().map(|f| f.parse().unwrap()).collect()).collect();
    assert_eq!(rows.len(), 2, "{text}");
    let me = std::process::id() as i32;
    // SAFETY: getpgrp/getsid have no preconditions.
    let (my_pgrp, my_sid) = unsafe { (libc::getpgrp(), libc::getsid(0)) };
    let (pgrun_row, cmd_row) = if rows[0][1] == my_pgrp { (&rows[0], &rows[1]) } else { (&rows[1], &rows[0]) };
    assert_eq!(pgrun_row[1], my_pgrp, "pgrun left the caller's group ({me})");
    assert_eq!(pgrun_row[2], my_sid);
    assert_eq!(cmd_row[1], cmd_row[0], "the command leads its own group");
    assert_eq!(cmd_row[2], my_sid, "same session without --setsid");
}

#[test]
fn setsid_gives_the_command_its_own_session() {
    let out = run(&mut pgrun(["--setsid", "--", "sh", "-c", "ps -o pid=,pgid=,sid= -p $$"]));
    assert_status(&out, 0, "ps");
    let row: Vec<i32> = String::from_utf8(out.stdout).unwrap().split_whitespace().map(|f| f.parse().unwrap()).collect();
    assert_eq!(row[0], row[1]);
    assert_eq!(row[0], row[2], "session id equals its pid");
}

#[test]
fn environment_and_working_directory_pass_through() {
    let scratch = Scratch::new();
    let out = run(pgrun(["--", "sh", "-c", "echo \"$PGRUN_TEST_VAR\"; pwd"])
        .env("PGRUN_TEST_VAR", "x y")
        .current_dir(scratch.dir()));
    let want = format!("x y\n{}\n", scratch.dir().canonicalize().unwrap().display());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
}

#[test]
fn the_environment_passes_through_byte_for_byte_in_order() {
    // What the command finds in /proc/self/environ is exactly what it finds
    // when started directly: every entry, in the same order, the first and
    // the last included, invalid UTF-8 too.
    use std::os::unix::ffi::OsStrExt;
    let odd = std::ffi::OsStr::from_bytes(b"\xff\xfe=bytes");
    let with_env = |cmd: &mut std::process::Command| {
        cmd.env_clear().env("FIRST", "1").env("MIDDLE", odd).env("EMPTY", "").env("LAST", "z");
    };
    let mut direct = std::process::Command::new("cat");
    direct.arg("/proc/self/environ");
    with_env(&mut direct);
    let want = run(&mut direct).stdout;
    let mut through = pgrun(["--", "cat", "/proc/self/environ"]);
    with_env(&mut through);
    let got = run(&mut through).stdout;
    let entries: Vec<&[u8]> = want.split(|&b| b == 0).filter(|e| !e.is_empty()).collect();
    assert_eq!(entries.len(), 4, "the reference run sees every entry: {want:?}");
    assert_eq!(got, want, "the environment changed on its way through pgrun");
}

#[test]
fn a_closed_stderr_stays_closed_for_the_command_and_takes_none_of_pgruns_files() {
    let scratch = Scratch::new();
    let pidfile = scratch.path("job.pid");
    // A stale pid file: pgrun opens it first, so without a placeholder it
    // would be fd 2, and pgrun's -v lines would be written into it.
    fs::write(&pidfile, "99999\n").unwrap();
    let script = "if [ -e /proc/$$/fd/2 ]; then echo command-fd2:open; else echo command-fd2:closed; fi; \
                  echo pgrun-fd2:$(readlink /proc/$PPID/fd/2)";
    let mut cmd = pgrun(["-v", "-p", pidfile.to_str().unwrap(), "--", "sh", "-c", script]);
    // SAFETY: close is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(2);
            Ok(())
        })
    };
    let out = run(&mut cmd);
    assert_status(&out, 0, "stderr closed");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "command-fd2:closed\npgrun-fd2:/dev/null\n");
}

#[test]
fn arguments_pass_byte_exact_even_when_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let odd = std::ffi::OsStr::from_bytes(b"a\xffb c\n-v");
    let out = run(pgrun(["--", "printf", "%s|%s"]).arg(odd).arg("--timeout"));
    assert_status(&out, 0, "printf");
    assert_eq!(out.stdout, b"a\xffb c\n-v|--timeout");
}

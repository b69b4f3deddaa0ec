//! `blocked_on_input` in `pgrun status --json`: true while a process of the
//! run waits for input from a stdin that is a terminal or the run's own
//! `--stdin-pipe` (a `read` of it, or, as an editor does, a `poll`,
//! `select` or `epoll` with fd 0 among the fds it waits to read); never
//! while it sleeps, computes, reads a file, a socket or a pipe that is not
//! the run's stdin pipe, or polls fds other than its stdin. Linux only (the
//! portable path leaves the field out: `ready::ready_is_not_available_on_the_portable_path`).
//!
//! A "false" case first sees from the process's own `/proc` that it sits
//! where the test says (the call's number and first argument in
//! `/proc/PID/syscall`), then asks `pgrun status` several times.
#![cfg(not(feature = "posix-fallback"))]

use crate::util::*;
use std::fs;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Stdio;

fn status_json(pidfile: &Path) -> serde_json::Value {
    let out = run(pgrun(["status", "--json", pidfile.to_str().unwrap()]).stdout(Stdio::piped()));
    serde_json::from_slice(&out.stdout).expect("status --json is JSON")
}

fn blocked_on_input(pidfile: &Path) -> bool {
    let v = status_json(pidfile);
    v["blocked_on_input"].as_bool().unwrap_or_else(|| panic!("no blocked_on_input in {v}"))
}

/// What the run's command has as its stdin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stdin {
    /// A new pty's slave, as stdin, stdout and stderr (not its controlling
    /// terminal); what the run writes there is read and dropped.
    Pty,
    /// The run's `--stdin-pipe`.
    RunsPipe,
    /// A pipe this test holds, given to pgrun as its stdin (no `--stdin-pipe`).
    CallersPipe,
}

/// What a started run's test holds: the pty's master (to answer on), or
/// the write end of the caller's pipe.
enum Held {
    Pty(fs::File),
    /// Held open: at its end the command would read end-of-file.
    Pipe {
        _open: std::process::ChildStdin,
    },
    Nothing,
}

/// Start `pgrun -p PIDFILE [--stdin-pipe] -- sh -c PAYLOAD` with `stdin`,
/// TERM=xterm; its index and what the test holds of its stdin.
fn start(guard: &mut Guard, pidfile: &Path, stdin: Stdin, payload: &str) -> (usize, Held) {
    let mut args = vec!["-p", pidfile.to_str().unwrap()];
    if stdin == Stdin::RunsPipe {
        args.push("--stdin-pipe");
    }
    args.extend(["--", "sh", "-c", payload]);
    let mut cmd = pgrun(&args);
    cmd.env("TERM", "xterm");
    let mut master = None;
    match stdin {
        Stdin::Pty => {
            let pty = openpty_cloexec(None);
            cmd.stdin(pty.slave.try_clone().unwrap()).stdout(pty.slave.try_clone().unwrap()).stderr(pty.slave);
            master = Some(fs::File::from(pty.master));
        }
        Stdin::RunsPipe => {}
        Stdin::CallersPipe => {
            cmd.stdin(Stdio::piped());
        }
    }
    let index = guard.spawn(&mut cmd);
    // The slave's copies go with the command (so the master sees the end).
    drop(cmd);
    let pgid: i32 = wait_line(pidfile).parse().expect("pid file holds a number");
    guard.record(pgid);
    guard.record_group(pgid);
    let held = match (master, guard.child(index).stdin.take()) {
        (Some(master), _) => {
            // Drop what the run writes, so that it never blocks on a full pty;
            // ends when the last slave closes (EIO).
            let mut output = master.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while matches!(output.read(&mut buf), Ok(n) if n > 0) {}
            });
            Held::Pty(master)
        }
        (None, Some(pipe)) => Held::Pipe { _open: pipe },
        (None, None) => Held::Nothing,
    };
    (index, held)
}

/// A command that waits for input (`waiter`, a shell command line): once
/// `blocked_on_input` says true, `answer` is given (typed on the pty, or
/// sent with `pgrun send ARGS`), the command goes on, and it is false again.
fn waits_for_input(stdin: Stdin, waiter: &str, answer: &[u8], send_args: &[&str]) {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let payload = format!("{waiter}; echo done > {dir}/done; while [ ! -e {dir}/stop ]; do sleep 0.02; done");
    let (index, held) = start(&mut guard, &pidfile, stdin, &payload);
    eventually(&format!("blocked_on_input for {waiter}"), || blocked_on_input(&pidfile));
    match held {
        Held::Pty(mut master) => master.write_all(answer).unwrap(),
        _ => {
            let mut send = pgrun(["send"]);
            send.args(send_args).arg(&pidfile).arg(std::str::from_utf8(answer).unwrap());
            assert_status(&run(&mut send), 0, "send the answer");
        }
    }
    wait_line(&scratch.path("done"));
    assert!(!blocked_on_input(&pidfile), "{waiter}: still blocked_on_input once answered");
    fs::write(scratch.path("stop"), "").unwrap();
    assert_eq!(guard.wait(index), 0);
}

#[test]
fn blocked_on_input_for_a_shell_read_on_a_pty() {
    waits_for_input(Stdin::Pty, "read answer", b"yes\n", &[]);
}

#[test]
fn blocked_on_input_for_python_input_on_a_pty() {
    waits_for_input(Stdin::Pty, &format!("{} -c 'input()'", python3()), b"yes\n", &[]);
}

#[test]
fn blocked_on_input_for_cat_on_a_pty() {
    // ^D at the start of a line: end of input for cat.
    waits_for_input(Stdin::Pty, "cat >/dev/null", b"\x04", &[]);
}

#[test]
fn blocked_on_input_for_a_shell_read_on_the_runs_stdin_pipe() {
    waits_for_input(Stdin::RunsPipe, "read answer", b"yes\n", &[]);
}

#[test]
fn blocked_on_input_for_python_input_on_the_runs_stdin_pipe() {
    waits_for_input(Stdin::RunsPipe, &format!("{} -c 'input()'", python3()), b"yes\n", &[]);
}

#[test]
fn blocked_on_input_for_cat_on_the_runs_stdin_pipe() {
    waits_for_input(Stdin::RunsPipe, "cat >/dev/null", b"x", &["--eof"]);
}

/// An editor: vim waits for its terminal in `pselect6`, not in `read`.
#[test]
fn blocked_on_input_for_an_editor_on_a_pty() {
    if !std::process::Command::new("vim").arg("--version").stdout(Stdio::null()).status().is_ok_and(|s| s.success()) {
        eprintln!("skipped: no vim here (.ci/run installs it)");
        return;
    }
    let scratch = Scratch::new();
    let file = scratch.path("edited");
    waits_for_input(Stdin::Pty, &format!("vim -u NONE -N -n -i NONE {}", file.display()), b":q!\r", &[]);
}

/// Python's `select.select([sys.stdin], ...)`, `select.poll` and
/// `select.epoll` on fd 0: the three ways a program waits for its stdin
/// along with other fds.
const PYTHON_WAITS: [(&str, &str); 3] = [
    ("select", "import select, sys; select.select([sys.stdin], [], [])"),
    ("poll", "import select; p = select.poll(); p.register(0, select.POLLIN); p.poll()"),
    ("epoll", "import select; e = select.epoll(); e.register(0, select.EPOLLIN); e.poll()"),
];

#[test]
fn blocked_on_input_for_select_poll_and_epoll_on_a_pty() {
    for (_, program) in PYTHON_WAITS {
        waits_for_input(Stdin::Pty, &format!("{} -c '{program}'", python3()), b"x\n", &[]);
    }
}

#[test]
fn blocked_on_input_for_select_poll_and_epoll_on_the_runs_stdin_pipe() {
    for (_, program) in PYTHON_WAITS {
        waits_for_input(Stdin::RunsPipe, &format!("{} -c '{program}'", python3()), b"x\n", &[]);
    }
}

/// The same waits, and a `read`, on another fd open on the stdin's file
/// (as Node's libuv opens its terminal again, and waits on that fd in epoll).
const PYTHON_WAITS_ON_ANOTHER_FD: [(&str, &str); 4] = [
    ("read", "import os; os.read(os.open(\"/proc/self/fd/0\", os.O_RDONLY), 1)"),
    ("select", "import os, select; fd = os.open(\"/proc/self/fd/0\", os.O_RDONLY); select.select([fd], [], [])"),
    (
        "poll",
        "import os, select; fd = os.open(\"/proc/self/fd/0\", os.O_RDONLY); p = select.poll(); \
         p.register(fd, select.POLLIN); p.poll()",
    ),
    (
        "epoll",
        "import os, select; fd = os.open(\"/proc/self/fd/0\", os.O_RDONLY); e = select.epoll(); \
         e.register(fd, select.EPOLLIN); e.poll()",
    ),
];

#[test]
fn blocked_on_input_for_read_select_poll_and_epoll_of_the_stdins_file_opened_again() {
    for stdin in [Stdin::Pty, Stdin::RunsPipe] {
        for (_, program) in PYTHON_WAITS_ON_ANOTHER_FD {
            waits_for_input(stdin, &format!("{} -c '{program}'", python3()), b"x\n", &[]);
        }
    }
}

/// A command whose stdin is `stdin` but which waits for something else:
/// once the process that wrote its pid to `$PIDFILE` (the payload's
/// `program`, which the payload execs unless it does so itself) sits where
/// `settled` says, it is never blocked_on_input.
fn never_blocked_on_input(stdin: Stdin, what: &str, program: &str, settled: &dyn Fn(i32) -> bool) {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let payload = if program.contains("$PIDFILE") {
        format!("export PIDFILE={dir}/pid; {program}")
    } else {
        format!("echo $$ > {dir}/pid; exec {program}")
    };
    let (index, _held) = start(&mut guard, &pidfile, stdin, &payload);
    let pid = wait_pid(&scratch.path("pid"), &mut guard);
    eventually(&format!("{what} to settle"), || settled(pid));
    for _ in 0..5 {
        assert!(!blocked_on_input(&pidfile), "{what}: blocked_on_input");
    }
    assert!(settled(pid), "{what}: no longer where it was");
    let out = run(pgrun(["cancel", pidfile.to_str().unwrap()]).stderr(Stdio::piped()));
    assert_status(&out, 0, "cancel");
    guard.wait(index);
}

/// Whether process `pid` sleeps (`S`) in call `call` (one of `calls`)
/// with `first` as its first argument (`None`: any), by its
/// /proc/PID/syscall.
fn in_call(pid: i32, calls: &[i64], first: Option<u64>) -> bool {
    let line = fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
    let mut fields = line.split_ascii_whitespace();
    let number = fields.next().and_then(|n| n.parse::<i64>().ok());
    let arg = fields.next().and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok());
    state(pid).as_deref() == Some("S")
        && number.is_some_and(|n| calls.contains(&n))
        && first.is_none_or(|fd| arg == Some(fd))
}

fn comm_is(pid: i32, name: &str) -> bool {
    fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim().starts_with(name))
}

#[allow(clippy::unnecessary_cast)] // c_long: 32 bits on some targets
const READ: i64 = libc::SYS_read as i64;

/// The calls `select.poll`, `select.select` and `select.epoll` wait in
/// (the C library's `poll`, `select` and `epoll_wait`: aarch64 has only
/// the generic ones).
#[allow(clippy::unnecessary_cast)]
fn python_calls(kind: &str) -> Vec<i64> {
    let generic = match kind {
        "poll" => vec![libc::SYS_ppoll as i64],
        "select" => vec![libc::SYS_pselect6 as i64],
        _ => vec![libc::SYS_epoll_pwait as i64, libc::SYS_epoll_pwait2 as i64],
    };
    #[cfg(target_arch = "x86_64")]
    let legacy = vec![match kind {
        "poll" => libc::SYS_poll,
        "select" => libc::SYS_select,
        _ => libc::SYS_epoll_wait,
    }];
    #[cfg(not(target_arch = "x86_64"))]
    let legacy = vec![];
    [generic, legacy].concat()
}

#[test]
fn never_blocked_on_input_while_sleeping() {
    let asleep = |pid: i32| comm_is(pid, "sleep") && state(pid).as_deref() == Some("S");
    never_blocked_on_input(Stdin::Pty, "sleep", "sleep 600", &asleep);
    never_blocked_on_input(Stdin::RunsPipe, "sleep on the stdin pipe", "sleep 600", &asleep);
}

#[test]
fn never_blocked_on_input_while_computing() {
    let script = format!("{} -c 'while True: pass'", python3());
    never_blocked_on_input(Stdin::Pty, "a busy loop", &script, &|pid| comm_is(pid, "python"));
}

#[test]
fn never_blocked_on_input_while_reading_a_socket_or_a_fifo() {
    // read(2) on fd 3, a socket, with the pty as stdin.
    let socket = format!("{} -c 'import os, socket; a, b = socket.socketpair(); os.read(a.fileno(), 1)'", python3());
    never_blocked_on_input(Stdin::Pty, "a read of a socket", &socket, &|pid| in_call(pid, &[READ], Some(3)));
    // read(2) on fd 0 that is a socket.
    let on_stdin = format!(
        "{} -c 'import os, socket; a, b = socket.socketpair(); os.dup2(a.fileno(), 0); os.read(0, 1)'",
        python3()
    );
    never_blocked_on_input(Stdin::RunsPipe, "a read of a socket on fd 0", &on_stdin, &|pid| {
        in_call(pid, &[READ], Some(0))
            && fs::read_link(format!("/proc/{pid}/fd/0")).is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
    });
    // read(2) on fd 3, a FIFO, with the pty as stdin.
    let scratch = Scratch::new();
    let fifo = scratch.path("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let fifo_read = format!("{} -c 'import os; os.read(os.open(\"{}\", os.O_RDWR), 1)'", python3(), fifo.display());
    never_blocked_on_input(Stdin::Pty, "a read of a FIFO", &fifo_read, &|pid| in_call(pid, &[READ], Some(3)));
    // read(2) on fd 0 that is the FIFO, not a terminal.
    let cat = format!("sh -c 'exec 0<>{}; exec cat'", fifo.display());
    never_blocked_on_input(Stdin::Pty, "cat reading a FIFO on its stdin", &cat, &|pid| {
        comm_is(pid, "cat") && in_call(pid, &[READ], Some(0))
    });
}

/// `cat` reading a pipe that is not the run's stdin pipe: one from the
/// run's own `sleep | cat` (the run has a stdin pipe, which `sleep` holds
/// and never reads), and the pipe pgrun was given as its stdin by its
/// caller.
#[test]
fn never_blocked_on_input_while_reading_a_pipe_not_the_runs_stdin_pipe() {
    let cat_reads_fd_0 = |pid: i32| {
        comm_is(pid, "cat")
            && in_call(pid, &[READ], Some(0))
            && fs::read_link(format!("/proc/{pid}/fd/0")).is_ok_and(|l| l.to_string_lossy().starts_with("pipe:"))
    };
    never_blocked_on_input(
        Stdin::RunsPipe,
        "cat reading the pipe from sleep",
        "sleep 600 | sh -c 'echo $$ > $PIDFILE; exec cat'",
        &cat_reads_fd_0,
    );
    never_blocked_on_input(Stdin::CallersPipe, "cat reading its caller's pipe", "cat", &cat_reads_fd_0);
}

/// `select`, `poll` and `epoll` on a socket (fd 3), with the pty or the
/// run's stdin pipe on fd 0: they wait, but not for the stdin.
#[test]
fn never_blocked_on_input_while_polling_other_fds() {
    let waits = [
        ("select", "import select, socket; a, b = socket.socketpair(); select.select([a], [], [])"),
        (
            "poll",
            "import select, socket; a, b = socket.socketpair(); p = select.poll(); p.register(a, select.POLLIN); p.poll()",
        ),
        (
            "epoll",
            "import select, socket; a, b = socket.socketpair(); e = select.epoll(); e.register(a, select.EPOLLIN); e.poll()",
        ),
    ];
    for stdin in [Stdin::Pty, Stdin::RunsPipe] {
        for (kind, program) in waits {
            let calls = python_calls(kind);
            // select's first argument is nfds (4: fds 0 to 3), epoll's the
            // epoll fd; poll's the array's address.
            let first = match kind {
                "select" => Some(4),
                _ => None,
            };
            never_blocked_on_input(
                stdin,
                &format!("{kind} of a socket"),
                &format!("{} -c '{program}'", python3()),
                &|pid| in_call(pid, &calls, first),
            );
        }
    }
}

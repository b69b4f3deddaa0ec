//! pgrun in a real pseudo-terminal: the command gets the terminal, Ctrl-C
//! and Ctrl-Z behave as without pgrun, and the terminal is given back.

use crate::util::*;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::{Arc, Mutex};

/// A bash session leader on a new pty, with the pty as its controlling
/// terminal, running `script`.
struct Session {
    master: File,
    output: Arc<Mutex<Vec<u8>>>,
    index: usize,
}

impl Session {
    fn start(guard: &mut Guard, script: &str) -> Session {
        let pty = nix::pty::openpty(None, None).expect("openpty");
        let slave: OwnedFd = pty.slave;
        let mut cmd = Command::new("bash");
        default_signals(&mut cmd); // Ctrl-C must reach a job, whatever the suite inherited
        cmd.args(["--norc", "--noprofile", "-c", script])
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave);
        // SAFETY: setsid and ioctl are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let index = guard.spawn(&mut cmd);
        drop(cmd); // closes the parent's copies of the slave
        let master = File::from(pty.master);
        let output = Arc::new(Mutex::new(Vec::new()));
        let (mut reader, sink) = (master.try_clone().unwrap(), output.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends with EIO once every slave fd is closed.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Session { master, output, index }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).replace('\r', "")
    }

    /// Wait for a line holding `prefix` (after any echoed `^C`); return it
    /// from `prefix` on.
    fn line(&self, prefix: &str) -> String {
        let mut found = None;
        let text = &mut String::new();
        let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            eventually(&format!("a line starting {prefix:?}"), || {
                *text = self.text();
                found = text.lines().find_map(|l| l.find(prefix).map(|at| l[at..].to_string()));
                found.is_some()
            })
        }));
        assert!(waited.is_ok(), "no line starting {prefix:?} in the terminal:\n{}", self.text());
        found.unwrap()
    }

    fn type_bytes(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).unwrap();
    }
}

/// `rc=N fg=A me=B` as printed by [`REPORT`].
fn parse_report(line: &str) -> (i32, String, String) {
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(name))
            .unwrap_or_else(|| panic!("{name} in {line:?}"))
            .to_string()
    };
    (field("rc=").parse().unwrap(), field("fg="), field("me="))
}

/// bash's exit status and the terminal's foreground group against bash's own.
const REPORT: &str = r#"echo "rc=$rc fg=$(ps -o tpgid= -p $$ | tr -d ' ') me=$(ps -o pgid= -p $$ | tr -d ' ')""#;

#[test]
fn a_typed_line_reaches_the_command() {
    let mut guard = Guard::new();
    let script = format!("{} -- sh -c 'echo ready; read x; echo \"got:$x\"'; rc=$?; {REPORT}", pgrun_path());
    let mut s = Session::start(&mut guard, &script);
    s.line("ready");
    s.type_bytes(b"hello\n");
    s.line("got:hello");
    let (rc, fg, me) = parse_report(&s.line("rc="));
    assert_eq!(rc, 0);
    assert_eq!(fg, me, "the terminal was not given back");
    assert_eq!(guard.wait(s.index), 0);
}

#[test]
fn ctrl_c_reaches_the_command_and_gives_130() {
    let mut guard = Guard::new();
    let script = format!("{} -- sh -c 'echo ready; exec sleep 100'; rc=$?; {REPORT}", pgrun_path());
    let mut s = Session::start(&mut guard, &script);
    s.line("ready");
    s.type_bytes(b"\x03");
    let (rc, fg, me) = parse_report(&s.line("rc="));
    assert_eq!(rc, 130);
    assert_eq!(fg, me, "foreground group not restored");
}

#[test]
fn a_timeout_during_an_interactive_read_gives_124_and_the_terminal_back() {
    let mut guard = Guard::new();
    let script = format!("{} --timeout 0.5 -- sh -c 'echo ready; read x'; rc=$?; {REPORT}", pgrun_path());
    let s = Session::start(&mut guard, &script);
    s.line("ready");
    let (rc, fg, me) = parse_report(&s.line("rc="));
    assert_eq!(rc, 124);
    assert_eq!(fg, me, "foreground group not restored");
}

#[test]
fn ctrl_z_stops_the_job_and_fg_resumes_it_to_completion() {
    let mut guard = Guard::new();
    let script = format!(
        "set -m; {} -- sh -c 'echo ready; read x; echo \"got:$x\"'; echo \"stopped:$?\"; fg; rc=$?; {REPORT}",
        pgrun_path()
    );
    let mut s = Session::start(&mut guard, &script);
    s.line("ready");
    s.type_bytes(b"\x1a");
    assert_eq!(s.line("stopped:"), "stopped:148", "the shell did not see the job stop");
    s.type_bytes(b"world\n");
    s.line("got:world"); // `fg` echoes the job, "got:$x" included: match the value
    let (rc, fg, me) = parse_report(&s.line("rc="));
    assert_eq!(rc, 0);
    assert_eq!(fg, me);
}

#[test]
fn a_background_pgrun_does_not_take_the_terminal() {
    let mut guard = Guard::new();
    let script = format!(
        "set -m; {} -- sh -c 'echo \"bg: tpgid=$(ps -o tpgid= -p $$ | tr -d \" \") pgid=$(ps -o pgid= -p $$ | tr -d \" \")\"' & wait $!; rc=$?; {REPORT}",
        pgrun_path()
    );
    let s = Session::start(&mut guard, &script);
    let bg = s.line("bg:");
    let (rc, fg, me) = parse_report(&s.line("rc="));
    assert_eq!(rc, 0);
    assert_eq!(fg, me);
    assert!(bg.contains(&format!("tpgid={me} ")), "the background command took the terminal: {bg} (shell {me})");
}

#[test]
fn setsid_gives_no_controlling_terminal() {
    let mut guard = Guard::new();
    let script = format!(
        "{} --setsid -- sh -c 'if (exec 3</dev/tty) 2>/dev/null; then echo tty:yes; else echo tty:no; fi; echo \"ids: sid=$(ps -o sid= -p $$ | tr -d \" \") pid=$$\"'; rc=$?; {REPORT}",
        pgrun_path()
    );
    let s = Session::start(&mut guard, &script);
    assert_eq!(s.line("tty:"), "tty:no");
    let ids = s.line("ids:");
    let sid = ids.split_whitespace().find_map(|f| f.strip_prefix("sid=")).unwrap();
    let pid = ids.split_whitespace().find_map(|f| f.strip_prefix("pid=")).unwrap();
    assert_eq!(sid, pid, "{ids}");
    let (rc, fg, me) = parse_report(&s.line("rc="));
    assert_eq!(rc, 0);
    assert_eq!(fg, me);
}

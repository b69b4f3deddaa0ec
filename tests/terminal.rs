//! pgrun in a real pseudo-terminal: the command gets the terminal, Ctrl-C
//! and Ctrl-Z behave as without pgrun, and the terminal is given back.
//! Scripts run in `bash -c` (pgrun shares bash's group, so the terminal's
//! foreground group after the run is pgrun's doing); command lines a user
//! types go to an interactive bash with job control.

use crate::util::*;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::Command;
use std::sync::{Arc, Mutex};

/// A bash session leader on a new 24x80 pty, with the pty as its
/// controlling terminal.
struct Session {
    master: File,
    output: Arc<Mutex<Vec<u8>>>,
    index: usize,
    /// How much of [`Session::text`] [`Session::expect`] has consumed.
    seen: usize,
}

/// The prompt of [`Session::interactive`].
const PROMPT: &str = "PROMPT$ ";

impl Session {
    /// `bash -c script`.
    fn start(guard: &mut Guard, script: &str) -> Session {
        let mut cmd = Command::new("bash");
        cmd.args(["--norc", "--noprofile", "-c", script]);
        Session::spawn(guard, cmd)
    }

    /// An interactive bash (job control on, as at a terminal), ready for a
    /// command line; `set -b` makes it report a job's stop at once.
    fn interactive(guard: &mut Guard) -> Session {
        let mut cmd = Command::new("bash");
        cmd.args(["--norc", "--noprofile", "-i"])
            .env("PS1", PROMPT)
            .env("TERM", "xterm")
            .env("HISTFILE", "/dev/null")
            .env("LESS", "")
            .env_remove("LESSOPEN")
            .env_remove("PROMPT_COMMAND");
        let mut s = Session::spawn(guard, cmd);
        s.expect(PROMPT);
        s.type_line("set -b");
        s.expect(PROMPT);
        s
    }

    fn spawn(guard: &mut Guard, mut cmd: Command) -> Session {
        let size = nix::pty::Winsize { ws_row: 24, ws_col: 80, ws_xpixel: 0, ws_ypixel: 0 };
        let pty = openpty_cloexec(Some(&size));
        let slave: OwnedFd = pty.slave;
        default_signals(&mut cmd); // Ctrl-C must reach a job, whatever the suite inherited
        cmd.stdin(slave.try_clone().unwrap()).stdout(slave.try_clone().unwrap()).stderr(slave);
        with_controlling_terminal(&mut cmd);
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
        Session { master, output, index, seen: 0 }
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

    fn type_line(&mut self, line: &str) {
        self.type_bytes(format!("{line}\n").as_bytes());
    }

    /// Wait for `what` in the output after what was expected before; the
    /// output up to its end is consumed.
    fn expect(&mut self, what: &str) {
        self.expect_with(what, |rest| rest.find(what).map(|at| at + what.len()));
    }

    /// Wait for `rc=N` and a newline after what was expected before (so
    /// not the typed `rc=$?`); return N.
    fn status(&mut self) -> i32 {
        let mut code = None;
        self.expect_with("rc=N", |rest| {
            rest.match_indices("rc=").find_map(|(at, _)| {
                let digits = &rest[at + 3..];
                let end = digits.find('\n')?;
                code = digits[..end].trim().parse().ok();
                code.map(|_| at + 3 + end)
            })
        });
        code.unwrap()
    }

    fn expect_with(&mut self, what: &str, mut find: impl FnMut(&str) -> Option<usize>) {
        let mut end = None;
        let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            eventually(&format!("{what:?} in the terminal"), || {
                end = find(&self.text()[self.seen..]);
                end.is_some()
            })
        }));
        assert!(waited.is_ok(), "no {what:?} after:\n{}", &self.text()[self.seen..]);
        self.seen += end.unwrap();
    }

    /// Type `exit` and wait for bash to end.
    fn exit(mut self, guard: &mut Guard) {
        self.type_line("exit");
        assert_eq!(guard.wait(self.index), 0, "bash did not exit cleanly:\n{}", self.text());
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
fn ctrl_z_stops_a_script_that_runs_pgrun_as_one_job() {
    // The job is the script's shell and pgrun (one group); the terminal's
    // Ctrl-Z reaches only the command's group. The whole job must stop, or
    // the shell never sees it stopped and no prompt comes back.
    let mut guard = Guard::new();
    let script = format!(
        "set -m; sh -c '{} -- sh -c \"echo ready; read x; echo got:\\$x\"; echo inner:$?'; echo \"stopped:$?\"; fg; rc=$?; {REPORT}",
        pgrun_path()
    );
    let mut s = Session::start(&mut guard, &script);
    s.line("ready");
    s.type_bytes(b"\x1a");
    assert_eq!(s.line("stopped:"), "stopped:148", "the shell did not see the whole job stop");
    s.type_bytes(b"world\n");
    s.line("got:world");
    s.line("inner:0"); // `fg` echoes the job, "inner:$?" included: match the value
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

// Command lines typed at an interactive prompt end as they do without
// pgrun, and the next prompt appears.

#[test]
fn a_pipeline_from_pgrun_into_less_leaves_less_the_terminal() {
    let mut guard = Guard::new();
    let mut s = Session::interactive(&mut guard);
    s.type_line(&format!("{} -- seq 1 200 | less", pgrun_path()));
    s.expect("\n23\n"); // less fills the screen...
    s.type_bytes(b"q"); // ...and reads the keyboard
    s.expect(PROMPT);
    s.type_line("echo \"rc=$?\"");
    assert_eq!(s.status(), 0);
    s.exit(&mut guard);
}

#[test]
fn less_at_the_end_of_a_pipeline_gets_the_terminal() {
    let mut guard = Guard::new();
    let mut s = Session::interactive(&mut guard);
    s.type_line(&format!("seq 1 200 | {} -- less", pgrun_path()));
    s.expect("\n23\n");
    s.type_bytes(b"q");
    s.expect(PROMPT);
    s.type_line("echo \"rc=$?\"");
    assert_eq!(s.status(), 0);
    s.exit(&mut guard);
}

/// `pgrun -v -- python3 ...` reading `/dev/tty` with stdin from /dev/null,
/// typed at the prompt; returns once pgrun has handed it the terminal.
fn start_dev_tty_reader(guard: &mut Guard) -> Session {
    let mut s = Session::interactive(guard);
    s.type_line(&format!(
        "{} -v -- {} -c 'print(\"got:\" + open(\"/dev/tty\").readline().strip())' </dev/null",
        pgrun_path(),
        python3()
    ));
    // Typed-ahead input could be flushed by the shell's own terminal
    // handling; type once pgrun says the command has the terminal.
    s.expect("handing it the terminal");
    s.expect("continuing process group");
    s
}

#[test]
fn a_dev_tty_reader_with_stdin_from_dev_null_reads_the_typed_line() {
    let mut guard = Guard::new();
    let mut s = start_dev_tty_reader(&mut guard);
    s.type_line("typed");
    s.expect("got:typed");
    s.expect(PROMPT);
    s.type_line("echo \"rc=$?\"");
    assert_eq!(s.status(), 0);
    s.exit(&mut guard);
}

#[test]
fn ctrl_c_ends_a_dev_tty_reader_with_130() {
    let mut guard = Guard::new();
    let mut s = start_dev_tty_reader(&mut guard);
    s.type_bytes(b"\x03");
    s.expect(PROMPT);
    s.type_line("echo \"rc=$?\"");
    assert_eq!(s.status(), 130);
    s.exit(&mut guard);
}

/// `pgrun -v -- cat &` at the prompt: the shell reports the job stopped
/// when cat reads; `fg` gives cat the terminal. Returns once it has it.
fn start_cat_in_the_background_then_fg(guard: &mut Guard) -> Session {
    let mut s = Session::interactive(guard);
    s.type_line(&format!("{} -v -- cat &", pgrun_path()));
    s.expect("Stopped"); // set -b: reported at once, with no new prompt
    s.type_line("fg");
    s.expect("handing it the terminal");
    s.expect("continuing process group");
    s
}

#[test]
fn a_background_job_stops_on_reading_and_fg_lets_it_read() {
    let mut guard = Guard::new();
    let mut s = start_cat_in_the_background_then_fg(&mut guard);
    s.type_line("line1");
    s.expect("line1\nline1\n"); // the echo, then cat's copy
    s.type_bytes(b"\x04");
    s.expect(PROMPT);
    s.type_line("echo \"rc=$?\"");
    assert_eq!(s.status(), 0);
    s.exit(&mut guard);
}

#[test]
fn ctrl_c_ends_a_job_brought_to_the_foreground_with_130() {
    let mut guard = Guard::new();
    let mut s = start_cat_in_the_background_then_fg(&mut guard);
    s.type_bytes(b"\x03");
    s.expect(PROMPT);
    s.type_line("echo \"rc=$?\"");
    assert_eq!(s.status(), 130);
    s.exit(&mut guard);
}

/// With a timeout pgrun runs on in the background; bash's `fg` then sends
/// no SIGCONT and only gives pgrun's group the terminal. pgrun notices and
/// hands it to the waiting reader.
#[test]
fn a_timed_background_reader_reads_after_fg() {
    let mut guard = Guard::new();
    let mut s = Session::interactive(&mut guard);
    s.type_line(&format!("{} -v --timeout 60 -- cat &", pgrun_path()));
    s.expect("waits for the terminal");
    s.type_line("fg");
    s.expect("handing it the terminal");
    s.type_line("line1");
    s.expect("line1\nline1\n"); // the echo, then cat's copy
    s.type_bytes(b"\x04");
    s.expect(PROMPT);
    s.type_line("echo \"rc=$?\"");
    assert_eq!(s.status(), 0);
    s.exit(&mut guard);
}

/// With a timeout pgrun does not stop itself in the background (a stopped
/// pgrun could not keep its deadline): the timeout ends the stopped reader.
#[test]
fn a_background_reader_still_times_out() {
    let mut guard = Guard::new();
    let mut s = Session::interactive(&mut guard);
    s.type_line(&format!("{} --timeout 1 -- cat & wait $!; echo \"rc=$?\"", pgrun_path()));
    assert_eq!(s.status(), 124);
    s.expect(PROMPT);
    s.exit(&mut guard);
}

/// A reader whose leader catches SIGTTIN stops alone, unseen by pgrun (its
/// parent is the leader, not pgrun): Ctrl-C still ends it, because a
/// forwarded INT is followed by SIGCONT.
#[test]
fn ctrl_c_reaches_a_member_stopped_on_terminal_access() {
    let mut guard = Guard::new();
    let dir = Scratch::new();
    let reader = dir.path("reader");
    let mut s = Session::interactive(&mut guard);
    s.type_line(&format!(
        "{} -- sh -c 'trap : TTIN INT; sh -c \"echo \\$\\$ > {}; read x </dev/tty\"; exit $?' </dev/null",
        pgrun_path(),
        reader.display()
    ));
    let pid = wait_pid(&reader, &mut guard);
    eventually("the reader to be stopped", || state(pid).as_deref() == Some("T"));
    s.type_bytes(b"\x03");
    s.expect(PROMPT);
    s.type_line("echo \"rc=$?\"");
    assert_eq!(s.status(), 130);
    s.exit(&mut guard);
}

/// pgrun in a script's group (no job control) hands the terminal to a
/// `/dev/tty` reader when it needs it and takes it back at the end.
#[test]
fn a_terminal_handed_over_mid_run_is_given_back() {
    let mut guard = Guard::new();
    let script =
        format!("seq 1 3 | {} -- sh -c 'echo ready; read x </dev/tty; echo \"got:$x\"'; rc=$?; {REPORT}", pgrun_path());
    let mut s = Session::start(&mut guard, &script);
    s.line("ready");
    s.type_bytes(b"typed\n");
    s.line("got:typed");
    let (rc, fg, me) = parse_report(&s.line("rc="));
    assert_eq!(rc, 0);
    assert_eq!(fg, me, "the terminal was not given back");
    assert_eq!(guard.wait(s.index), 0);
}

/// A command that cannot be run leaves the terminal to the shell, which
/// can read it next.
#[test]
fn a_failed_spawn_gives_the_terminal_back() {
    let mut guard = Guard::new();
    let script = format!(
        "{} no-such-command-for-pgrun; echo \"status:$?\"; if read x; then echo \"got:$x\"; else echo read-failed; fi",
        pgrun_path()
    );
    let mut s = Session::start(&mut guard, &script);
    assert_eq!(s.line("status:"), "status:127");
    s.type_bytes(b"typed\n");
    s.expect("\ngot:typed");
    assert_eq!(guard.wait(s.index), 0);
}

//! The representative runs the sweep records and replays: what pgrun is
//! asked to do, which process strace traces, and which exit statuses the
//! contract allows for it.

use std::path::Path;
use std::time::Duration;

/// What the case does around the traced process.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Shape {
    /// The traced pgrun runs its command to the end.
    Run,
    /// The traced pgrun runs a long command; once the command is up, an
    /// untraced `pgrun cancel` (another process) stops it.
    CancelledRun,
    /// The traced pgrun runs a long command; once the command is up, the
    /// sweep SIGKILLs pgrun itself: its guard must stop the run and remove
    /// the pid file and the marker.
    KilledRun,
    /// An untraced pgrun runs a long command with a pid file; the traced
    /// process is a `cancel` or `status` aimed at it. The untraced run is
    /// then stopped by an untraced cancel (if still alive).
    AgainstLiveRun,
}

pub struct Scenario {
    pub name: &'static str,
    pub shape: Shape,
    /// The traced process's arguments (after the pgrun binary), given the
    /// case's folder.
    pub args: fn(&Path) -> Vec<String>,
    /// The status the traced process exits with when nothing fails.
    pub normal: i32,
    /// Statuses the contract allows besides `normal` for a failure of
    /// pgrun itself (126 and 127 are allowed only when the command's own
    /// `execve` fails: see case.rs).
    pub failure: &'static [i32],
    /// The traced process writes `report.json` in the case's folder.
    pub report: bool,
    /// Needs a writable cgroup2 hierarchy (`--contain cgroup`).
    pub cgroup: bool,
    /// A case that runs longer is a hang: the bound is generous (strace
    /// slows every syscall down, and the machine is shared).
    pub bound: Duration,
}

fn words(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn path(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// A command that records its pid and a straggler's, then exits 3 (the
/// straggler is stopped by pgrun's stop sequence).
pub fn straggler(dir: &Path) -> String {
    let pids = path(dir, "pids");
    format!("echo $$ >> {pids}; sleep 30 & echo $! >> {pids}; exit 3")
}

/// A command that records its pids and runs until stopped.
pub fn long(dir: &Path) -> String {
    let pids = path(dir, "pids");
    format!("echo $$ >> {pids}; sleep 30 & echo $! >> {pids}; wait")
}

/// Like `long`, but the shell and its child ignore TERM: only KILL ends it.
fn deaf(dir: &Path) -> String {
    let pids = path(dir, "pids");
    format!("trap '' TERM; echo $$ >> {pids}; sleep 30 & echo $! >> {pids}; wait")
}

/// What `max-output` writes: 5000 `a` and a newline on stdout, one line on
/// stderr.
fn chatty(dir: &Path) -> String {
    let pids = path(dir, "pids");
    format!("echo $$ >> {pids}; head -c 5000 /dev/zero | tr '\\0' a; echo; echo err >&2; exit 0")
}

fn run_args(dir: &Path, extra: &[&str], script: String) -> Vec<String> {
    let mut v = words(&["--pidfile", &path(dir, "run.pid"), "--report", &path(dir, "report.json")]);
    v.extend(words(extra));
    v.extend(words(&["--", "/bin/sh", "-c", &script]));
    v
}

/// The untraced run the `AgainstLiveRun` scenarios aim at (its `--timeout`
/// is a backstop, should every cancel fail).
pub fn live_run_args(dir: &Path) -> Vec<String> {
    run_args(dir, &["--timeout", "20"], long(dir))
}

pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "run",
        shape: Shape::Run,
        args: |d| run_args(d, &[], straggler(d)),
        normal: 3,
        failure: &[125],
        report: true,
        cgroup: false,
        bound: Duration::from_secs(15),
    },
    Scenario {
        name: "timeout",
        shape: Shape::Run,
        args: |d| run_args(d, &["--timeout", "0.3", "-k", "0.3"], deaf(d)),
        normal: 124,
        failure: &[125],
        report: true,
        cgroup: false,
        bound: Duration::from_secs(15),
    },
    Scenario {
        name: "cancel",
        shape: Shape::CancelledRun,
        args: |d| run_args(d, &[], long(d)),
        normal: 143,
        failure: &[125],
        report: true,
        cgroup: false,
        bound: Duration::from_secs(20),
    },
    Scenario {
        name: "guard",
        shape: Shape::KilledRun,
        args: |d| {
            let mut v = words(&["--pidfile", &path(d, "run.pid"), "--", "/bin/sh", "-c"]);
            v.push(long(d));
            v
        },
        normal: 137,
        failure: &[125],
        report: false,
        cgroup: false,
        bound: Duration::from_secs(20),
    },
    Scenario {
        name: "cancel-cmd",
        shape: Shape::AgainstLiveRun,
        args: |d| words(&["cancel", &path(d, "run.pid")]),
        normal: 0,
        failure: &[125],
        report: false,
        cgroup: false,
        bound: Duration::from_secs(20),
    },
    Scenario {
        name: "status",
        shape: Shape::AgainstLiveRun,
        args: |d| words(&["status", "--json", &path(d, "run.pid")]),
        normal: 0,
        failure: &[4],
        report: false,
        cgroup: false,
        bound: Duration::from_secs(15),
    },
    Scenario {
        name: "max-output",
        shape: Shape::Run,
        args: |d| {
            let mut v = words(&["--report", &path(d, "report.json"), "--max-output", "1K", "--", "/bin/sh", "-c"]);
            v.push(chatty(d));
            v
        },
        normal: 0,
        failure: &[125],
        report: true,
        cgroup: false,
        bound: Duration::from_secs(15),
    },
    Scenario {
        name: "cgroup",
        shape: Shape::Run,
        args: |d| run_args(d, &["--contain", "cgroup"], straggler(d)),
        normal: 3,
        failure: &[125],
        report: true,
        cgroup: true,
        bound: Duration::from_secs(15),
    },
];

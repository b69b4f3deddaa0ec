//! The load test: a few hundred runs at once ([`LOAD_RUNS`] in the long
//! target, [`QUICK_RUNS`] in the default suite), of mixed shapes (a plain
//! `sleep`, one that ignores TERM from its first instruction, one with a
//! `&` child, one with a `setsid` escapee in tree mode, short commands that
//! end on their own), each ended its own way (a cancel, two cancels at
//! once, a SIGKILL of pgrun that leaves the guard to finish, a cancel and
//! then a SIGKILL of pgrun mid-stop, a timeout), with `pgrun status` and
//! `pgrun wait` calls in between. What each run does is drawn from a seed
//! (`PGRUN_LOAD_SEED=N` replays one; it is printed with the figures); the
//! timing is the machine's. A failure shows four cases of each failed
//! check (`PGRUN_LOAD_ALL=1`: all of them).
//!
//! Nothing is asserted as it goes: every check that fails is noted under
//! its name with what was seen, and the test fails at the end with the
//! count of each, the seed and the figures, so one run says everything it
//! found. The checks, all from the contract:
//! - a cancel exits 0, and only once the run is gone: right after it
//!   returns, its pgrun is dead (state Z or gone: pgrun is the test's
//!   child, a zombie until reaped; not checked on the portable path, where
//!   cancel can only see pgrun's lock let go), no process of the run is
//!   alive and no process is left in the run's group, not even a zombie;
//!   a second cancel of a run being stopped exits 0 too;
//! - `pgrun wait` returns only once the run is over (no process of it left)
//!   and with the run's own status when given `--report`;
//! - every `pgrun status` answer is a state of the contract's, with the
//!   exit status that goes with it, the run's group and pgrun, and a state
//!   the run can be in at that point of its life; "not running" never while
//!   a process of the run exists; the pid file is never removed while one
//!   does;
//! - pgrun's exit status and report say what was done to the run (reason,
//!   exit code, the signal that ended the command, the stop signals sent,
//!   `escaped`); a pgrun that exits normally has reaped its whole run and
//!   its guard;
//! - at the end nothing is left: no process of any run (each payload writes
//!   the pid and start time of every process it makes), no pgrun, no guard,
//!   no pid file, marker or temporary file; the bystander got no signal.
//!
//! This file holds the test, its bounds and its context; the parts: `plan`
//! (what is drawn from the seed), `procs` (a run's processes, payloads),
//! `calls` (the test's own cancel/status/wait in the background), `drive`
//! (one run, start to end), `checks` (the contract's checks) and `findings`
//! (what failed, the figures).

use crate::util::*;
use std::collections::BTreeMap;
use std::fs;
use std::io::BufRead;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

mod calls;
mod checks;
mod drive;
mod findings;
mod plan;
mod procs;

use calls::*;
use checks::*;
use drive::*;
use findings::*;
use plan::*;
use procs::*;

/// Runs at once in the long target (`cargo test --features long-tests
/// --test long load -- --nocapture`): on a 2-core machine a few hundred
/// are plenty.
pub const LOAD_RUNS: usize = 240;
/// Runs at once in the default suite: one of each shape and ending (19),
/// and one more.
pub const QUICK_RUNS: usize = 20;
/// The test's own bound: every wait in it ends by then (each call of the
/// test's own still left gets 5 s more to answer), and what is still
/// running is then noted and killed.
const LOAD_DEADLINE: Duration = Duration::from_secs(80);
/// The grace between TERM and KILL for a command that dies of TERM: a KILL
/// in its report means something of it outlived TERM by that long.
const TERM_GRACE: &str = "5";
/// The grace for the command that ignores TERM: every stop of it ends in
/// a KILL after this.
const IGNORED_GRACE: &str = "1";

#[test]
fn load_hundreds_of_runs_cancelled_killed_and_watched_at_once() {
    let runs = rounds(QUICK_RUNS, LOAD_RUNS);
    let seed = seed();
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    test_deadline();
    let ctx = Arc::new(Ctx::new(&scratch));
    let plans = plans(seed, runs, ctx.tree);
    let load_before = load_average();
    let started = Instant::now();
    let workers: Vec<_> = plans
        .iter()
        .map(|plan| {
            let (plan, ctx) = (plan.clone(), ctx.clone());
            thread::Builder::new().stack_size(256 << 10).spawn(move || drive(plan, &ctx)).expect("a thread per run")
        })
        .collect();
    let mut results = Vec::new();
    for (worker, plan) in workers.into_iter().zip(&plans) {
        results.push(worker.join().unwrap_or_else(|panic| {
            let mut r = RunResult::new(plan.clone());
            let why =
                panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
            r.fail("panic", why.unwrap_or_default());
            r
        }));
    }
    let took = started.elapsed();
    let load = (load_before, load_average());
    // Every pgrun and guard has exited (each run waited for its own): what
    // is left in the folder is left for good.
    let mut last = RunResult::new(Plan::default());
    for entry in fs::read_dir(&ctx.runs).expect("the runs' folder") {
        let name = entry.expect("a folder entry").file_name().to_string_lossy().into_owned();
        // Reports stay; a run's pid file and marker are checked by its run.
        let run_file = [".json", ".pid", ".pid.cancel"]
            .iter()
            .any(|end| name.strip_suffix(end).is_some_and(|n| n.parse::<usize>().is_ok()));
        if run_file {
            continue;
        }
        last.fail("leftover-file", name);
    }
    let log = fs::read_to_string(scratch.path("canary.log")).unwrap_or_default();
    if is_dead(canary) || !log.is_empty() {
        last.fail("bystander-signalled", format!("canary {canary}: dead {}, signals {log:?}", is_dead(canary)));
    }
    results.push(last);
    let summary = figures(seed, runs, took, &load, &results);
    eprintln!("{summary}");
    let failures = failures(&results);
    // The runs' leftovers are killed (each result holds its run's Guard)
    // before the verdict.
    drop(results);
    assert!(
        failures.is_empty(),
        "load test failed (seed {seed:#x}; replay: PGRUN_LOAD_SEED={seed:#x})\n{failures}\n{summary}"
    );
}

/// The machine's load averages over 1, 5 and 15 minutes (`/proc/loadavg`),
/// for the figures: how busy it was is half of what the latencies say.
fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map_or_else(|_| "unknown".into(), |text| text.split_ascii_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// `PGRUN_LOAD_SEED` (decimal or 0x-hex), else one from the clock.
fn seed() -> u64 {
    if let Ok(text) = std::env::var("PGRUN_LOAD_SEED") {
        let text = text.trim();
        let parsed = match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => text.parse(),
        };
        return parsed.unwrap_or_else(|_| panic!("PGRUN_LOAD_SEED={text:?} is not a number"));
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (now.as_nanos() as u64) ^ u64::from(std::process::id()).rotate_left(32)
}

/// Where the runs keep their files, and what this build can do.
struct Ctx {
    /// Pid files, markers, reports: the folder checked for leftovers.
    runs: PathBuf,
    /// The payloads' logs of their processes.
    pids: PathBuf,
    /// pgrun's stderr (`-v`), one file per run.
    logs: PathBuf,
    /// Tree mode exists (Linux paths): the escapee shape is in the mix.
    tree: bool,
}

impl Ctx {
    fn new(scratch: &Scratch) -> Ctx {
        let folder = |name: &str| {
            let path = scratch.path(name);
            fs::create_dir(&path).expect("a scratch folder");
            path
        };
        Ctx {
            runs: folder("runs"),
            pids: folder("pids"),
            logs: folder("logs"),
            tree: !cfg!(feature = "posix-fallback"),
        }
    }

    /// `now + by`, but never past the test's deadline.
    fn within(&self, by: Duration) -> Instant {
        (Instant::now() + by).min(test_deadline())
    }
}

/// [`LOAD_DEADLINE`] from the first call (the test's start; one load test
/// per process).
fn test_deadline() -> Instant {
    static UNTIL: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *UNTIL.get_or_init(|| Instant::now() + LOAD_DEADLINE)
}

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

/// splitmix64: a small deterministic generator (no rand crate).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn ms(&mut self, max: u64) -> Duration {
        Duration::from_millis(self.below(max + 1))
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, weighted: &[(T, u64)]) -> T {
        let total: u64 = weighted.iter().map(|(_, w)| w).sum();
        let mut at = self.below(total);
        for &(item, weight) in weighted {
            if at < weight {
                return item;
            }
            at -= weight;
        }
        unreachable!("the weights add up to {total}")
    }
}

/// What the command of a run is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
enum Shape {
    /// Exits on its own at once with a code of its own.
    Short,
    /// `exec sleep 300`.
    #[default]
    Plain,
    /// `exec sleep 300` with TERM ignored from its first instruction.
    IgnoresTerm,
    /// A `sleep 300 &` child, and the shell waits.
    BackgroundChild,
    /// A `setsid sleep 300 &` child (it leaves the group), in tree mode.
    Escapee,
}

/// How a run is ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
enum Action {
    /// The command exits by itself (the short shape).
    EndsOnItsOwn,
    /// One `pgrun cancel`.
    #[default]
    Cancel,
    /// Two `pgrun cancel` started together.
    DoubleCancel,
    /// SIGKILL to pgrun: the guard finishes the job.
    Kill,
    /// A cancel, then SIGKILL to pgrun once the cancel has signalled it,
    /// while it waits.
    CancelThenKill,
    /// `--timeout`.
    Timeout,
}

/// Everything drawn from the seed for one run.
#[derive(Clone, Debug, Default)]
struct Plan {
    index: usize,
    shape: Shape,
    action: Action,
    /// Before pgrun starts: spreads the starts a little.
    start_delay: Duration,
    /// From the run's readiness to its ending action.
    action_delay: Duration,
    /// From the cancel to the SIGKILL (`CancelThenKill`).
    kill_delay: Duration,
    /// `--timeout`, in ms (`Timeout`).
    timeout_ms: u64,
    /// The short command's exit code.
    exit_code: i32,
    /// A status call before the action.
    status_before: bool,
    /// Status calls after the action starts, at these offsets.
    status_during: Vec<Duration>,
    /// A `pgrun wait` started before the action.
    wait: bool,
}

/// The plans of `n` runs: every shape with every ending it can have first
/// (so that even the quick version has each), then random ones.
fn plans(seed: u64, n: usize, tree: bool) -> Vec<Plan> {
    use Action::*;
    use Shape::*;
    let mut rng = Rng(seed);
    let endings = |shape: Shape| -> Vec<(Action, u64)> {
        match shape {
            Short => vec![(EndsOnItsOwn, 1)],
            // Out of the guard's reach once pgrun is dead (the contract's
            // tree mode): no SIGKILL of pgrun for a run with an escapee.
            Escapee => vec![(Cancel, 40), (DoubleCancel, 25), (Timeout, 20)],
            _ => vec![(Cancel, 35), (DoubleCancel, 20), (Kill, 15), (CancelThenKill, 15), (Timeout, 15)],
        }
    };
    let mut shapes = vec![(Short, 15), (Plain, 25), (IgnoresTerm, 20), (BackgroundChild, 20)];
    if tree {
        shapes.push((Escapee, 20));
    }
    let mut combos: Vec<(Shape, Action)> =
        shapes.iter().flat_map(|&(s, _)| endings(s).into_iter().map(move |(a, _)| (s, a))).collect();
    combos.truncate(n);
    while combos.len() < n {
        let shape = rng.pick(&shapes);
        combos.push((shape, rng.pick(&endings(shape))));
    }
    combos
        .into_iter()
        .enumerate()
        .map(|(index, (shape, action))| Plan {
            index,
            shape,
            action,
            start_delay: rng.ms(200),
            action_delay: rng.ms(300),
            kill_delay: rng.ms(150),
            timeout_ms: 4000 + rng.below(3001),
            exit_code: [0, 1, 3, 42][rng.below(4) as usize],
            status_before: rng.chance(50),
            status_during: (0..rng.below(3)).map(|_| rng.ms(100)).collect(),
            wait: rng.chance(50),
        })
        .collect()
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

/// A process told apart from any later one with its pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ident {
    pid: i32,
    start: u64,
}

impl Ident {
    fn of(pid: i32) -> Option<Ident> {
        proc_stat(pid).map(|s| Ident { pid, start: s.start })
    }
    /// How it stands, if the pid still names this process (zombie or not).
    fn look(self) -> Option<ProcStat> {
        proc_stat(self.pid).filter(|s| s.start == self.start)
    }
    /// Alive: there and not a zombie.
    fn alive(self) -> bool {
        self.look().is_some_and(|s| s.state != "Z")
    }
}

/// What the test knows of a run's processes.
#[derive(Clone, Debug, Default)]
struct RunIds {
    pgrun: Option<Ident>,
    guard: Option<Ident>,
    /// Every process the payload made (it logs each).
    procs: Vec<Ident>,
    pgid: i32,
    /// pgrun's stderr, which its guard writes to too.
    log: PathBuf,
}

/// What was left of a run at one moment.
#[derive(Debug, Default)]
struct Left {
    /// Each process still there, described.
    found: Vec<String>,
    /// All of them zombies the run's guard gave up on (its line that ends
    /// "giving up"): the command's process, orphaned to init by pgrun's
    /// death, which init had not reaped yet. The contract's one
    /// exception: a zombie pgrun cannot reap is waited for one grace after
    /// the last step, then reported. (This machine's init reaps its
    /// orphans about 1.7 s after they die.)
    excused: bool,
}

impl Left {
    fn is_empty(&self) -> bool {
        self.found.is_empty()
    }
    fn said(&self) -> String {
        self.found.join(", ")
    }
}

impl RunIds {
    /// The run's processes still there in any state (a zombie still holds
    /// the group, and pgrun reaps what is its own before it is over).
    fn left(&self) -> Left {
        let mut zombies = true;
        let mut found = Vec::new();
        for id in &self.procs {
            if let Some(s) = id.look() {
                zombies &= s.state == "Z";
                found.push(format!("process {} (state {}, group {})", id.pid, s.state, s.pgrp));
            }
        }
        let excused = !found.is_empty() && zombies && self.guard_gave_up();
        Left { found, excused }
    }

    /// What says the run is not gone right after a cancel returned: its
    /// pgrun alive, a process of it alive, anything left in its group.
    fn left_after_cancel(&self) -> Left {
        let mut found = Vec::new();
        if let Some(pgrun) = self.pgrun
            && let Some(s) = pgrun.look().filter(|s| s.state != "Z")
        {
            found.push(format!("its pgrun {} was still running (state {})", pgrun.pid, s.state));
        }
        let mut zombies = found.is_empty();
        for id in &self.procs {
            if let Some(s) = id.look()
                && (s.state != "Z" || s.pgrp == self.pgid)
            {
                zombies &= s.state == "Z";
                found.push(format!("process {} of the run was there (state {}, group {})", id.pid, s.state, s.pgrp));
            }
        }
        let excused = !found.is_empty() && zombies && self.guard_gave_up();
        Left { found, excused }
    }

    /// The guard said it gave up on what is left of the run (its one line
    /// that ends "giving up").
    fn guard_gave_up(&self) -> bool {
        fs::read_to_string(&self.log)
            .is_ok_and(|said| said.lines().any(|l| l.starts_with("pgrun: guard: ") && l.ends_with("; giving up")))
    }
}

/// One run's findings: its checks that failed, its figures, and its Guard
/// (whatever it recorded is killed when the result is dropped).
struct RunResult {
    plan: Plan,
    /// The pgrun this test SIGKILLed, if it did.
    killed_pgrun: Option<i32>,
    failed: Vec<(&'static str, String)>,
    /// Each cancel that exited 0: its kind and how long it took.
    latencies: Vec<(&'static str, Duration)>,
    /// The slowest cancel that exited 0: how long, and what it said.
    slowest: Option<(Duration, String)>,
    cancels: usize,
    /// Cancels of a pair that came after the run was over (see
    /// `cancel_late`).
    late_paired: usize,
    /// State answered by each status call.
    states: Vec<String>,
    /// Waits that found the run live, and those that came after it.
    waits_found: usize,
    waits_missed: usize,
    /// Checks passed under the contract's zombie exception (see [`Left`]).
    excused: usize,
    /// Cancels that said 2 after pgrun's SIGKILL (see `check_cancel`).
    cancels_said_2: usize,
    /// Timeouts that fired before the test saw the run ready or found its
    /// guard.
    early_timeouts: usize,
    _guard: Option<Guard>,
}

impl RunResult {
    fn new(plan: Plan) -> RunResult {
        RunResult {
            plan,
            killed_pgrun: None,
            failed: Vec::new(),
            latencies: Vec::new(),
            slowest: None,
            cancels: 0,
            late_paired: 0,
            states: Vec::new(),
            waits_found: 0,
            waits_missed: 0,
            excused: 0,
            cancels_said_2: 0,
            early_timeouts: 0,
            _guard: None,
        }
    }
    fn fail(&mut self, check: &'static str, detail: String) {
        self.failed.push((check, detail));
    }
    /// Fail `check` if something of the run was `left`, unless the
    /// contract's zombie exception covers it.
    fn fail_if_left(&mut self, check: &'static str, left: &Left, detail: String) {
        if left.excused {
            self.excused += 1;
        } else if !left.is_empty() {
            self.fail(check, format!("{detail}: {}", left.said()));
        }
    }
}

/// A command of the test's own (cancel, status, wait) running in the
/// background, reaped by a thread that, the moment it has exited, looks
/// at the run (`at_exit`).
struct Pending<T> {
    pid: i32,
    /// Set the moment its thread has reaped it: its pid is free from then
    /// on, and never signalled.
    reaped: Arc<std::sync::atomic::AtomicBool>,
    what: String,
    done: mpsc::Receiver<Done<T>>,
    /// `wait -v`: a note once it has found the live run and waits for it.
    waiting: Option<mpsc::Receiver<()>>,
}

struct Done<T> {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    took: Duration,
    seen: T,
}

impl<T> Done<T> {
    fn code(&self) -> i32 {
        code_of(self.status)
    }
}

/// Start `cmd` (stdout and stderr piped); the thread that reaps it runs
/// `at_exit` at once and times it from the spawn to its exit. With
/// `watch`, stdout is dropped and stderr read line by line, and the first
/// line containing `watch` is announced on `Pending::waiting`.
fn start<T: Send + 'static>(
    what: String,
    cmd: &mut Command,
    watch: Option<&'static str>,
    at_exit: impl FnOnce() -> T + Send + 'static,
) -> Pending<T> {
    let (tx, done) = mpsc::channel();
    let (note, waiting) = mpsc::channel();
    cmd.stdout(if watch.is_some() { Stdio::null() } else { Stdio::piped() }).stderr(Stdio::piped());
    let began = Instant::now();
    let mut child = cmd.spawn().expect("spawn");
    let pid = child.id() as i32;
    let reaped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reaper = reaped.clone();
    let set_reaped = move || reaper.store(true, std::sync::atomic::Ordering::SeqCst);
    thread::Builder::new()
        .stack_size(128 << 10)
        .spawn(move || {
            let (status, stdout, stderr) = match watch {
                Some(text) => {
                    let mut lines = std::io::BufReader::new(child.stderr.take().expect("piped stderr"));
                    let (mut note, mut said, mut line) = (Some(note), String::new(), String::new());
                    while lines.read_line(&mut line).unwrap_or(0) > 0 {
                        if line.contains(text)
                            && let Some(note) = note.take()
                        {
                            let _ = note.send(());
                        }
                        said.push_str(&line);
                        line.clear();
                    }
                    drop(note);
                    let status = child.wait().expect("wait");
                    set_reaped();
                    (status, String::new(), said)
                }
                None => {
                    drop(note);
                    let out = child.wait_with_output().expect("wait");
                    set_reaped();
                    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
                    (out.status, text(out.stdout), text(out.stderr))
                }
            };
            let took = began.elapsed();
            let seen = at_exit();
            let _ = tx.send(Done { status, stdout, stderr, took, seen });
        })
        .expect("a thread to reap it");
    Pending { pid, reaped, what, done, waiting: watch.map(|_| waiting) }
}

impl<T> Pending<T> {
    /// Its end, or a note that it did not end in time: by the test's
    /// deadline, or 5 s from now if that is later (then it is killed,
    /// unless its thread has reaped it meanwhile).
    fn finish(self) -> Result<Done<T>, String> {
        let until = test_deadline().max(Instant::now() + Duration::from_secs(5));
        match self.done.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(done) => Ok(done),
            Err(_) => {
                if !self.reaped.load(std::sync::atomic::Ordering::SeqCst) {
                    // SAFETY: kill with the pid of the test's own child,
                    // not reaped yet (its thread says so once it has).
                    unsafe { libc::kill(self.pid, libc::SIGKILL) };
                }
                let _ = self.done.recv_timeout(Duration::from_secs(5));
                Err(format!("{} (pid {}) did not end in time: killed", self.what, self.pid))
            }
        }
    }
}

/// The status states the contract has, with the exit status of each.
const STATES: [(&str, i32); 5] =
    [("running", 0), ("stopping", 0), ("stale", 1), ("not-running", 3), ("cancel-pending", 3)];

/// Start `pgrun status --json` on the run; it notes, the moment it exits,
/// which of the run's processes are still there.
fn status_call(pidfile: &Path, ids: &RunIds) -> Pending<Left> {
    let ids = ids.clone();
    let mut cmd = pgrun(["status", "--json", pidfile.to_str().unwrap()]);
    start("pgrun status".into(), &mut cmd, None, move || ids.left())
}

/// Check one status answer against `allowed` (the states the run can be
/// in at that point); `ids` known (not for a short run, whose status may
/// come before its pid file).
fn check_status(r: &mut RunResult, when: &str, allowed: &[&str], ids: Option<&RunIds>, call: Pending<Left>) {
    let run = format!("run {} ({:?}, {:?})", r.plan.index, r.plan.shape, r.plan.action);
    let done = match call.finish() {
        Ok(done) => done,
        Err(e) => return r.fail("status-exit", format!("{run}, {when}: {e}")),
    };
    let answer: serde_json::Value = match serde_json::from_str(done.stdout.trim()) {
        Ok(v) => v,
        Err(_) => {
            let (code, out, err) = (done.code(), &done.stdout, &done.stderr);
            return r.fail("status-answer", format!("{run}, {when}: exit {code}, stdout {out:?}, stderr {err:?}"));
        }
    };
    let state = answer["state"].as_str().unwrap_or("(none)").to_string();
    r.states.push(state.clone());
    let said = format!("{run}, {when}: exit {}, {}", done.code(), done.stdout.trim());
    match STATES.iter().find(|(s, _)| *s == state) {
        None => return r.fail("status-answer", format!("not a state of the contract's: {said}")),
        Some(&(_, code)) if code != done.code() => {
            return r.fail("status-answer", format!("exit status does not go with the state: {said}"));
        }
        _ => {}
    }
    if !allowed.contains(&state.as_str()) {
        r.fail("status-state", format!("{state} is not one of {allowed:?} here: {said}"));
    }
    let Some(ids) = ids else { return };
    if matches!(state.as_str(), "running" | "stopping" | "stale") && answer["pgid"].as_i64() != Some(ids.pgid.into()) {
        r.fail("status-answer", format!("pgid is not the run's {}: {said}", ids.pgid));
    }
    if matches!(state.as_str(), "running" | "stopping")
        && let Some(pgrun) = ids.pgrun
        && answer["pid"].as_i64() != Some(pgrun.pid.into())
    {
        r.fail("status-answer", format!("pid is not the run's pgrun {}: {said}", pgrun.pid));
    }
    if matches!(state.as_str(), "not-running" | "cancel-pending") {
        r.fail_if_left("status-over-while-run-exists", &done.seen, format!("{said}; right after it"));
    }
}

/// The processes of `pgrun`'s threads' children (`/proc/PID/task/*/children`).
fn children(pid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    for task in fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let text = fs::read_to_string(task.path().join("children")).unwrap_or_default();
        found.extend(text.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
    }
    found
}

/// Poll `cond` with backoff (1 ms to 20 ms) until it holds or `until`.
fn poll(until: Instant, mut cond: impl FnMut() -> bool) -> bool {
    let mut pause = Duration::from_millis(1);
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// The payload's shell script: it logs the pid and start time of each
/// process it makes to `log`, then `ready`.
fn payload(shape: Shape, log: &Path, exit_code: i32) -> String {
    let log = log.display();
    let note = format!("note() {{ read -r l < /proc/$1/stat && set -- $l && echo \"$1 ${{22}}\" >> {log}; }}");
    let body = match shape {
        Shape::Short => format!("note $$; echo ready >> {log}; exit {exit_code}"),
        Shape::Plain | Shape::IgnoresTerm => format!("note $$; echo ready >> {log}; exec sleep 300"),
        Shape::BackgroundChild => format!("sleep 300 & note $!; note $$; echo ready >> {log}; wait"),
        Shape::Escapee => format!("setsid sleep 300 & note $!; note $$; echo ready >> {log}; wait"),
    };
    format!("{note}; {body}")
}

/// The processes a payload logged, once it wrote `ready`.
fn logged(log: &Path) -> Option<Vec<Ident>> {
    let text = fs::read_to_string(log).ok()?;
    if !text.ends_with("ready\n") {
        return None;
    }
    let ids = text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(pid, start)| Some(Ident { pid: pid.parse().ok()?, start: start.parse().ok()? }))
        .collect();
    Some(ids)
}

/// What pgrun's exit and report must say for a run stopped by cancel,
/// timeout or the guard: the command's end (143 of TERM, 137 of KILL) and
/// the stop signals sent.
fn stop_end(shape: Shape) -> (i32, &'static str, &'static [&'static str]) {
    match shape {
        Shape::IgnoresTerm => (137, "KILL", &["TERM", "KILL"]),
        _ => (143, "TERM", &["TERM"]),
    }
}

/// One run, start to end, checked all the way.
fn drive(plan: Plan, ctx: &Ctx) -> RunResult {
    let mut r = RunResult::new(plan.clone());
    let mut guard = Guard::new();
    drive_run(&plan, ctx, &mut guard, &mut r);
    r._guard = Some(guard);
    r
}

fn drive_run(plan: &Plan, ctx: &Ctx, guard: &mut Guard, r: &mut RunResult) {
    let i = plan.index;
    let pidfile = ctx.runs.join(format!("{i}.pid"));
    let marker = ctx.runs.join(format!("{i}.pid.cancel"));
    let report = ctx.runs.join(format!("{i}.json"));
    let log = ctx.pids.join(format!("{i}"));
    let errlog = ctx.logs.join(format!("{i}.err"));
    let p = pidfile.to_str().unwrap().to_string();
    thread::sleep(plan.start_delay); // spreads the starts; synchronises nothing
    let grace = if plan.shape == Shape::IgnoresTerm { IGNORED_GRACE } else { TERM_GRACE };
    let timeout = format!("{:.3}", plan.timeout_ms as f64 / 1000.0);
    let mut args = vec!["-v", "-p", &p, "--report", report.to_str().unwrap(), "-k", grace];
    if plan.shape == Shape::Escapee {
        args.extend(["--contain", "tree"]);
    }
    if plan.action == Action::Timeout {
        args.extend(["--timeout", &timeout]);
    }
    let script = payload(plan.shape, &log, plan.exit_code);
    args.extend(["--", "sh", "-c", &script]);
    let mut cmd = pgrun(&args);
    cmd.stdout(Stdio::null()).stderr(fs::File::create(&errlog).expect("a log file"));
    if plan.shape == Shape::IgnoresTerm {
        with_ignored(&mut cmd, libc::SIGTERM);
    }
    let index = guard.spawn(&mut cmd);
    let pgrun_pid = guard.child(index).id() as i32;
    let mut ids = RunIds { pgrun: Ident::of(pgrun_pid), log: errlog.clone(), ..RunIds::default() };
    let pgrun_said = || fs::read_to_string(&errlog).unwrap_or_default();

    if plan.shape == Shape::Short {
        return short_run(plan, ctx, guard, index, &pidfile, &report, &log, r);
    }

    // Published and ready: the pid file names the group, the payload has
    // logged every process, the guard is found.
    let mut exited = None;
    let mut named = None;
    let published = poll(ctx.within(DEADLINE), || {
        exited = guard.child(index).try_wait().ok().flatten();
        if named.is_none() {
            let line = fs::read_to_string(&pidfile).ok().filter(|t| t.ends_with('\n'));
            named = line.and_then(|t| t.trim().parse::<i32>().ok());
        }
        exited.is_some() || (named.is_some() && logged(&log).is_some())
    });
    if let Some(status) = exited.filter(|_| plan.action == Action::Timeout) {
        // The timeout fired before the test saw the run ready (a loaded
        // machine): what is left to check is its end.
        r.early_timeouts += 1;
        if status.code() != Some(124) {
            r.fail("pgrun-exit", format!("run {i} ({:?}, Timeout): {status}, want 124: {}", plan.shape, pgrun_said()));
        }
        let left = RunIds { procs: logged(&log).unwrap_or_default(), ..RunIds::default() }.left();
        if !left.is_empty() {
            r.fail("pgrun-exited-while-run-exists", format!("run {i} (exit {status}): {}", left.said()));
        }
        return;
    }
    if !published || exited.is_some() {
        return r.fail("setup", format!("run {i} not published and ready (exit {exited:?}): {}", pgrun_said()));
    }
    ids.procs = logged(&log).unwrap_or_default();
    for id in &ids.procs {
        // Recorded only while the pid is still that process.
        if id.look().is_some() {
            guard.record(id.pid);
        }
    }
    // The group is the test's to kill on failure only if it is the one
    // the payload's own process leads.
    match named.filter(|&g| g > 1 && ids.procs.iter().any(|id| id.pid == g)) {
        Some(pgid) => {
            ids.pgid = pgid;
            guard.record_group(pgid);
        }
        None => {
            let what = format!("run {i}: the pid file names {named:?}, not the command's process {:?}", ids.procs);
            r.fail("pidfile", what);
            send(pgrun_pid, libc::SIGKILL);
            return;
        }
    }
    let mut keeper = None;
    poll(ctx.within(DEADLINE), || {
        keeper = children(pgrun_pid)
            .into_iter()
            .find(|&c| fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim_end() == "pgrun-guard"));
        keeper.is_some() || !ids.pgrun.is_some_and(Ident::alive)
    });
    ids.guard = keeper.and_then(Ident::of);
    // Only a timeout ends a run before the test acts on it (on a loaded
    // machine it may fire before the test has looked at everything).
    let early = plan.action == Action::Timeout && !ids.pgrun.is_some_and(Ident::alive);
    match ids.guard {
        Some(g) => guard.record(g.pid),
        None if early => r.early_timeouts += 1,
        None => r.fail("setup", format!("run {i}: no guard found under pgrun {pgrun_pid}")),
    }
    if !early {
        check_shape(plan, &ids, ctx, r);
    }

    thread::sleep(plan.action_delay); // when to act: drawn, not a synchronisation
    if plan.status_before {
        let allowed: &[&str] =
            if plan.action == Action::Timeout { &["running", "stopping", "not-running"] } else { &["running"] };
        let call = status_call(&pidfile, &ids);
        check_status(r, "before the action", allowed, Some(&ids), call);
    }
    let killed = matches!(plan.action, Action::Kill | Action::CancelThenKill);
    let waiter = plan.wait.then(|| {
        let mut wargs = vec!["wait", "-v", "--wait-start", "1"];
        if !killed {
            wargs.extend(["--report", report.to_str().unwrap()]);
        }
        wargs.push(&p);
        let ids = ids.clone();
        let call = start("pgrun wait".into(), &mut pgrun(&wargs), Some("waiting for pgrun"), move || ids.left());
        let found = call
            .waiting
            .as_ref()
            .expect("watched")
            .recv_timeout(ctx.within(DEADLINE).saturating_duration_since(Instant::now()))
            .is_ok();
        (call, found)
    });

    // The action.
    let acted = Instant::now();
    let mut cancels = Vec::new();
    let cancel = |paired: bool, watch: Option<&'static str>| {
        let ids = ids.clone();
        let what = if paired { "one of two cancels at once" } else { "pgrun cancel" };
        let mut cmd = pgrun(["cancel", "-v", p.as_str()]);
        (paired, start(what.into(), &mut cmd, watch, move || ids.left_after_cancel()))
    };
    match plan.action {
        Action::Cancel => cancels.push(cancel(false, None)),
        Action::DoubleCancel => {
            cancels.push(cancel(true, None));
            cancels.push(cancel(true, None));
        }
        Action::Kill => {
            r.killed_pgrun = Some(pgrun_pid);
            send(pgrun_pid, libc::SIGKILL);
        }
        Action::CancelThenKill => {
            // Once the cancel has found the run live and asked its pgrun
            // to stop, at a drawn moment of the stop: SIGKILL.
            let (paired, call) = cancel(false, Some("sending TERM to pgrun"));
            if call
                .waiting
                .as_ref()
                .expect("watched")
                .recv_timeout(ctx.within(DEADLINE).saturating_duration_since(Instant::now()))
                .is_err()
            {
                r.fail("cancel-exit", format!("run {i}: the cancel ended or hung before it signalled pgrun"));
            }
            cancels.push((paired, call));
            thread::sleep(plan.kill_delay); // drawn: anywhere in the stop
            r.killed_pgrun = Some(pgrun_pid);
            send(pgrun_pid, libc::SIGKILL);
        }
        Action::Timeout | Action::EndsOnItsOwn => {}
    }

    // The run's end: pgrun exits (or is killed and its guard finishes),
    // the pid file goes (never before the run), status calls meanwhile.
    let during: &[&str] = match plan.action {
        Action::Cancel | Action::DoubleCancel => &["running", "stopping", "not-running", "cancel-pending"],
        Action::Timeout => &["running", "stopping", "not-running"],
        Action::Kill => &["running", "stale", "not-running"],
        _ => &["running", "stopping", "stale", "not-running", "cancel-pending"],
    };
    let mut probes: Vec<Instant> = plan.status_during.iter().map(|d| acted + *d).collect();
    probes.sort();
    let mut calls = Vec::new();
    let mut exit: Option<ExitStatus> = None;
    let mut pidfile_gone = false;
    let settled = poll(ctx.within(Duration::from_secs(60)), || {
        while probes.first().is_some_and(|t| Instant::now() >= *t) {
            probes.remove(0);
            calls.push(status_call(&pidfile, &ids));
        }
        if exit.is_none() {
            exit = guard.child(index).try_wait().ok().flatten();
            if let Some(status) = exit
                && status.signal() != Some(libc::SIGKILL)
            {
                // pgrun ends only once its run is gone, and reaps its guard.
                let mut left = ids.left().found;
                if let Some(g) = ids.guard.filter(|g| g.look().is_some()) {
                    left.push(format!("its guard {}", g.pid));
                }
                if !left.is_empty() {
                    r.fail("pgrun-exited-while-run-exists", format!("run {i} (exit {status}): {}", left.join(", ")));
                }
            }
        }
        if !pidfile_gone && fs::symlink_metadata(&pidfile).is_err() {
            pidfile_gone = true;
            let left = ids.left();
            let log = pgrun_said().replace('\n', " | ");
            if left.excused {
                r.excused += 1;
            } else if !left.is_empty() {
                let what = format!("run {i} ({:?}, {:?}): {}; pgrun said: {log}", plan.shape, plan.action, left.said());
                r.fail("pidfile-removed-while-run-exists", what);
            }
        }
        exit.is_some()
            && pidfile_gone
            && !ids.guard.is_some_and(Ident::alive)
            && !ids.procs.iter().any(|id| id.alive())
            && probes.is_empty()
    });
    if !settled {
        let mut left: Vec<String> =
            ids.procs.iter().filter(|id| id.alive()).map(|id| format!("process {}", id.pid)).collect();
        if exit.is_none() {
            left.push(format!("pgrun {pgrun_pid}"));
        }
        if ids.guard.is_some_and(Ident::alive) {
            left.push("the guard".into());
        }
        if !pidfile_gone {
            left.push("the pid file".into());
        }
        let what = format!("run {i} ({:?}, {:?}): {}", plan.shape, plan.action, left.join(", "));
        r.fail("not-over-in-time", format!("{what}; pgrun said: {}", pgrun_said()));
    }
    for call in calls {
        check_status(r, "during the stop", during, Some(&ids), call);
    }
    let mut cancels_said = Vec::new();
    let mut late = 0;
    for (paired, call) in cancels {
        let (said, came_late) = check_cancel(r, plan, paired, call);
        cancels_said.push(said);
        late += usize::from(came_late);
    }
    if plan.action == Action::DoubleCancel && late == 2 {
        r.fail(
            "cancel-exit",
            format!("run {i}: both cancels came after the run, which only they could end: {cancels_said:?}"),
        );
    }
    // pgrun and its guard are gone, and every cancel has returned: a file
    // of the run's still there is there for good.
    let mut marker_left = false;
    for path in [&pidfile, &marker] {
        if fs::symlink_metadata(path).is_ok() {
            marker_left |= path == &marker;
            let what = format!("{} ({:?}, {:?})", path.display(), plan.shape, plan.action);
            r.fail("leftover-file", format!("{what}; cancels said: {cancels_said:?}; pgrun said: {}", pgrun_said()));
        }
    }
    let (code, signal, signals) = stop_end(plan.shape);
    let by_kill = exit.is_some_and(|s| s.signal() == Some(libc::SIGKILL));
    let want_code = if plan.action == Action::Timeout { 124 } else { code };
    match (plan.action, exit) {
        (_, None) => {}
        (Action::Kill, Some(s)) if !by_kill => r.fail("pgrun-exit", format!("run {i}: SIGKILLed, yet {s}")),
        (Action::Kill | Action::CancelThenKill, Some(_)) if by_kill => {}
        (_, Some(s)) if s.code() != Some(want_code) => {
            let what = format!("run {i} ({:?}, {:?}): {s}, want {want_code}", plan.shape, plan.action);
            r.fail("pgrun-exit", format!("{what}: {}", pgrun_said()));
        }
        _ => {}
    }
    if let Some((call, found)) = waiter {
        check_wait(r, plan, call, found, exit.filter(|_| !by_kill).and_then(|s| s.code()));
    }
    // The report: none after a SIGKILL (a cancel's may have come first).
    match fs::read_to_string(&report) {
        Err(_) if by_kill || exit.is_none() => {}
        Err(e) => r.fail("report", format!("run {i}: no report: {e}")),
        Ok(_) if plan.action == Action::Kill => r.fail("report", format!("run {i}: a report from a SIGKILLed pgrun")),
        Ok(text) => {
            let reason = if plan.action == Action::Timeout { "timeout" } else { "cancelled" };
            check_report(r, plan, &text, &ids, (want_code, reason, Some(signal), signals));
            if let Some((_, said)) = &mut r.slowest {
                // Where the time went, for the figures: pgrun's own account.
                let rep: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                said.push_str(&format!("; report: signals {}, duration_ms {}", rep["signals"], rep["duration_ms"]));
            }
        }
    }
    // The zombies a SIGKILLed pgrun's run leaves go to init, which reaps
    // them in its own time: the last answer is judged once they are gone.
    let reaped = poll(ctx.within(Duration::from_secs(15)), || ids.left().is_empty());
    let call = status_call(&pidfile, &ids);
    // A marker left behind (noted above) is a request (cancel-pending) or
    // a stopping note nobody removed (not-running).
    let last: &[&str] = if marker_left { &["not-running", "cancel-pending"] } else { &["not-running"] };
    check_status(r, "after the end", last, reaped.then_some(&ids), call);
}

/// A short run: it ends on its own, perhaps under a status call and a
/// wait.
#[allow(clippy::too_many_arguments)]
fn short_run(
    plan: &Plan,
    ctx: &Ctx,
    guard: &mut Guard,
    index: usize,
    pidfile: &Path,
    report: &Path,
    log: &Path,
    r: &mut RunResult,
) {
    let i = plan.index;
    let p = pidfile.to_str().unwrap();
    let status = plan.status_before.then(|| status_call(pidfile, &RunIds::default()));
    let waiter = plan.wait.then(|| {
        let mut cmd = pgrun(["wait", "-v", "--wait-start", "1", "--report", report.to_str().unwrap(), p]);
        start("pgrun wait".into(), &mut cmd, Some("waiting for pgrun"), Left::default)
    });
    let mut exit = None;
    if !poll(ctx.within(DEADLINE), || {
        exit = guard.child(index).try_wait().ok().flatten();
        exit.is_some()
    }) {
        return r.fail("not-over-in-time", format!("short run {i} did not end"));
    }
    let exit = exit.expect("polled");
    let procs = logged(log).unwrap_or_default();
    let ids = RunIds { pgid: procs.first().map_or(0, |id| id.pid), procs, ..RunIds::default() };
    let left = ids.left();
    if !left.is_empty() {
        r.fail("pgrun-exited-while-run-exists", format!("short run {i}: {}", left.said()));
    }
    if exit.code() != Some(plan.exit_code) {
        r.fail("pgrun-exit", format!("short run {i}: {exit}, want {}", plan.exit_code));
    }
    for path in [pidfile.to_path_buf(), PathBuf::from(format!("{p}.cancel"))] {
        if fs::symlink_metadata(&path).is_ok() {
            r.fail("leftover-file", format!("{} after pgrun exited", path.display()));
        }
    }
    if let Some(call) = status {
        check_status(r, "of a short run", &["running", "not-running"], None, call);
    }
    if let Some(call) = waiter {
        // It may have found the run live, or come after it (then it waits
        // `--wait-start` for one and says 1).
        let found = call
            .waiting
            .as_ref()
            .expect("watched")
            .recv_timeout(ctx.within(DEADLINE).saturating_duration_since(Instant::now()))
            .is_ok();
        check_wait(r, plan, call, found, Some(plan.exit_code));
    }
    match fs::read_to_string(report) {
        Ok(text) => check_report(r, plan, &text, &ids, (plan.exit_code, "exited", None, &[])),
        Err(e) => r.fail("report", format!("short run {i}: no report: {e}")),
    }
    let call = status_call(pidfile, &ids);
    check_status(r, "after the end", &["not-running"], Some(&ids), call);
}

/// The payloads really are what they claim: the TERM-ignoring command
/// ignores TERM, the escapee has left the group for a session of its own.
fn check_shape(plan: &Plan, ids: &RunIds, ctx: &Ctx, r: &mut RunResult) {
    let i = plan.index;
    // A timeout may end the run while the test looks.
    let ended = || plan.action == Action::Timeout && !ids.pgrun.is_some_and(Ident::alive);
    match plan.shape {
        Shape::IgnoresTerm => {
            let status = fs::read_to_string(format!("/proc/{}/status", ids.pgid)).unwrap_or_default();
            let ignored = status
                .lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
                .is_some_and(|mask| mask & (1 << (libc::SIGTERM - 1)) != 0);
            if !ignored && !ended() {
                r.fail("setup", format!("run {i}: the command {} does not ignore TERM", ids.pgid));
            }
        }
        Shape::Escapee => {
            let escapee = ids.procs.iter().copied().find(|id| id.pid != ids.pgid);
            let escaped = escapee.is_some_and(|id| {
                poll(ctx.within(DEADLINE), || id.look().is_none_or(|s| s.session == id.pid && s.pgrp == id.pid))
                    && id.alive()
            });
            if !escaped && !ended() {
                r.fail("setup", format!("run {i}: no escapee in a session of its own: {escapee:?}"));
            }
        }
        _ => {}
    }
}

/// A cancel's exit and what was there right after it: 0 only once the run
/// is gone. One of two cancels started together that came after the run
/// was over (its `-v` lines: it made the marker itself and never saw the
/// run's pid file; its twin had ended the run by then) is not a cancel of
/// a run being stopped: it is counted, and may say 1 ("no live run"). Any
/// cancel that saw the run, its pid file or its twin's marker must say 0.
/// Returns what it said, for the record, and whether it came late.
fn check_cancel(r: &mut RunResult, plan: &Plan, paired: bool, call: Pending<Left>) -> (String, bool) {
    let i = plan.index;
    let what = format!("run {i} ({:?}, {:?})", plan.shape, plan.action);
    r.cancels += 1;
    let done = match call.finish() {
        Ok(done) => done,
        Err(e) => {
            r.fail("cancel-exit", format!("{what}: {e}"));
            return (e, false);
        }
    };
    let took = done.took.as_millis();
    let said = format!("exit {} after {took} ms: {}", done.code(), done.stderr.trim().replace('\n', " | "));
    let late = paired && cancel_late(&done.stderr);
    r.late_paired += usize::from(late);
    // 2 is the contract's answer for a group still there 1 s after the
    // SIGKILL that cancel sent itself (it stops the group when pgrun died
    // without withdrawing its record): a zombie init has not reaped yet
    // holds it, or on a loaded machine a member not yet scheduled to die.
    // Only the cancel saw it; it is counted.
    let outlived_kill = plan.action == Action::CancelThenKill
        && done.code() == 2
        && done.stderr.contains("still alive 1s after SIGKILL");
    if outlived_kill {
        r.cancels_said_2 += 1;
        return (said, late);
    }
    if done.code() != 0 {
        if !(late && done.code() == 1) {
            r.fail(if paired { "double-cancel-exit" } else { "cancel-exit" }, format!("{what}: {said}"));
        }
        return (said, late);
    }
    let kind = match (plan.action, plan.shape, paired) {
        (Action::CancelThenKill, ..) => "cancel, then SIGKILL of pgrun",
        (_, _, true) => "one of two at once",
        (_, Shape::IgnoresTerm, _) => "TERM ignored (-k 1)",
        _ => "TERM ends the run",
    };
    r.latencies.push((kind, done.took));
    if r.slowest.as_ref().is_none_or(|(t, _)| *t < done.took) {
        r.slowest = Some((done.took, format!("{what}, {kind}: {said}")));
    }
    let pgrun_running = done.seen.found.iter().filter(|s| s.starts_with("its pgrun")).cloned().collect::<Vec<_>>();
    // Without pidfds (the portable path) cancel can only see pgrun let go
    // of a lock, which its exit does a moment before it is a zombie (and
    // a SIGKILLed pgrun at once): the man page says so.
    if !pgrun_running.is_empty() && !cfg!(feature = "posix-fallback") {
        r.fail("cancel-before-pgrun-exit", format!("{what}: {}; cancel {said}", pgrun_running.join(", ")));
    }
    let rest =
        Left { found: done.seen.found.iter().filter(|s| !s.starts_with("its pgrun")).cloned().collect(), ..done.seen };
    r.fail_if_left("cancel-before-run-gone", &rest, format!("{what}, after {took} ms"));
    (said, late)
}

/// A cancel that arrived after the run was over: it created the marker
/// itself and never found the run, its pid file or its pgrun (its `-v`
/// lines).
fn cancel_late(stderr: &str) -> bool {
    let saw_run = [
        "already there",
        "a run is starting",
        "stale pid file",
        "sending TERM",
        "ended while cancel looked",
        "withdrawn the run",
        "withdrew its record",
        "waiting for pgrun",
        "has exited",
    ];
    stderr.contains(" created") && stderr.contains("no run at") && !saw_run.iter().any(|s| stderr.contains(s))
}

/// A wait's exit and what was there right after it. `run_code`: the
/// run's own exit status when the wait was given `--report` and pgrun
/// exited (not SIGKILLed).
fn check_wait(r: &mut RunResult, plan: &Plan, call: Pending<Left>, found: bool, run_code: Option<i32>) {
    let i = plan.index;
    let may_miss = matches!(plan.action, Action::Timeout | Action::EndsOnItsOwn);
    let done = match call.finish() {
        Ok(done) => done,
        Err(e) => return r.fail("wait-exit", format!("run {i}: {e}")),
    };
    let said = done.stderr.trim().replace('\n', " | ");
    if !found {
        r.waits_missed += 1;
        // A run over before the wait looked: with --report naming the pid
        // file, wait answers at once with the run's own status; without
        // one, 1 (no run).
        let by_report = said.contains("its report says it is over");
        let wrong =
            if by_report { done.code() == 125 || run_code.is_some_and(|w| w != done.code()) } else { done.code() != 1 };
        if !may_miss {
            r.fail("wait-missed-live-run", format!("run {i}: exit {}: {said}", done.code()));
        } else if wrong {
            r.fail("wait-exit", format!("run {i}: no live run found, yet exit {}: {said}", done.code()));
        }
        return;
    }
    r.waits_found += 1;
    let killed = matches!(plan.action, Action::Kill | Action::CancelThenKill);
    let want = if killed { Some(0) } else { run_code };
    if want.is_some_and(|w| w != done.code()) {
        r.fail(
            "wait-exit",
            format!("run {i} ({:?}, {:?}): exit {}, want {want:?}: {said}", plan.shape, plan.action, done.code()),
        );
    }
    // Any answer but "no run" (1) and an error (125) says the run is over.
    if !matches!(done.code(), 1 | 125) {
        let what = format!("run {i} ({:?}, {:?}): exit {}", plan.shape, plan.action, done.code());
        r.fail_if_left("wait-before-run-gone", &done.seen, what);
    }
}

/// The report as contracted for what was done to the run: `want` is the
/// exit code, the reason, the signal that ended the command (None: it
/// exited) and the stop signals sent.
fn check_report(r: &mut RunResult, plan: &Plan, text: &str, ids: &RunIds, want: (i32, &str, Option<&str>, &[&str])) {
    let i = plan.index;
    let (code, reason, signal, signals) = want;
    let mut wrong = Vec::new();
    let Ok(rep) = serde_json::from_str::<serde_json::Value>(text) else {
        return r.fail("report", format!("run {i}: not JSON: {text:?}"));
    };
    let int = |key: &str| rep[key].as_u64();
    if rep["exit_code"].as_i64() != Some(code.into()) {
        wrong.push(format!("exit_code, want {code}"));
    }
    if rep["reason"] != reason {
        wrong.push(format!("reason, want {reason}"));
    }
    let ended = match signal {
        Some(s) => rep["status"]["signal"] == s && rep["status"]["code"].is_null(),
        None => rep["status"]["code"].as_i64() == Some(code.into()) && rep["status"]["signal"].is_null(),
    };
    if !ended {
        wrong.push(format!("status, want {}", signal.map_or(format!("code {code}"), |s| format!("signal {s}"))));
    }
    if rep["pgid"].as_i64() != Some(ids.pgid.into()) {
        wrong.push(format!("pgid, want {}", ids.pgid));
    }
    let sent: Vec<&str> =
        rep["signals"].as_array().into_iter().flatten().filter_map(|s| s["signal"].as_str()).collect();
    let at: Vec<Option<u64>> = rep["signals"].as_array().into_iter().flatten().map(|s| s["at_ms"].as_u64()).collect();
    if sent != signals {
        // Where TERM should have ended everything, a KILL means something
        // of the run outlived TERM by the whole grace.
        let check = if signals == ["TERM"] && sent == ["TERM", "KILL"] { "report-kill-needed" } else { "report" };
        let log = fs::read_to_string(&ids.log).unwrap_or_default().replace('\n', " | ");
        let what = format!(
            "run {i} ({:?}, {:?}): signals {sent:?}, want {signals:?}: {text}; pgrun said: {log}",
            plan.shape, plan.action
        );
        r.fail(check, what);
    }
    let duration = int("duration_ms");
    if at.iter().any(Option::is_none) || at.windows(2).any(|w| w[0] > w[1]) || at.last().copied().flatten() > duration {
        wrong.push("signals' at_ms (integers, in order, within duration_ms)".into());
    }
    if plan.action == Action::Timeout && at.first().copied().flatten().is_some_and(|t| t + 1 < plan.timeout_ms) {
        wrong.push(format!("the first signal before the timeout of {} ms", plan.timeout_ms));
    }
    let stragglers_max = u64::from(matches!(plan.shape, Shape::BackgroundChild | Shape::Escapee));
    if int("stragglers").is_none_or(|n| n > stragglers_max) {
        wrong.push(format!("stragglers, want at most {stragglers_max}"));
    }
    if int("unreaped") != Some(0) {
        wrong.push("unreaped, want 0".into());
    }
    let escaped = u64::from(plan.shape == Shape::Escapee && plan.action != Action::EndsOnItsOwn);
    if int("escaped") != Some(escaped) {
        wrong.push(format!("escaped, want {escaped}"));
    }
    let mode = if plan.shape == Shape::Escapee || !cfg!(feature = "posix-fallback") { "tree" } else { "group" };
    if rep["contain"] != mode {
        wrong.push(format!("contain, want {mode}"));
    }
    if duration.is_none() {
        wrong.push("duration_ms, want an integer".into());
    }
    if !wrong.is_empty() {
        r.fail("report", format!("run {i} ({:?}, {:?}): {}: {text}", plan.shape, plan.action, wrong.join("; ")));
    }
}

/// The checks that failed, each with its count and its first few cases.
fn failures(results: &[RunResult]) -> String {
    let mut by_check: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
    for (check, detail) in results.iter().flat_map(|r| &r.failed) {
        by_check.entry(check).or_default().push(detail);
    }
    let mut text = String::new();
    for (check, details) in by_check {
        text.push_str(&format!("{check}: {} time(s)\n", details.len()));
        let shown = if std::env::var_os("PGRUN_LOAD_ALL").is_some() { details.len() } else { 4 };
        for detail in details.iter().take(shown) {
            text.push_str(&format!("    {detail}\n"));
        }
    }
    text
}

/// The figures: what was run, what was done, the cancels' latency.
fn figures(seed: u64, runs: usize, took: Duration, load: &(String, String), results: &[RunResult]) -> String {
    let count = |f: &dyn Fn(&RunResult) -> usize| results.iter().map(f).sum::<usize>();
    let mut shapes: BTreeMap<String, usize> = BTreeMap::new();
    let mut actions: BTreeMap<String, usize> = BTreeMap::new();
    let mut states: BTreeMap<&str, usize> = BTreeMap::new();
    for r in results.iter().take(runs) {
        *shapes.entry(format!("{:?}", r.plan.shape)).or_default() += 1;
        *actions.entry(format!("{:?}", r.plan.action)).or_default() += 1;
        for s in &r.states {
            *states.entry(s).or_default() += 1;
        }
    }
    let list = |m: &BTreeMap<String, usize>| m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
    let mut text = format!(
        "load test: seed {seed:#x}, {runs} runs at once, over in {:.1} s\n\
         load average (1, 5, 15 min): {} before, {} after\n\
         shapes: {}\nendings: {}\n",
        took.as_secs_f64(),
        load.0,
        load.1,
        list(&shapes),
        list(&actions)
    );
    let statuses: usize = states.values().sum();
    let states = states.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
    text.push_str(&format!(
        "calls: cancel {} (one of two at once that came after the run: {}), status {statuses} ({states}), wait {} (found the run live {}, came after it {})\n",
        count(&|r| r.cancels),
        count(&|r| r.late_paired),
        count(&|r| r.waits_found + r.waits_missed),
        count(&|r| r.waits_found),
        count(&|r| r.waits_missed),
    ));
    let mut kinds: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    for (kind, took) in results.iter().flat_map(|r| &r.latencies) {
        kinds.entry("all").or_default().push(*took);
        kinds.entry(kind).or_default().push(*took);
    }
    text.push_str("cancel latency, from the call to its exit 0 (ms):\n");
    for (kind, mut took) in kinds {
        took.sort();
        let q =
            |p: f64| took[((took.len() as f64 * p).ceil() as usize).clamp(1, took.len()) - 1].as_secs_f64() * 1000.0;
        text.push_str(&format!(
            "    {kind}: n {}, p50 {:.1}, p95 {:.1}, p99 {:.1}, max {:.1}\n",
            took.len(),
            q(0.50),
            q(0.95),
            q(0.99),
            q(1.0)
        ));
    }
    text.push_str(&format!(
        "checks passed under the contract's zombie exception (init had not yet reaped the command pgrun's SIGKILL orphaned; the guard gave up waiting for its reaping): {}\n",
        count(&|r| r.excused)
    ));
    text.push_str(&format!(
        "cancels that said 2 (the group still there 1 s after their SIGKILL, pgrun SIGKILLed): {}\n",
        count(&|r| r.cancels_said_2)
    ));
    text.push_str(&format!(
        "timeouts that fired before the test saw the run ready or found its guard: {}\n",
        count(&|r| r.early_timeouts)
    ));
    let mut slowest: Vec<_> = results.iter().filter_map(|r| r.slowest.as_ref()).collect();
    slowest.sort_by_key(|s| std::cmp::Reverse(s.0));
    for (_, said) in slowest.iter().take(3) {
        text.push_str(&format!("slow cancel: {said}\n"));
    }
    let failed = count(&|r| r.failed.len());
    text.push_str(&format!("failed checks: {failed}"));
    text
}

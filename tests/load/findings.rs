//! What the test found: each run's failed checks and figures, and how
//! they are told at the end (the failures, the figures).

use super::*;

/// One run's findings: its checks that failed, its figures, and its Guard
/// (whatever it recorded is killed when the result is dropped).
pub(super) struct RunResult {
    pub(super) plan: Plan,
    /// The pgrun this test SIGKILLed, if it did.
    pub(super) killed_pgrun: Option<i32>,
    pub(super) failed: Vec<(&'static str, String)>,
    /// Each cancel that exited 0: its kind and how long it took.
    pub(super) latencies: Vec<(&'static str, Duration)>,
    /// The slowest cancel that exited 0: how long, and what it said.
    pub(super) slowest: Option<(Duration, String)>,
    pub(super) cancels: usize,
    /// Cancels of a pair that came after the run was over (see
    /// `cancel_late`).
    pub(super) late_paired: usize,
    /// State answered by each status call.
    pub(super) states: Vec<String>,
    /// Waits that found the run live, and those that came after it.
    pub(super) waits_found: usize,
    pub(super) waits_missed: usize,
    /// Checks passed under the contract's zombie exception (see [`Left`]).
    pub(super) excused: usize,
    /// Cancels that said 2 after pgrun's SIGKILL (see `check_cancel`).
    pub(super) cancels_said_2: usize,
    /// Timeouts that fired before the test saw the run ready or found its
    /// guard.
    pub(super) early_timeouts: usize,
    pub(super) _guard: Option<Guard>,
}

impl RunResult {
    pub(super) fn new(plan: Plan) -> RunResult {
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
    pub(super) fn fail(&mut self, check: &'static str, detail: String) {
        self.failed.push((check, detail));
    }
    /// Fail `check` if something of the run was `left`, unless the
    /// contract's zombie exception covers it.
    pub(super) fn fail_if_left(&mut self, check: &'static str, left: &Left, detail: String) {
        if left.excused {
            self.excused += 1;
        } else if !left.is_empty() {
            self.fail(check, format!("{detail}: {}", left.said()));
        }
    }
}

/// The checks that failed, each with its count and its first few cases.
pub(super) fn failures(results: &[RunResult]) -> String {
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
pub(super) fn figures(
    seed: u64,
    runs: usize,
    took: Duration,
    load: &(String, String),
    results: &[RunResult],
) -> String {
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

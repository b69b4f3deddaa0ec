//! The standing fault-injection sweep (issue 18): record the syscalls of
//! representative pgrun runs, replay each with one syscall failing, and
//! check that pgrun still keeps its contract. See README.md in this folder.
//!
//! Its own driver (no libtest): one summary of every case, with the known
//! injection artifacts (`allowed.txt`) and the defects being fixed
//! (`expected-failures.txt`) counted as such, never as passes. It fails on
//! any other failing case, and on an expected failure none of whose cases
//! fails any more (remove it: the fix has landed).

mod case;
mod lists;
mod matrix;
mod procs;
mod scenario;

use case::{Env, Injection, Outcome};
use lists::{CaseId, Rule};
use scenario::{SCENARIOS, Scenario};
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;
use std::{env, fs, thread};

struct Settings {
    full: bool,
    seed: u64,
    jobs: usize,
    only: Option<Vec<Rule>>,
    per_syscall: usize,
    full_when: u32,
}

fn var(name: &str) -> Option<String> {
    env::var(name).ok().filter(|s| !s.is_empty())
}

fn settings(dir: &Path) -> Settings {
    let only = var("PGRUN_FAULTS_ONLY").map(|pats| {
        let text: String = pats.split_whitespace().map(|p| format!("allow {p} * (selected)\n")).collect();
        let tmp = std::env::temp_dir().join(format!("pgrun-faults-only-{}", std::process::id()));
        fs::write(&tmp, text).expect("write the selection");
        let rules = lists::load(&tmp, true);
        let _ = fs::remove_file(tmp);
        rules
    });
    let _ = dir;
    Settings {
        full: var("PGRUN_FAULTS_FULL").is_some_and(|v| v != "0"),
        seed: var("PGRUN_FAULTS_SEED").map(|s| s.parse().expect("PGRUN_FAULTS_SEED: a number")).unwrap_or(18),
        jobs: var("PGRUN_FAULTS_JOBS").map(|s| s.parse().expect("PGRUN_FAULTS_JOBS: a number")).unwrap_or(2),
        only,
        per_syscall: 2,
        full_when: var("PGRUN_FAULTS_WHEN").map(|s| s.parse().expect("PGRUN_FAULTS_WHEN: a number")).unwrap_or(8),
    }
}

/// Whether the cgroup scenario can run: a writable cgroup2 hierarchy, or a
/// declared skip (as the suite's `PGRUN_TEST_SKIP_CGROUP2`).
fn cgroup_folder() -> Result<Option<PathBuf>, String> {
    let probe = || -> Result<PathBuf, String> {
        let info = fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
        let (root, point) = info
            .lines()
            .find_map(|l| {
                let (left, right) = l.split_once(" - ")?;
                let f: Vec<&str> = left.split(' ').collect();
                (right.split(' ').next() == Some("cgroup2")).then(|| (f[3].to_string(), f[4].to_string()))
            })
            .ok_or("no cgroup2 file system is mounted")?;
        let own = fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
        let own = own.lines().find_map(|l| l.strip_prefix("0::")).ok_or("no cgroup v2 line in /proc/self/cgroup")?;
        let rel = own.strip_prefix(root.trim_end_matches('/')).ok_or("own cgroup outside the mount")?;
        let folder = PathBuf::from(point).join(rel.trim_start_matches('/'));
        let test = folder.join(format!("faults-probe-{}", std::process::id()));
        fs::create_dir(&test).map_err(|e| format!("cannot create a cgroup under {}: {e}", folder.display()))?;
        let _ = fs::remove_dir(&test);
        Ok(folder)
    };
    match probe() {
        Ok(folder) => Ok(Some(folder)),
        Err(why) => match var("PGRUN_TEST_SKIP_CGROUP2") {
            Some(reason) => {
                println!("skipped: the cgroup scenario ({why}): {reason}");
                Ok(None)
            }
            None => Err(format!(
                "the cgroup scenario needs a writable cgroup2 hierarchy ({why}); \
                 declare a skip with PGRUN_TEST_SKIP_CGROUP2=<reason>"
            )),
        },
    }
}

/// The pgrun under test: the debug build, statically linked, so that no
/// dynamic loader runs before `main`. The loader's own reads, opens, closes
/// and fstats would otherwise take the first numbers of strace's per-process
/// count in pgrun's process, and an injection meant for the first `read` of
/// the guard (a fork, counted from 1) would fail the loader instead. Built
/// here into `target/faults-static` (`PGRUN_FAULTS_BIN=PATH` takes another
/// binary; where no static C library exists, the dynamic debug binary is
/// used, and the loader's failures are counted as artifacts).
fn static_pgrun() -> PathBuf {
    if let Some(bin) = var("PGRUN_FAULTS_BIN") {
        return PathBuf::from(bin);
    }
    let dynamic = PathBuf::from(env!("CARGO_BIN_EXE_pgrun"));
    let host = Command::new("rustc")
        .arg("-vV")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|t| t.lines().find_map(|l| l.strip_prefix("host: ").map(str::to_string)));
    let Some(host) = host else {
        println!("faults: `rustc -vV` names no host; using the dynamic binary {}", dynamic.display());
        return dynamic;
    };
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target_dir = manifest.join("target/faults-static");
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    println!("faults: building a statically linked debug pgrun in {}", target_dir.display());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--bin", "pgrun", "--target", &host, "--target-dir"])
        .arg(&target_dir)
        .arg("--manifest-path")
        .arg(manifest.join("Cargo.toml"))
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status();
    let bin = target_dir.join(&host).join("debug/pgrun");
    match status {
        Ok(s) if s.success() && bin.exists() => bin,
        _ => {
            println!(
                "faults: no static build ({status:?}); using the dynamic binary {}: the loader's syscalls \
                 mask the first calls of the guard and the child",
                dynamic.display()
            );
            dynamic
        }
    }
}

/// How one case ended, as the summary counts it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Verdict {
    Pass,
    /// Every violation is a known injection artifact.
    Allowed,
    /// Every violation is allowed or an expected failure, at least one expected.
    Expected,
    Fail,
}

struct Done {
    scn: &'static Scenario,
    inj: Injection,
    outcome: Outcome,
    verdict: Verdict,
    /// For each violation, the rule that covers it (allowed/expected).
    rules: Vec<Option<(bool, usize)>>,
}

fn classify(
    id: &CaseId,
    outcome: &Outcome,
    allowed: &[Rule],
    expected: &[Rule],
) -> (Verdict, Vec<Option<(bool, usize)>>) {
    if outcome.violations.is_empty() {
        return (Verdict::Pass, Vec::new());
    }
    let rules: Vec<Option<(bool, usize)>> = outcome
        .violations
        .iter()
        .map(|(kind, _)| {
            if let Some(i) = expected.iter().position(|r| r.covers(id, kind)) {
                Some((true, i))
            } else {
                allowed.iter().position(|r| r.tag == "allow" && r.covers(id, kind)).map(|i| (false, i))
            }
        })
        .collect();
    let verdict = if rules.iter().any(Option::is_none) {
        Verdict::Fail
    } else if rules.iter().any(|r| r.is_some_and(|(exp, _)| exp)) {
        Verdict::Expected
    } else {
        Verdict::Allowed
    };
    (verdict, rules)
}

fn main() {
    let started = Instant::now();
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/faults");
    if Command::new("strace").arg("-V").output().is_err() {
        eprintln!("faults: strace is not installed (apt-get install strace): the sweep needs it");
        std::process::exit(1);
    }
    let s = settings(&here);
    let allowed = lists::load(&here.join("allowed.txt"), true);
    let expected = lists::load(&here.join("expected-failures.txt"), false);
    let cgroup = match cgroup_folder() {
        Ok(c) => c,
        Err(why) => {
            eprintln!("faults: {why}");
            std::process::exit(1);
        }
    };
    let mut bystander = Command::new("sleep");
    std::os::unix::process::CommandExt::process_group(bystander.arg("100000"), 0);
    let env = Env {
        pgrun: static_pgrun(),
        cgroup,
        bystander: Mutex::new(bystander.spawn().expect("cannot start the bystander")),
        counter: AtomicUsize::new(0),
    };
    println!(
        "faults: {} sweep, seed {}, {} jobs (PGRUN_FAULTS_FULL=1 for the whole matrix)",
        if s.full { "full" } else { "sampled" },
        s.seed,
        s.jobs
    );

    // Record each scenario once, uninjected: its syscalls, and its output.
    let mut queue = VecDeque::new();
    let mut baselines: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
    let mut baseline_failures = Vec::new();
    for scn in SCENARIOS {
        if scn.cgroup && env.cgroup.is_none() {
            continue;
        }
        let outcome = case::run(&env, scn, None, None);
        if !outcome.violations.is_empty() {
            baseline_failures
                .push(format!("{}: uninjected run fails: {:?}\n{}", scn.name, outcome.violations, outcome.stderr));
            continue;
        }
        let profile = matrix::profile(outcome.trace.as_deref().unwrap_or(""));
        let mut n = 0;
        for (syscall, calls) in &profile {
            for (errno, when) in matrix::cases_for(
                scn.name,
                syscall,
                *calls,
                s.full || s.only.is_some(),
                s.full_when,
                s.per_syscall,
                s.seed,
            ) {
                let id = CaseId { scenario: scn.name, syscall, errno, when };
                if allowed.iter().any(|r| r.tag == "skip" && r.matches_case(&id)) {
                    continue;
                }
                if let Some(only) = &s.only
                    && !only.iter().any(|r| r.matches_case(&id))
                {
                    continue;
                }
                queue.push_back((scn, Injection { syscall: syscall.clone(), errno, when }));
                n += 1;
            }
        }
        println!("faults: {}: {} syscalls recorded, {n} cases", scn.name, profile.len());
        if scn.name == "max-output" {
            baselines.insert(scn.name, outcome.stdout);
        }
    }
    let total = queue.len();
    let queue = Mutex::new(queue);
    let done: Mutex<Vec<Done>> = Mutex::new(Vec::new());
    thread::scope(|scope| {
        for _ in 0..s.jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let Some((scn, inj)) = queue.lock().unwrap().pop_front() else { break };
                    let outcome = case::run(&env, scn, Some(&inj), baselines.get(scn.name).map(Vec::as_slice));
                    let id = CaseId { scenario: scn.name, syscall: &inj.syscall, errno: inj.errno, when: inj.when };
                    let (verdict, rules) = classify(&id, &outcome, &allowed, &expected);
                    let mut d = done.lock().unwrap();
                    if verdict == Verdict::Fail {
                        println!("FAIL {} ({}): {:?}", id.text(), outcome.exit, outcome.violations);
                    }
                    d.push(Done { scn, inj, outcome, verdict, rules });
                    if d.len().is_multiple_of(50) {
                        println!("faults: {}/{total} cases, {:.0}s", d.len(), started.elapsed().as_secs_f64());
                    }
                }
            });
        }
    });
    let _ = env.bystander.lock().unwrap().kill();
    let _ = env.bystander.lock().unwrap().wait();

    let mut done = done.into_inner().unwrap();
    done.sort_by(|a, b| {
        (a.scn.name, &a.inj.syscall, a.inj.errno, a.inj.when).cmp(&(
            b.scn.name,
            &b.inj.syscall,
            b.inj.errno,
            b.inj.when,
        ))
    });
    let results = summarise(&env, &done, &allowed, &expected, &baseline_failures, started, s.full && s.only.is_none());
    print!("{results}");
    let mut details = String::from("\n-- every case that did not simply pass:\n");
    for d in done.iter().filter(|d| d.verdict != Verdict::Pass) {
        let id = CaseId { scenario: d.scn.name, syscall: &d.inj.syscall, errno: d.inj.errno, when: d.inj.when };
        let _ = writeln!(details, "{:?} {}  exit {}  {:.1}s", d.verdict, id.text(), d.outcome.exit, d.outcome.secs);
        for (kind, what) in &d.outcome.violations {
            let _ = writeln!(details, "     {kind}: {what}");
        }
        for l in d.outcome.stderr.lines().filter(|l| l.starts_with("pgrun")).take(4) {
            let _ = writeln!(details, "     stderr: {l}");
        }
    }
    let file = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("faults-last-run.txt");
    let _ = fs::write(&file, format!("{results}{details}"));
    println!("faults: this summary is also in {}", file.display());
    let failed = done.iter().any(|d| d.verdict == Verdict::Fail)
            || !baseline_failures.is_empty()
            // A selection says nothing about the cases it left out.
            || (s.only.is_none() && results.contains("XPASS "));
    std::process::exit(if failed { 1 } else { 0 });
}

fn summarise(
    env: &Env,
    done: &[Done],
    allowed: &[Rule],
    expected: &[Rule],
    baseline: &[String],
    started: Instant,
    full_run: bool,
) -> String {
    let mut out = String::new();
    let count = |v: Verdict| done.iter().filter(|d| d.verdict == v).count();
    let _ =
        writeln!(out, "\n== fault-injection sweep: {} cases in {:.0}s", done.len(), started.elapsed().as_secs_f64());
    for b in baseline {
        let _ = writeln!(out, "BASELINE FAIL {b}");
    }
    let fails: Vec<&Done> = done.iter().filter(|d| d.verdict == Verdict::Fail).collect();
    if !fails.is_empty() {
        let _ = writeln!(out, "\n-- failing cases not in any list ({}):", fails.len());
        for d in &fails {
            let id = CaseId { scenario: d.scn.name, syscall: &d.inj.syscall, errno: d.inj.errno, when: d.inj.when };
            let _ = writeln!(out, "FAIL {}  exit {}  {:.1}s", id.text(), d.outcome.exit, d.outcome.secs);
            for (i, (kind, what)) in d.outcome.violations.iter().enumerate() {
                let known = if d.rules[i].is_some() { " (listed)" } else { "" };
                let _ = writeln!(out, "     {kind}{known}: {what}");
            }
            for l in d.outcome.stderr.lines().filter(|l| l.starts_with("pgrun")).take(4) {
                let _ = writeln!(out, "     stderr: {l}");
            }
            let _ = writeln!(
                out,
                "     rerun: PGRUN_FAULTS_ONLY={} cargo test --features fault-injection --test faults",
                id.text()
            );
            let _ = writeln!(
                out,
                "     by hand: {}",
                case::repro(&env.pgrun, d.scn, &d.inj).replace('\n', "\n              ")
            );
        }
    }
    let _ = writeln!(out, "\n-- expected failures (defects being fixed), by entry of expected-failures.txt:");
    for (i, rule) in expected.iter().enumerate() {
        let matched: Vec<&Done> = done.iter().filter(|d| d.rules.contains(&Some((true, i)))).collect();
        let exercised = done
            .iter()
            .filter(|d| {
                rule.matches_case(&CaseId {
                    scenario: d.scn.name,
                    syscall: &d.inj.syscall,
                    errno: d.inj.errno,
                    when: d.inj.when,
                })
            })
            .count();
        if matched.is_empty() && exercised > 0 && rule.tag.ends_with('?') {
            let _ = writeln!(
                out,
                "      line {}: {}: racy, none of its {} cases failed this time",
                rule.line, rule.tag, exercised
            );
        } else if matched.is_empty() && exercised > 0 && !full_run {
            let _ = writeln!(
                out,
                "      line {}: {}: none of the {} sampled cases it matches fails (the full matrix judges it)",
                rule.line, rule.tag, exercised
            );
        } else if matched.is_empty() && exercised > 0 {
            let _ = writeln!(
                out,
                "XPASS line {}: {} ({} cases, none fails any more: remove this entry) {}",
                rule.line, rule.tag, exercised, rule.text
            );
        } else if matched.is_empty() {
            let _ = writeln!(out, "      line {}: {}: no case of this sweep matches it", rule.line, rule.tag);
        } else {
            let ids: Vec<String> = matched
                .iter()
                .take(6)
                .map(|d| format!("{}/{}/{}/{}", d.scn.name, d.inj.syscall, d.inj.errno, d.inj.when))
                .collect();
            let _ = writeln!(
                out,
                "XFAIL line {}: {}: {} of {} matching cases fail as expected, e.g. {}",
                rule.line,
                rule.tag,
                matched.len(),
                exercised,
                ids.join(" ")
            );
        }
    }
    let _ = writeln!(out, "\n-- known injection artifacts (allowed.txt):");
    for (i, rule) in allowed.iter().enumerate() {
        let n = done.iter().filter(|d| d.rules.contains(&Some((false, i)))).count();
        if n > 0 {
            let _ = writeln!(out, "ALLOWED line {}: {n} cases: {}", rule.line, rule.reason);
        }
    }
    let _ = writeln!(
        out,
        "\nfaults: {} passed, {} known artifacts, {} expected failures (XFAIL), {} FAILED; {:.0}s",
        count(Verdict::Pass),
        count(Verdict::Allowed),
        count(Verdict::Expected),
        count(Verdict::Fail) + baseline.len(),
        started.elapsed().as_secs_f64()
    );
    out
}

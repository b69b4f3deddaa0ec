//! A black-box fuzz test of the command line: thousands of random argument
//! lists, built from pgrun's own vocabulary and near misses of it, seeded
//! and so reproducible (`PGRUN_FUZZ_SEED=N` replays another seed), bounded
//! in count and time: 100 cases in the default suite, 3000 in the long
//! target. Each one must end (no hang), end with a status pgrun
//! or the command can give (never a signal: no panic, no SIGPIPE), say at
//! most one `pgrun: ` error line (plus the usage hint), and never signal a
//! bystander in another group, although a stale pid file names it.

use crate::util::*;
use std::fs;
use std::time::{Duration, Instant};

/// A small deterministic generator (xorshift64*): no rand crate needed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const FLAGS: &[&str] = &[
    "-t",
    "--timeout",
    "-s",
    "--signal",
    "-k",
    "--kill-after",
    "--escalate",
    "--preserve-status",
    "--wait-group",
    "-p",
    "--pidfile",
    "--cancel-file",
    "--report",
    "--setsid",
    "-v",
    "--verbose",
    "--",
    "-",
    "--json",
    "--no-wait",
    "--keep-pending",
    "--wait-start",
    "--help",
    "-h",
    "--version",
    "--generate",
    "--bogus",
    "-x",
    "-tv",
    "--timeout=0.01",
    "--signal=INT",
    "cancel",
    "status",
    "wait",
];

/// Values: durations and signals (valid ones are short or terminating, so
/// a case never waits long), schedules, and near misses of all of them.
const VALUES: &[&str] = &[
    "0",
    "0.01",
    ".02",
    "1ms",
    "0.0000000001",
    "5",
    "-1",
    "1e3",
    "inf",
    "0x10",
    "5S",
    " 5",
    "",
    "TERM",
    "INT",
    "kill",
    "9",
    "sigterm",
    "RTMIN",
    "RTMAX-1",
    "SIG15",
    "999",
    "TERMX",
    "INT/0.01/KILL",
    "TERM/KILL",
    "HUP/1ms",
    "TERM/2s/3s",
    "/",
    "\u{e9}\u{1f600}",
    "a\nb",
];

/// Commands that end at once, with their own statuses.
const COMMANDS: &[&[&str]] = &[
    &["true"],
    &["false"],
    &["sh", "-c", "exit 3"],
    &["sh", "-c", "kill -TERM $$"],
    &["pgrun-test-no-such-command"],
    &["cancel"],
    &["status"],
    &["wait"],
    &["-v"],
];

#[test]
fn random_command_lines_never_panic_hang_or_touch_a_bystander() {
    let seed: u64 = std::env::var("PGRUN_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_2026);
    let mut rng = Rng(seed | 1);
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let canary = spawn_canary(&mut guard, &scratch);
    let stale = scratch.path("stale.pid");
    let not_executable = scratch.path("not-executable");
    fs::write(&not_executable, "true\n").unwrap();
    let paths: Vec<String> =
        ["job.pid", "job.pid.cancel", "other.cancel", "r.json", "stale.pid", "no/such/folder/x", "not-executable", ""]
            .iter()
            .map(|name| if name.is_empty() { scratch.sh() } else { scratch.path(name).display().to_string() })
            .collect();
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();

    let (most, budget) = (rounds(100, 3000), Duration::from_secs(40));
    let start = Instant::now();
    let mut cases = 0;
    while cases < most && start.elapsed() < budget {
        cases += 1;
        // A stale pid file naming the bystander's group: cancel and status
        // must only ever read it (no --force in the vocabulary).
        fs::write(&stale, format!("{canary}\n")).unwrap();
        let mut args: Vec<String> = Vec::new();
        for _ in 0..rng.below(7) {
            let word = match rng.below(10) {
                0..=4 => rng.pick(FLAGS),
                5..=7 => rng.pick(VALUES),
                _ => rng.pick(&paths),
            };
            args.push(word.to_string());
            // cancel and wait wait up to --wait-start (5s) for a run that
            // never comes: keep each case short.
            if word == "cancel" || word == "wait" {
                args.extend(["--wait-start".to_string(), "0.02".to_string()]);
            }
        }
        if rng.below(4) != 0 {
            if rng.below(2) == 0 {
                args.push("--".to_string());
            }
            let command = COMMANDS[rng.below(COMMANDS.len())];
            args.extend(command.iter().map(|s| s.to_string()));
        }
        // In the scratch folder: a random word may name a pid file or report.
        let out = run(pgrun(&args).current_dir(scratch.dir()));
        let code = code_of(out.status);
        let err = stderr_of(&out);
        let what = format!("seed {seed}, case {cases}: pgrun {args:?}\nexit {code}\nstderr: {err}");
        assert!(
            [0, 1, 2, 3, 4, 124, 125, 126, 127, 143].contains(&code),
            "an exit status neither pgrun nor the command gives: {what}"
        );
        let verbose = args.iter().any(|a| matches!(a.as_str(), "-v" | "--verbose" | "-tv"));
        if !verbose {
            // The hint after a missing command named like a duration
            // (`pgrun 30 make`) is a second line by contract.
            let hint = |l: &str| l.starts_with("pgrun: for a timeout, write: ");
            let own = err.lines().filter(|l| l.starts_with("pgrun: ") && !hint(l)).count();
            assert!(own <= 1, "more than one error line: {what}");
            assert!(!err.contains("panicked"), "a panic: {what}");
        }
        let _ = fs::remove_file(scratch.path("job.pid.cancel"));
        let _ = fs::remove_file(scratch.path("other.cancel"));
    }
    eprintln!("{cases} command lines in {:?} (seed {seed})", start.elapsed());
    assert!(cases >= 100, "only {cases} cases ran within {budget:?}: the test says little");
    assert_canary_untouched(&scratch, canary);
}

//! A group number taken over by another group: cancel, cancel --timeout,
//! status and pgrun itself never signal or count a group that took the
//! run's number (before pgrun died, after the run ended, while pgrun
//! finishes). The number is handed over for real inside a PID namespace
//! of the test's own ([`HAND_OVER`]); the cancel tests (tests/cancel.rs)
//! use the same helpers.

use crate::util::run as run_cmd;
use crate::util::*;
use std::fs;
use std::process::{Command, Stdio};

#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path has no pidfds: it signals by number, as the man page says"
)]
fn cancel_never_signals_a_group_that_took_over_the_number() {
    // cancel --force stops a stale run's group it is not the parent of. If
    // that group ends and its number is taken by a new, unrelated group
    // while cancel waits out a grace, cancel must not signal the newcomer.
    // In a PID namespace of our own, ns_last_pid hands the number over,
    // while cancel is held stopped so that it cannot look in between.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = format!(
        r#"setsid {py} -c 'import os, signal
signal.signal(signal.SIGTERM, lambda n, f: open("term.log", "a").write("TERM\n"))
open("g.pid", "w").write(str(os.getpid()) + "\n")
while True: signal.pause()' &
while [ ! -s g.pid ]; do sleep 0.01; done
G=$(cat g.pid)
echo "$G" > stale.pid
{pg} cancel -v --force --wait-start 0 stale.pid 2> cancel.log &
C=$!
until [ -s term.log ]; do sleep 0.01; done
kill -STOP "$C"
kill -KILL "$G"; wait "$G" 2>/dev/null
"#,
        pg = pgrun_path(),
        py = python3()
    );
    let after = "kill -CONT \"$C\"\nwait \"$C\"; echo \"cancel=$?\"\n";
    let script = format!("{before}{HAND_OVER}{after}");
    assert_number_handed_over_untouched(&scratch, &script, "cancel=0", "cancel.log");
}

/// The shell fragment that starts a published run (`$R`: its pgrun; `$G`:
/// its group) and holds its pgrun at the step `run-gone`: the group has
/// ended, the record is not withdrawn yet (in life, a long final flush of
/// --max-output). `touch gate` lets it go on. `options`: pgrun's own.
fn run_held_once_gone(options: &str) -> String {
    format!(
        r#"PGRUN_TEST_PAUSE=run-gone=gate {pg} {options} -p job.pid -- sh -c 'echo $$ > g.pid; until [ -e go ]; do sleep 0.01; done' &
R=$!
while [ ! -s g.pid ] || [ ! -s job.pid ]; do sleep 0.01; done
G=$(cat g.pid)
touch go
until [ -e gate.reached ]; do sleep 0.01; done
"#,
        pg = pgrun_path()
    )
}

#[test]
fn cancel_never_signals_a_group_that_took_over_the_number_after_the_run_ended() {
    // A run whose group is gone but whose pgrun still holds the lock (here
    // held at the step `run-gone`; in life, a long final flush of
    // --max-output) is found live by cancel, which TERMs that pgrun and waits
    // for it. Meanwhile the group's number is handed to an unrelated process.
    // pgrun then ends normally and withdraws its record: the run is over,
    // and cancel must not adopt the group that now has the number.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = run_held_once_gone("");
    let after = format!(
        r#"{pg} cancel -v job.pid 2> cancel.log &
C=$!
until grep -q "sending TERM to pgrun" cancel.log; do sleep 0.01; done
touch gate
wait "$R"
wait "$C"; echo "cancel=$?"
"#,
        pg = pgrun_path()
    );
    let script = format!("{before}{HAND_OVER}{after}");
    assert_number_handed_over_untouched(&scratch, &script, "cancel=0", "cancel.log");
}

#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path has no subreaper: it signals by number, as the man page says"
)]
fn cancel_never_adopts_a_group_that_took_over_the_number_before_pgrun_died() {
    // cancel finds a pgrun finishing after its group ended (the number
    // already handed to a newcomer); that pgrun (no guard) is then SIGKILLed
    // before it withdraws its record. The record is left in place, but the
    // group cancel would "finish" was not the run's when cancel found it.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = run_held_once_gone("--no-guard");
    let after = format!(
        r#"{pg} cancel -v job.pid 2> cancel.log &
C=$!
until grep -q "sending TERM to pgrun" cancel.log; do sleep 0.01; done
kill -KILL "$R"
wait "$C"; echo "cancel=$?"
"#,
        pg = pgrun_path()
    );
    let script = format!("{before}{HAND_OVER}{after}");
    assert_number_handed_over_untouched(&scratch, &script, "cancel=0", "cancel.log");
}

#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path has no subreaper: it signals by number, as the man page says"
)]
fn cancel_timeout_never_kills_a_group_that_took_over_the_number_while_pgrun_finishes() {
    // As above, but cancel's --timeout passes while that pgrun still holds
    // the lock: the group it would SIGKILL "itself" is no longer the run's.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = run_held_once_gone("");
    let after = format!(
        r#"{pg} cancel -v --timeout 0.3 job.pid 2> cancel.log
echo "cancel=$?"
touch gate
wait "$R"
"#,
        pg = pgrun_path()
    );
    let script = format!("{before}{HAND_OVER}{after}");
    assert_number_handed_over_untouched(&scratch, &script, "cancel=0", "cancel.log");
}

#[test]
#[cfg_attr(
    feature = "posix-fallback",
    ignore = "the portable path has no subreaper: it counts by number, as the man page says"
)]
fn status_never_counts_a_group_that_took_over_the_number_while_pgrun_finishes() {
    // While a pgrun finishes after its group ended, status says "running"
    // (the lock is held) but must not count the newcomer that took the
    // group's number as a process of the run.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = run_held_once_gone("");
    let after = format!(
        r#"{pg} status --json job.pid > status.json 2> status.log
grep -o '"processes":[^,}}]*' status.json
touch gate
wait "$R"
"#,
        pg = pgrun_path()
    );
    let script = format!("{before}{HAND_OVER}{after}");
    assert_number_handed_over_untouched(&scratch, &script, "\"processes\":0", "status.log");
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "tree mode needs Linux")]
fn pgrun_never_signals_a_group_that_took_over_the_number_of_its_own() {
    // Tree mode: the command's group ends while an escaped descendant that
    // ignores TERM keeps the run going. The group's number is then handed
    // to an unrelated process (ns_last_pid, in a PID namespace of our own);
    // pgrun's next step must reach the escapee, never the newcomer.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = format!(
        r#"{pg} -v --contain tree -t 1 -k 2 -- sh -c 'setsid sh -c "trap \"\" TERM; exec sleep 300" & echo $$ > g.pid; exec sleep 300' 2> run.log &
R=$!
while [ ! -s g.pid ]; do sleep 0.01; done
G=$(cat g.pid)
until grep -q "process group $G is empty" run.log; do sleep 0.01; done
"#,
        pg = pgrun_path()
    );
    let script = format!("{before}{HAND_OVER}wait \"$R\"; echo \"run=$?\"\n");
    assert_number_handed_over_untouched(&scratch, &script, "run=124", "run.log");
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the guard's ground truth is Linux's (PR_SET_PDEATHSIG)")]
fn pgrun_killed_while_it_flushes_held_output_leaves_the_guard_nothing_to_stop() {
    // --max-output and a reader that never reads: the run is gone but pgrun
    // still holds output for the reader (the head fits in the FIFO, which
    // pgrun widens as F_SETPIPE_SZ 1031 does here, head and tail do not). By then the record is withdrawn
    // and the guard released, so when the group's number has gone to an
    // unrelated process and pgrun is SIGKILLed, the guard stops nothing.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let before = format!(
        r#"mkfifo out
sleep 300 < out &
C=$("$PYTHON3" -c 'import fcntl, os
fd = os.open("out", os.O_RDWR)
try: fcntl.fcntl(fd, 1031, 1 << 20)
except OSError: pass
print(fcntl.fcntl(fd, 1032))')
{pg} -v -p run.pid --max-output $((C * 3 / 2)) -- sh -c "echo \$\$ > g.pid; head -c $((C * 8)) /dev/zero" > out 2> run.log &
R=$!
while [ ! -s g.pid ]; do sleep 0.01; done
G=$(cat g.pid)
while [ -e /proc/$G ]; do sleep 0.01; done
while [ -e run.pid ]; do sleep 0.01; done
[ -e /proc/$R ] || echo "pgrun-ended-early"
KIDS=$(cat /proc/$R/task/$R/children)
"#,
        pg = pgrun_path()
    );
    let after = r#"kill -KILL "$R"; wait "$R"; echo "run=$?"
for k in $KIDS; do
  while [ -e /proc/$k ] && ! grep -q '^State:.*Z' /proc/$k/status 2>/dev/null; do sleep 0.01; done
done
"#;
    let script = format!("{before}{HAND_OVER}{after}");
    assert_number_handed_over_untouched(&scratch, &script, "run=137", "run.log");
}

/// Shell lines that hand the number of the group `$G` (ended and reaped)
/// to the canary: the next pid in the namespace is `$G`, and the canary
/// takes it with a new session, so a new group with that number appears.
pub(crate) const HAND_OVER: &str = r#"echo $((G - 1)) > /proc/sys/kernel/ns_last_pid
setsid "$PYTHON3" canary.py &
until [ -e canary.ready ]; do sleep 0.01; done
[ "$(cat /proc/$G/comm)" = "${PYTHON3##*/}" ] || echo "number-not-reused"
"#;

/// Run `script` as PID 1 of a PID namespace of our own (everything in it
/// dies with it). `timeout -s KILL` bounds its polling loops, before the
/// suite's own deadline: unshare ignores TERM, and killing unshare kills
/// the namespace (--kill-child), so nothing can outlive a failed test. The script hands a
/// group's number to the canary and prints `number-not-reused` if that
/// failed, `want` (the stopper's exit) and `canary-alive`. The canary must
/// be alive and have received nothing; `log` is the stopper's -v output.
pub(crate) fn assert_number_handed_over_untouched(scratch: &Scratch, script: &str, want: &str, log: &str) {
    fs::write(scratch.path("canary.py"), canary_script(scratch)).unwrap();
    let script = format!("cd {}\n{script}[ -e /proc/$G ] && echo canary-alive\n", scratch.sh());
    let script = script.as_str();
    let mut ns = Command::new("timeout");
    ns.args([
        "-s",
        "KILL",
        "25",
        "unshare",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--",
        "sh",
        "-c",
        script,
    ])
    .env("PYTHON3", python3())
    .stdin(Stdio::null());
    let out = run_cmd(&mut ns);
    let said = String::from_utf8_lossy(&out.stdout);
    let log = fs::read_to_string(scratch.path(log)).unwrap_or_default();
    assert!(!said.contains("number-not-reused"), "the test could not hand the number over: {said}");
    assert!(said.contains(want), "{said}\nlog: {log}");
    assert!(said.contains("canary-alive"), "the newcomer was killed: {said}\nlog: {log}");
    let signals = fs::read_to_string(scratch.path("canary.log")).unwrap_or_default();
    assert!(signals.is_empty(), "the newcomer got {signals:?}; log: {log}");
}

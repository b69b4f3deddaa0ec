//! A group number pgrun has seen empty is never used again, by pgrun, its
//! guard or its panic hook: the number is handed to a new group whose
//! leader has already exited (so no process is numbered like the group,
//! and nothing but the group's emptiness tells the newcomer apart), and
//! the newcomer must be left alone. The pid reuse is forced inside a PID
//! namespace of the test's own (ns_last_pid); everything in it dies with
//! the namespace.

use crate::util::*;
use std::fs;
use std::process::{Command, Stdio};

/// A tree-mode run whose command leaves an escapee (in a session of its
/// own, ignoring TERM) and exits; with --wait-group pgrun drains, sees the
/// group empty, and the run goes on for the escapee. `$R`: pgrun, `$G`:
/// the group's number, given up by pgrun once the script goes on.
fn run_past_its_empty_group(env: &str) -> String {
    format!(
        r#"{env} {pg} -v --wait-group -k 2 -p job.pid -- sh -c '
  setsid sh -c "trap \"\" TERM; echo \$\$ > esc; exec sleep 300" </dev/null >/dev/null 2>&1 &
  until [ -s esc ]; do sleep 0.01; done' 2> run.log &
R=$!
until [ -s job.pid ] && [ -s esc ]; do sleep 0.01; done
G=$(cat job.pid)
until grep -q "process group $G is empty: gone for good" run.log; do sleep 0.01; done
for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = pgrun-guard ] && GP=${{p#/proc/}}; done
"#,
        pg = pgrun_path()
    )
}

/// Hand the number `$G` to a new group (`setsid`, the next fork) whose
/// leader starts the canary (`$C`, in group `$G`) and exits at once; the
/// shell reaps that leader, so no process is numbered `$G` any more.
const HAND_OVER_LEADERLESS: &str = r#"echo $((G - 1)) > /proc/sys/kernel/ns_last_pid
setsid sh -c '"$PYTHON3" canary.py </dev/null >/dev/null 2>&1 & echo $! > canary.pid'
until [ -e canary.ready ]; do sleep 0.01; done
C=$(cat canary.pid)
[ "$(cut -d' ' -f5 /proc/$C/stat)" = "$G" ] || echo "number-not-reused"
[ -e /proc/$G ] && echo "number-still-held"
"#;

/// Wait for the guard `$GP` (reparented to this script, the namespace's
/// init) to end after pgrun's death.
const GUARD_DONE: &str = r#"[ -n "$GP" ] || echo "no-guard-found"
while [ -e /proc/$GP ] && [ "$(cut -d' ' -f3 /proc/$GP/stat)" != Z ]; do sleep 0.01; done
"#;

/// Run `script` as the init of a PID namespace of its own (bounded by
/// `timeout -s KILL`: killing unshare kills the namespace, so nothing
/// outlives the test); it prints `want` (how pgrun ended); the canary
/// must be alive and have received nothing.
fn assert_leaderless_newcomer_untouched(scratch: &Scratch, script: &str, want: &str) {
    fs::write(scratch.path("canary.py"), canary_script(scratch)).unwrap();
    let script = format!("cd {}\n{script}[ -e /proc/$C ] && echo canary-alive\n", scratch.sh());
    let mut ns = Command::new("timeout");
    ns.args(["-s", "KILL", "40", "unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--", "sh", "-c"])
        .arg(&script)
        .env("PYTHON3", python3())
        .stdin(Stdio::null());
    let out = run(&mut ns);
    let said = String::from_utf8_lossy(&out.stdout);
    let log = fs::read_to_string(scratch.path("run.log")).unwrap_or_default();
    assert!(!said.contains("number-not-reused"), "the test could not hand the number over: {said}");
    assert!(!said.contains("number-still-held"), "the new group's leader did not end: {said}");
    assert!(!said.contains("no-guard-found"), "pgrun's guard was not found: {said}");
    assert!(said.contains(want), "{said}\nlog: {log}");
    let signals = fs::read_to_string(scratch.path("canary.log")).unwrap_or_default();
    assert!(said.contains("canary-alive"), "the newcomer was killed: {said}\nlog: {log}");
    assert!(signals.is_empty(), "the newcomer got {signals:?}; log: {log}");
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "tree mode needs Linux")]
fn a_stop_after_the_group_was_seen_empty_hands_the_guard_nothing_by_its_number() {
    // pgrun saw the group empty; the number goes to a newcomer; a stop
    // starts (TERM to pgrun), and pgrun is SIGKILLed during it. Neither the
    // stop's start nor the guard may reach the newcomer's group.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let after = format!(
        r#"kill -TERM "$R"
until grep -q "sending TERM" run.log; do sleep 0.01; done
kill -KILL "$R"; wait "$R"; echo "run=$?"
{GUARD_DONE}"#
    );
    let script = format!("{}{HAND_OVER_LEADERLESS}{after}", run_past_its_empty_group(""));
    assert_leaderless_newcomer_untouched(&scratch, &script, "run=137");
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "tree mode needs Linux; the panic hook is a debug build's")]
fn a_panic_after_the_group_was_seen_empty_kills_nothing_by_its_number() {
    // As above, but pgrun panics (a test hook, on SIGUSR1): its panic hook
    // must not SIGKILL the number it gave up, nor may the guard use it.
    if !require(Capability::PidNamespaces) {
        return;
    }
    let scratch = Scratch::new();
    let after = format!(
        r#"kill -USR1 "$R"; wait "$R"; echo "run=$?"
{GUARD_DONE}"#
    );
    let script = format!("{}{HAND_OVER_LEADERLESS}{after}", run_past_its_empty_group("PGRUN_TEST_HOOK=panic-on-usr1"));
    assert_leaderless_newcomer_untouched(&scratch, &script, "run=125");
}

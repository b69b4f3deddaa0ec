//! The checks from the contract: each status answer, the payloads'
//! shapes, a cancel's and a wait's exit and what was left right after, and
//! pgrun's report.

use super::*;

/// Check one status answer against `allowed` (the states the run can be
/// in at that point); `ids` known (not for a short run, whose status may
/// come before its pid file).
pub(super) fn check_status(r: &mut RunResult, when: &str, allowed: &[&str], ids: Option<&RunIds>, call: Pending<Left>) {
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

/// What pgrun's exit and report must say for a run stopped by cancel,
/// timeout or the guard: the command's end (143 of TERM, 137 of KILL) and
/// the stop signals sent.
pub(super) fn stop_end(shape: Shape) -> (i32, &'static str, &'static [&'static str]) {
    match shape {
        Shape::IgnoresTerm => (137, "KILL", &["TERM", "KILL"]),
        _ => (143, "TERM", &["TERM"]),
    }
}

/// The payloads really are what they claim: the TERM-ignoring command
/// ignores TERM, the escapee has left the group for a session of its own.
pub(super) fn check_shape(plan: &Plan, ids: &RunIds, ctx: &Ctx, r: &mut RunResult) {
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
pub(super) fn check_cancel(r: &mut RunResult, plan: &Plan, paired: bool, call: Pending<Left>) -> (String, bool) {
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
pub(super) fn cancel_late(stderr: &str) -> bool {
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
pub(super) fn check_wait(r: &mut RunResult, plan: &Plan, call: Pending<Left>, found: bool, run_code: Option<i32>) {
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
pub(super) fn check_report(
    r: &mut RunResult,
    plan: &Plan,
    text: &str,
    ids: &RunIds,
    want: (i32, &str, Option<&str>, &[&str]),
) {
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

//! One run, start to end: started, watched with status and wait calls,
//! ended its own way, and checked all the way.

use super::*;

/// One run, start to end, checked all the way.
pub(super) fn drive(plan: Plan, ctx: &Ctx) -> RunResult {
    let mut r = RunResult::new(plan.clone());
    let mut guard = Guard::new();
    drive_run(&plan, ctx, &mut guard, &mut r);
    r._guard = Some(guard);
    r
}

pub(super) fn drive_run(plan: &Plan, ctx: &Ctx, guard: &mut Guard, r: &mut RunResult) {
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
pub(super) fn short_run(
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

//! One case: a scenario run once under strace (recording its syscalls, or
//! with one fault injected), bounded in time, then checked against the
//! contract. Everything the case started runs in sessions of its own, so
//! that what is left can be found, and killed, by session id alone.
//!
//! Injection reaches pgrun and its guard only: strace runs with `-b
//! execve`, which detaches from a process when it execs, so the command
//! (the payload, exec'd by pgrun's child) runs untraced, and a fault is
//! never injected into it. The child's own steps before its exec (process
//! group, fds, signal mask, the `execve` itself) are pgrun's code and are
//! traced. strace counts `when=N` per process; the exec of pgrun by strace
//! itself is never injected.

use crate::procs::{self, Proc};
use crate::scenario::{self, Scenario, Shape};
use std::fs::{self, File};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The fault of one case: `SYSCALL` fails with `ERRNO` on its `WHEN`th
/// call in each traced process.
#[derive(Clone, Debug)]
pub struct Injection {
    pub syscall: String,
    pub errno: &'static str,
    pub when: u32,
}

/// What the whole sweep shares.
pub struct Env {
    pub pgrun: PathBuf,
    /// The sweep's own cgroup folder in the cgroup2 mount, if one is writable.
    pub cgroup: Option<PathBuf>,
    /// A process in a group of its own that must survive every case.
    pub bystander: Mutex<Child>,
    pub counter: AtomicUsize,
}

/// A contract violation: its kind (as the lists name it) and the detail.
pub type Violation = (&'static str, String);

pub struct Outcome {
    pub violations: Vec<Violation>,
    pub exit: String,
    pub stderr: String,
    pub stdout: Vec<u8>,
    pub trace: Option<String>,
    pub secs: f64,
}

/// A child and, once reaped, its status.
struct Tracked {
    child: Child,
    status: Option<ExitStatus>,
}

impl Tracked {
    fn exited(&mut self) -> bool {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status.is_some()
    }

    fn wait_until(&mut self, deadline: Instant) -> bool {
        if self.status.is_none() {
            self.status = procs::wait_until(&mut self.child, deadline);
        }
        self.status.is_some()
    }

    fn session(&self) -> i32 {
        self.child.id() as i32
    }
}

/// The `strace` arguments of a case, before the pgrun binary.
pub fn strace_args(inj: Option<&Injection>, output: &str) -> Vec<String> {
    let mut v: Vec<String> = ["-f", "-qq", "-b", "execve", "-o", output].iter().map(|s| s.to_string()).collect();
    if let Some(i) = inj {
        v.push("-e".into());
        v.push(format!("trace={}", i.syscall));
        v.push("-e".into());
        v.push(format!("inject={}:error={}:when={}", i.syscall, i.errno, i.when));
    }
    v
}

fn lines_of(path: &Path) -> usize {
    fs::read_to_string(path).map(|s| s.lines().count()).unwrap_or(0)
}

fn describe(procs: &[Proc]) -> String {
    procs.iter().map(|p| format!("{} ({}, {})", p.pid, p.comm, p.state)).collect::<Vec<_>>().join(", ")
}

/// A cgroup made for one case: the traced process is moved there before it
/// execs strace, so pgrun's own cgroup is this one and any `pgrun-*` leaf
/// under it is the case's.
struct CaseCgroup {
    dir: PathBuf,
    procs: File,
}

impl CaseCgroup {
    fn create(parent: &Path, n: usize) -> std::io::Result<CaseCgroup> {
        let dir = parent.join(format!("faults-{}-{n}", std::process::id()));
        fs::create_dir(&dir)?;
        let procs = fs::OpenOptions::new().write(true).open(dir.join("cgroup.procs"))?;
        Ok(CaseCgroup { dir, procs })
    }

    fn leaves(&self) -> Vec<String> {
        fs::read_dir(&self.dir)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Remove the leaves left and the case's cgroup (their processes are in
    /// the case's sessions, killed before this).
    fn remove(&self) {
        for leaf in self.leaves() {
            let leaf = self.dir.join(leaf);
            let _ = fs::write(leaf.join("cgroup.kill"), "1");
            procs::poll_until(Instant::now() + Duration::from_secs(5), || fs::remove_dir(&leaf).is_ok());
        }
        procs::poll_until(Instant::now() + Duration::from_secs(5), || fs::remove_dir(&self.dir).is_ok());
    }
}

fn spawn_pgrun(env: &Env, args: Vec<String>, err: &Path) -> Tracked {
    let mut cmd = Command::new(&env.pgrun);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(File::create(err).expect("stderr file"));
    procs::new_session(&mut cmd);
    Tracked { child: cmd.spawn().expect("cannot start pgrun"), status: None }
}

/// Kill what is left of each session, return it described.
fn reap_sessions(sessions: &mut [&mut Tracked]) -> Vec<Proc> {
    let mut left = Vec::new();
    for t in sessions.iter_mut() {
        left.extend(procs::in_session(t.session()));
        if !left.is_empty() || t.status.is_none() {
            procs::kill_session(&mut t.child);
            t.status = t.status.or_else(|| t.child.try_wait().ok().flatten());
        }
    }
    left
}

/// Run `scn` once under strace, with `inj` (or recording every syscall),
/// and check it. `baseline_stdout`: what the uninjected run wrote.
pub fn run(env: &Env, scn: &Scenario, inj: Option<&Injection>, baseline_stdout: Option<&[u8]>) -> Outcome {
    let start = Instant::now();
    let deadline = start + scn.bound;
    let root = tempfile::Builder::new().prefix("pgrun-faults-").tempdir().expect("temp dir");
    let dir = root.path().join("d");
    fs::create_dir(&dir).expect("case folder");
    let mut v: Vec<Violation> = Vec::new();
    let n = env.counter.fetch_add(1, Ordering::Relaxed);

    let cgroup = if scn.cgroup {
        let parent = env.cgroup.as_ref().expect("cgroup scenario without a cgroup");
        Some(CaseCgroup::create(parent, n).expect("cannot create the case's cgroup"))
    } else {
        None
    };

    // The run a `cancel` or `status` is aimed at.
    let mut live = None;
    if scn.shape == Shape::AgainstLiveRun {
        let mut t = spawn_pgrun(env, scenario::live_run_args(&dir), &root.path().join("live.err"));
        if !procs::poll_until(deadline, || lines_of(&dir.join("pids")) >= 2 && dir.join("run.pid").exists()) {
            procs::kill_session(&mut t.child);
            return Outcome {
                violations: vec![("setup", "the untraced run did not come up".into())],
                exit: "not run".into(),
                stderr: String::new(),
                stdout: Vec::new(),
                trace: None,
                secs: start.elapsed().as_secs_f64(),
            };
        }
        live = Some(t);
    }

    let trace_path = root.path().join("trace");
    let output = if inj.is_some() { "/dev/null".to_string() } else { trace_path.display().to_string() };
    let out_path = root.path().join("out");
    let err_path = root.path().join("err");
    let mut cmd = Command::new("strace");
    cmd.args(strace_args(inj, &output))
        .arg(&env.pgrun)
        .args((scn.args)(&dir))
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).expect("stdout file"))
        .stderr(File::create(&err_path).expect("stderr file"));
    procs::new_session(&mut cmd);
    if let Some(cg) = &cgroup {
        let fd = cg.procs.as_raw_fd();
        // SAFETY: write(2) is async-signal-safe; the fd stays open in the
        // parent until spawn returns; "0" moves the writing process.
        unsafe {
            cmd.pre_exec(move || {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut traced = Tracked { child: cmd.spawn().expect("cannot start strace"), status: None };

    // Once the command is up: the run has its guard; then a cancel from
    // another process, or a SIGKILL of pgrun itself.
    let mut canceller = None;
    if matches!(scn.shape, Shape::CancelledRun | Shape::KilledRun) {
        // Up: the command runs and the pid file is published; then give
        // pgrun a moment to remove its temporary name (a SIGKILL before
        // that is issue 18 #7's window; a failed removal leaves it).
        let published = || {
            lines_of(&dir.join("pids")) >= 2 && fs::read_to_string(dir.join("run.pid")).is_ok_and(|s| s.ends_with('\n'))
        };
        let no_tmp = || {
            !fs::read_dir(&dir).is_ok_and(|d| {
                d.filter_map(|e| e.ok()).any(|e| e.file_name().to_string_lossy().starts_with(".run.pid"))
            })
        };
        let up = procs::poll_until(deadline, || published() || traced.exited());
        procs::poll_until(Instant::now() + Duration::from_secs(2), || no_tmp() || traced.exited());
        let now = procs::in_session(traced.session());
        let pgrun: Vec<i32> =
            now.iter().filter(|p| p.ppid == traced.session() && p.comm == "pgrun").map(|p| p.pid).collect();
        // And settled: pgrun waits in its supervise loop (so the guard has
        // been told everything it is told at the start).
        procs::poll_until(Instant::now() + Duration::from_secs(2), || {
            traced.exited() || pgrun.iter().all(|p| procs::waiting_in_poll(*p))
        });
        if up && !traced.exited() && !pgrun.is_empty() {
            // The guard: named `pgrun-guard`, or a fork of pgrun not yet renamed.
            if !now.iter().any(|p| p.comm == "pgrun-guard" || (p.comm == "pgrun" && pgrun.contains(&p.ppid))) {
                v.push(("guard", format!("the command runs, but pgrun's guard does not: {}", describe(&now))));
            }
            if scn.shape == Shape::CancelledRun {
                let args = vec![
                    "cancel".to_string(),
                    "--timeout".into(),
                    "5".into(),
                    dir.join("run.pid").display().to_string(),
                ];
                let mut c = spawn_pgrun(env, args, &root.path().join("cancel.err"));
                if !c.wait_until(deadline) {
                    v.push(("hang", "the untraced `pgrun cancel` did not return".into()));
                }
                canceller = Some(c);
            } else {
                // pgrun is strace's child (the guard is pgrun's).
                for pid in &pgrun {
                    // SAFETY: kill has no memory effects; pid is in the case's session.
                    unsafe { libc::kill(*pid, libc::SIGKILL) };
                }
            }
        }
    }

    let finished = traced.wait_until(deadline);
    let (code, exit) = match traced.status {
        Some(s) if finished => procs::status_code(s),
        _ => (-1, "hang".to_string()),
    };
    if !finished {
        let left = procs::in_session(traced.session());
        v.push(("hang", format!("still running after {}s: {}", scn.bound.as_secs(), describe(&left))));
    }

    // A `cancel` that says the run is gone must have waited for it.
    if let Some(l) = live.as_mut() {
        // (The lock is released as the run's pgrun exits, a moment before
        // it is a zombie its parent can see: allow that moment.)
        if scn.name == "cancel-cmd"
            && code == scn.normal
            && !procs::poll_until(Instant::now() + Duration::from_millis(500), || l.exited())
        {
            v.push(("live-run", "cancel exited 0 while the run's pgrun still runs".into()));
        }
        if !l.exited() {
            let args =
                vec!["cancel".to_string(), "--timeout".into(), "5".into(), dir.join("run.pid").display().to_string()];
            let mut c = spawn_pgrun(env, args, &root.path().join("cancel.err"));
            if !c.wait_until(Instant::now() + Duration::from_secs(15)) {
                v.push(("hang", "the untraced `pgrun cancel` did not return".into()));
            }
            canceller = Some(c);
        }
        if !l.wait_until(Instant::now() + Duration::from_secs(15)) {
            v.push(("hang", "the run the traced process was aimed at did not end".into()));
        } else {
            let (lcode, lexit) = procs::status_code(l.status.unwrap());
            if lcode != 143 {
                v.push(("live-run", format!("the run it was aimed at exited {lexit}, not 143 (cancelled)")));
            }
            check_report(&dir, lcode, &fs::read_to_string(root.path().join("live.err")).unwrap_or_default(), &mut v);
        }
    }

    let stderr = fs::read_to_string(&err_path).unwrap_or_default();
    let stdout = fs::read(&out_path).unwrap_or_default();
    if finished {
        check_exit(scn, inj, code, &exit, &stderr, &mut v);
        if scn.report && !v.iter().any(|(k, _)| *k == "loader") {
            check_report(&dir, code, &stderr, &mut v);
        }
        check_stdout(scn, code, &stderr, &stdout, baseline_stdout, &mut v);
    }

    // Nothing of the case may be left running, then kill what is.
    let mut sessions: Vec<&mut Tracked> = vec![&mut traced];
    if let Some(l) = live.as_mut() {
        sessions.push(l);
    }
    if let Some(c) = canceller.as_mut() {
        sessions.push(c);
    }
    let left = reap_sessions(&mut sessions);
    if finished && !left.is_empty() {
        v.push(("leftover-process", format!("left running: {}", describe(&left))));
    }

    // No file but what the payload and the report leave.
    let mut stray: Vec<String> = fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    stray.retain(|f| f != "pids" && f != "report.json");
    stray.sort();
    // One kind per sort of file, so that the lists can tell a marker left
    // (issue 18 #10) from a pid file or a temporary file; `-reported` when
    // pgrun said something on stderr, a warning or an error (a removal that
    // failed and said so is the best pgrun can do; one that left the file
    // silently is not).
    let reported = if stderr.lines().any(|l| l.starts_with("pgrun: ")) { "-reported" } else { "" };
    for (kind, files) in [
        ("leftover-marker", stray.iter().filter(|f| f.ends_with(".cancel")).collect::<Vec<_>>()),
        ("leftover-pidfile", stray.iter().filter(|f| *f == "run.pid").collect()),
        ("leftover-tmp", stray.iter().filter(|f| f.starts_with('.') && f.contains("tmp")).collect()),
        (
            "leftover-other",
            stray
                .iter()
                .filter(|f| !f.ends_with(".cancel") && *f != "run.pid" && !(f.starts_with('.') && f.contains("tmp")))
                .collect(),
        ),
    ] {
        if !files.is_empty() {
            let names: Vec<&str> = files.iter().map(|f| f.as_str()).collect();
            let kind = match (kind, reported) {
                ("leftover-marker", "") => "leftover-marker",
                ("leftover-marker", _) => "leftover-marker-reported",
                ("leftover-pidfile", "") => "leftover-pidfile",
                ("leftover-pidfile", _) => "leftover-pidfile-reported",
                ("leftover-tmp", "") => "leftover-tmp",
                ("leftover-tmp", _) => "leftover-tmp-reported",
                (_, "") => "leftover-other",
                _ => "leftover-other-reported",
            };
            v.push((kind, format!("left in the folder: {}", names.join(", "))));
        }
    }
    if let Some(cg) = &cgroup {
        let leaves = cg.leaves();
        if !leaves.is_empty() {
            v.push(("leaf", format!("cgroup leaf left: {}", leaves.join(", "))));
        }
        cg.remove();
    }

    // The bystander must have survived.
    {
        let mut b = env.bystander.lock().unwrap();
        if let Ok(Some(status)) = b.try_wait() {
            v.push(("bystander", format!("the bystander (own group) died: {status}")));
            let mut cmd = Command::new("sleep");
            cmd.arg("100000").process_group(0);
            *b = cmd.spawn().expect("restart the bystander");
        }
    }

    let trace = if inj.is_none() { fs::read_to_string(&trace_path).ok() } else { None };
    Outcome { violations: v, exit, stderr, stdout, trace, secs: start.elapsed().as_secs_f64() }
}

/// pgrun's error lines: `pgrun: ` lines other than warnings.
/// pgrun's error lines: `pgrun: ` lines other than warnings and the
/// guard's notice that it took over (`pgrun: guard: pgrun N died; stopping
/// ...`), which says what happened, not what failed.
pub fn error_lines(stderr: &str) -> usize {
    stderr
        .lines()
        .filter(|l| l.starts_with("pgrun: ") && !l.starts_with("pgrun: warning:"))
        .filter(|l| !(l.starts_with("pgrun: guard: pgrun ") && l.contains(" died; stopping ")))
        .count()
}

fn check_exit(scn: &Scenario, inj: Option<&Injection>, code: i32, exit: &str, stderr: &str, v: &mut Vec<Violation>) {
    if stderr.contains("error while loading shared libraries") {
        v.push(("loader", "the dynamic loader failed before pgrun's main".into()));
        return;
    }
    let exec_failed = inj.is_some_and(|i| i.syscall.starts_with("execve"));
    let allowed = code == scn.normal || scn.failure.contains(&code) || (exec_failed && (code == 126 || code == 127));
    if !allowed {
        let mut want = vec![scn.normal];
        want.extend(scn.failure);
        if exec_failed {
            want.extend([126, 127]);
        }
        v.push(("exit", format!("exit {exit}, not one of {want:?}")));
    }
    let errors = error_lines(stderr);
    if errors > 1 {
        v.push(("stderr", format!("{errors} error lines")));
    }
    if code != scn.normal && errors == 0 {
        v.push(("silent", format!("exit {exit} with no `pgrun:` line")));
    }
}

fn check_report(dir: &Path, code: i32, stderr: &str, v: &mut Vec<Violation>) {
    let path = dir.join("report.json");
    match fs::read_to_string(&path) {
        Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(json) => {
                if json["exit_code"].as_i64() != Some(i64::from(code)) {
                    v.push(("report", format!("report says exit_code {}, the exit was {code}", json["exit_code"])));
                }
            }
            Err(e) => v.push(("report", format!("partial report ({e}): {text:?}"))),
        },
        Err(_) if error_lines(stderr) == 0 => v.push(("report", "no report, and no line saying why".into())),
        Err(_) => {}
    }
}

fn check_stdout(
    scn: &Scenario,
    code: i32,
    stderr: &str,
    stdout: &[u8],
    baseline: Option<&[u8]>,
    v: &mut Vec<Violation>,
) {
    if scn.name == "status" && code == 0 {
        let state = serde_json::from_slice::<serde_json::Value>(stdout)
            .ok()
            .and_then(|j| j["state"].as_str().map(String::from));
        if !matches!(state.as_deref(), Some("running") | Some("stopping")) {
            v.push(("stdout", format!("exit 0 but state {state:?}: {:?}", String::from_utf8_lossy(stdout))));
        }
    }
    if let Some(base) = baseline
        && code == scn.normal
        && error_lines(stderr) == 0
        && stdout != base
    {
        v.push((
            "stdout",
            format!("output differs from the uninjected run: {} bytes, not {}", stdout.len(), base.len()),
        ));
    }
}

/// A case as a shell command line, to reproduce it by hand (the folder
/// stands for the case's; create it first).
pub fn repro(pgrun: &Path, scn: &Scenario, inj: &Injection) -> String {
    let dir = Path::new("/tmp/pgrun-fault");
    let quote = |s: &str| {
        if s.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-=:,".contains(&b)) {
            s.to_string()
        } else {
            format!("'{}'", s.replace('\'', "'\\''"))
        }
    };
    let mut words = vec!["strace".to_string()];
    words.extend(strace_args(Some(inj), "/dev/null"));
    words.push(pgrun.display().to_string());
    words.extend((scn.args)(dir));
    let line = words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ");
    let mut text = format!("mkdir -p {}; rm -f {}/*; {line}; echo exit=$?", dir.display(), dir.display());
    match scn.shape {
        Shape::Run => {}
        Shape::CancelledRun => text.push_str("   # and, once it runs: pgrun cancel /tmp/pgrun-fault/run.pid"),
        Shape::KilledRun => text.push_str("   # and, once it runs: kill -KILL <that pgrun's pid>"),
        Shape::AgainstLiveRun => {
            let live = scenario::live_run_args(dir).iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ");
            text = format!("{} {live} &   # first, the run it is aimed at\n{text}", pgrun.display());
        }
    }
    let _ = std::io::stdout().flush();
    text
}

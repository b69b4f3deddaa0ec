//! Helpers shared by the integration tests: running the built binary,
//! polling for files with a deadline, telling whether a process is dead, and
//! cleaning up every process a test started (and only those).

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Generous: the suite runs in parallel on a busy 2-core machine.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// `--timeout` values for a test whose run must time out while its command
/// is still busy (say, mid-stream): the first is short, and each next one is
/// for a retry when the command had not got far enough by then (a busy host
/// is slower, so the test takes longer instead of failing).
pub const SHORT_TIMEOUTS: [&str; 6] = ["0.25", "0.5", "1", "2", "4", "8"];

/// Whether this is the long target (tests/long.rs, `cargo test --features
/// long-tests --test long`), which compiles the loops, the fuzz test and
/// the properties at full size; every other target runs them quick.
pub fn full_size() -> bool {
    env!("CARGO_CRATE_NAME") == "long"
}

/// How many rounds a repeated or randomised test makes (stress loops, the
/// fuzz test's cases, the properties' cases): `quick` in the default suite,
/// `full` in the long target (see [`full_size`]).
pub fn rounds(quick: usize, full: usize) -> usize {
    if full_size() { full } else { quick }
}

/// The binary under test.
pub fn pgrun_path() -> &'static str {
    env!("CARGO_BIN_EXE_pgrun")
}

/// The python3 the tests run: the interpreter behind `python3` on PATH
/// (its `sys.executable`), found once. A launcher in front of it (a pyenv
/// shim is a bash script that runs `pyenv exec`, about twice python's own
/// start-up) then runs once per suite, not for each of the ~80 python3
/// processes it starts. The path is shell-safe (else `python3` itself), so
/// payloads written for `sh -c` use it as it is.
pub fn python3() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output();
        let found = match out {
            Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
            _ => String::new(),
        };
        let safe = |b: u8| b.is_ascii_alphanumeric() || b"/._-+".contains(&b);
        if found.starts_with('/') && found.bytes().all(safe) { found } else { "python3".to_string() }
    })
}

/// `pgrun ARGS...` as a std Command, stdio inherited from nothing, and
/// SIGINT and SIGQUIT at their defaults: a suite started in the background
/// of a script or under nohup inherits them ignored, and ignored signals
/// pass on to every command, which would change what the tests see.
pub fn pgrun<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut cmd = Command::new(pgrun_path());
    cmd.args(args).stdin(Stdio::null());
    default_signals(&mut cmd);
    cmd
}

/// Give `cmd` SIGINT and SIGQUIT at their defaults (see [`pgrun`]): the
/// suite's own process takes them at their defaults once, so that every
/// command inherits them so. Not a `pre_exec` of each command: that would
/// make std fork the whole (large, many-threaded) test process for each
/// spawn instead of using posix_spawn, which cost the suite seconds of
/// CPU. A test's own `pre_exec` still runs in the child as before.
pub fn default_signals(cmd: &mut Command) -> &mut Command {
    static DEFAULTS: std::sync::Once = std::sync::Once::new();
    DEFAULTS.call_once(|| {
        // SAFETY: signal(2) with SIG_DFL installs no handler; the suite
        // itself relies on neither signal.
        unsafe {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
        }
    });
    cmd
}

/// Start `cmd` with `signals` blocked, as its caller. pgrun hands its
/// caller's mask on to the command, so a signal sent to the group early
/// stays pending in the command until the command unblocks it, which it does
/// once its handlers are in place: no race between the handlers and a short
/// timeout. (The command must unblock them itself: `signal.pthread_sigmask`
/// in Python.)
pub fn with_blocked<'a>(cmd: &'a mut Command, signals: &'static [i32]) -> &'a mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: sigprocmask is async-signal-safe; the set is on the stack.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &s in signals {
                libc::sigaddset(&mut set, s);
            }
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Ok(())
        })
    }
}

/// Start `cmd` with `signal` ignored, as its caller: ignored signals pass on
/// to the command from its first instruction, so "a command that ignores
/// TERM" needs no trap to race a short timeout.
pub fn with_ignored(cmd: &mut Command, signal: i32) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: signal(2) is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(signal, libc::SIG_IGN);
            Ok(())
        })
    }
}

/// Something a test needs that a machine may not offer. The suite never
/// counts a test that could not run as passed: when the capability is
/// missing, the test fails, saying what is missing, unless whoever runs the
/// suite declares the skip with `PGRUN_TEST_SKIP_<NAME>=<reason>`; then it
/// prints `skipped: ...` and returns. On a machine that has the capability
/// the variable changes nothing: the test runs.
#[derive(Clone, Copy, Debug)]
pub enum Capability {
    /// `unshare --pid --fork --mount-proc` works (root, or user namespaces).
    PidNamespaces,
    /// Running as root with util-linux's setpriv, so a test can act as the
    /// unprivileged user nobody.
    UnprivilegedUser,
    /// `unshare --mount` works and mounts inside it (tmpfs, read-only bind
    /// mounts) are allowed: root.
    MountNamespaces,
    /// A cgroup2 hierarchy is mounted and a cgroup can be created under the
    /// suite's own (root, or a delegated subtree): `--contain cgroup`.
    Cgroup2,
}

impl Capability {
    fn env(self) -> &'static str {
        match self {
            Capability::PidNamespaces => "PGRUN_TEST_SKIP_PIDNS",
            Capability::UnprivilegedUser => "PGRUN_TEST_SKIP_NOBODY",
            Capability::MountNamespaces => "PGRUN_TEST_SKIP_MOUNTNS",
            Capability::Cgroup2 => "PGRUN_TEST_SKIP_CGROUP2",
        }
    }

    /// `Ok` if this machine has it, else why not.
    fn probe(self) -> Result<(), String> {
        let (what, mut cmd) = match self {
            Capability::Cgroup2 => return cgroup2_probe(),
            Capability::PidNamespaces => {
                let mut cmd = Command::new("unshare");
                cmd.args(["--pid", "--fork", "--mount-proc", "true"]);
                ("unshare --pid --fork --mount-proc", cmd)
            }
            Capability::UnprivilegedUser => {
                // SAFETY: geteuid has no preconditions.
                if unsafe { libc::geteuid() } != 0 {
                    return Err("the suite does not run as root, so it cannot become nobody".into());
                }
                ("setpriv --reuid=65534", as_nobody("true", &[]))
            }
            Capability::MountNamespaces => {
                let mut cmd = Command::new("unshare");
                cmd.args([
                    "--mount",
                    "--",
                    "sh",
                    "-c",
                    "d=$(mktemp -d) && mount -t tmpfs tmpfs \"$d\" && umount \"$d\"; rmdir \"$d\"",
                ]);
                ("unshare --mount with a tmpfs mount", cmd)
            }
        };
        match cmd.stdin(Stdio::null()).output() {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(format!("{what} failed: {}", String::from_utf8_lossy(&out.stderr).trim())),
            Err(e) => Err(format!("{what} cannot start: {e}")),
        }
    }
}

/// The cgroup2 mount point and the folder of the suite's own cgroup in it.
pub fn cgroup2_folders() -> Result<(PathBuf, PathBuf), String> {
    let info = fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    let (root, point) = info
        .lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let fields: Vec<&str> = left.split(' ').collect();
            (right.split(' ').next() == Some("cgroup2")).then(|| (fields[3].to_string(), fields[4].to_string()))
        })
        .ok_or("no cgroup2 file system is mounted")?;
    let own = fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    let own = own.lines().find_map(|l| l.strip_prefix("0::")).ok_or("no cgroup v2 line in /proc/self/cgroup")?;
    let rel = own.strip_prefix(root.trim_end_matches('/')).ok_or("the own cgroup is outside the mount")?;
    let point = PathBuf::from(point);
    Ok((point.clone(), point.join(rel.trim_start_matches('/'))))
}

/// A cgroup can be created (and removed) under the suite's own.
fn cgroup2_probe() -> Result<(), String> {
    let (_, own) = cgroup2_folders()?;
    static PROBES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = own.join(format!("pgrun-test-probe-{}-{n}", std::process::id()));
    fs::create_dir(&probe).map_err(|e| format!("cannot create a cgroup at {}: {e}", probe.display()))?;
    let _ = fs::remove_dir(&probe);
    Ok(())
}

/// Whether the test may go on: true if the machine has `capability`; false
/// (after printing `skipped: ...`) if it lacks it and the skip is declared;
/// otherwise the test fails here, naming the variable that declares a skip.
pub fn require(capability: Capability) -> bool {
    let Err(why) = capability.probe() else { return true };
    let var = capability.env();
    match std::env::var(var) {
        Ok(reason) if !reason.trim().is_empty() => {
            eprintln!("skipped: {capability:?} is not available ({why}); skip declared by {var}={reason}");
            false
        }
        _ => panic!(
            "{capability:?} is not available here: {why}. This test cannot run; set {var}=<reason> to skip it knowingly"
        ),
    }
}

/// A scratch folder, removed at the end of the test.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        Scratch { dir: tempfile::Builder::new().prefix("pgrun-test-").tempdir().expect("tempdir") }
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
    /// The folder as a string, for shell payloads.
    pub fn sh(&self) -> String {
        self.dir.path().to_str().expect("utf-8 temp path").to_string()
    }
}

/// A pipe for pgrun's stdout, as pgrun leaves it: on Linux pgrun widens a
/// destination pipe to hold 1 MiB (where it may), so a test that fills the
/// pipe widens it first and reads the capacity after (`F_GETPIPE_SZ`).
pub fn widened_pipe() -> (std::io::PipeReader, std::io::PipeWriter) {
    use std::os::fd::AsRawFd;
    let (reader, writer) = std::io::pipe().unwrap();
    // SAFETY: fcntl on a pipe this function made; failure leaves it as it
    // was (pgrun's widening fails alike).
    unsafe { libc::fcntl(reader.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    (reader, writer)
}

/// Poll `cond` with backoff until it holds or the deadline passes.
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Wait until `path` holds a complete line (ends in a newline) and return
/// its content without the newline.
pub fn wait_line(path: &Path) -> String {
    let mut text = String::new();
    eventually(&format!("a line in {}", path.display()), || {
        text = fs::read_to_string(path).unwrap_or_default();
        text.ends_with('\n')
    });
    text.trim_end().to_string()
}

/// Wait for a pid written by a payload (`echo $$ > FILE`) and guard it.
pub fn wait_pid(path: &Path, guard: &mut Guard) -> i32 {
    let pid: i32 = wait_line(path).parse().expect("a pid");
    guard.record(pid);
    pid
}

/// `/proc/PID/stat` fields after the command name: state is index 0, pgrp 2,
/// starttime 19. `None` if the process is gone.
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.rfind(')')?;
    Some(stat[close + 1..].split_whitespace().map(str::to_string).collect())
}

/// One read of `/proc/PID/stat`: what a test needs to tell a process apart
/// from a later one with the same pid (`start`), and where it stands.
#[derive(Clone, Debug)]
pub struct ProcStat {
    /// The state letter (`R`, `S`, `Z`...).
    pub state: String,
    pub pgrp: i32,
    pub session: i32,
    /// Start time in clock ticks since boot: with the pid, an identity.
    pub start: u64,
}

/// [`ProcStat`] of `pid`, read at once; `None` if the process is gone.
pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    let f = stat_fields(pid)?;
    Some(ProcStat {
        state: f[0].clone(),
        pgrp: f[2].parse().ok()?,
        session: f[3].parse().ok()?,
        start: f[19].parse().ok()?,
    })
}

/// Live descendants of `pid` (children, grandchildren...), from `/proc`.
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut parent_of = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Some(p) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok())
            && let Some(f) = stat_fields(p)
            && f[0] != "Z"
        {
            parent_of.push((p, f[1].parse::<i32>().unwrap_or(0)));
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(parent_of.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    found.split_off(1)
}

/// A live descendant of `pid` whose command name (`/proc/PID/comm`) is
/// `comm`, polled for until one appears (a payload may still be on its way
/// to the `exec` that names it).
pub fn descendant_named(pid: i32, comm: &str) -> i32 {
    let mut found = None;
    eventually(&format!("a {comm} under {pid}"), || {
        found = descendants(pid)
            .into_iter()
            .find(|&p| fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim_end() == comm));
        found.is_some()
    });
    found.unwrap()
}

/// pgrun's guard: its child named `pgrun-guard`.
pub fn guard_of(pgrun: i32) -> i32 {
    descendant_named(pgrun, "pgrun-guard")
}

/// Dead: `/proc/PID/stat` is gone or shows state Z.
pub fn is_dead(pid: i32) -> bool {
    stat_fields(pid).is_none_or(|f| f[0] == "Z")
}

/// The process state letter (`R`, `S`, `T`, `Z`...), if it exists.
pub fn state(pid: i32) -> Option<String> {
    stat_fields(pid).map(|f| f[0].clone())
}

/// The parent of `pid`, if it exists.
pub fn ppid(pid: i32) -> Option<i32> {
    stat_fields(pid).and_then(|f| f[1].parse().ok())
}

/// The process group of `pid`, if it exists.
pub fn pgrp(pid: i32) -> Option<i32> {
    stat_fields(pid).and_then(|f| f[2].parse().ok())
}

pub fn wait_dead(pid: i32) {
    eventually(&format!("pid {pid} to die"), || is_dead(pid));
}

/// Records the processes a test started; on drop SIGKILLs those still alive,
/// and only if the pid still names the same process (same start time), so a
/// reused pid is never hit.
#[derive(Default)]
pub struct Guard {
    pids: Vec<(i32, String)>,
    children: Vec<Child>,
    /// Group ids, with their leader's start time when it was recorded.
    groups: Vec<(i32, Option<String>)>,
}

impl Guard {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn record(&mut self, pid: i32) {
        if let Some(f) = stat_fields(pid) {
            self.pids.push((pid, f[19].clone()));
        }
    }
    /// Record a process group that a pgrun this test started created (read
    /// from its pid file while the group existed). A group id cannot be
    /// reused while any member of the group lives, so killing it on drop
    /// can only hit what is left of that group.
    pub fn record_group(&mut self, pgid: i32) {
        let leader_start = stat_fields(pgid).map(|f| f[19].clone());
        self.groups.push((pgid, leader_start));
    }
    /// Spawn `cmd` and keep its handle; killed on drop if still running.
    pub fn spawn(&mut self, cmd: &mut Command) -> usize {
        let child = cmd.spawn().expect("spawn");
        self.children.push(child);
        self.children.len() - 1
    }
    /// Spawn `cmd` and reap it from a thread as soon as it ends (so it never
    /// lingers as a zombie of the test); the receiver gets its status.
    pub fn spawn_reaped(&mut self, cmd: &mut Command) -> (i32, std::sync::mpsc::Receiver<i32>) {
        let mut child = cmd.spawn().expect("spawn");
        let pid = child.id() as i32;
        self.record(pid);
        let (tx, rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(code_of(child.wait().expect("wait")));
        });
        (pid, rx)
    }
    pub fn child(&mut self, index: usize) -> &mut Child {
        &mut self.children[index]
    }
    /// Wait for child `index` with the suite deadline; returns its output
    /// status code (or 128+signal).
    pub fn wait(&mut self, index: usize) -> i32 {
        let child = &mut self.children[index];
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return code_of(status);
            }
            assert!(start.elapsed() < DEADLINE, "pgrun did not exit in time");
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // A child still running here means the test failed half-way: what it
        // started is ours too, so record its descendants before killing it.
        let running: Vec<i32> = self
            .children
            .iter_mut()
            .filter_map(|c| c.try_wait().ok().flatten().is_none().then(|| c.id() as i32))
            .collect();
        for pid in running {
            for descendant in descendants(pid) {
                self.record(descendant);
            }
        }
        for child in &mut self.children {
            if child.try_wait().ok().flatten().is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        for (pgid, leader_start) in &self.groups {
            if group_still_ours(*pgid, leader_start.as_deref()) {
                // SAFETY: a group this test created that still exists, see
                // record_group and group_still_ours.
                unsafe { libc::kill(-*pgid, libc::SIGKILL) };
            }
        }
        for (pid, start) in &self.pids {
            if let Some(f) = stat_fields(*pid)
                && &f[19] == start
                && f[0] != "Z"
            {
                // SAFETY: a pid we recorded, verified by its start time.
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
        }
    }
}

/// Whether group `pgid` still exists and is still the one recorded: some
/// live process is in it, and if its leader is alive, it is the process that
/// led it when it was recorded (same start time). A group that is gone is
/// never signalled: its id may have been reused by another group.
fn group_still_ours(pgid: i32, leader_start: Option<&str>) -> bool {
    // No process at all in the group (ESRCH): gone, without reading all of
    // /proc. kill with signal 0 only probes.
    // SAFETY: kill takes plain integers; signal 0 sends nothing.
    if unsafe { libc::kill(-pgid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return false;
    }
    if let (Some(f), Some(start)) = (stat_fields(pgid), leader_start)
        && f[2] == pgid.to_string()
        && f[19] != start
    {
        return false; // a new process leads a group with this id
    }
    fs::read_dir("/proc").into_iter().flatten().flatten().any(|entry| {
        entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
            .and_then(stat_fields)
            .is_some_and(|f| f[0] != "Z" && f[2] == pgid.to_string())
    })
}

/// Exit code, or 128+N for death by signal N.
pub fn code_of(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Run to completion with the suite deadline; panics with argv, status,
/// stdout and stderr if it does not end in time.
pub fn run(cmd: &mut Command) -> Output {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn pgrun");
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(out) => out.expect("wait"),
        Err(_) => {
            // What it started is ours too: its descendants first (found from
            // /proc while it still holds them), then the child.
            for descendant in descendants(pid) {
                // SAFETY: kill takes plain integers; a live descendant of our child.
                unsafe { libc::kill(descendant, libc::SIGKILL) };
            }
            // SAFETY: our own child, not yet reaped (the waiter thread is stuck).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{cmd:?} did not finish within {DEADLINE:?}");
        }
    }
}

/// Assert the exit status, showing everything about the run if it differs.
pub fn assert_status(out: &Output, want: i32, what: &str) {
    let got = code_of(out.status);
    assert_eq!(
        got,
        want,
        "{what}: exit {got}, want {want}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Send `signal` to a process this test started.
pub fn send(pid: i32, signal: i32) {
    // SAFETY: kill with a positive pid the test recorded.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill({pid}, {signal})");
}

/// The pid that holds a lock on `path` (F_GETLK), if any.
pub fn lock_holder(path: &Path) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let file = fs::File::open(path).ok()?;
    // SAFETY: a zeroed flock is valid; F_GETLK fills it in.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: a valid fd and a writable flock.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut lock) };
    assert_eq!(rc, 0, "F_GETLK on {}", path.display());
    (lock.l_type != libc::F_UNLCK as libc::c_short).then_some(lock.l_pid)
}

/// Whether a non-blocking write lock on `path` can be taken right now (the
/// attempt is released at once).
pub fn can_lock(path: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let file = fs::OpenOptions::new().read(true).write(true).open(path).expect("open for locking");
    // SAFETY: as above.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: a valid fd and flock; the lock dies with `file`.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &lock) == 0 }
}

/// Start `pgrun -p PIDFILE ARGS... -- sh -c PAYLOAD` in the background and
/// wait until its pid file is published. Returns the child's index and the
/// group id it published.
pub fn start_published(guard: &mut Guard, pidfile: &Path, extra: &[&str], payload: &str) -> (usize, i32) {
    start_published_from(guard, pidfile, &mut published_run(pidfile, extra, payload))
}

/// [`start_published`], with SIGTERM ignored from the command's first
/// instruction ([`with_ignored`]): a command that ignores TERM with no
/// `trap` for a signal sent right after the publication to race.
pub fn start_published_ignoring_term(guard: &mut Guard, pidfile: &Path, extra: &[&str], payload: &str) -> (usize, i32) {
    let mut cmd = published_run(pidfile, extra, payload);
    start_published_from(guard, pidfile, with_ignored(&mut cmd, libc::SIGTERM))
}

fn published_run(pidfile: &Path, extra: &[&str], payload: &str) -> Command {
    let mut args: Vec<&str> = vec!["-p", pidfile.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", payload]);
    pgrun(&args)
}

fn start_published_from(guard: &mut Guard, pidfile: &Path, cmd: &mut Command) -> (usize, i32) {
    let index = guard.spawn(cmd);
    let pgid: i32 = wait_line(pidfile).parse().expect("pid file holds a number");
    guard.record(pgid);
    guard.record_group(pgid);
    (index, pgid)
}

/// Spawn `pgrun wait -v ARGS...` (stdout and stderr piped) and return once
/// it has found the live run and is waiting for it (its verbose line says
/// so). The rest of its stderr stays in the pipe.
pub fn spawn_waiting(guard: &mut Guard, args: &[&str]) -> usize {
    let mut all = vec!["wait", "-v"];
    all.extend_from_slice(args);
    let index = guard.spawn(pgrun(&all).stdout(Stdio::piped()).stderr(Stdio::piped()));
    read_stderr_until(guard, index, "waiting for pgrun");
    index
}

/// Read child `index`'s stderr (piped) until a line contains `what`; the
/// rest stays in the pipe (one byte at a time: nothing after the line is
/// taken).
pub fn read_stderr_until(guard: &mut Guard, index: usize, what: &str) {
    let stderr = guard.child(index).stderr.as_mut().expect("stderr piped");
    let mut line = Vec::new();
    loop {
        let mut byte = [0u8];
        let n = std::io::Read::read(stderr, &mut byte).expect("read stderr");
        assert!(n == 1, "ended before saying {what:?}: {}", String::from_utf8_lossy(&line));
        line.push(byte[0]);
        if byte[0] == b'\n' {
            if String::from_utf8_lossy(&line).contains(what) {
                return;
            }
            line.clear();
        }
    }
}

/// Read a JSON file.
pub fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(path).expect("report exists")).expect("valid JSON")
}

/// Every process a test starts carries a tag of its own in its environment
/// (pgrun passes it on to the supervising pgrun, the guard and the
/// command): whatever of them a failed test leaves running, detached from
/// the test's own children, is found by it and killed on drop.
pub struct Tag(String);

const TAG_VARIABLE: &str = "PGRUN_TEST_TAG";

impl Tag {
    /// A tag no other test of this process has (`name` says whose).
    pub fn new(name: &str) -> Tag {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Tag(format!("{}-{n}-{name}", std::process::id()))
    }
    /// Give `cmd` (and so every process it starts) the tag.
    pub fn on<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env(TAG_VARIABLE, &self.0)
    }
    /// Live processes that hold this tag.
    pub fn processes(&self) -> Vec<i32> {
        let needle = format!("{TAG_VARIABLE}={}", self.0);
        fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| !is_dead(pid))
            .filter(|&pid| {
                fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|&b| b == 0).any(|var| var == needle.as_bytes()))
            })
            .collect()
    }
}

impl Drop for Tag {
    fn drop(&mut self) {
        for pid in self.processes() {
            // SAFETY: kill takes plain integers; a live process that holds
            // this test's own tag (a pid read from /proc just now).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// Start the next run on pid file `pidfile` (a `touch` of a witness file
/// in `scratch`) and say whether its command ran: 0 and the witness made,
/// or 143 (a request left at the marker path cancelled it before its
/// start) and none.
pub fn next_run_runs(scratch: &Scratch, pidfile: &str) -> bool {
    let witness = scratch.path("ran");
    let out = run(pgrun(["-p", pidfile, "--", "touch", witness.to_str().unwrap()]).stdin(Stdio::null()));
    let ran = witness.exists();
    assert_status(&out, if ran { 0 } else { 143 }, "the next run on the pid file");
    ran
}

/// A test-only pause of pgrun at a named step (see `src/test_hook.rs`):
/// the environment entry that asks for it, a way to know pgrun got there,
/// and a way to let it go on.
pub struct Pause {
    gate: PathBuf,
    step: &'static str,
}

impl Pause {
    pub fn new(scratch: &Scratch, step: &'static str) -> Self {
        Pause { gate: scratch.path(&format!("gate-{step}")), step }
    }
    /// Ask `cmd` (a pgrun) to pause at the step.
    pub fn arm<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env("PGRUN_TEST_PAUSE", format!("{}={}", self.step, self.gate.display()))
    }
    /// Wait until pgrun has reached the step and is waiting there.
    pub fn wait_reached(&self) {
        let reached = PathBuf::from(format!("{}.reached", self.gate.display()));
        eventually(&format!("pgrun to reach step {}", self.step), || reached.exists());
    }
    /// Let pgrun go on.
    pub fn release(&self) {
        fs::write(&self.gate, b"").expect("open the gate");
    }
}

/// A bystander: a process in a group of its own that logs every catchable
/// signal it receives to `canary.log` (and so must end the test alive with
/// an empty log). Returns its pid (= its group id).
pub fn spawn_canary(guard: &mut Guard, scratch: &Scratch) -> i32 {
    use std::os::unix::process::CommandExt;
    let script = canary_script(scratch);
    let ready = scratch.path("canary.ready");
    let mut cmd = Command::new(python3());
    cmd.args(["-c", &script]).stdin(Stdio::null()).process_group(0);
    let (pid, _) = guard.spawn_reaped(&mut cmd);
    guard.record_group(pid);
    wait_line(&ready);
    pid
}

/// The canary's Python program: log every catchable signal to
/// `canary.log`, write `canary.ready`, wait.
pub fn canary_script(scratch: &Scratch) -> String {
    let log = scratch.path("canary.log");
    let ready = scratch.path("canary.ready");
    format!(
        "import signal, os\n\
         def note(n, f):\n    open({log:?}, 'a').write(signal.Signals(n).name + '\\n')\n\
         for s in signal.valid_signals():\n    \
             try: signal.signal(s, note)\n    \
             except (OSError, ValueError): pass\n\
         open({ready:?}, 'w').write('ready\\n')\n\
         while True: signal.pause()\n",
        log = log.display().to_string(),
        ready = ready.display().to_string()
    )
}

/// The canary is alive and has received no signal.
pub fn assert_canary_untouched(scratch: &Scratch, canary: i32) {
    assert!(!is_dead(canary), "the bystander {canary} was killed");
    let log = fs::read_to_string(scratch.path("canary.log")).unwrap_or_default();
    assert!(log.is_empty(), "the bystander {canary} received signals: {log:?}");
}

/// A pseudo-terminal: its master and its slave.
pub struct Pty {
    pub master: std::os::fd::OwnedFd,
    pub slave: std::os::fd::OwnedFd,
}

/// A pseudo-terminal whose two fds are close-on-exec from the start
/// (openpty(3) makes them inheritable): the tests run in parallel, and any
/// process another test spawned meanwhile would hold them (a terminal that
/// then never hangs up; one fd too many for a test that counts them). A
/// Command given the slave as stdin, stdout or stderr still gets its copy.
pub fn openpty_cloexec(size: Option<&nix::pty::Winsize>) -> Pty {
    use nix::fcntl::OFlag;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let master = nix::pty::posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC).expect("posix_openpt");
    nix::pty::grantpt(&master).expect("grantpt");
    nix::pty::unlockpt(&master).expect("unlockpt");
    let name = nix::pty::ptsname_r(&master).expect("ptsname_r");
    // std opens with O_CLOEXEC.
    let slave =
        fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOCTTY).open(name).expect("open the slave");
    if let Some(size) = size {
        // SAFETY: TIOCSWINSZ reads one winsize from a valid pointer.
        assert_eq!(unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCSWINSZ, size) }, 0, "TIOCSWINSZ");
    }
    Pty { master: master.into(), slave: slave.into() }
}

/// Start `cmd` in a session of its own whose controlling terminal is its
/// stdin (a pty slave given as stdin), as a login shell's.
pub fn with_controlling_terminal(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// Run `cmd` as the unprivileged user nobody (uid and gid 65534, no
/// supplementary groups), through util-linux's setpriv.
pub fn as_nobody(program: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--", program]).args(args).stdin(Stdio::null());
    cmd
}

/// Make `path` (a folder) usable by nobody: world-readable, or with
/// `writable`, world-writable and sticky like /tmp.
pub fn open_up(path: &Path, writable: bool) {
    use std::os::unix::fs::PermissionsExt;
    let mode = if writable { 0o1777 } else { 0o755 };
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}

/// `pgrun ARGS...` under `strace -f -qq -e inject=SPEC` (e.g.
/// `unlink:error=EIO:when=1`), so a test can make one syscall fail; with
/// `only_path`, only the calls on that path (`strace -P`). Fails the test
/// with a clear message if strace is not installed.
pub fn pgrun_injected(inject: &str, only_path: Option<&Path>, args: &[&str]) -> Command {
    let found = Command::new("strace").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(found.is_ok_and(|s| s.success()), "this test needs strace (to inject {inject}); install it");
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-o", "/dev/null", "-e", &format!("inject={inject}")]);
    if let Some(path) = only_path {
        cmd.arg("-P").arg(path);
    }
    cmd.arg("--").arg(pgrun_path()).args(args).stdin(Stdio::null());
    default_signals(&mut cmd);
    cmd
}

/// The children-file race tests' siblings: makes `dir/fifo` and returns the
/// shell lines that fork 12 processes blocked reading it, each pid appended
/// to `dir/siblings` (the payload then appends `done`; see
/// [`fifo_siblings`]).
pub fn fork_fifo_siblings(scratch: &Scratch) -> String {
    let fifo = scratch.path("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let dir = scratch.sh();
    format!("for i in 1 2 3 4 5 6 7 8 9 10 11 12; do cat {dir}/fifo >/dev/null & echo $! >> {dir}/siblings; done")
}

/// The siblings of [`fork_fifo_siblings`]: waits for the payload's `done`
/// line in `dir/siblings`, records the pids with `guard`, and returns them.
pub fn fifo_siblings(scratch: &Scratch, guard: &mut Guard) -> Vec<i32> {
    eventually("the 12 siblings", || {
        fs::read_to_string(scratch.path("siblings")).unwrap_or_default().ends_with("done\n")
    });
    let siblings: Vec<i32> =
        fs::read_to_string(scratch.path("siblings")).unwrap().lines().filter_map(|l| l.parse().ok()).collect();
    assert_eq!(siblings.len(), 12);
    for &pid in &siblings {
        guard.record(pid);
    }
    siblings
}

/// End [`fifo_siblings`]'s processes (EOF on the fifo) and wait until their
/// parent has reaped them.
pub fn end_fifo_siblings(scratch: &Scratch, siblings: &[i32]) {
    drop(fs::OpenOptions::new().write(true).open(scratch.path("fifo")).unwrap());
    for &pid in siblings {
        eventually("a sibling reaped", || !Path::new(&format!("/proc/{pid}")).exists());
    }
}

/// The pgrun that `strace_pid` runs, once strace's injected SIGSTOP has
/// stopped it with `file` open (right after its first read of it).
pub fn stopped_reading(strace_pid: i32, file: &Path) -> i32 {
    let mut pgrun = 0;
    eventually(&format!("pgrun stopped after its first read of {}", file.display()), || {
        pgrun = descendants(strace_pid).first().copied().unwrap_or(0);
        let reading = fs::read_dir(format!("/proc/{pgrun}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| fs::read_link(fd.path()).is_ok_and(|target| target == file));
        pgrun > 0 && reading && state(pgrun).is_some_and(|s| s == "t" || s == "T")
    });
    pgrun
}

/// The last whole line of an endless writer's log (`DIR/log`: it appends
/// each line's number after writing the line).
pub fn last_logged(dir: &Path) -> Option<u64> {
    let log = fs::read_to_string(dir.join("log")).ok()?;
    log.strip_suffix('\n').unwrap_or("").rsplit('\n').next()?.parse().ok()
}

/// Stop the endless writer run `index` (published at `pidfile`) the way
/// `how` says, mid-stream: "timeout" (its `-t` ends it), "cancel" or
/// "sigterm" (once the writer has logged 2000 lines); then wait for pgrun
/// and check its status (124 for the timeout, else 143).
pub fn stop_mid_stream(how: &str, guard: &mut Guard, index: usize, dir: &Path, pidfile: &Path) {
    if how != "timeout" {
        eventually("a long stream", || last_logged(dir) > Some(2000));
    }
    match how {
        "cancel" => assert_status(&run(&mut pgrun(["cancel", pidfile.to_str().unwrap()])), 0, "cancel"),
        "sigterm" => send(guard.child(index).id() as i32, libc::SIGTERM),
        _ => {}
    }
    let code = guard.wait(index);
    assert_eq!(code, if how == "timeout" { 124 } else { 143 }, "{how}");
}

/// A process this test traces to hold it in its exit (see [`hold_at_exit`]).
pub struct HeldAtExit {
    pid: i32,
    released: bool,
}

/// Trace process `pid` (a descendant of the test) with `PTRACE_O_TRACEEXIT`:
/// once it is sent its death, it stops in its exit, its KILL still pending,
/// and stays there, neither alive nor gone, until [`HeldAtExit::release`]
/// (or the end of the tracing thread: the test's). What a process dying on
/// a loaded machine looks like, for as long as the test wants. Signals it
/// gets meanwhile stop it too, until its KILL comes.
pub fn hold_at_exit(pid: i32) -> HeldAtExit {
    // SAFETY: PTRACE_SEIZE takes no pointers (options as the data word);
    // `pid` is a process this test started, alive (it wrote its pid).
    let r = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0, libc::PTRACE_O_TRACEEXIT as libc::c_long) };
    assert_eq!(r, 0, "cannot trace process {pid}: {}", std::io::Error::last_os_error());
    HeldAtExit { pid, released: false }
}

impl HeldAtExit {
    /// Let it finish its exit: every stop is waited for and let go on
    /// until it is held in its exit, then it is let go of. Call it once the
    /// process was sent its KILL.
    pub fn release(&mut self) {
        self.released = true;
        let start = Instant::now();
        loop {
            let mut status = 0;
            // SAFETY: waitpid on the tracee with a valid status pointer.
            let r = unsafe { libc::waitpid(self.pid, &mut status, libc::__WALL | libc::WNOHANG) };
            if r < 0 || libc::WIFEXITED(status) && r == self.pid || libc::WIFSIGNALED(status) && r == self.pid {
                return;
            }
            if r == self.pid && libc::WIFSTOPPED(status) {
                let at_exit = status >> 8 == libc::SIGTRAP | (libc::PTRACE_EVENT_EXIT << 8);
                let (request, signal) = if at_exit {
                    (libc::PTRACE_DETACH, 0)
                } else if status >> 16 != 0 {
                    (libc::PTRACE_CONT, 0)
                } else {
                    (libc::PTRACE_CONT, libc::WSTOPSIG(status))
                };
                // SAFETY: a tracee of this thread in a ptrace-stop; no pointers.
                unsafe { libc::ptrace(request, self.pid, 0, signal as libc::c_long) };
                if at_exit {
                    return;
                }
                continue;
            }
            assert!(start.elapsed() < DEADLINE, "process {} was not held in its exit in time", self.pid);
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for HeldAtExit {
    /// A test that failed before it let the process go: kill it, and let
    /// it finish its exit.
    fn drop(&mut self) {
        if !self.released {
            // SAFETY: the tracee cannot be reaped (so its pid reused) while
            // this thread traces it and has not let it go.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            self.release();
        }
    }
}

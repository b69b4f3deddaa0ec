//! The test's own commands (cancel, status, wait) running in the
//! background, each looking at the run the moment it exits.

use super::*;

/// A command of the test's own (cancel, status, wait) running in the
/// background, reaped by a thread that, the moment it has exited, looks
/// at the run (`at_exit`).
pub(super) struct Pending<T> {
    pub(super) pid: i32,
    /// Set the moment its thread has reaped it: its pid is free from then
    /// on, and never signalled.
    pub(super) reaped: Arc<std::sync::atomic::AtomicBool>,
    pub(super) what: String,
    pub(super) done: mpsc::Receiver<Done<T>>,
    /// `wait -v`: a note once it has found the live run and waits for it.
    pub(super) waiting: Option<mpsc::Receiver<()>>,
}

pub(super) struct Done<T> {
    pub(super) status: ExitStatus,
    pub(super) stdout: String,
    pub(super) stderr: String,
    pub(super) took: Duration,
    pub(super) seen: T,
}

impl<T> Done<T> {
    pub(super) fn code(&self) -> i32 {
        code_of(self.status)
    }
}

/// Start `cmd` (stdout and stderr piped); the thread that reaps it runs
/// `at_exit` at once and times it from the spawn to its exit. With
/// `watch`, stdout is dropped and stderr read line by line, and the first
/// line containing `watch` is announced on `Pending::waiting`.
pub(super) fn start<T: Send + 'static>(
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
    pub(super) fn finish(self) -> Result<Done<T>, String> {
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
pub(super) const STATES: [(&str, i32); 5] =
    [("running", 0), ("stopping", 0), ("stale", 1), ("not-running", 3), ("cancel-pending", 3)];

/// Start `pgrun status --json` on the run; it notes, the moment it exits,
/// which of the run's processes are still there.
pub(super) fn status_call(pidfile: &Path, ids: &RunIds) -> Pending<Left> {
    let ids = ids.clone();
    let mut cmd = pgrun(["status", "--json", pidfile.to_str().unwrap()]);
    start("pgrun status".into(), &mut cmd, None, move || ids.left())
}

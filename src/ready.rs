//! `pgrun wait --ready listen[:PORT] PIDFILE`: wait, from another process,
//! until a process of a live run listens on a TCP port (PORT, or any),
//! instead of for the run's end.
//!
//! Whose socket it is comes from [`crate::activity`]: a socket held by a
//! process outside the run never counts, even on the same port. Linux has
//! no event for a new listening socket (`/proc/net/tcp` announces no
//! change), so the run's sockets are looked at with a backoff from 10 ms
//! up to [`LONGEST_PAUSE`], well under the 100 ms the answer may take: one
//! look starts at most that long after the one before (the time the look
//! took is taken off the pause), unless a look itself takes longer (a run
//! of thousands of processes). The pauses are waits on the events of the
//! run's end (its lock let go of, its pgrun's pidfd), so a run that ends
//! is seen at once. Only looks: no signal, no file. (`bench/measure.py`'s
//! `ready_latency` times a `listen()` to the wait's return.)

use crate::activity::{self, Listening};
use crate::backoff::Backoff;
use crate::pidfile::Record;
use crate::sys::{self, Pid};
use anyhow::{Context, Result, anyhow};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// The first pause between two looks at the run's sockets.
const FIRST_PAUSE: Duration = Duration::from_millis(10);
/// The longest, from the start of one look to the start of the next: a
/// look costs a read of the run's fd tables, and the answer must come
/// within 100 ms of the `listen()`.
pub const LONGEST_PAUSE: Duration = Duration::from_millis(50);
const _: () = assert!(LONGEST_PAUSE.as_millis() <= 100 && FIRST_PAUSE.as_millis() == 10);

/// What `--ready` waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `listen[:PORT]`: a process of the run listens on TCP port PORT (any
    /// port: `None`).
    Listen(Option<u16>),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Listen(Some(port)) => write!(f, "listens on TCP port {port}"),
            Target::Listen(None) => write!(f, "listens on a TCP port"),
        }
    }
}

/// How the wait for readiness ended.
pub enum Outcome {
    /// A process of the run listens as asked.
    Ready(Listening),
    /// The run was over first.
    Over,
    /// The deadline passed first.
    TimedOut,
}

/// What is left to say when the run was not seen ready: a process of it
/// whose fds could not be read (another user's), whose socket may have
/// been missed.
pub struct Waited {
    pub outcome: Outcome,
    pub unreadable: Option<String>,
}

/// An error if this build cannot wait for readiness (the portable path:
/// no `/proc` to read).
pub fn check_available() -> Result<()> {
    if activity::AVAILABLE {
        return Ok(());
    }
    Err(anyhow!("--ready is not available on this system: it reads the run's sockets from Linux's /proc"))
}

/// Wait until a process of the run published in `record` (its lock held
/// by the pgrun `holder`, in our PID namespace) is ready as `target` says,
/// the run is over, or `deadline` passes.
pub fn wait_until_ready(record: &Record, holder: Pid, target: Target, deadline: Option<Instant>) -> Result<Waited> {
    check_available()?;
    // A handle on the pgrun first, then the lock checked to name it still:
    // so the pidfd names that pgrun, never a process that reused its pid.
    let holder_fd = sys::pidfd::pidfd_open(holder);
    let release = record.watch_release().context("cannot wait for the lock of the pid file")?;
    let still_live = record.liveness().map_err(|e| anyhow!("cannot read the lock of the pid file: {e}"))?
        == crate::pidfile::Liveness::Live(holder);
    if !still_live {
        return Ok(Waited { outcome: Outcome::Over, unreadable: None });
    }
    let Target::Listen(port) = target;
    let mut backoff = Backoff::between(FIRST_PAUSE, LONGEST_PAUSE);
    let mut unreadable = None;
    loop {
        let looked_at = Instant::now();
        let pids = activity::run_processes(holder, record.pgid);
        let sockets = activity::look(&pids, activity::Input::NotAsked).context("cannot read the run's sockets")?;
        if let Some(found) = sockets.listening.into_iter().find(|l| port.is_none_or(|p| p == l.port)) {
            return Ok(Waited { outcome: Outcome::Ready(found), unreadable: None });
        }
        if let Some((pid, e)) = sockets.unreadable {
            crate::verbose!("cannot read the fds of process {pid}: {e}");
            unreadable = Some(format!("the fds of process {pid} of the run could not be read: {e}"));
        }
        // Wait for the run's end, or the next look.
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(Waited { outcome: Outcome::TimedOut, unreadable });
        }
        let pause = backoff.next_pause().saturating_sub(now - looked_at);
        let pause = deadline.map_or(pause, |d| pause.min(d - now));
        let mut set = [sys::PollFd::read(release.fd()); 2];
        let n = match &holder_fd {
            Some(fd) => {
                set[1] = sys::PollFd::read(fd.as_fd());
                2
            }
            None => 1,
        };
        sys::poll(&mut set[..n], Some(pause)).context("cannot wait for pgrun")?;
        if set[0].ready {
            release.outcome().context("cannot wait for the lock of the pid file")?;
            return Ok(Waited { outcome: Outcome::Over, unreadable });
        }
        if n == 2 && set[1].ready {
            return Ok(Waited { outcome: Outcome::Over, unreadable });
        }
    }
}

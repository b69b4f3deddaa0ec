//! A run's processes: how the test tells one apart from a later one with
//! its pid, what is known of a run's and what was left of it at one
//! moment, the payloads that log each process they make, and polling.

use super::*;

/// A process told apart from any later one with its pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ident {
    pub(super) pid: i32,
    pub(super) start: u64,
}

impl Ident {
    pub(super) fn of(pid: i32) -> Option<Ident> {
        proc_stat(pid).map(|s| Ident { pid, start: s.start })
    }
    /// How it stands, if the pid still names this process (zombie or not).
    pub(super) fn look(self) -> Option<ProcStat> {
        proc_stat(self.pid).filter(|s| s.start == self.start)
    }
    /// Alive: there and not a zombie.
    pub(super) fn alive(self) -> bool {
        self.look().is_some_and(|s| s.state != "Z")
    }
}

/// What the test knows of a run's processes.
#[derive(Clone, Debug, Default)]
pub(super) struct RunIds {
    pub(super) pgrun: Option<Ident>,
    pub(super) guard: Option<Ident>,
    /// Every process the payload made (it logs each).
    pub(super) procs: Vec<Ident>,
    pub(super) pgid: i32,
    /// pgrun's stderr, which its guard writes to too.
    pub(super) log: PathBuf,
}

/// What was left of a run at one moment.
#[derive(Debug, Default)]
pub(super) struct Left {
    /// Each process still there, described.
    pub(super) found: Vec<String>,
    /// All of them zombies the run's guard gave up on (its line that ends
    /// "giving up"): the command's process, orphaned to init by pgrun's
    /// death, which init had not reaped yet. The contract's one
    /// exception: a zombie pgrun cannot reap is waited for one grace after
    /// the last step, then reported. (This machine's init reaps its
    /// orphans about 1.7 s after they die.)
    pub(super) excused: bool,
}

impl Left {
    pub(super) fn is_empty(&self) -> bool {
        self.found.is_empty()
    }
    pub(super) fn said(&self) -> String {
        self.found.join(", ")
    }
}

impl RunIds {
    /// The run's processes still there in any state (a zombie still holds
    /// the group, and pgrun reaps what is its own before it is over).
    pub(super) fn left(&self) -> Left {
        let mut zombies = true;
        let mut found = Vec::new();
        for id in &self.procs {
            if let Some(s) = id.look() {
                zombies &= s.state == "Z";
                found.push(format!("process {} (state {}, group {})", id.pid, s.state, s.pgrp));
            }
        }
        let excused = !found.is_empty() && zombies && self.guard_gave_up();
        Left { found, excused }
    }

    /// What says the run is not gone right after a cancel returned: its
    /// pgrun alive, a process of it alive, anything left in its group.
    pub(super) fn left_after_cancel(&self) -> Left {
        let mut found = Vec::new();
        if let Some(pgrun) = self.pgrun
            && let Some(s) = pgrun.look().filter(|s| s.state != "Z")
        {
            found.push(format!("its pgrun {} was still running (state {})", pgrun.pid, s.state));
        }
        let mut zombies = found.is_empty();
        for id in &self.procs {
            if let Some(s) = id.look()
                && (s.state != "Z" || s.pgrp == self.pgid)
            {
                zombies &= s.state == "Z";
                found.push(format!("process {} of the run was there (state {}, group {})", id.pid, s.state, s.pgrp));
            }
        }
        let excused = !found.is_empty() && zombies && self.guard_gave_up();
        Left { found, excused }
    }

    /// The guard said it gave up on what is left of the run (its one line
    /// that ends "giving up").
    pub(super) fn guard_gave_up(&self) -> bool {
        fs::read_to_string(&self.log)
            .is_ok_and(|said| said.lines().any(|l| l.starts_with("pgrun: guard: ") && l.ends_with("; giving up")))
    }
}

/// The processes of `pgrun`'s threads' children (`/proc/PID/task/*/children`).
pub(super) fn children(pid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    for task in fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let text = fs::read_to_string(task.path().join("children")).unwrap_or_default();
        found.extend(text.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
    }
    found
}

/// Poll `cond` with backoff (1 ms to 20 ms) until it holds or `until`.
pub(super) fn poll(until: Instant, mut cond: impl FnMut() -> bool) -> bool {
    let mut pause = Duration::from_millis(1);
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// The payload's shell script: it logs the pid and start time of each
/// process it makes to `log`, then `ready`.
pub(super) fn payload(shape: Shape, log: &Path, exit_code: i32) -> String {
    let log = log.display();
    let note = format!("note() {{ read -r l < /proc/$1/stat && set -- $l && echo \"$1 ${{22}}\" >> {log}; }}");
    let body = match shape {
        Shape::Short => format!("note $$; echo ready >> {log}; exit {exit_code}"),
        Shape::Plain | Shape::IgnoresTerm => format!("note $$; echo ready >> {log}; exec sleep 300"),
        Shape::BackgroundChild => format!("sleep 300 & note $!; note $$; echo ready >> {log}; wait"),
        Shape::Escapee => format!("setsid sleep 300 & note $!; note $$; echo ready >> {log}; wait"),
    };
    format!("{note}; {body}")
}

/// The processes a payload logged, once it wrote `ready`.
pub(super) fn logged(log: &Path) -> Option<Vec<Ident>> {
    let text = fs::read_to_string(log).ok()?;
    if !text.ends_with("ready\n") {
        return None;
    }
    let ids = text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(pid, start)| Some(Ident { pid: pid.parse().ok()?, start: start.parse().ok()? }))
        .collect();
    Some(ids)
}

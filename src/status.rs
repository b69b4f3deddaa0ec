//! `pgrun status PIDFILE`: say whether a run is alive, from its pid file,
//! its lock and its marker alone. Read-only: it signals nothing and changes
//! no file.

use crate::contain::Mode;
use crate::exit::StatusExit;
use crate::pidfile::{self, Liveness, Marker, RecordError};
use crate::say;
use crate::sys::{self, Pid};
use anyhow::anyhow;
use serde::Serialize;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::SystemTime;

#[derive(Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum State {
    Running,
    Stopping,
    Stale,
    NotRunning,
    CancelPending,
}

#[derive(Serialize)]
struct Answer {
    state: State,
    pgid: Option<Pid>,
    /// The pgrun process holding the lock.
    pid: Option<Pid>,
    /// How many processes the run has, as its `--contain` mode defines it
    /// (`null`: unknown, e.g. the run is in another PID namespace, where the
    /// file's group id names other processes).
    processes: Option<usize>,
    uptime_ms: Option<u64>,
    pidfile: String,
    cancel_pending: bool,
    /// A run is starting on this path: the file is claimed, not published.
    starting: bool,
    /// Whether the pgrun holding the lock lives in another PID namespace.
    other_pid_namespace: bool,
    /// The owner of a marker that is ignored because it belongs to another
    /// user.
    #[serde(skip_serializing_if = "Option::is_none")]
    ignored_marker_uid: Option<u32>,
    /// A live run in cgroup mode: what its leaf says so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    resources: Option<crate::resources::Live>,
    /// A live run: the TCP sockets its processes listen on (absent where
    /// pgrun cannot tell: the portable path, a run in another PID
    /// namespace). See [`crate::activity`].
    #[serde(skip_serializing_if = "Option::is_none")]
    listening: Option<Vec<crate::activity::Listening>>,
    /// A live run: whether a process of it is blocked reading a terminal
    /// on its stdin; advisory (absent where `listening` is).
    #[serde(skip_serializing_if = "Option::is_none")]
    blocked_on_input: Option<bool>,
}

/// What `pgrun status` was asked (resolved from its command line by the
/// entry point, so that this module reads no command line).
#[derive(Debug, Clone)]
pub struct Options {
    /// The pid file of the run to look at.
    pub pidfile: PathBuf,
    /// `--cancel-file`: the marker, if not PIDFILE.cancel.
    pub cancel_file: Option<PathBuf>,
    /// `--json`: one JSON object instead of a line.
    pub json: bool,
}

/// `pgrun status`: answer, or say the one error; the exit status.
pub fn status(args: &Options) -> StatusExit {
    match answer(args) {
        Ok(exit) => exit,
        Err((exit, err)) => {
            say::line(format_args!("{err:#}"));
            exit
        }
    }
}

/// Look at the pid file, its locks and its marker, and print the answer.
fn answer(args: &Options) -> Result<StatusExit, (StatusExit, anyhow::Error)> {
    let path = &args.pidfile;
    let marker = args.cancel_file.clone().unwrap_or_else(|| pidfile::default_marker(path));
    if pidfile::same_file(&marker, path) {
        return Err((StatusExit::Usage, anyhow!("--cancel-file {} names the pid file itself", marker.display())));
    }
    // What the run is doing is said in JSON alone: the plain line skips its
    // cost. With it, a group- or tree-mode run is counted in the same walk
    // of its own processes (see `count_and_look`), not from a scan.
    let report = look(path, &marker, Census::Proc, args.json)?;
    print(args.json, &report, &marker).map_err(|e| (StatusExit::Unknown, anyhow!("cannot write to stdout: {e}")))?;
    Ok(match report.state {
        State::Running | State::Stopping => StatusExit::Alive,
        State::Stale => StatusExit::Stale,
        State::NotRunning | State::CancelPending => StatusExit::NotRunning,
    })
}

/// The `status --json` object of the pid file at `path` (its marker
/// PATH.cancel), for `pgrun ls`, which lists the runs of a folder: the
/// run's processes are counted from its own processes only (see
/// [`Census::Run`]). An error for a file that is no pid file.
/// With `activity`, what a live run is doing too (`listening`,
/// `blocked_on_input`: `ls --json`; its lines show neither).
pub fn json_of(path: &std::path::Path, activity: bool) -> anyhow::Result<serde_json::Value> {
    let report = look(path, &pidfile::default_marker(path), Census::Run, activity).map_err(|(_, e)| e)?;
    Ok(serde_json::to_value(&report)?)
}

/// Where a live run's group members are counted from.
#[derive(Clone, Copy)]
enum Census {
    /// Every process's `/proc/PID/stat`: one scan, for one question.
    Proc,
    /// The descendants of the pgrun holding the lock (every member of
    /// its group, on Linux, where that pgrun is a subreaper): what `ls`
    /// reads, which looks at many runs and at nothing but theirs.
    Run,
}

impl Census {
    /// How many processes group `pgid`, published by the pgrun `holder`,
    /// has (`None` where `/proc` cannot tell).
    fn group_members(self, holder: Pid, pgid: Pid) -> Option<usize> {
        match self {
            Census::Proc => crate::sys::proc::count_group_members(pgid),
            Census::Run => crate::sys::proc::count_group_members_below(holder, pgid),
        }
    }
}

/// What the pid file at `path`, its locks and its marker say; with
/// `activity`, what a live run is doing too (see [`crate::activity`]).
fn look(
    path: &std::path::Path,
    marker: &std::path::Path,
    census: Census,
    activity: bool,
) -> Result<Answer, (StatusExit, anyhow::Error)> {
    let unknown = |err: anyhow::Error| (StatusExit::Unknown, err);
    let record = match pidfile::read_record(path, false) {
        Ok(record) => Some(record),
        Err(RecordError::Missing) => None,
        Err(e) => return Err(unknown(anyhow!("cannot read pid file {}: {e}", path.display()))),
    };
    // Markers count when they belong to the run's user (the pid file's
    // owner) or root.
    let owner = record.as_ref().map_or_else(sys::geteuid, |r| r.meta.uid());
    let found = pidfile::marker(marker, owner);
    let mut report = Answer {
        state: State::NotRunning,
        pgid: None,
        pid: None,
        processes: None,
        uptime_ms: None,
        pidfile: path.display().to_string(),
        cancel_pending: found == Marker::Request,
        starting: false,
        other_pid_namespace: false,
        ignored_marker_uid: match found {
            Marker::Foreign(uid) => Some(uid),
            _ => None,
        },
        resources: None,
        listening: None,
        blocked_on_input: None,
    };
    match record {
        None => report.state = if report.cancel_pending { State::CancelPending } else { State::NotRunning },
        Some(record) => {
            report.pgid = Some(record.pgid);
            let liveness = record
                .liveness()
                .map_err(|e| unknown(anyhow!("cannot read the lock of pid file {}: {e}", path.display())))?;
            match liveness {
                Liveness::Stale => {
                    // A run that ended cleanly removed its pid file before
                    // letting go of the lock: if the path no longer names
                    // the file read, that run is over, and no run is there.
                    let named = pidfile::still_names(path, &record)
                        .map_err(|e| unknown(anyhow!("cannot read pid file {}: {e}", path.display())))?;
                    if named {
                        report.state = State::Stale;
                    } else {
                        report.pgid = None;
                        report.state = if report.cancel_pending { State::CancelPending } else { State::NotRunning };
                    }
                }
                Liveness::Claimed => {
                    // Not published yet: the content is the old run's.
                    report.starting = true;
                    report.pgid = None;
                    report.state = if report.cancel_pending { State::CancelPending } else { State::NotRunning };
                }
                Liveness::Live(holder) => {
                    pidfile::check_holder(path, &record, holder).map_err(unknown)?;
                    // 0: the holder is in a PID namespace we cannot see.
                    report.pid = (holder > 0).then_some(holder);
                    report.other_pid_namespace = holder <= 0 || !crate::sys::proc::in_own_pid_namespace(holder);
                    // A request, or the note of this run's pgrun: it is
                    // stopping (a note another pgrun left says nothing). A
                    // note's pid is one of the run's PID namespace: from
                    // another namespace it cannot be told apart, and counts.
                    let stopping = match found {
                        Marker::Request => true,
                        Marker::Note(Some(pgrun)) => report.other_pid_namespace || pgrun == holder,
                        _ => false,
                    };
                    report.state = if stopping { State::Stopping } else { State::Running };
                    if !report.other_pid_namespace {
                        // The run as its --contain mode defines it.
                        // Asked what the run is doing: counted in the same
                        // walk where its mode allows.
                        let mut counted = (activity && holder > 0 && crate::activity::AVAILABLE)
                            .then(|| count_and_look(holder, record.pgid))
                            .flatten();
                        report.processes = match holder {
                            _ if counted.is_some() => counted.as_ref().map(|(processes, _)| *processes),
                            0 => crate::sys::proc::count_group_members(record.pgid),
                            holder if pidfile::group_holds_run_of(holder, record.pgid) => {
                                count_run(holder, record.pgid, census)
                            }
                            // The group ended while its pgrun finishes: what
                            // has its number now is not the run's.
                            holder => count_run(holder, record.pgid, census)
                                .map(|run| run.saturating_sub(census.group_members(holder, record.pgid).unwrap_or(0))),
                        };
                        report.resources = (holder > 0)
                            .then(|| live_accounting(holder, record.pgid))
                            .flatten()
                            .map(|leaf| crate::resources::Live::from(&leaf));
                        if activity && holder > 0 && crate::activity::AVAILABLE {
                            let looked = match counted.take() {
                                Some((_, run)) => run.activity,
                                None => crate::activity::look(
                                    &crate::activity::run_processes(holder, record.pgid),
                                    crate::activity::Input::Asked { holder },
                                ),
                            };
                            // Advisory: what cannot be read is left out.
                            if let Ok(activity) = looked {
                                report.listening = Some(activity.listening);
                                report.blocked_on_input = Some(activity.blocked_on_input);
                            }
                        }
                    }
                    report.uptime_ms = record
                        .meta
                        .modified()
                        .ok()
                        .and_then(|t| SystemTime::now().duration_since(t).ok())
                        .map(|d| d.as_millis() as u64);
                }
            }
        }
    }
    Ok(report)
}

/// Print the answer; an error if stdout cannot take it (the caller then
/// has no answer, which is not "running").
fn print(json: bool, r: &Answer, marker: &std::path::Path) -> std::io::Result<()> {
    let line = if json {
        serde_json::to_string(r).unwrap_or_default()
    } else {
        let pgid = r.pgid.unwrap_or_default();
        let mut text = match r.state {
            State::Running | State::Stopping => {
                let name = if r.state == State::Running { "running" } else { "stopping" };
                let pid = r.pid.map_or_else(|| "unknown".to_string(), |p| p.to_string());
                let mut line = format!("{name}: pgid {pgid}, pgrun pid {pid}");
                match r.processes {
                    Some(n) => line.push_str(&format!(", {n} process{}", if n == 1 { "" } else { "es" })),
                    None if r.other_pid_namespace => {
                        line.push_str(" (in another PID namespace), process count unknown")
                    }
                    None => {}
                }
                if let Some(ms) = r.uptime_ms {
                    line.push_str(&format!(", up {:.1}s", ms as f64 / 1000.0));
                }
                line
            }
            State::Stale => format!("stale: pgid {pgid}, no live run holds {}", r.pidfile),
            State::NotRunning if r.starting => format!("not-running: a run is starting at {}", r.pidfile),
            State::NotRunning => format!("not-running: no pid file at {}", r.pidfile),
            State::CancelPending => format!("cancel-pending: no run yet, cancel marker at {}", marker.display()),
        };
        if let Some(uid) = r.ignored_marker_uid {
            text.push_str(&format!(" (ignoring cancel marker {} owned by uid {uid})", marker.display()));
        }
        text
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush())
}

/// How many processes the run published by the pgrun `holder` (group
/// `pgid`) has, as its mode defines it; for `pgrun status`. The mode is
/// read from that pgrun's own command line. `None` where `/proc` cannot
/// tell.
fn count_run(holder: Pid, pgid: Pid, census: Census) -> Option<usize> {
    let mode = mode_of(holder);
    if let (Census::Run, Mode::Tree) = (census, mode) {
        // One walk of the run's own processes: its group and what left it.
        let (group, outside) = crate::contain::tree::count_below(holder, pgid, crate::guard::NAME)?;
        return Some(group + outside);
    }
    let group = census.group_members(holder, pgid)?;
    if mode == Mode::Group {
        return Some(group);
    }
    if matches!(mode, Mode::Cgroup | Mode::Auto)
        && let Some(dir) = run_leaf(holder, pgid)
    {
        let members = crate::sys::cgroup::members(&dir).ok()?;
        let outside = members.iter().filter(|&&p| crate::sys::proc::stat(p).is_some_and(|s| s.pgrp != pgid)).count();
        return Some(group + outside);
    }
    Some(group + crate::contain::tree::count_outside(holder, pgid, crate::guard::NAME))
}

/// The run published by the pgrun `holder` (group `pgid`) counted as
/// [`count_run`] does and looked at ([`crate::activity`]) in one walk of
/// its own processes, where its mode is group or tree and its group is
/// still the run's: how many processes it has, and what they are doing.
/// `None` elsewhere (the caller counts and looks apart).
fn count_and_look(holder: Pid, pgid: Pid) -> Option<(usize, crate::activity::CountedRun)> {
    let mode = mode_of(holder);
    if !matches!(mode, Mode::Group | Mode::Tree) || !pidfile::group_holds_run_of(holder, pgid) {
        return None;
    }
    let run = crate::activity::count_and_look(holder, pgid, mode)?;
    let processes = if mode == Mode::Tree { run.in_group + run.outside_group } else { run.in_group };
    Some((processes, run))
}

/// The `--contain` mode the pgrun `holder` was asked for, read from its
/// own command line (group where that cannot be read).
fn mode_of(holder: Pid) -> Mode {
    crate::sys::proc::cmdline(holder).and_then(crate::quick_args::contain_mode_of).unwrap_or(Mode::Group)
}

/// What the cgroup leaf of the run published by the pgrun `holder` (group
/// `pgid`) says so far; `None` unless that run is in cgroup mode and its
/// leaf is found.
fn live_accounting(holder: Pid, pgid: Pid) -> Option<crate::sys::cgroup::Accounting> {
    if !matches!(mode_of(holder), Mode::Cgroup | Mode::Auto) {
        return None;
    }
    let dir = run_leaf(holder, pgid)?;
    Some(crate::sys::cgroup::accounting(&dir, &mut |_, _| {}))
}

/// The folder of the leaf of the run published by the pgrun `holder`
/// (group `pgid`), found where the run's own processes are: the cgroup of
/// the group's leader (or of another member, once the leader is gone),
/// which must be a leaf `pgrun-HOLDER-...` right under the holder's own
/// cgroup. Never looked up by name alone: another run may have one like it.
fn run_leaf(holder: Pid, pgid: Pid) -> Option<std::path::PathBuf> {
    use crate::sys::{cgroup as cg, proc};
    let mount = cg::find_mount().ok()??;
    let own = proc::cgroup_path(holder)?;
    // A pgrun that moved itself into a leaf of its own (to enable the
    // controllers of cgroup limits) made the run's leaf beside it.
    let own = match own.rsplit_once('/') {
        Some((parent, me)) if me.starts_with(&format!("pgrun-{holder}-self-")) => parent.to_string(),
        _ => own,
    };
    let prefix = format!("{}/pgrun-{holder}-", own.trim_end_matches('/'));
    let mut members: Vec<Pid> = proc::scan().into_iter().filter(|(_, s)| s.pgrp == pgid).map(|(p, _)| p).collect();
    members.sort_by_key(|&p| p != pgid);
    let rel = members.into_iter().find_map(|pid| {
        let path = proc::cgroup_path(pid)?;
        // Still a member once its cgroup was read.
        proc::stat(pid).filter(|s| s.pgrp == pgid)?;
        leaf_of(&path, &prefix)
    })?;
    cg::folder(&mount, &rel)
}

/// The run's leaf (`PREFIX` and the rest of that path component) if
/// cgroup `path` is it or below it.
fn leaf_of(path: &str, prefix: &str) -> Option<String> {
    let rest = path.strip_prefix(prefix)?;
    let name_end = rest.split('/').next().filter(|s| !s.is_empty())?;
    Some(format!("{prefix}{name_end}"))
}

#[cfg(test)]
mod tests {
    use super::leaf_of;

    #[test]
    fn the_runs_leaf_is_found_from_a_members_cgroup() {
        let prefix = "/user.slice/pgrun-42-";
        assert_eq!(leaf_of("/user.slice/pgrun-42-00ff", prefix).as_deref(), Some("/user.slice/pgrun-42-00ff"));
        assert_eq!(leaf_of("/user.slice/pgrun-42-00ff/sub", prefix).as_deref(), Some("/user.slice/pgrun-42-00ff"));
        assert_eq!(leaf_of("/user.slice/pgrun-42-", prefix), None);
        assert_eq!(leaf_of("/user.slice/pgrun-421-00ff", prefix), None);
        assert_eq!(leaf_of("/user.slice", prefix), None);
    }
}

//! `pgrun status PIDFILE`: say whether a run is alive, from its pid file,
//! its lock and its marker alone. Read-only: it signals nothing and changes
//! no file.

use crate::cli::StatusArgs;
use crate::pidfile::{self, RecordError};
use crate::say;
use crate::sys::{Pid, lock, process};
use serde::Serialize;
use std::io::Write;
use std::time::SystemTime;

/// Exit statuses of `pgrun status`, after the LSB convention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusExit {
    /// 0: running or stopping.
    Alive,
    /// 1: stale pid file.
    Stale,
    /// 3: not running, or only a cancel is pending.
    NotRunning,
    /// 4: the pid file cannot be read or does not hold a group id.
    Unknown,
}

impl StatusExit {
    pub fn code(self) -> u8 {
        match self {
            StatusExit::Alive => 0,
            StatusExit::Stale => 1,
            StatusExit::NotRunning => 3,
            StatusExit::Unknown => 4,
        }
    }
}

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
struct Report {
    state: State,
    pgid: Option<Pid>,
    /// The pgrun process holding the lock.
    pid: Option<Pid>,
    processes: Option<usize>,
    uptime_ms: Option<u64>,
    pidfile: String,
    cancel_pending: bool,
}

pub fn status(args: &StatusArgs) -> StatusExit {
    let path = &args.pidfile;
    let marker = args.cancel_file.clone().unwrap_or_else(|| pidfile::default_marker(path));
    let marker_present = pidfile::marker_present(&marker);
    let mut report = Report {
        state: State::NotRunning,
        pgid: None,
        pid: None,
        processes: None,
        uptime_ms: None,
        pidfile: path.display().to_string(),
        cancel_pending: marker_present,
    };
    match pidfile::read_record(path, false) {
        Err(RecordError::Missing) => {
            report.state = if marker_present { State::CancelPending } else { State::NotRunning };
        }
        Err(e) => {
            say::line(format_args!("cannot read pid file {}: {e}", path.display()));
            return StatusExit::Unknown;
        }
        Ok(record) => {
            report.pgid = Some(record.pgid);
            match lock::lock_holder(&record.file) {
                Err(e) => {
                    say::line(format_args!("cannot read the lock of pid file {}: {e}", path.display()));
                    return StatusExit::Unknown;
                }
                Ok(None) => report.state = State::Stale,
                Ok(Some(holder)) => {
                    report.state = if marker_present { State::Stopping } else { State::Running };
                    // 0: the holder is in another PID namespace.
                    report.pid = (holder > 0).then_some(holder);
                    report.processes = process::count_group_members(record.pgid);
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
    print(args.json, &report, &marker);
    match report.state {
        State::Running | State::Stopping => StatusExit::Alive,
        State::Stale => StatusExit::Stale,
        State::NotRunning | State::CancelPending => StatusExit::NotRunning,
    }
}

fn print(json: bool, r: &Report, marker: &std::path::Path) {
    let line = if json {
        serde_json::to_string(r).unwrap_or_default()
    } else {
        let pgid = r.pgid.unwrap_or_default();
        match r.state {
            State::Running | State::Stopping => {
                let name = if r.state == State::Running { "running" } else { "stopping" };
                let mut line = format!("{name}: pgid {pgid}, pgrun pid {}", r.pid.unwrap_or_default());
                if let Some(n) = r.processes {
                    line.push_str(&format!(", {n} process{}", if n == 1 { "" } else { "es" }));
                }
                if let Some(ms) = r.uptime_ms {
                    line.push_str(&format!(", up {:.1}s", ms as f64 / 1000.0));
                }
                line
            }
            State::Stale => format!("stale: pgid {pgid}, no live run holds {}", r.pidfile),
            State::NotRunning => format!("not-running: no pid file at {}", r.pidfile),
            State::CancelPending => format!("cancel-pending: no run yet, cancel marker at {}", marker.display()),
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

//! The `--report` JSON outcome, written atomically at exit.
//!
//! The path is checked before anything else, and the temporary file the
//! report is renamed from is created then: once the path is accepted, every
//! exit can write the report, failures included, and a folder the report
//! cannot be written to is found before the command starts.

use crate::atomic_file::TempFile;
use crate::output::{Relayed, StreamError};
use crate::pidfile::check_target;
use crate::resources::Resources;
use crate::stop_plan::SentSignal;
use crate::sys::Pid;
use crate::sys::process::ChildStatus;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The `reason` field.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    Exited,
    Signaled,
    Timeout,
    IdleTimeout,
    Cancelled,
    CancelledBeforeStart,
    Error,
    /// The kernel's out-of-memory killer ended the run (`--memory-max`).
    Oom,
}

#[derive(Serialize)]
struct Status {
    code: Option<i32>,
    signal: Option<String>,
}

#[derive(Serialize)]
struct SignalEntry {
    signal: String,
    at_ms: u64,
}

#[derive(Serialize)]
struct ReportJson<'a> {
    exit_code: u8,
    reason: Reason,
    status: Status,
    pgid: Option<Pid>,
    signals: Vec<SignalEntry>,
    stragglers: usize,
    unreaped: usize,
    /// Processes pgrun could not stop (every KILL refused) and left.
    unstopped: usize,
    /// Only when the output went through pgrun (`--max-output`,
    /// `--output-file`, `--idle-timeout`; null otherwise): bytes and omitted
    /// per stream, the output file and its error.
    output: Option<Output>,
    /// The `--contain` mode in force.
    contain: &'a str,
    /// Processes outside the group the stop reached.
    escaped: usize,
    /// The cgroup leaf pgrun could not remove (null if none is left).
    cgroup_left: Option<String>,
    /// What the run used.
    resources: Resources,
    duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

#[derive(Serialize)]
struct StreamEntry {
    bytes: u64,
    omitted: u64,
    /// Why the stream was cut short (a failed read of the command's output
    /// or write of it); absent when nothing failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl From<Relayed> for StreamEntry {
    fn from(r: Relayed) -> Self {
        StreamEntry { bytes: r.stats.bytes, omitted: r.stats.omitted, error: r.error.map(|e| e.to_string()) }
    }
}

#[derive(Serialize)]
struct Output {
    /// `--output-file`'s PATH; absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    /// The failed write that ended the output file's copy early; absent
    /// when nothing failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    file_error: Option<String>,
    stdout: StreamEntry,
    stderr: StreamEntry,
}

/// Everything the report says about one run.
pub struct Contents<'a> {
    pub exit_code: u8,
    pub reason: Reason,
    pub status: Option<ChildStatus>,
    pub pgid: Option<Pid>,
    pub signals: &'a [SentSignal],
    /// Members left when the command exited; 0 when it never ran.
    pub stragglers: usize,
    /// Zombies pgrun could not reap and stopped waiting for.
    pub unreaped: usize,
    /// Processes pgrun could not stop (every KILL refused) and left.
    pub unstopped: usize,
    /// stdout's and stderr's, with `--max-output` or `--output-file`.
    pub output: Option<[Relayed; 2]>,
    /// `--output-file`'s PATH.
    pub output_file: Option<&'a Path>,
    /// The failed write that ended the output file's copy early.
    pub output_file_error: Option<StreamError>,
    pub contain: &'a str,
    pub escaped: usize,
    /// The cgroup leaf pgrun could not remove.
    pub cgroup_left: Option<&'a Path>,
    /// What the run used (zeros and nulls if the command never started).
    pub resources: Resources,
    pub duration: Duration,
    pub error: Option<&'a str>,
}

/// Space reserved for the report when the run starts; a longer report
/// (a long error message) still fits unless the disk is full.
const REPORT_SPACE: usize = 4096;

/// An accepted report path, with its temporary file ready.
pub struct ReportTarget {
    path: PathBuf,
    temp: TempFile,
}

impl ReportTarget {
    /// Accept `path` if its folder exists and it is not a symlink or folder,
    /// and create the temporary file the report will be renamed from.
    pub fn prepare(path: &Path) -> Result<Self> {
        check_target(path, "report")?;
        let temp = TempFile::create(path, REPORT_SPACE)
            .with_context(|| format!("cannot prepare report {}", path.display()))?;
        Ok(ReportTarget { path: path.to_path_buf(), temp })
    }

    /// Write the report into the temporary file, then rename it into place.
    pub fn write(self, contents: &Contents<'_>) -> Result<()> {
        let report = ReportJson {
            exit_code: contents.exit_code,
            reason: contents.reason,
            status: match contents.status {
                Some(ChildStatus::Exited(code)) => Status { code: Some(code), signal: None },
                Some(ChildStatus::Signaled(sig)) => {
                    Status { code: None, signal: Some(crate::signame::Signal(sig).name()) }
                }
                None => Status { code: None, signal: None },
            },
            pgid: contents.pgid,
            signals: contents
                .signals
                .iter()
                .map(|s| SignalEntry { signal: s.name(), at_ms: s.at.as_millis() as u64 })
                .collect(),
            stragglers: contents.stragglers,
            unreaped: contents.unreaped,
            unstopped: contents.unstopped,
            output: contents.output.map(|[out, err]| Output {
                file: contents.output_file.map(|p| p.display().to_string()),
                file_error: contents.output_file_error.map(|e| e.to_string()),
                stdout: out.into(),
                stderr: err.into(),
            }),
            contain: contents.contain,
            escaped: contents.escaped,
            cgroup_left: contents.cgroup_left.map(|p| p.display().to_string()),
            resources: contents.resources,
            duration_ms: contents.duration.as_millis() as u64,
            error: contents.error,
        };
        let mut json = serde_json::to_vec(&report).context("cannot encode the report")?;
        json.push(b'\n');
        let path = self.path;
        self.temp.set_content(&json).with_context(|| format!("cannot write report {}", path.display()))?;
        self.temp.rename_into_place().with_context(|| format!("cannot write report {}", path.display()))?;
        Ok(())
    }
}

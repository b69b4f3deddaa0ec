//! The `--report` JSON outcome, written atomically at exit.
//!
//! The path is checked before anything else, and the temporary file the
//! report is renamed from is created then: once the path is accepted, every
//! exit can write the report, failures included, and a folder the report
//! cannot be written to is found before the command starts.

use crate::atomic_file::TempFile;
use crate::contain::Mode;
use crate::exit::RunExit;
use crate::output::{Relayed, StreamError};
use crate::pidfile::check_target;
use crate::resources::Resources;
use crate::stop::plan::SentSignal;
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
    /// In cgroup mode, where the cgroup came from: `delegated` (a leaf
    /// under pgrun's own cgroup) or `user-systemd` (a scope the user's
    /// systemd made); null in the other modes.
    cgroup_via: Option<&'static str>,
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

/// What a run came to: the exit status pgrun chooses and everything the
/// report says of the run. The run mode fills it in as the run goes; the
/// report borrows it (see [`Contents`]).
pub struct Outcome {
    pub exit: RunExit,
    pub reason: Reason,
    pub status: Option<ChildStatus>,
    pub pgid: Option<Pid>,
    pub signals: Vec<SentSignal>,
    /// Members left when the command exited; 0 when it never ran.
    pub stragglers: usize,
    /// Zombies pgrun could not reap and stopped waiting for.
    pub unreaped: usize,
    /// Processes pgrun could not stop (every KILL refused) and left.
    pub unstopped: usize,
    pub error: Option<anyhow::Error>,
    /// `--max-output`, `--output-file`: what became of stdout and stderr,
    /// once relayed.
    pub output: Option<[Relayed; 2]>,
    /// `--output-file`: the write that ended its copy early.
    pub file_error: Option<StreamError>,
    /// The `--contain` mode in force; `None` if the run ended before it
    /// was settled (the report then names the one asked for).
    pub contain: Option<Mode>,
    /// In cgroup mode, where the cgroup came from.
    pub cgroup_via: Option<crate::contain::cgroup::Via>,
    /// Processes outside the group the stop reached.
    pub escaped: usize,
    /// The cgroup leaf that could not be removed.
    pub cgroup_left: Option<PathBuf>,
    /// What the run used; zeros and nulls if the command never started.
    pub resources: Resources,
}

impl Outcome {
    /// An outcome with nothing known yet but how pgrun exits and why.
    pub fn new(exit: RunExit, reason: Reason) -> Self {
        Outcome {
            exit,
            reason,
            status: None,
            pgid: None,
            signals: Vec::new(),
            stragglers: 0,
            unreaped: 0,
            unstopped: 0,
            error: None,
            output: None,
            file_error: None,
            contain: None,
            cgroup_via: None,
            escaped: 0,
            cgroup_left: None,
            resources: Resources::default(),
        }
    }
}

/// The report of one run: its [`Outcome`], and what the outcome does not
/// know (what the command line asked for, how long pgrun ran).
pub struct Contents<'a> {
    pub outcome: &'a Outcome,
    /// pgrun's exit status (`--preserve-status` applied).
    pub exit_code: u8,
    /// The output went through pgrun (`--max-output`, `--output-file`,
    /// `--idle-timeout`): the report's `output` is an object, zeros if
    /// nothing was relayed.
    pub relays_output: bool,
    /// `--output-file`'s PATH.
    pub output_file: Option<&'a Path>,
    /// The `--contain` mode asked for: named if the outcome has none in
    /// force.
    pub contain_requested: Mode,
    pub duration: Duration,
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
    /// and create the temporary file the report will be renamed from: with
    /// no name until then where the system allows (it is made before the
    /// guard exists, see [`TempFile::unnamed`]).
    pub fn prepare(path: &Path) -> Result<Self> {
        check_target(path, "report")?;
        let temp = TempFile::unnamed(path, REPORT_SPACE)
            .with_context(|| format!("cannot prepare report {}", path.display()))?;
        Ok(ReportTarget { path: path.to_path_buf(), temp })
    }

    /// Write the report into the temporary file, then rename it into place.
    pub fn write(self, contents: &Contents<'_>) -> Result<()> {
        let outcome = contents.outcome;
        let error = outcome.error.as_ref().map(crate::say::error_text);
        let report = ReportJson {
            exit_code: contents.exit_code,
            reason: outcome.reason,
            status: match outcome.status {
                Some(ChildStatus::Exited(code)) => Status { code: Some(code), signal: None },
                Some(ChildStatus::Signaled(sig)) => {
                    Status { code: None, signal: Some(crate::signame::Signal(sig).name()) }
                }
                None => Status { code: None, signal: None },
            },
            pgid: outcome.pgid,
            signals: outcome
                .signals
                .iter()
                .map(|s| SignalEntry { signal: s.name(), at_ms: s.at.as_millis() as u64 })
                .collect(),
            stragglers: outcome.stragglers,
            unreaped: outcome.unreaped,
            unstopped: outcome.unstopped,
            output: contents.relays_output.then(|| {
                let [out, err] = outcome.output.unwrap_or_default();
                Output {
                    file: contents.output_file.map(|p| p.display().to_string()),
                    file_error: outcome.file_error.map(|e| e.to_string()),
                    stdout: out.into(),
                    stderr: err.into(),
                }
            }),
            contain: outcome.contain.unwrap_or(contents.contain_requested).name(),
            cgroup_via: outcome.cgroup_via.map(|via| via.name()),
            escaped: outcome.escaped,
            cgroup_left: outcome.cgroup_left.as_ref().map(|p| p.display().to_string()),
            resources: outcome.resources,
            duration_ms: contents.duration.as_millis() as u64,
            error: error.as_deref(),
        };
        let mut json = serde_json::to_vec(&report).context("cannot encode the report")?;
        json.push(b'\n');
        let path = self.path;
        self.temp.set_content(&json).with_context(|| format!("cannot write report {}", path.display()))?;
        self.temp.rename_into_place().with_context(|| format!("cannot write report {}", path.display()))?;
        Ok(())
    }
}

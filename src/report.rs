//! The `--report` JSON outcome, written atomically at exit, and read back
//! by `wait` and `cancel` ([`read`], [`over_at`]).
//!
//! The path is checked before anything else, and the temporary file the
//! report is renamed from is created then: once the path is accepted, every
//! exit can write the report, failures included, and a folder the report
//! cannot be written to is found before the command starts. An old report
//! at the path is removed then too, before the run publishes its pid file,
//! and the report names that pid file (`pidfile`): so a report found while
//! no run is published at its pid file is the last run's, and says at once
//! how that run ended.

use crate::atomic_file::TempFile;
use crate::contain::Mode;
use crate::exit::RunExit;
use crate::output::{Relayed, StreamError};
use crate::pidfile::{self, check_target};
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
    /// The pid file's absolute name (see [`pidfile::absolute_name`]).
    pidfile: Option<&'a Path>,
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
    /// The run's pid file, by its absolute name.
    pidfile: Option<PathBuf>,
}

impl ReportTarget {
    /// Accept `path` if its folder exists and it is not a symlink, a folder
    /// or a live run's pid file, and create the temporary file the report
    /// will be renamed from: with no name until then where the system
    /// allows (it is made before the guard exists, see
    /// [`TempFile::unnamed`]). Mark the path in use (refused if another
    /// live pgrun has: see [`mark_in_use`]), then remove the report a run
    /// before left at `path`: this run's `pidfile` is not published yet.
    pub fn prepare(path: &Path, pidfile: Option<&Path>) -> Result<Self> {
        let target = Self::again(path, pidfile)?;
        mark_in_use(path)?;
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                anyhow::bail!("cannot remove the old report {}: {}", path.display(), crate::say::errno_text(&e))
            }
            _ => {
                crate::test_hook::pause("report-cleared");
                Ok(target)
            }
        }
    }

    /// As [`ReportTarget::prepare`], for this run's report written once
    /// more: what is at `path` is this run's own, and stays until replaced.
    pub fn again(path: &Path, pidfile: Option<&Path>) -> Result<Self> {
        check_target(path, "report")?;
        let live = pidfile::live_run_at(path).with_context(|| format!("cannot look at report {}", path.display()))?;
        if let Some(pgrun) = live {
            anyhow::bail!("report {} is the pid file of a live run (pgrun {pgrun})", path.display());
        }
        let temp = TempFile::unnamed(path, REPORT_SPACE)
            .with_context(|| format!("cannot prepare report {}", path.display()))?;
        Ok(ReportTarget { path: path.to_path_buf(), temp, pidfile: pidfile.map(pidfile::absolute_name) })
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
            pidfile: self.pidfile.as_deref(),
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

/// The folder of this pgrun's report, open while pgrun lives, with the
/// report's name marked in use on it (see [`mark_in_use`]).
static IN_USE: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();

/// Mark the report path `path` in use by this pgrun until it exits, or
/// fail if a live pgrun has marked it: two runs that share a report would
/// each remove and replace the other's. The mark is a read lock on one
/// byte of the report's folder, at an offset its file name gives (a
/// 64-bit hash folded into off_t's range: two names of one folder that
/// share a byte are refused as one, a chance too small to matter), held on an fd kept
/// open until pgrun exits, so the kernel drops it however pgrun ends, and
/// never before its run is withdrawn and its report written. A starting
/// run looks for another's lock there, takes its own, and looks again: of
/// runs that start at once, at most one goes on (one that looks again
/// after another took its lock sees it).
fn mark_in_use(path: &Path) -> Result<()> {
    match look_and_mark(path) {
        Ok(marked) => marked,
        // A folder this pgrun may not read, or one whose file system keeps
        // no locks on folders: the path cannot be marked, nor a mark seen,
        // so runs that share it are not told apart (as before marks).
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EACCES | libc::EBADF | libc::EINVAL | libc::ENOLCK | libc::EOPNOTSUPP)
            ) =>
        {
            crate::verbose!("cannot mark report {} in use ({e}): another run given it is not refused", path.display());
            Ok(())
        }
        Err(e) => Err(anyhow::anyhow!("cannot mark report {} in use: {e}", path.display())),
    }
}

/// [`mark_in_use`]'s looks and lock: `Err` if one failed, else `Ok` of
/// whether the path is this run's now.
fn look_and_mark(path: &Path) -> std::io::Result<Result<()>> {
    use crate::sys::lock::{self, Range};
    use std::os::unix::ffi::OsStrExt;
    let folder = std::fs::File::open(crate::atomic_file::folder_of(path))?;
    let name = path.file_name().map_or(&[][..], |n| n.as_bytes());
    // FNV-1a, folded into the non-negative offsets of any off_t.
    let hash = name.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let mark = Range::Mark((hash % (libc::off_t::MAX as u64)) as libc::off_t);
    let used_by =
        |pgrun: Pid| Err(anyhow::anyhow!("report {} is used by another live run (pgrun {pgrun})", path.display()));
    if let Some(other) = lock::holder(&folder, mark)? {
        return Ok(used_by(other.pid));
    }
    crate::test_hook::pause("report-looked");
    if !lock::try_read_lock(&folder, mark)? {
        return Ok(Err(anyhow::anyhow!("report {} is locked by another process", path.display())));
    }
    if let Some(other) = lock::holder(&folder, mark)? {
        lock::unlock(&folder, mark)?;
        return Ok(used_by(other.pid));
    }
    if let Err(folder) = IN_USE.set(folder) {
        // A second report in one pgrun (there is none): closing this fd
        // would drop every mark on the folder, so it stays open too.
        std::mem::forget(folder);
    }
    Ok(Ok(()))
}

/// What `wait` and `cancel` act on in a report a run wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// pgrun's exit status: the run's own.
    pub exit_code: u8,
    /// The run's process group; `None` if the command never ran.
    pub pgid: Option<Pid>,
    /// The run's pid file by its absolute name; `None` without one (or in
    /// a report written before reports named it).
    pub pidfile: Option<PathBuf>,
}

impl Written {
    /// Whether this report names the pid file `pidfile` (by any spelling
    /// of its folder: see [`pidfile::absolute_name`]).
    pub fn names(&self, pidfile: &Path) -> bool {
        self.pidfile.as_deref() == Some(pidfile::absolute_name(pidfile).as_path())
    }
}

/// Read the report at `path`. Every failure (no file included) is one
/// message naming the path.
pub fn read(path: &Path) -> Result<Written> {
    let cannot = |e: &dyn std::fmt::Display| anyhow::anyhow!("cannot read report {}: {e}", path.display());
    let text = std::fs::read_to_string(path).map_err(|e| cannot(&e))?;
    let report: serde_json::Value = serde_json::from_str(&text).map_err(|e| cannot(&e))?;
    let exit_code = report
        .get("exit_code")
        .and_then(serde_json::Value::as_u64)
        .and_then(|code| u8::try_from(code).ok())
        .ok_or_else(|| cannot(&"no exit_code from 0 to 255"))?;
    let pgid = report.get("pgid").and_then(serde_json::Value::as_i64).and_then(|p| Pid::try_from(p).ok());
    let pidfile = report.get("pidfile").and_then(serde_json::Value::as_str).map(PathBuf::from);
    Ok(Written { exit_code, pgid, pidfile })
}

/// The run at pid file `pidfile` is over if no run is published there
/// and the report at `report` names it (a run removes its old report
/// before it publishes, and writes the new one once it is over): that
/// run's report. `None` if a run is published or starting there, or the
/// report is not there, cannot be read or names another pid file: then
/// only the pid file can tell. The pid file is looked at first, then the
/// report, so a report found is never older than the run last seen.
pub fn over_at(pidfile: &Path, report: &Path) -> Option<Written> {
    if !matches!(pidfile::read_record(pidfile, false), Err(pidfile::RecordError::Missing)) {
        return None;
    }
    match read(report) {
        Ok(written) if written.names(pidfile) => Some(written),
        Ok(_) => {
            crate::verbose!("report {} is not the report of a run at {}", report.display(), pidfile.display());
            None
        }
        Err(err) => {
            crate::verbose!("{err:#}");
            None
        }
    }
}

/// Whether the report at `report` (one that can be read) names the pid
/// file `pidfile`.
pub fn names(report: &Path, pidfile: &Path) -> bool {
    read(report).is_ok_and(|written| written.names(pidfile))
}

/// `cancel --report`: if the run at `pidfile` is over by its `report` (see
/// [`over_at`]), say so, one line, and true: no live run is left to stop.
pub fn said_over(pidfile: &Path, report: &Path) -> bool {
    let Some(over) = over_at(pidfile, report) else { return false };
    let (path, report, code) = (pidfile.display(), report.display(), over.exit_code);
    crate::say::line(format_args!("no live run at {path}: it is over (report {report}: exit status {code})"));
    true
}

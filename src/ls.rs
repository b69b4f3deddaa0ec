//! `pgrun ls DIR`: the runs published in a folder, from what the folder
//! holds. Every regular file there whose content is a pid file's (a group
//! id and a newline) is listed, sorted by name, with its state as `pgrun
//! status` gives it ([`status::json_of`]: the same object, the same
//! rules), and the command line of the run's leader where it can be read.
//!
//! ls reads the folder, the pid files, their locks and markers, and the
//! run's own processes: the pgrun holding a lock, its descendants (the
//! process count is theirs, not a census of every process), the leader.
//! It never looks for pgrun processes by name, never signals, and
//! creates or removes nothing. A file that is no pid file, or that changes
//! under it, is passed over; only a folder that cannot be read is an
//! error.

use crate::exit::LsExit;
use crate::sys::Pid;
use crate::{say, status};
use anyhow::{Result, anyhow};
use serde_json::Value;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// What `pgrun ls` was asked (resolved from its command line by the entry
/// point, so that this module reads no command line).
#[derive(Debug, Clone)]
pub struct Options {
    /// The folder to list.
    pub dir: PathBuf,
    /// `--json`: one array of `status --json` objects.
    pub json: bool,
}

/// One listed run: its file's name and what status says of it.
struct Listed {
    name: OsString,
    status: Value,
}

/// `pgrun ls`: list the runs, or say the one error; the exit status.
pub fn ls(args: &Options) -> LsExit {
    match list(args) {
        Ok(runs) => {
            let text = if args.json { json(runs) } else { text(&runs) };
            if say::to_stdout(text.as_bytes()) { LsExit::Listed } else { LsExit::Failed }
        }
        Err(err) => {
            say::line(format_args!("{err:#}"));
            LsExit::Failed
        }
    }
}

/// The runs published in the folder, sorted by name. Each file is looked
/// at on its own, so the files are shared out among a few threads (one per
/// core, at most [`MAX_THREADS`]): a look is mostly waiting for the kernel
/// to make `/proc` files, and a folder may hold a thousand runs.
fn list(args: &Options) -> Result<Vec<Listed>> {
    let dir = &args.dir;
    let mut names = crate::sys::proc::list_folder(dir)
        .map_err(|e| anyhow!("cannot list folder {}: {}", dir.display(), say::errno_text(&e)))?;
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, MAX_THREADS);
    let share = names.len().div_ceil(threads).max(1);
    let look_all = |names: &[OsString]| -> Vec<Listed> {
        names.iter().filter_map(|name| look(&dir.join(name), name, args.json)).collect()
    };
    Ok(std::thread::scope(|scope| {
        let shares: Vec<&[OsString]> = names.chunks(share).collect();
        // A thread that cannot be started leaves its share to this one.
        let started: Vec<_> = shares
            .iter()
            .skip(1)
            .map(|&part| (part, std::thread::Builder::new().spawn_scoped(scope, move || look_all(part)).ok()))
            .collect();
        let mut runs = shares.first().map_or_else(Vec::new, |&part| look_all(part));
        for (part, thread) in started {
            match thread.map(|t| t.join()) {
                Some(Ok(listed)) => runs.extend(listed),
                // A panic is pgrun's own failure: let it end pgrun.
                Some(Err(panic)) => std::panic::resume_unwind(panic),
                None => runs.extend(look_all(part)),
            }
        }
        runs
    }))
}

/// At most this many threads look at the files.
const MAX_THREADS: usize = 4;

/// What status says of the file at `path` (named `name`), if it is a pid
/// file that names a run or a starting one (`json`: with what a live run
/// is doing, which only `--json` shows).
fn look(path: &std::path::Path, name: &OsString, json: bool) -> Option<Listed> {
    let mut status = status::json_of(path, json).ok()?;
    // Gone between the listing and the look: not listed.
    let gone = matches!(status["state"].as_str(), Some("not-running" | "cancel-pending"))
        && status["starting"] != Value::Bool(true);
    if gone {
        return None;
    }
    let command = leader_command(&status);
    status["command"] = command.map_or(Value::Null, |args| args.into_iter().map(Value::String).collect());
    Some(Listed { name: name.clone(), status })
}

/// The command line of the run's leader (the process whose pid is the
/// group id), for a live run in our PID namespace, while that process is
/// still the leader and a child of the run's pgrun: never another
/// process that took the number.
fn leader_command(status: &Value) -> Option<Vec<String>> {
    if !matches!(status["state"].as_str(), Some("running" | "stopping")) || status["other_pid_namespace"] != false {
        return None;
    }
    let pgid = Pid::try_from(status["pgid"].as_i64()?).ok()?;
    let holder = Pid::try_from(status["pid"].as_i64()?).ok()?;
    let is_leader = || crate::sys::proc::stat(pgid).is_some_and(|s| s.pgrp == pgid && s.ppid == holder);
    if !is_leader() {
        return None;
    }
    let args = crate::sys::proc::cmdline(pgid)?;
    is_leader().then(|| args.iter().map(|a| a.to_string_lossy().into_owned()).collect())
}

/// The JSON array, one line.
fn json(runs: Vec<Listed>) -> String {
    let array = Value::Array(runs.into_iter().map(|run| run.status).collect());
    let mut text = array.to_string();
    text.push('\n');
    text
}

/// One line per run: name, state, then what status says of it and the
/// leader's command line, e.g. `api.pid  running  pgid 4242, pgrun pid
/// 4241, 3 processes, up 12.4s  python3 -m http.server`.
fn text(runs: &[Listed]) -> String {
    let names: Vec<String> = runs.iter().map(|run| printable(&run.name.to_string_lossy())).collect();
    let states: Vec<&str> = runs.iter().map(|run| state_of(&run.status)).collect();
    let name_width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let state_width = states.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = String::new();
    for ((run, name), state) in runs.iter().zip(&names).zip(&states) {
        let s = &run.status;
        let mut facts = Vec::new();
        if let Some(pgid) = s["pgid"].as_i64() {
            facts.push(format!("pgid {pgid}"));
        }
        if let Some(pid) = s["pid"].as_i64() {
            facts.push(format!("pgrun pid {pid}"));
        }
        if let Some(n) = s["processes"].as_u64() {
            facts.push(format!("{n} process{}", if n == 1 { "" } else { "es" }));
        }
        if let Some(ms) = s["uptime_ms"].as_u64() {
            facts.push(format!("up {:.1}s", ms as f64 / 1000.0));
        }
        let pad = name_width - name.chars().count();
        let mut line = format!("{name}{:pad$}  {state:state_width$}", "");
        if !facts.is_empty() {
            line.push_str("  ");
            line.push_str(&facts.join(", "));
        }
        if let Some(args) = s["command"].as_array() {
            let words: Vec<&str> = args.iter().filter_map(Value::as_str).collect();
            line.push_str("  ");
            line.push_str(&printable(&words.join(" ")));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The state as the text line names it: status's, or `starting` for a
/// file a starting run has claimed.
fn state_of(status: &Value) -> &str {
    if status["starting"] == true { "starting" } else { status["state"].as_str().unwrap_or("unknown") }
}

/// `text` with control characters shown as `?`, so that each run stays
/// on one line.
fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

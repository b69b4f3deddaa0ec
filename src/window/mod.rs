//! `pgrun output FILE`: a window of a run's output file, the way a harness
//! pages through a command's output between its turns. The window starts
//! at byte N and holds at most SIZE bytes (or the last SIZE past N), cut
//! on the rules of `--max-output`: never inside a character, never holding
//! back bytes that can never become one ([`cut`]); it is read where it
//! lies ([`look`]). `--wait` blocks until bytes past N come, the run in
//! `--pidfile` is over ([`run`]), or DUR passes: on events, a change to
//! FILE or the pid file ([`crate::sys::watch`]) and the release of the
//! run's lock, where the platform announces them, else in ticks of at
//! most 20 ms. `--until REGEX` waits for a line that matches ([`until`]).
//!
//! A FILE cut short below N, or replaced (another file renamed over it, as
//! a new run with the same `--output-file` does), is an error: the offsets
//! N counts are gone, and the old file will never grow.
//!
//! output only reads: FILE, and the pid file if `--pidfile` is given; it
//! creates, removes and signals nothing, and holds no lock but the
//! instant's read lock that learns of the run's lock being let go of.

mod cut;
mod look;
mod run;
mod until;

pub use look::Shape;

use crate::backoff::Backoff;
use crate::exit::OutputExit;
use crate::say;
use crate::sys::{self, watch::Changes};
use anyhow::{Context, Result, anyhow, bail};
use look::Window;
use run::Run;
use std::fs::File;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use until::Until;

/// The smallest SIZE: a window of at least one character, so that a
/// window never splits one and still moves on.
pub const MIN_SIZE: u64 = 4;

/// What `pgrun output` was asked (resolved from its command line by the
/// entry point, so that this module reads no command line).
#[derive(Debug, Clone)]
pub struct Options {
    /// The output file.
    pub file: PathBuf,
    /// `--since N`: where the window starts.
    pub since: u64,
    /// `--max SIZE` or `--tail SIZE`.
    pub shape: Shape,
    /// `--wait DUR`: wait for bytes past N (or the line), the run's end,
    /// or DUR.
    pub wait: Option<Duration>,
    /// `--until REGEX`, as given.
    pub until: Option<String>,
    /// `--pidfile P`: the run that writes FILE.
    pub pidfile: Option<PathBuf>,
    /// `--json`: one object instead of the bytes.
    pub json: bool,
}

/// `pgrun output`: print the window, or say the one error; the exit
/// status.
pub fn output(args: &Options) -> OutputExit {
    match answer(args) {
        Ok(exit) => exit,
        Err(err) => {
            say::line(format_args!("{err:#}"));
            OutputExit::Failed
        }
    }
}

fn answer(args: &Options) -> Result<OutputExit> {
    let size = args.shape.size();
    if size < MIN_SIZE {
        bail!("SIZE {size} is too small for a window: at least {MIN_SIZE} bytes (one character)");
    }
    let regex = match &args.until {
        Some(text) => Some(regex_lite::Regex::new(text).map_err(|e| anyhow!("invalid --until REGEX {text:?}: {e}"))?),
        None => None,
    };
    let path = &args.file;
    let file = open(args)?;
    // What tells of a change is set up before the first look, so that
    // nothing that comes after that look goes unannounced.
    let mut run = args.pidfile.as_deref().map(Run::find).transpose()?;
    let changes = match args.wait {
        Some(_) => Some(watch(args, run.as_mut())?),
        None => None,
    };
    let deadline = args.wait.map(|d| Instant::now().checked_add(d));
    let mut until = regex.map(|regex| Until::new(regex, args.since));
    let mut ticks = Backoff::default();
    loop {
        // The run first, then the file: bytes written before the run
        // ended are in the file by the time its end is seen.
        let over = run.as_ref().map(Run::over).transpose()?;
        let meta = file.metadata().with_context(|| format!("cannot read output file {}", path.display()))?;
        if changes.is_some() && replaced(path, &meta) {
            bail!("output file {} was replaced by another file while output waited on it", path.display());
        }
        let len = meta.len();
        if len < args.since {
            bail!(
                "output file {} was cut short: it now ends at byte {len}, before --since {}",
                path.display(),
                args.since
            );
        }
        let over_now = over == Some(true);
        let read = |e| anyhow!("cannot read output file {}: {e}", path.display());
        let found = match &mut until {
            Some(until) => until.look(&file, len, over_now).map_err(read)?,
            None => None,
        };
        let mut window = match found {
            Some(end) => look::window_to(&file, len, args.since, end, size),
            None => look::window(&file, len, args.since, args.shape, over_now),
        }
        .map_err(read)?;
        let came = if until.is_some() { found.is_some() } else { !window.bytes.is_empty() };
        let exit = match deadline {
            None => Some(OutputExit::Came),
            Some(_) if came => Some(OutputExit::Came),
            Some(_) if over_now => Some(OutputExit::Over),
            Some(d) if d.is_some_and(|d| Instant::now() >= d) => Some(OutputExit::TimedOut),
            Some(_) => None,
        };
        if let Some(exit) = exit {
            // Without its line, a window ends after its last whole line,
            // or at N if it holds none: a next call from `next` then sees
            // every line whole (a line still being written included).
            if exit == OutputExit::TimedOut && until.is_some() {
                window.end_after_last_line();
            }
            // A failed write is said by `say::to_stdout`, once.
            return Ok(if print(args, &window, over)? { exit } else { OutputExit::Failed });
        }
        let changes = changes.as_ref().expect("set up for --wait");
        pause(changes, run.as_mut(), deadline.flatten(), &mut ticks)?;
    }
}

/// Open FILE to read, refusing what is not a regular file, and check N.
fn open(args: &Options) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = &args.file;
    // Looked at before it is opened: an open alone can act on what is not
    // a regular file (let a FIFO's writer through, arm a watchdog).
    let cannot_open =
        |e: std::io::Error| anyhow!("cannot open output file {}: {}", path.display(), say::errno_text(&e));
    if !std::fs::metadata(path).map_err(cannot_open)?.is_file() {
        bail!("output file {} is not a regular file", path.display());
    }
    // Non-blocking: a FIFO put at the path since must not hold output up.
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(cannot_open)?;
    let meta = file.metadata().with_context(|| format!("cannot read output file {}", path.display()))?;
    if !meta.is_file() {
        bail!("output file {} is not a regular file", path.display());
    }
    if args.since > meta.len() {
        bail!("--since {} is beyond the end of output file {} ({} bytes)", args.since, path.display(), meta.len());
    }
    Ok(file)
}

/// Whether `path` now names another file than the one open (`meta`): a
/// file renamed over it. One removed, and none there, is no other file.
fn replaced(path: &std::path::Path, meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).is_ok_and(|now| (now.dev(), now.ino()) != (meta.dev(), meta.ino()))
}

/// Ask to be told of changes to FILE and, while the run lives, to its pid
/// file and its lock.
fn watch(args: &Options, run: Option<&mut Run>) -> Result<Changes> {
    let changes = Changes::new().context("cannot watch for changes")?;
    changes.watch(&args.file).with_context(|| format!("cannot watch output file {}", args.file.display()))?;
    if let Some(run) = run {
        if let Some(pidfile) = run.path() {
            match changes.watch(pidfile) {
                // Removed since the run was found: it is over, as the
                // first look says.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                watched => watched.with_context(|| format!("cannot watch pid file {}", pidfile.display()))?,
            }
        }
        run.watch_release()?;
    }
    Ok(changes)
}

/// Wait until something may have changed: a change announced, the run's
/// lock let go of, the deadline, or (where changes are not announced) the
/// next tick.
fn pause(changes: &Changes, run: Option<&mut Run>, deadline: Option<Instant>, ticks: &mut Backoff) -> Result<()> {
    let mut set = Vec::with_capacity(2);
    set.extend(changes.fd().map(sys::PollFd::read));
    let announced = set.len();
    set.extend(run.as_deref().and_then(Run::release_fd).map(sys::PollFd::read));
    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let tick = (announced == 0).then(|| ticks.next_pause());
    let timeout = match (left, tick) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    sys::poll(&mut set, timeout).context("cannot wait for the output file")?;
    if announced == 1 && set[0].ready {
        changes.clear().context("cannot read the changes to the output file")?;
    }
    if set.len() > announced
        && set[announced].ready
        && let Some(run) = run
    {
        run.take_release()?;
    }
    Ok(())
}

/// Write the window's bytes, or with `--json` the object that describes
/// it, to stdout; false if stdout took it not.
fn print(args: &Options, window: &Window, over: Option<bool>) -> Result<bool> {
    if !args.json {
        return Ok(say::to_stdout(&window.bytes));
    }
    #[derive(serde::Serialize)]
    struct Answer<'a> {
        since: u64,
        next: u64,
        skipped: u64,
        text: &'a str,
        eof: bool,
        run: Option<&'static str>,
    }
    let text = cut::text_of(&window.bytes);
    let answer = Answer {
        since: window.since,
        next: window.next(),
        skipped: window.skipped,
        text: &text,
        eof: window.eof,
        run: over.map(|over| if over { "over" } else { "running" }),
    };
    let mut line = serde_json::to_string(&answer).context("cannot write the answer")?;
    line.push('\n');
    Ok(say::to_stdout(line.as_bytes()))
}

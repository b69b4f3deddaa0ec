//! pgrun's only voice on stderr: `--verbose` action lines and error lines,
//! each prefixed `pgrun: `; and its few writes to stdout ([`to_stdout`]).
//!
//! Writes ignore every error: a closed or broken stderr must never change
//! what pgrun does or how it exits (SIGPIPE is blocked, so EPIPE comes back
//! as a plain error that is dropped here).
//!
//! Stderr is fd 2, except while a detached run is being started
//! (`--detach`): its fd 2 is already `/dev/null`, and its lines go to the
//! caller's stderr, held apart, until the run is published.

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// See [`lines_on_stderr`].
static LINES_ON_STDERR: AtomicU64 = AtomicU64::new(0);

/// Where lines go instead of fd 2, if anywhere (see [`speak_to`]).
static SINK: Mutex<Option<std::fs::File>> = Mutex::new(None);

/// Write lines to `sink` instead of fd 2 from now on; `None` goes back to
/// fd 2 and closes the sink held so far.
pub fn speak_to(sink: Option<std::os::fd::OwnedFd>) {
    let mut held = SINK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    *held = sink.map(std::fs::File::from);
}

/// Turn `--verbose` lines on.
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

/// Whether `--verbose` is on.
pub fn is_verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}

/// Write one `pgrun: ` line to stderr, ignoring failures. std's
/// " (os error N)" suffixes are dropped: the text already says it.
pub fn line(args: std::fmt::Arguments<'_>) {
    speak("", args);
}

/// As [`line`], after a newline: stderr's last byte (the command's, relayed
/// there) was not one, and the line must begin a line of its own
/// (`--detach-after`'s hand-off line).
pub fn line_after_newline(args: std::fmt::Arguments<'_>) {
    speak("\n", args);
}

/// How many lines this process wrote to fd 2 so far (not to a sink of
/// [`speak_to`]'s): the relay tells by it whether pgrun's own line came
/// after the last bytes of the command's it wrote there.
pub fn lines_on_stderr() -> u64 {
    LINES_ON_STDERR.load(Ordering::Relaxed)
}

/// Write `start`, then the `pgrun: ` line, in one write where it can.
fn speak(start: &str, args: std::fmt::Arguments<'_>) {
    let text = format!("{start}pgrun: {}\n", without_os_error_numbers(&args.to_string()));
    // try_lock: a panic hook that speaks while a line is being written
    // must not wait for itself.
    if let Ok(mut held) = SINK.try_lock()
        && let Some(sink) = held.as_mut()
    {
        let _ = sink.write_all(text.as_bytes());
        return;
    }
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
    LINES_ON_STDERR.fetch_add(1, Ordering::Relaxed);
}

/// "Input/output error (EIO)": the text and the errno's name, for the
/// warnings about files pgrun could not remove.
pub fn errno_text(err: &std::io::Error) -> String {
    match err.raw_os_error() {
        Some(code) => format!("{err} ({:?})", nix::errno::Errno::from_raw(code)),
        None => err.to_string(),
    }
}

/// An error chain as one line (`{:#}`) without " (os error N)" suffixes.
pub fn error_text(err: &anyhow::Error) -> String {
    without_os_error_numbers(&format!("{err:#}"))
}

fn without_os_error_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" (os error ") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + " (os error ".len()..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && tail[digits..].starts_with(')') {
            rest = &tail[digits + 1..];
        } else {
            out.push_str(" (os error ");
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// Write `bytes` to stdout and flush: `--help`, `--version` and
/// `--generate`, pgrun's only writes to stdout. A reader that has gone
/// (EPIPE: `pgrun --help | head -1`) is not a failure, as it is none for a
/// filter that dies of SIGPIPE there; any other failure is said in one
/// line. False if the write failed.
pub fn to_stdout(bytes: &[u8]) -> bool {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => true,
        Err(e) => {
            line(format_args!("cannot write to stdout: {e}"));
            false
        }
    }
}

/// One `--verbose` line: `verbose!("sending {} to process group {}", sig, pgid)`.
/// Crate-private: `use crate::say::verbose;` (or `crate::verbose!`, which
/// lib.rs re-exports).
macro_rules! verbose {
    ($($arg:tt)*) => {
        if $crate::say::is_verbose() {
            $crate::say::line(format_args!($($arg)*));
        }
    };
}
pub(crate) use verbose;

#[cfg(test)]
mod tests {
    #[test]
    fn drops_os_error_numbers_only() {
        let f = super::without_os_error_numbers;
        assert_eq!(
            f("cannot run 'x': No such file or directory (os error 2)"),
            "cannot run 'x': No such file or directory"
        );
        assert_eq!(f("a (os error 13): b (os error x)"), "a: b (os error x)");
    }
}

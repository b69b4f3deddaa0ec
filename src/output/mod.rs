//! `--max-output SIZE`, `--output-file PATH` and `--idle-timeout`: the
//! command's stdout and stderr each go through a pipe that pgrun reads, so
//! that each comes out bounded (head, a marker line, tail), cut on UTF-8
//! character boundaries, in bounded memory, or whole; every byte of both
//! goes to PATH in the order pgrun read it; and nothing pgrun read is ever
//! lost.
//!
//! From the top: [`relay`] owns both streams and is what the supervisor's
//! event loop drives (which fds to poll, what to do when they are ready,
//! the end of the run); [`stream`] moves one stream from its pipe to its
//! destination; [`dest`] writes to a destination without ever blocking;
//! [`rest`] is the rule that lets a busy source gather bytes before it is
//! read again; [`shape`] says what a stream's limit makes of its bytes,
//! [`limit`] is the pure head-and-tail cut, [`utf8`] knows where a cut may
//! fall; [`file`] is the output file (SIZE itself is parsed by [`crate::size`],
//! as every size is); [`handoff`] is `--detach-after`'s hand-off of the
//! caller's fds. This file holds
//! what they all speak of: the limit, what became of the streams, and
//! their error.

pub mod dest;
pub mod file;
pub mod handoff;
pub mod limit;
pub mod relay;
pub mod rest;
pub mod shape;
pub mod stream;
pub mod utf8;

use limit::StreamStats;

/// How much of each stream reaches its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// All of it, byte-identical (`--output-file` or `--idle-timeout`
    /// without `--max-output`).
    None,
    /// `--max-output SIZE`: at most SIZE bytes, head, marker and tail.
    Bytes(u64),
}

/// What became of the relay: each stream, and the output file's failed
/// write, if one failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RelayEnd {
    pub streams: [Relayed; 2],
    pub file_error: Option<StreamError>,
}

/// What became of one stream: the cut's numbers, and the error that cut it
/// short, if any.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Relayed {
    pub stats: StreamStats,
    pub error: Option<StreamError>,
}

/// A read of the command's output, or a write of it to pgrun's own fd or
/// to the output file, or the output file's rename into place, failed
/// (other than EPIPE: a reader that left is no error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamError {
    /// What failed: `read`, `write` or `rename`.
    pub op: &'static str,
    pub errno: i32,
}

impl StreamError {
    /// The error `e` of the operation `op` (`read`, `write`, `rename`).
    pub fn of(op: &'static str, e: &std::io::Error) -> StreamError {
        StreamError { op, errno: e.raw_os_error().unwrap_or(libc::EIO) }
    }

    /// What failed, without the `cannot read: ` in front: `Input/output
    /// error (EIO)`.
    pub fn cause(&self) -> String {
        let text = std::io::Error::from_raw_os_error(self.errno).to_string();
        let text = text.split(" (os error").next().unwrap_or(&text);
        format!("{text} ({:?})", nix::errno::Errno::from_raw(self.errno))
    }
}

impl std::fmt::Display for StreamError {
    /// `cannot read: Input/output error (EIO)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot {}: {}", self.op, self.cause())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_says_what_failed_and_why() {
        let e = StreamError::of("read", &std::io::Error::from_raw_os_error(libc::EIO));
        assert_eq!(e.to_string(), "cannot read: Input/output error (EIO)");
        let e = StreamError::of("write", &std::io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(e.cause(), "No space left on device (ENOSPC)");
    }
}

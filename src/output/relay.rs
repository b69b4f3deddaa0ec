//! Moving the command's stdout and stderr through pgrun, for
//! `--max-output`.
//!
//! The relay owns the two inner pipes (the command writes to their write
//! ends, pgrun reads their read ends) and each stream's [`Cut`]. It never
//! blocks and never wakes on its own: the supervisor's event loop polls the
//! fds the relay names ([`Relay::interest`]) together with the signal fd and
//! calls [`Relay::on_ready`]. Head bytes are written as they arrive; while
//! pgrun's own stdout cannot take them, the relay stops reading that
//! stream's head, so the command waits, as it would on a direct pipe. Past
//! the head, bytes go into the ring and reading never stops.
//!
//! When the run is over, [`Relay::finish`] reads what the pipes hold at that
//! moment and no more (a process outside the run that still holds a write
//! end cannot keep pgrun), then writes the held bytes, the marker and the
//! tail. A stream whose reader went away (EPIPE) is closed at once, so the
//! command gets EPIPE or SIGPIPE on its next write, as it would without
//! pgrun; the run goes on.

use super::limit::{Cut, StreamStats};
use crate::sys::PollFd;
use crate::sys::pipe;
use crate::verbose;
use anyhow::{Context, Result};
use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

/// One read's worth: large, so a fast writer costs few wake-ups.
const READ_SIZE: usize = 256 * 1024;

/// At most this many `PIPE_BUF` writes to a pipe, socket or terminal per
/// turn of the loop (1 MiB), before signals and the other stream get theirs.
const WRITES_PER_TURN: usize = 256;
/// The inner pipes' buffer on Linux (best effort).
const PIPE_CAPACITY: usize = 1024 * 1024;

/// The write ends of the inner pipes, for the command's fds 1 and 2; pgrun
/// closes its copies once the command has started.
pub struct ChildEnds {
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

impl ChildEnds {
    /// The fds for the spawn, stdout's first.
    pub fn raw(&self) -> [std::os::fd::RawFd; 2] {
        [self.stdout.as_raw_fd(), self.stderr.as_raw_fd()]
    }
}

/// Both streams' relays.
pub struct Relay {
    streams: [Stream; 2],
    scratch: Vec<u8>,
}

struct Stream {
    name: &'static str,
    /// The inner pipe's read end; `None` once the stream has ended.
    source: Option<OwnedFd>,
    /// pgrun's own fd (1 or 2) this stream goes to.
    dest: BorrowedFd<'static>,
    /// A write to `dest` never waits for a reader (file, /dev/null).
    dest_never_waits: bool,
    cut: Option<Cut>,
    /// Bytes to write to `dest`, in order; the front one from `written` on.
    outbox: VecDeque<Vec<u8>>,
    written: usize,
    stats: Option<StreamStats>,
}

impl Relay {
    /// Create the pipes and reserve each stream's ring for SIZE `size`.
    /// Everything that can fail fails here, before the command starts.
    pub fn new(size: u64) -> Result<(Relay, ChildEnds)> {
        let (out_read, out_write) = pipe::output_pipe(PIPE_CAPACITY).context("cannot create the output pipes")?;
        let (err_read, err_write) = pipe::output_pipe(PIPE_CAPACITY).context("cannot create the output pipes")?;
        let mut scratch = Vec::new();
        scratch.try_reserve_exact(READ_SIZE).context("cannot reserve the output buffer")?;
        scratch.resize(READ_SIZE, 0);
        let reserve = || {
            Cut::new(size).with_context(|| format!("cannot reserve memory for --max-output {size} (2 x {size} bytes)"))
        };
        let (stdout, stderr) = pipe::own_stdout_stderr();
        let relay = Relay {
            streams: [
                Stream::new("stdout", out_read, stdout, reserve()?),
                Stream::new("stderr", err_read, stderr, reserve()?),
            ],
            scratch,
        };
        Ok((relay, ChildEnds { stdout: out_write, stderr: err_write }))
    }

    /// The fds to poll and what for, into `set`; returns how many.
    pub fn interest(&self, set: &mut [PollFd]) -> usize {
        let mut n = 0;
        for s in &self.streams {
            if let Some(source) = &s.source
                && (s.outbox.is_empty() || s.cut.as_ref().is_some_and(Cut::past_head))
            {
                set[n] = PollFd::read(source.as_fd());
                n += 1;
            }
            if !s.outbox.is_empty() && !s.dest_never_waits {
                set[n] = PollFd::write(s.dest);
                n += 1;
            }
        }
        n
    }

    /// Act on the fds `poll` found ready.
    pub fn on_ready(&mut self, set: &[PollFd]) {
        for entry in set.iter().filter(|e| e.ready) {
            for s in &mut self.streams {
                if entry.write && entry.fd == s.dest.as_raw_fd() && !s.outbox.is_empty() {
                    s.flush(false);
                } else if !entry.write && s.source.as_ref().is_some_and(|fd| fd.as_raw_fd() == entry.fd) {
                    s.read_once(&mut self.scratch);
                }
            }
        }
    }

    /// The run is over: read what the pipes hold now, write everything
    /// still owed (waiting for the readers as long as it takes), and return
    /// the stats of stdout and stderr.
    pub fn finish(mut self) -> [StreamStats; 2] {
        for s in &mut self.streams {
            s.drain(&mut self.scratch);
            s.end();
            s.flush(true);
        }
        self.streams.map(|s| s.stats.unwrap_or_default())
    }
}

impl Stream {
    fn new(name: &'static str, source: OwnedFd, dest: BorrowedFd<'static>, cut: Cut) -> Stream {
        Stream {
            name,
            source: Some(source),
            dest,
            dest_never_waits: pipe::writes_never_wait(dest),
            cut: Some(cut),
            outbox: VecDeque::new(),
            written: 0,
            stats: None,
        }
    }

    /// One read (the loop comes back while there is more); returns whether
    /// bytes came.
    fn read_once(&mut self, scratch: &mut [u8]) -> bool {
        let Some(source) = &self.source else { return false };
        match pipe::read(source.as_fd(), scratch) {
            Ok(0) => {
                self.end();
                self.flush(false);
                false
            }
            Ok(n) => {
                self.feed(&scratch[..n]);
                true
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(e) => {
                verbose!("cannot read the command's {}: {e}", self.name);
                self.end();
                self.flush(false);
                false
            }
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        let Some(cut) = &mut self.cut else { return };
        let mut head = Vec::new();
        cut.feed(bytes, &mut head);
        if !head.is_empty() {
            self.outbox.push_back(head);
            self.flush(false);
        }
    }

    /// Read what the pipe holds right now, and no more: a writer outside
    /// the run must not keep pgrun here.
    fn drain(&mut self, scratch: &mut [u8]) {
        let Some(source) = &self.source else { return };
        let mut left = pipe::bytes_readable(source.as_fd()).unwrap_or(PIPE_CAPACITY);
        while left > 0 {
            let want = left.min(scratch.len());
            if !self.read_once(&mut scratch[..want]) {
                break;
            }
            // The head may have queued bytes: write them before reading on.
            self.flush(true);
            left = left.saturating_sub(want);
        }
    }

    /// The stream has ended (end of file, or the run is over): close the
    /// pipe and queue what the cut still owes.
    fn end(&mut self) {
        self.source = None;
        if let Some(cut) = self.cut.take() {
            let mut held = Vec::new();
            let (rest, stats) = cut.finish(&mut held);
            for bytes in [held, rest] {
                if !bytes.is_empty() {
                    self.outbox.push_back(bytes);
                }
            }
            self.stats = Some(stats);
        }
    }

    /// Write queued bytes. `wait`: all of them, however long the reader
    /// takes (the fd is blocking). Otherwise only what `dest` takes without
    /// waiting: everything for a file; for a pipe, socket or terminal one
    /// `PIPE_BUF` at a time while a zero-timeout poll says it is writable
    /// (a writable pipe takes `PIPE_BUF` without blocking), up to
    /// [`WRITES_PER_TURN`] writes, so the loop stays responsive.
    fn flush(&mut self, wait: bool) {
        let mut writes = 0;
        while let Some(front) = self.outbox.front() {
            let rest = &front[self.written..];
            let chunk = if wait || self.dest_never_waits { rest } else { &rest[..rest.len().min(pipe::PIPE_BUF)] };
            match pipe::write(self.dest, chunk) {
                Ok(n) => {
                    self.written += n;
                    if self.written == front.len() {
                        self.outbox.pop_front();
                        self.written = 0;
                    }
                    writes += 1;
                    if !wait
                        && !self.dest_never_waits
                        && (writes >= WRITES_PER_TURN || !crate::sys::writable_now(self.dest))
                    {
                        return;
                    }
                }
                Err(e) => return self.reader_gone(&e),
            }
        }
    }

    /// pgrun's own stdout or stderr failed (EPIPE: the reader left): stop
    /// this stream's relay, not the run. Closing the pipe gives the command
    /// EPIPE or SIGPIPE on its next write, as without pgrun.
    fn reader_gone(&mut self, err: &std::io::Error) {
        verbose!("cannot write the command's {}: {err}; no longer relaying it", self.name);
        self.outbox.clear();
        self.written = 0;
        self.source = None;
        if let Some(cut) = self.cut.take() {
            self.stats = Some(cut.finish(&mut Vec::new()).1);
        }
    }
}

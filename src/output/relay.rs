//! Moving the command's stdout and stderr through pgrun, for
//! `--max-output`, `--output-file` and `--idle-timeout`.
//!
//! The relay owns the two inner pipes (the command writes to their write
//! ends, pgrun reads their read ends) and each stream's [`Shape`]: its
//! [`Cut`] under a [`Limit::Bytes`], or the whole stream under
//! [`Limit::None`] (a pass-through: every byte, in order). With
//! `--output-file`, every piece pgrun takes from either pipe goes to the
//! [`OutputFile`] as it takes it, in that order, whatever the streams'
//! readers do (a read: to the file first; a tee: on to the destination,
//! then spliced into the file before anything else is taken).
//! [`Relay::on_ready`] says whether bytes were read, which is what moves
//! the idle deadline. Bytes nobody needs to look at (a whole stream, and a
//! cut stream's head up to [`PASS_MARGIN`](super::limit::PASS_MARGIN)
//! bytes before its end, see [`Cut::may_pass`]) move kernel to kernel on
//! Linux when the destination is a pipe or a regular file
//! ([`pipe::splice_nowait`]: pipe speed, no copy through pgrun); with the
//! output file too, only to a pipe: [`pipe::tee_nowait`] copies them on to
//! the destination and [`OutputFile::take_from_pipe`] then splices the same
//! bytes into the file, so the file still gets each piece as pgrun takes
//! it. Both only while the destination has room; a full one is polled for
//! POLLOUT while the source waits, as for any write. The bytes near the
//! cut, past the head, and to a terminal, socket or device are read and
//! written. A splice or tee counts as a read for the idle deadline. It never
//! blocks: the supervisor's event loop polls the fds the relay names
//! ([`Relay::interest`]) together with the signal fd and calls
//! [`Relay::on_ready`]. Where pgrun keeps up with a writer of small pieces
//! that comes back within a fraction of a millisecond, a source it has just
//! taken (all but the few pieces written meanwhile) rests that long before
//! it is polled again
//! ([`Stream::rest_if_caught_up`]), so that the pieces go on together; a
//! slower writer is not rested for (the rest would gather nothing and only
//! wake pgrun once more per piece). At most one source rests at a time,
//! and bytes on the other wake pgrun, which takes the resting one's first
//! ([`Relay::take_from_resting`]): a rest does not reorder stdout and
//! stderr where they share a destination or the output file. Once a rest
//! is over, both sources are polled alike, and bytes found on both in one
//! wake-up go stdout first, as with no rest at all (two pipes carry no
//! order between them; the contract promises none): so a rest that has
//! just ended while the other stream got bytes may still be overtaken.
//! Closing that window took a mark of "rested since last taken" kept
//! right through every path (a poll finding it empty, the rest's end, the
//! idle deadline), and bought nothing against the same reorder without
//! rests; it was tried and taken out again (f42f5a3 and its review).
//!
//! Nor does a rest make a command idle: bytes waiting behind it when the
//! idle deadline comes end it ([`Relay::end_rests_that_hold_bytes`]). That rest
//! ([`Relay::next_wake`]) is the relay's only timed wake-up, and only ever
//! follows bytes taken: a command that writes nothing wakes nobody. Only a
//! busy stream rests ([`BUSY_AFTER`]), and its destination, if a pipe, is
//! then widened to hold [`PIPE_CAPACITY`] like the inner pipes
//! ([`pipe::widen`]: Linux, best effort, never narrower), so that those
//! bigger pieces go on in one splice and the reader downstream is woken
//! less often. Head bytes are written as they arrive; while pgrun's own stdout
//! cannot take them, they wait in the stream's outbox (at most one read's
//! worth) and the relay stops reading that stream's head, so the command
//! waits, as it would on a direct pipe. Past the head,
//! bytes go into the ring and reading never stops. A whole stream is like a
//! head that never ends: a stalled reader stops the reading of its stream
//! (the output file then waits too, and still gets every byte in order).
//!
//! No write ever blocks, so a reader that stops reading never makes pgrun
//! deaf to its timeout or to signals, and O_NONBLOCK is never set on a file
//! description pgrun shares with its caller: a pipe or a terminal through a
//! non-blocking description of pgrun's own (on Linux, opened anew from
//! `/proc/self/fd`: a write takes what fits, a whole pipe buffer at once);
//! elsewhere, or when that cannot be had, a pipe is written `PIPE_BUF`
//! bytes at a time, each only once `poll` says it is writable (a terminal
//! likewise); a socket with `MSG_DONTWAIT`; a file at once. EAGAIN (the
//! caller's own O_NONBLOCK) means "wait for POLLOUT", like a full pipe.
//! Only a write error means the reader is gone: EPIPE (the reader left)
//! quietly, any other error with one line. A destination that is a pipe is
//! also watched while nothing is owed to it (poll for POLLERR/POLLHUP
//! only, which a pipe's write end reports once its last reader left and
//! never otherwise): past the head nothing is written until the stream
//! ends, and the command must not write on for a reader long gone. A
//! terminal, socket or file is not watched so (a terminal's hangup is no
//! reader leaving): its next write says. A stream
//! whose reader is gone is closed at once, so the command gets EPIPE or
//! SIGPIPE on its next write, as it would without pgrun; the run goes on. A
//! read error on an inner pipe ends that stream with one line, and the
//! report says so.
//!
//! When the run is over, [`Relay::close`] reads what the pipes hold at that
//! moment and no more (a process outside the run that still holds a write
//! end cannot keep pgrun), and queues the held bytes, the marker and the
//! tail; [`Relay::flush_rest`] then writes them, after pgrun has withdrawn
//! the run's record (see `run::clean_up`), polling for the readers as long
//! as they take. A signal to pgrun then changes nothing: the run is already
//! over, and everything pgrun read is written (SIGKILL ends pgrun, which
//! holds nothing but its output by then).

use super::file::OutputFile;
use super::limit::{Cut, StreamStats};
use crate::sys::PollFd;
use crate::sys::pipe::{self, WriteKind};
use crate::sys::wakeup::SignalSource;
use crate::{say, verbose};
use anyhow::{Context, Result};
use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

/// One read's worth: large, so a fast writer costs few wake-ups.
const READ_SIZE: usize = 256 * 1024;

/// At most this many `PIPE_BUF` writes to a pipe, socket or terminal per
/// turn of the loop (1 MiB), before signals and the other stream get theirs.
const WRITES_PER_TURN: usize = 256;
/// What the inner pipes hold on Linux (best effort), and a busy stream's
/// destination if it is a pipe.
const PIPE_CAPACITY: usize = 1024 * 1024;
/// A stream is busy once this much of it has been taken: only then is its
/// destination widened and may its source rest. A run whose output is
/// small leaves its caller's pipe as it found it (and takes no more of the
/// user's pipe budget for it: past `pipe-user-pages-soft`, the kernel
/// gives an unprivileged user's new pipes 2 pages instead of 16), and its
/// output is never held back by a rest.
const BUSY_AFTER: u64 = 1024 * 1024;
/// How long a stream's source rests once pgrun has caught up with it
/// (taken all it held but under [`CAUGHT_UP`], see
/// [`Stream::rest_if_caught_up`]): short enough that a writer at the
/// kernel's pipe speed (a few GB/s) does not fill [`PIPE_CAPACITY`]
/// meanwhile, long enough that it writes many small pieces.
const REST: Duration = Duration::from_micros(200);
/// pgrun has caught up with the writer when the source holds less than
/// this after a take: what came while pgrun moved the last piece, a few
/// of a fast writer's small pieces (16 of `head`'s). Taking them at once
/// would move only those few: a source with a writer that fast would be
/// taken a few pieces at a time, never empty, and never rest (1 GiB from
/// `head`: 25,000 wake-ups of pgrun, 5,000 with this, its CPU time
/// halved). They wait for the rest, as the pieces that follow them do.
const CAUGHT_UP: usize = 64 * 1024;

/// How much of each stream reaches its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// All of it, byte-identical (`--output-file` without `--max-output`).
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

/// A read of the command's output, or a write of it to pgrun's own fd,
/// failed (other than EPIPE: a reader that left is no error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamError {
    /// The read failed (else the write).
    pub reading: bool,
    pub errno: i32,
}

impl std::fmt::Display for StreamError {
    /// `cannot read: Input/output error (EIO)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.reading { "read" } else { "write" };
        let text = std::io::Error::from_raw_os_error(self.errno).to_string();
        let text = text.split(" (os error").next().unwrap_or(&text);
        write!(f, "cannot {what}: {text} ({:?})", nix::errno::Errno::from_raw(self.errno))
    }
}

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

/// Both streams' relays, and the output file they share.
pub struct Relay {
    streams: [Stream; 2],
    scratch: Vec<u8>,
    file: Option<OutputFile>,
}

struct Stream {
    name: &'static str,
    /// The inner pipe's read end; `None` once the stream has ended.
    source: Option<OwnedFd>,
    /// pgrun's own fd (1 or 2) this stream goes to, or (a terminal) a
    /// non-blocking description of it that pgrun opened.
    dest: Dest,
    /// How `dest` is written without blocking.
    kind: WriteKind,
    /// Move the bytes kernel to kernel ([`pipe::splice_nowait`]) where no
    /// byte needs looking at (a whole stream; the head far from its cut,
    /// see [`Cut::may_pass`]): `dest` is a pipe or a regular file, on
    /// Linux; turned off for good if the kernel refuses.
    splice: bool,
    /// With an output file: copy the bytes on to `dest` with
    /// [`pipe::tee_nowait`], then splice them into the file
    /// ([`OutputFile::take_from_pipe`]): `dest` is a pipe, on Linux.
    tee: bool,
    /// A splicing stream found its destination full: poll it for room
    /// instead of the source for bytes.
    wants_room: bool,
    /// `dest` is a pipe: while there is nothing to write to it, it is
    /// still polled for its reader leaving (POLLERR/POLLHUP, nothing else).
    watch_reader: bool,
    /// A write to `dest` failed (EPIPE, or an error said once): nothing
    /// more goes there; what the pipe holds is still read for the output
    /// file and the counts before the stream is closed.
    dest_gone: bool,
    /// How many bytes were taken from the source so far.
    taken: u64,
    /// The source holds [`PIPE_CAPACITY`] bytes.
    wide: bool,
    /// The stream was found busy: more than `busy_after` bytes taken
    /// ([`BUSY_AFTER`]; 0 under the test hook `long-rest`).
    busy: bool,
    busy_after: u64,
    /// The rest of a busy stream with a wide source ([`Stream::rest`]):
    /// [`REST`] (2 s under `long-rest`).
    rest_when_busy: Duration,
    /// The last bytes taken went kernel to kernel (splice, tee): only
    /// those rest. Bytes read (near the cut, past it into the ring, to a
    /// terminal) cost a copy each, and pgrun, copying, rests them no
    /// faster than the pipe would gather them (a cut of 1 GiB: 1.36x a
    /// direct pipe with rests, 1.23x without).
    spliced_last: bool,
    /// Until when the source rests: not polled, however much it gets.
    rests_until: Option<Instant>,
    /// Since when pgrun has watched the source (caught up with, or so it
    /// was): its last take, or the end of the rest that followed it. Bytes
    /// that come within [`REST`] of it say the writer keeps coming back
    /// quickly.
    watched_since: Option<Instant>,
    /// `None` once the stream has ended and its stats are known.
    shape: Option<Shape>,
    /// Bytes to write to `dest`, in order; the front one from `written` on.
    outbox: VecDeque<Vec<u8>>,
    written: usize,
    stats: Option<StreamStats>,
    error: Option<StreamError>,
}

/// Where a stream is written.
enum Dest {
    /// pgrun's own fd, shared with its caller: its flags are never changed.
    Shared(BorrowedFd<'static>),
    /// A description of that terminal of pgrun's own, non-blocking.
    Own(OwnedFd),
}

impl Dest {
    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Dest::Shared(fd) => *fd,
            Dest::Own(fd) => fd.as_fd(),
        }
    }
}

/// What a stream's bytes become on their way to its destination.
enum Shape {
    /// `--max-output`: head, marker, tail.
    Cut(Cut),
    /// Every byte as it comes; how many so far.
    Whole(u64),
}

impl Shape {
    /// The bytes to write now for `bytes` read, appended to `out`.
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        match self {
            Shape::Cut(cut) => cut.feed(bytes, out),
            Shape::Whole(count) => {
                *count += bytes.len() as u64;
                out.extend_from_slice(bytes);
            }
        }
    }

    /// Whether what is read from now on is only kept, not written (so
    /// reading need not wait for the reader).
    fn past_head(&self) -> bool {
        matches!(self, Shape::Cut(cut) if cut.past_head())
    }

    /// The stream has ended: what is still to write, and the stats.
    fn finish(self, out: &mut Vec<u8>) -> (Vec<u8>, StreamStats) {
        match self {
            Shape::Cut(cut) => cut.finish(out),
            Shape::Whole(bytes) => (Vec::new(), StreamStats { bytes, omitted: 0 }),
        }
    }
}

impl Relay {
    /// Create the pipes and, under [`Limit::Bytes`], reserve each stream's
    /// ring. `file` (already open) gets every byte read. Everything that
    /// can fail fails here, before the command starts.
    pub fn new(limit: Limit, file: Option<OutputFile>) -> Result<(Relay, ChildEnds)> {
        let (out_read, out_write, out_wide) =
            pipe::output_pipe(PIPE_CAPACITY).context("cannot create the output pipes")?;
        let (err_read, err_write, err_wide) =
            pipe::output_pipe(PIPE_CAPACITY).context("cannot create the output pipes")?;
        let mut scratch = Vec::new();
        scratch.try_reserve_exact(READ_SIZE).context("cannot reserve the output buffer")?;
        scratch.resize(READ_SIZE, 0);
        let reserve = || match limit {
            Limit::None => Ok(Shape::Whole(0)),
            Limit::Bytes(size) => Cut::new(size)
                .map(Shape::Cut)
                .with_context(|| format!("cannot reserve memory for --max-output {size} (2 x {size} bytes)")),
        };
        let (stdout, stderr) = pipe::own_stdout_stderr();
        let mut relay = Relay {
            streams: [
                Stream::new("stdout", out_read, out_wide, stdout, reserve()?),
                Stream::new("stderr", err_read, err_wide, stderr, reserve()?),
            ],
            scratch,
            file,
        };
        if crate::test_hook::active(crate::test_hook::LONG_REST) {
            for s in &mut relay.streams {
                (s.busy_after, s.rest_when_busy) = (0, Duration::from_secs(2));
            }
        }
        Ok((relay, ChildEnds { stdout: out_write, stderr: err_write }))
    }

    /// The fds to poll and what for, into `set`; returns how many. A
    /// source that rests (see [`Relay::next_wake`]) is not among them.
    pub fn interest(&self, set: &mut [PollFd]) -> usize {
        let mut n = 0;
        let now = Instant::now();
        for s in &self.streams {
            if s.wants_room && s.source.is_some() {
                set[n] = PollFd::write(s.dest.fd());
                n += 1;
                continue;
            }
            if let Some(source) = &s.source
                && s.may_take()
                && !s.rests_at(now)
            {
                set[n] = PollFd::read(source.as_fd());
                n += 1;
            }
            if !s.outbox.is_empty() {
                set[n] = PollFd::write(s.dest.fd());
                n += 1;
            } else if s.watch_reader && s.source.is_some() {
                set[n] = PollFd::errors(s.dest.fd());
                n += 1;
            }
        }
        n
    }

    /// When a resting source is to be polled again, if one rests: the loop
    /// must wake then (this is the only wake-up the relay asks for, and
    /// only right after it took bytes).
    pub fn next_wake(&self) -> Option<Instant> {
        let resting = self.streams.iter().filter(|s| s.source.is_some()).filter_map(|s| s.rests_until);
        let now = Instant::now();
        resting.filter(|until| now < *until).min()
    }

    /// End now every rest whose source holds bytes; true if one did. The
    /// idle deadline has passed: bytes that wait behind a rest were
    /// written, so the command was not idle, and they are to be taken (on
    /// the loop's next turn, which moves the deadline) rather than the run
    /// stopped. A rest only ever defers the idle timeout once: a source
    /// that is then not taken (its destination full) rests no more.
    pub fn end_rests_that_hold_bytes(&mut self) -> bool {
        let now = Instant::now();
        let mut held = false;
        for s in &mut self.streams {
            let Some(source) = &s.source else { continue };
            if s.rests_at(now) && pipe::bytes_readable(source.as_fd()).is_ok_and(|n| n > 0) {
                s.rests_until = None;
                held = true;
            }
        }
        held
    }

    /// Act on the fds `poll` found ready; true if bytes of the command's
    /// output were read.
    pub fn on_ready(&mut self, set: &[PollFd]) -> bool {
        let mut read = false;
        for entry in set.iter().filter(|e| e.ready) {
            for i in 0..self.streams.len() {
                let s = &mut self.streams[i];
                if entry.errors {
                    if entry.fd == s.dest.fd().as_raw_fd() && s.source.is_some() {
                        s.reader_left(&mut self.scratch, &mut self.file);
                    }
                } else if entry.write && entry.fd == s.dest.fd().as_raw_fd() && s.wants_room {
                    // Room again: read on (on the next turn).
                    s.wants_room = false;
                } else if entry.write && entry.fd == s.dest.fd().as_raw_fd() && !s.outbox.is_empty() {
                    s.flush();
                } else if !entry.write && s.source.as_ref().is_some_and(|fd| fd.as_raw_fd() == entry.fd) {
                    // What a resting stream holds was, most likely,
                    // written before these bytes: it goes first.
                    read |= self.take_from_resting(i, set);
                    read |= self.take(i);
                }
                let s = &mut self.streams[i];
                if s.dest_gone && s.source.is_some() {
                    s.finish_without_dest(&mut self.scratch, &mut self.file);
                }
            }
        }
        read
    }

    /// Stream `except`'s source turned readable in `set`: first take
    /// what every other source that rested (not polled in `set`, see
    /// [`Relay::interest`]) holds now, a few reads' worth at most. A rest
    /// must not reorder the streams: where they share a destination
    /// (`2>&1`, a terminal) or go to the output file, bytes the command
    /// wrote to stdout during stdout's rest would otherwise come after
    /// the stderr it wrote next. Returns whether bytes came.
    fn take_from_resting(&mut self, except: usize, set: &[PollFd]) -> bool {
        let mut read = false;
        for i in 0..self.streams.len() {
            let Some(source) = &self.streams[i].source else { continue };
            let fd = source.as_raw_fd();
            if i == except || self.streams[i].rests_until.is_none() || set.iter().any(|e| e.fd == fd && !e.write) {
                continue;
            }
            for _ in 0..PIPE_CAPACITY.div_ceil(READ_SIZE) {
                let s = &self.streams[i];
                let held = s.source.as_ref().map(|fd| pipe::bytes_readable(fd.as_fd()));
                if !s.may_take() || !held.is_some_and(|held| held.is_ok_and(|held| held > 0)) {
                    break;
                }
                if !self.take(i) {
                    break;
                }
                read = true;
            }
            let s = &mut self.streams[i];
            if s.dest_gone && s.source.is_some() {
                s.finish_without_dest(&mut self.scratch, &mut self.file);
            }
        }
        read
    }

    /// Stream `i`'s source is readable: take from it
    /// ([`Stream::on_readable`]); if that caught up with the writer
    /// (see [`Stream::rest_if_caught_up`]), it rests, unless
    /// another source rests already: at most one rests at a time, so
    /// that bytes the command writes to the other stream meanwhile wake
    /// pgrun, which takes the resting one's first
    /// ([`Relay::take_from_resting`]) and the streams keep their order.
    /// Returns whether bytes came.
    fn take(&mut self, i: usize) -> bool {
        let came = self.streams[i].on_readable(&mut self.scratch, &mut self.file);
        let now = Instant::now();
        if came {
            self.streams[i].widen_if_busy();
            let may_rest = !self.streams.iter().enumerate().any(|(j, s)| j != i && s.rests_at(now));
            self.streams[i].rest_if_caught_up(now, may_rest);
        }
        came
    }

    /// The run is over: read what the pipes hold now (and no more), close
    /// them, and queue everything still owed. Writes only what the readers
    /// take at once; the rest is for [`Relay::flush_rest`].
    pub fn close(&mut self) {
        for s in &mut self.streams {
            s.drain(&mut self.scratch, &mut self.file);
            s.end();
            s.flush();
        }
    }

    /// What became of the streams and the output file so far: after
    /// [`Relay::close`], every count is final; only an error of the writes
    /// still owed ([`Relay::flush_rest`]) can come on top.
    pub fn end_so_far(&self) -> RelayEnd {
        RelayEnd {
            streams: [&self.streams[0], &self.streams[1]]
                .map(|s| Relayed { stats: s.stats.unwrap_or_default(), error: s.error }),
            file_error: self.file.as_ref().and_then(OutputFile::error),
        }
    }

    /// After [`Relay::close`]: write everything still owed, waiting for the
    /// readers as long as they take (or until they leave), and return what
    /// became of stdout, stderr and the output file (which has everything
    /// already). Signals that arrive meanwhile are read and change nothing:
    /// the run is over, and nothing read is lost.
    pub fn flush_rest(mut self, signals: &SignalSource) -> RelayEnd {
        let mut watch_signals = true;
        loop {
            let mut set = [PollFd::read(signals.as_fd()); 3];
            let mut n = usize::from(watch_signals);
            let first = n;
            for s in &mut self.streams {
                s.flush();
                if !s.outbox.is_empty() {
                    set[n] = PollFd::write(s.dest.fd());
                    n += 1;
                }
            }
            if n == first {
                break;
            }
            if let Err(e) = crate::sys::poll(&mut set[..n], None) {
                say::line(format_args!("cannot wait for the readers of the command's output: {e}; it is lost"));
                for s in &mut self.streams {
                    s.abandon();
                }
                break;
            }
            if watch_signals && set[0].ready {
                match signals.drain() {
                    Ok(received) => {
                        for signal in received {
                            let signal = crate::signame::Signal(signal);
                            verbose!("received {signal}: the run is over, still writing its output");
                        }
                    }
                    Err(e) => {
                        // Signals change nothing now: stop reading them
                        // rather than wake for them again and again.
                        verbose!("cannot read signals: {e}; no longer watching them");
                        watch_signals = false;
                    }
                }
            }
        }
        RelayEnd {
            streams: self.streams.map(|s| Relayed { stats: s.stats.unwrap_or_default(), error: s.error }),
            file_error: self.file.and_then(OutputFile::finish),
        }
    }
}

impl Stream {
    fn new(name: &'static str, source: OwnedFd, wide: bool, dest: BorrowedFd<'static>, shape: Shape) -> Stream {
        let mut kind = pipe::write_kind(dest);
        let mut dest = Dest::Shared(dest);
        if kind == WriteKind::Waits
            && let Dest::Shared(fd) = dest
            && let Some(own) = pipe::reopen_pipe_nonblocking(fd).or_else(|| pipe::reopen_terminal_nonblocking(fd))
        {
            (dest, kind) = (Dest::Own(own), WriteKind::NonBlocking);
        }
        let splice = pipe::can_splice_to(dest.fd());
        let tee = splice && pipe::can_tee_to(dest.fd());
        let watch_reader = pipe::is_pipe(dest.fd());
        Stream {
            name,
            source: Some(source),
            dest,
            kind,
            splice,
            tee,
            wants_room: false,
            dest_gone: false,
            watch_reader,
            taken: 0,
            wide,
            busy: false,
            spliced_last: false,
            busy_after: BUSY_AFTER,
            rest_when_busy: REST,
            rests_until: None,
            watched_since: None,
            shape: Some(shape),
            outbox: VecDeque::new(),
            written: 0,
            stats: None,
            error: None,
        }
    }

    /// How long the source rests once caught up: `rest_when_busy` once the
    /// stream is busy, if its source is wide; else it never rests.
    fn rest(&self) -> Option<Duration> {
        (self.busy && self.wide).then_some(self.rest_when_busy)
    }

    /// Once the stream is busy (more than [`BUSY_AFTER`] bytes taken), once:
    /// widen its destination, if a pipe, to hold [`PIPE_CAPACITY`]
    /// ([`pipe::widen`]: best effort, never narrower), so that each splice
    /// or write moves more and the reader downstream is woken less often
    /// (not past a cut's head: the destination only gets the marker and
    /// the tail, at the end); and let a wide source rest when caught up
    /// ([`Stream::rest_if_caught_up`]).
    fn widen_if_busy(&mut self) {
        if self.busy || self.taken < self.busy_after {
            return;
        }
        self.busy = true;
        // Past a cut's head only the ring gets bytes: the caller's pipe
        // gets the marker and the tail at the end, and is left as it was.
        if self.watch_reader && !self.shape.as_ref().is_some_and(Shape::past_head) {
            pipe::widen(self.dest.fd(), PIPE_CAPACITY);
        }
    }

    /// Whether the source may be read now, rest aside: it has not ended,
    /// its destination has room, and nothing is owed to it that these
    /// bytes would have to wait behind (past the head, they only go to
    /// the ring).
    fn may_take(&self) -> bool {
        self.source.is_some()
            && !self.wants_room
            && (self.outbox.is_empty() || self.shape.as_ref().is_some_and(Shape::past_head))
    }

    /// Whether the source rests at `now` (see [`Stream::rest_if_caught_up`]).
    fn rests_at(&self, now: Instant) -> bool {
        self.source.is_some() && self.rests_until.is_some_and(|until| now < until)
    }

    /// Bytes came, and if they were all the source held, or all but what
    /// the writer wrote meanwhile (less than [`CAUGHT_UP`]: pgrun keeps up
    /// with the writer), let the source rest for [`REST`] before it is
    /// polled again. A pipe wakes its reader at each write once it has
    /// emptied, so a relay that keeps up with a writer of small pieces
    /// (`head` writes 4 KiB at a time) would wake, poll and move each
    /// piece on its own, a context switch for pgrun and one for the
    /// reader downstream per piece: one more hop as costly as one more
    /// `cat`. Resting lets the pieces gather in the pipe (it holds
    /// [`PIPE_CAPACITY`]; only a pipe that does may rest) and go on
    /// together. Only a writer that comes back quickly is rested for:
    /// these bytes came within `REST` of pgrun starting to watch the
    /// source (its previous take, or the end of the rest after it). A
    /// slower writer (a line every few milliseconds) would find the rest
    /// over before it writes again, and the rest's end would only wake
    /// pgrun a second time per piece, for nothing. So the first bytes after
    /// a quiet spell go on at once, and so does every piece of a slow
    /// writer; only pieces that follow within `REST` (or came while pgrun
    /// took the last ones) wait, for at most that long. A command that
    /// writes nothing causes no wake-up at all: a rest follows only bytes
    /// taken. Not if the pipe cannot say what it holds, nor unless
    /// `may_rest` (no other source rests), nor after a read (see
    /// `spliced_last`).
    fn rest_if_caught_up(&mut self, now: Instant, may_rest: bool) {
        let (Some(rest), Some(source)) = (self.rest(), &self.source) else { return };
        let quick = self.watched_since.is_some_and(|since| now.saturating_duration_since(since) <= rest);
        self.watched_since = Some(now);
        if may_rest
            && quick
            && self.spliced_last
            && pipe::bytes_readable(source.as_fd()).is_ok_and(|held| held < CAUGHT_UP)
        {
            self.rests_until = now.checked_add(rest);
            self.watched_since = self.rests_until;
        }
    }

    /// The source is readable: if the next bytes need no looking at
    /// ([`Stream::splice_budget`]), move up to that many kernel to kernel
    /// (with an output file, tee'd on and spliced into the file); if the
    /// destination has no room (EAGAIN: the source has bytes, and only
    /// pgrun reads it), wait for it (POLLOUT, see [`Relay::interest`])
    /// before reading on, as for any write; else one read. Returns whether
    /// bytes came.
    fn on_readable(&mut self, scratch: &mut [u8], file: &mut Option<OutputFile>) -> bool {
        let copied = file.as_ref().is_some_and(OutputFile::is_open);
        let budget = self.splice_budget(scratch.len(), copied);
        if budget > 0 {
            let moved = match file.as_mut().filter(|_| copied) {
                Some(file) => self.tee_once(budget, file, scratch),
                None => self.splice_once(budget),
            };
            if let Some(moved) = moved {
                return moved;
            }
        }
        self.read_once(scratch, file)
    }

    /// How many of the next bytes may go kernel to kernel, at most `len`:
    /// none if this stream cannot splice (or, with the output file still
    /// being written, `copied`, cannot tee) or still owes bytes to its
    /// destination (they come first); a whole stream's next `len`; a cut
    /// stream's head up to [`Cut::may_pass`]; nothing past the head.
    fn splice_budget(&self, len: usize, copied: bool) -> usize {
        if !self.splice || (copied && !self.tee) || !self.outbox.is_empty() {
            return 0;
        }
        match &self.shape {
            Some(Shape::Whole(_)) => len,
            Some(Shape::Cut(cut)) => usize::try_from(cut.may_pass()).unwrap_or(usize::MAX).min(len),
            None => 0,
        }
    }

    /// `n` bytes went to the destination kernel to kernel: count them.
    fn passed(&mut self, n: usize) {
        self.taken = self.taken.saturating_add(n as u64);
        self.spliced_last = true;
        match &mut self.shape {
            Some(Shape::Whole(count)) => *count += n as u64,
            Some(Shape::Cut(cut)) => cut.passed(n as u64),
            None => {}
        }
    }

    /// One splice of up to `len` bytes from a readable source;
    /// `None` if the kernel refuses splicing here (then never again: plain
    /// reads and writes say what failed and where).
    fn splice_once(&mut self, len: usize) -> Option<bool> {
        let source = self.source.as_ref()?;
        match pipe::splice_nowait(source.as_fd(), self.dest.fd(), len) {
            Ok(0) => {
                self.end();
                self.flush();
                Some(false)
            }
            Ok(n) => {
                self.passed(n);
                Some(true)
            }
            // The source polled readable, so the destination is full
            // (were the source empty after all, POLLOUT comes at once).
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                self.wants_room = true;
                Some(false)
            }
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {
                self.reader_gone(&e);
                Some(false)
            }
            Err(e) => {
                verbose!("cannot splice the command's {}: {e}; copying it instead", self.name);
                self.splice = false;
                None
            }
        }
    }

    /// One tee of up to `len` bytes from a readable source to a
    /// destination pipe,
    /// then the same bytes from the source into `file`, so the file gets
    /// them in the order pgrun took them, as from a read. `None` if the
    /// kernel refuses teeing here (then never again), or the destination's
    /// reader left: a read then takes the next bytes into the file, and its
    /// write says so, as without tee.
    fn tee_once(&mut self, len: usize, file: &mut OutputFile, scratch: &mut [u8]) -> Option<bool> {
        let source = self.source.as_ref()?;
        match pipe::tee_nowait(source.as_fd(), self.dest.fd(), len) {
            Ok(0) => {
                self.end();
                self.flush();
                Some(false)
            }
            Ok(n) => {
                let taken = file.take_from_pipe(source.as_fd(), n, scratch);
                self.passed(n);
                if let Err(e) = taken {
                    self.read_failed(&e);
                }
                Some(true)
            }
            // The source polled readable, so the destination is full
            // (were the source empty after all, POLLOUT comes at once).
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                self.wants_room = true;
                Some(false)
            }
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => None,
            Err(e) => {
                verbose!("cannot tee the command's {}: {e}; copying it instead", self.name);
                self.tee = false;
                None
            }
        }
    }

    /// One read (the loop comes back while there is more); returns whether
    /// bytes came. They go to `file` first, then on their way to `dest`.
    fn read_once(&mut self, scratch: &mut [u8], file: &mut Option<OutputFile>) -> bool {
        let Some(source) = &self.source else { return false };
        match pipe::read(source.as_fd(), scratch) {
            Ok(0) => {
                self.end();
                self.flush();
                false
            }
            Ok(n) => {
                self.taken = self.taken.saturating_add(n as u64);
                self.spliced_last = false;
                if let Some(file) = file {
                    file.write(&scratch[..n]);
                }
                self.feed(&scratch[..n]);
                true
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(e) => {
                self.read_failed(&e);
                false
            }
        }
    }

    /// A read of the command's output failed: say so, and end the stream
    /// (what it owes is still written).
    fn read_failed(&mut self, e: &std::io::Error) {
        let error = StreamError { reading: true, errno: e.raw_os_error().unwrap_or(libc::EIO) };
        say::line(format_args!(
            "cannot read the command's {}: {}; the rest of it is lost",
            self.name,
            error.to_string().trim_start_matches("cannot read: ")
        ));
        self.error.get_or_insert(error);
        self.end();
        self.flush();
    }

    fn feed(&mut self, bytes: &[u8]) {
        let Some(shape) = &mut self.shape else { return };
        let mut head = Vec::new();
        shape.feed(bytes, &mut head);
        if !head.is_empty() {
            self.outbox.push_back(head);
            self.flush();
        }
    }

    /// Read what the pipe holds right now, and no more: a writer outside
    /// the run must not keep pgrun here. What the head gains is queued (at
    /// most SIZE/2 in all), never waited for.
    ///
    /// Where the pipe said how much it holds, an EAGAIN before that much
    /// came is no proof of "empty" (nothing but pgrun reads this pipe): it
    /// is retried a few times, then said as a read error, never taken for
    /// the stream's end in silence.
    fn drain(&mut self, scratch: &mut [u8], file: &mut Option<OutputFile>) {
        const REFUSALS: u32 = 3;
        let Some(source) = &self.source else { return };
        let counted = pipe::bytes_readable(source.as_fd()).ok();
        let mut left = counted.unwrap_or(PIPE_CAPACITY);
        let mut refused = 0;
        while left > 0 {
            let want = left.min(scratch.len());
            if self.read_once(&mut scratch[..want], file) {
                left = left.saturating_sub(want);
                refused = 0;
                continue;
            }
            // The end of the stream, or an error already said; else EAGAIN.
            if self.source.is_none() || counted.is_none() {
                break;
            }
            refused += 1;
            if refused == REFUSALS {
                let err = std::io::Error::from_raw_os_error(libc::EAGAIN);
                self.read_failed(&err);
                break;
            }
        }
    }

    /// The stream has ended (end of file, or the run is over): close the
    /// pipe and queue what the cut still owes.
    fn end(&mut self) {
        self.source = None;
        if let Some(shape) = self.shape.take() {
            let mut held = Vec::new();
            let (rest, stats) = shape.finish(&mut held);
            for bytes in [held, rest] {
                if !bytes.is_empty() {
                    self.outbox.push_back(bytes);
                }
            }
            self.stats = Some(stats);
        }
    }

    /// Write what `dest` takes without waiting: everything for a file; for
    /// a pipe or terminal one `PIPE_BUF` at a time while a zero-timeout poll
    /// says it is writable (a writable pipe takes `PIPE_BUF` without
    /// blocking); for a socket what `MSG_DONTWAIT` takes. At most
    /// [`WRITES_PER_TURN`] writes, so the loop stays responsive; what is
    /// left waits for POLLOUT.
    fn flush(&mut self) {
        if self.dest_gone {
            self.outbox.clear();
            self.written = 0;
            return;
        }
        for _ in 0..WRITES_PER_TURN {
            let Some(front) = self.outbox.front() else { return };
            let rest = &front[self.written..];
            let dest = self.dest.fd();
            let result = match self.kind {
                WriteKind::Immediate | WriteKind::NonBlocking => pipe::write(dest, rest),
                WriteKind::Socket => pipe::send_nowait(dest, rest),
                WriteKind::Waits if crate::sys::writable_now(dest) => {
                    pipe::write(dest, &rest[..rest.len().min(pipe::PIPE_BUF)])
                }
                WriteKind::Waits => return,
            };
            match result {
                Ok(n) => {
                    self.written += n;
                    if self.written == front.len() {
                        self.outbox.pop_front();
                        self.written = 0;
                    }
                }
                // The caller's own O_NONBLOCK, or a full socket: wait.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) => return self.reader_gone(&e),
            }
        }
    }

    /// pgrun's own stdout or stderr failed (EPIPE: the reader left; any
    /// other error is said and reported): stop this stream's relay, not the
    /// run. Closing the pipe gives the command EPIPE or SIGPIPE on its next
    /// write, as without pgrun.
    fn reader_gone(&mut self, err: &std::io::Error) {
        if err.raw_os_error() == Some(libc::EPIPE) {
            verbose!("cannot write the command's {}: {err}; no longer relaying it", self.name);
        } else {
            let error = StreamError { reading: false, errno: err.raw_os_error().unwrap_or(libc::EIO) };
            say::line(format_args!(
                "cannot write the command's {}: {}; no longer relaying it",
                self.name,
                error.to_string().trim_start_matches("cannot write: ")
            ));
            self.error.get_or_insert(error);
        }
        // Nothing more goes to `dest`; the bytes the pipe holds are still
        // read (the output file and the counts get them: the command wrote
        // them) by [`Stream::finish_without_dest`], then the pipe is closed.
        self.dest_gone = true;
        self.splice = false;
        self.tee = false;
        self.outbox.clear();
        self.written = 0;
        if self.source.is_none() {
            self.abandon();
        }
    }

    /// The destination went away ([`Stream::reader_gone`]): read what the
    /// pipe holds now, for the output file and the counts, then close it,
    /// so the command gets EPIPE or SIGPIPE on its next write. (A write the
    /// command makes between this read and the close still succeeds and is
    /// lost: no pipe can be closed for writers only.)
    fn finish_without_dest(&mut self, scratch: &mut [u8], file: &mut Option<OutputFile>) {
        self.drain(scratch, file);
        self.abandon();
    }

    /// Nothing was owed to `dest`, a pipe, and it reports an error or a
    /// hangup: its reader left (a pipe's write end says nothing else). End
    /// the stream as on EPIPE, now rather than at a next write that may
    /// never come (past the head, bytes only go to the ring): what the pipe
    /// holds is read first (the output file and the counts get it), then
    /// the pipe is closed, so the command gets EPIPE or SIGPIPE on its next
    /// write. The condition stays set, so the stream is never polled again.
    fn reader_left(&mut self, scratch: &mut [u8], file: &mut Option<OutputFile>) {
        self.drain(scratch, file);
        if self.source.is_some() {
            verbose!("the reader of the command's {} left; no longer relaying it", self.name);
        }
        self.abandon();
    }

    /// Stop relaying this stream: drop what is owed and close the pipe.
    fn abandon(&mut self) {
        self.outbox.clear();
        self.written = 0;
        self.source = None;
        if let Some(shape) = self.shape.take() {
            self.stats = Some(shape.finish(&mut Vec::new()).1);
        }
    }
}

#[cfg(all(test, linux_strengths))]
mod tests {
    use super::*;
    use crate::sys::spawn::cloexec_pipe;

    /// A relay of two whole streams, each from a fresh inner pipe into a
    /// pipe of the test's own; returns it, the command's ends and the
    /// destinations' read ends.
    fn relay_into_pipes() -> (Relay, [OwnedFd; 2], [OwnedFd; 2]) {
        let mut parts = Vec::new();
        for name in ["stdout", "stderr"] {
            let (source, command_end, wide) = pipe::output_pipe(PIPE_CAPACITY).unwrap();
            let (dest_read, dest_write) = cloexec_pipe().unwrap();
            // The relay borrows its destinations for good (pgrun's own fds).
            let dest: &'static OwnedFd = Box::leak(Box::new(dest_write));
            let dest = dest.as_fd();
            parts.push((Stream::new(name, source, wide, dest, Shape::Whole(0)), command_end, dest_read));
        }
        let [(out, out_cmd, out_dest), (err, err_cmd, err_dest)]: [_; 2] = parts.try_into().ok().unwrap();
        let relay = Relay { streams: [out, err], scratch: vec![0; READ_SIZE], file: None };
        (relay, [out_cmd, err_cmd], [out_dest, err_dest])
    }

    /// Stream 0 as if busy with a wide source, resting `rest` once caught
    /// up (its destination is left as it is).
    fn rests_for(relay: &mut Relay, rest: Duration) {
        let s = &mut relay.streams[0];
        (s.busy, s.wide, s.rest_when_busy) = (true, true, rest);
    }

    /// Whether `relay` polls stream `i`'s source for reading now.
    fn polls_for_reading(relay: &Relay, i: usize) -> bool {
        let fd = relay.streams[i].source.as_ref().unwrap().as_raw_fd();
        let mut set = [PollFd::read(relay.streams[0].dest.fd()); crate::sys::POLL_MAX];
        let n = relay.interest(&mut set);
        set[..n].iter().any(|p| p.fd == fd && !p.write && !p.errors)
    }

    /// One turn of the relay's part of the loop, waiting at most a second.
    fn turn(relay: &mut Relay) -> bool {
        let mut set = [PollFd::read(relay.streams[0].dest.fd()); crate::sys::POLL_MAX];
        let n = relay.interest(&mut set);
        crate::sys::poll(&mut set[..n], Some(Duration::from_secs(1))).unwrap();
        relay.on_ready(&set[..n])
    }

    fn write_all(fd: &OwnedFd, len: usize) {
        let bytes = vec![b'x'; len];
        let mut done = 0;
        while done < len {
            done += pipe::write(fd.as_fd(), &bytes[done..]).unwrap();
        }
    }

    #[test]
    fn a_source_taken_empty_rests_then_is_polled_again() {
        let (mut relay, command, dests) = relay_into_pipes();
        rests_for(&mut relay, Duration::from_secs(3600));
        assert!(relay.next_wake().is_none());
        assert!(polls_for_reading(&relay, 0));
        // The first bytes after a quiet spell go on, and nothing rests.
        write_all(&command[0], 4096);
        assert!(turn(&mut relay), "the 4 KiB were not taken");
        assert_eq!(pipe::bytes_readable(dests[0].as_fd()).unwrap(), 4096, "the 4 KiB did not go on");
        assert!(relay.next_wake().is_none(), "a source rested after a quiet spell");
        // More within a rest's length: all the source held was taken, and
        // it rests, whatever comes meanwhile.
        write_all(&command[0], 4096);
        assert!(turn(&mut relay), "the next 4 KiB were not taken");
        let wake = relay.next_wake().expect("no rest after the source was taken empty");
        assert!(wake > Instant::now() + Duration::from_secs(3000));
        write_all(&command[0], 4096);
        assert!(!polls_for_reading(&relay, 0), "a resting source was polled");
        // The other stream is not held up by this one's rest.
        assert!(polls_for_reading(&relay, 1));
        // The rest over, the source is polled again and nothing is lost.
        relay.streams[0].rests_until = Some(Instant::now());
        assert!(relay.next_wake().is_none(), "a rest that is over still wakes the loop");
        assert!(polls_for_reading(&relay, 0));
        assert!(turn(&mut relay));
        assert_eq!(pipe::bytes_readable(dests[0].as_fd()).unwrap(), 12288);
    }

    #[test]
    fn bytes_read_rather_than_spliced_do_not_rest() {
        let (mut relay, command, dests) = relay_into_pipes();
        rests_for(&mut relay, Duration::from_secs(3600));
        relay.streams[0].splice = false;
        for _ in 0..2 {
            write_all(&command[0], 4096);
            assert!(turn(&mut relay), "the 4 KiB were not taken");
        }
        assert_eq!(pipe::bytes_readable(dests[0].as_fd()).unwrap(), 8192, "the bytes did not go on");
        assert!(relay.next_wake().is_none(), "bytes read and copied rested");
    }

    #[test]
    fn a_writer_slower_than_a_rest_is_not_rested_for() {
        let (mut relay, command, _dests) = relay_into_pipes();
        // As if busy: a source that is not never rests, whatever the writer.
        rests_for(&mut relay, REST);
        for _ in 0..3 {
            write_all(&command[0], 4096);
            assert!(turn(&mut relay));
            assert!(relay.next_wake().is_none(), "a slow writer's source rested");
            // The writer comes back only after a rest would have ended.
            relay.streams[0].watched_since = Some(Instant::now() - 2 * REST);
        }
    }

    /// What the pipe `read_end` holds now (at most 64 KiB).
    fn held(read_end: &OwnedFd) -> Vec<u8> {
        let mut buf = vec![0; 65536];
        let n = pipe::bytes_readable(read_end.as_fd()).unwrap();
        let got = if n == 0 { 0 } else { pipe::read(read_end.as_fd(), &mut buf).unwrap() };
        buf.truncate(got);
        buf
    }

    #[test]
    fn a_rest_does_not_reorder_streams_that_share_a_destination() {
        // 2>&1: both streams into one pipe of the test's own.
        let (source_out, command_out, _) = pipe::output_pipe(PIPE_CAPACITY).unwrap();
        let (source_err, command_err, _) = pipe::output_pipe(PIPE_CAPACITY).unwrap();
        let (dest_read, dest_write) = cloexec_pipe().unwrap();
        let dest: &'static OwnedFd = Box::leak(Box::new(dest_write));
        let streams = [
            Stream::new("stdout", source_out, true, dest.as_fd(), Shape::Whole(0)),
            Stream::new("stderr", source_err, true, dest.as_fd(), Shape::Whole(0)),
        ];
        let mut relay = Relay { streams, scratch: vec![0; READ_SIZE], file: None };
        pipe::write(command_out.as_fd(), b"A\n").unwrap();
        assert!(turn(&mut relay));
        assert_eq!(held(&dest_read), b"A\n");
        // stdout rests; the command writes C to it, then B to stderr.
        relay.streams[0].rests_until = Some(Instant::now() + Duration::from_secs(3600));
        pipe::write(command_out.as_fd(), b"C\n").unwrap();
        pipe::write(command_err.as_fd(), b"B\n").unwrap();
        assert!(turn(&mut relay));
        assert_eq!(String::from_utf8(held(&dest_read)).unwrap(), "C\nB\n", "stderr overtook stdout's rest");
        // A rest that ends while the loop waits for the other stream: the
        // source was not polled, and its bytes still go first.
        relay.streams[1].rests_until = None;
        relay.streams[0].rests_until = Some(Instant::now() + Duration::from_secs(3600));
        let mut set = [PollFd::read(dest.as_fd()); crate::sys::POLL_MAX];
        let n = relay.interest(&mut set);
        relay.streams[0].rests_until = Some(Instant::now());
        pipe::write(command_out.as_fd(), b"E\n").unwrap();
        pipe::write(command_err.as_fd(), b"D\n").unwrap();
        crate::sys::poll(&mut set[..n], Some(Duration::from_secs(1))).unwrap();
        assert!(relay.on_ready(&set[..n]));
        assert_eq!(String::from_utf8(held(&dest_read)).unwrap(), "E\nD\n", "stderr overtook a rest just over");
    }

    /// Stream 0's source gets `len` bytes while its destination has room
    /// for 4 KiB only, and one turn takes them: returns what the source
    /// holds after it.
    fn take_with_4k_of_room(relay: &mut Relay, command: &OwnedFd, len: usize) -> usize {
        use nix::fcntl::{FcntlArg, fcntl};
        let source = relay.streams[0].source.as_ref().unwrap().as_fd();
        assert!(usize::try_from(fcntl(source, FcntlArg::F_GETPIPE_SZ).unwrap()).unwrap() >= len);
        let capacity = fcntl(relay.streams[0].dest.fd(), FcntlArg::F_GETPIPE_SZ).unwrap();
        let filler = vec![0u8; usize::try_from(capacity).unwrap() - 4096];
        assert_eq!(pipe::write(relay.streams[0].dest.fd(), &filler).unwrap(), filler.len());
        write_all(command, len);
        assert!(turn(relay));
        pipe::bytes_readable(relay.streams[0].source.as_ref().unwrap().as_fd()).unwrap()
    }

    #[test]
    fn a_source_that_still_holds_more_than_a_few_pieces_does_not_rest() {
        let (mut relay, command, _dests) = relay_into_pipes();
        rests_for(&mut relay, Duration::from_secs(3600));
        relay.streams[0].watched_since = Some(Instant::now());
        let held = take_with_4k_of_room(&mut relay, &command[0], CAUGHT_UP + 8192);
        assert_eq!(held, CAUGHT_UP + 4096);
        assert!(relay.next_wake().is_none(), "a source still holding {held} bytes rested");
    }

    #[test]
    fn a_source_left_with_a_few_pieces_rests() {
        let (mut relay, command, _dests) = relay_into_pipes();
        rests_for(&mut relay, Duration::from_secs(3600));
        relay.streams[0].watched_since = Some(Instant::now());
        let held = take_with_4k_of_room(&mut relay, &command[0], 16384);
        assert_eq!(held, 12288);
        assert!(relay.next_wake().is_some(), "a source left with {held} bytes did not rest");
        assert!(!polls_for_reading(&relay, 0), "a resting source was polled");
    }

    /// Pass `len` bytes from stream 0's command end through the relay to
    /// `dest`, 4 KiB at a time (each taken before the next is written),
    /// reading them there.
    fn pass(relay: &mut Relay, command: &OwnedFd, dest: &OwnedFd, len: usize) {
        let mut sink = [0u8; 4096];
        for _ in 0..len / 4096 {
            write_all(command, 4096);
            relay.streams[0].rests_until = None;
            assert!(turn(relay), "4 KiB were not taken");
            let mut got = 0;
            while got < 4096 {
                got += pipe::read(dest.as_fd(), &mut sink[got..]).unwrap();
            }
        }
    }

    #[test]
    fn a_busy_streams_destination_is_widened_and_only_then_may_it_rest() {
        use nix::fcntl::{FcntlArg, fcntl};
        let (mut relay, command, dests) = relay_into_pipes();
        let size = |fd: BorrowedFd<'_>| usize::try_from(fcntl(fd, FcntlArg::F_GETPIPE_SZ).unwrap()).unwrap();
        let small = size(dests[0].as_fd());
        assert!(small < PIPE_CAPACITY, "the system's pipes are already wide");
        // Short of BUSY_AFTER: the destination is as it was, nothing rests.
        pass(&mut relay, &command[0], &dests[0], BUSY_AFTER as usize - 4096);
        assert_eq!(size(dests[0].as_fd()), small);
        assert!(relay.streams[0].rest().is_none() && relay.next_wake().is_none());
        // Past it: the destination holds PIPE_CAPACITY and the source may
        // rest (where this process may widen a pipe at all).
        pass(&mut relay, &command[0], &dests[0], 8192);
        if relay.streams[0].wide {
            assert!(size(dests[0].as_fd()) >= PIPE_CAPACITY, "{} bytes", size(dests[0].as_fd()));
            assert_eq!(relay.streams[0].rest(), Some(REST), "a busy stream may not rest");
        }
        // The other stream, which took nothing, is left as it was.
        assert_eq!(size(dests[1].as_fd()), small);
    }

    #[test]
    fn a_cut_streams_destination_is_not_widened_past_its_head() {
        use nix::fcntl::{FcntlArg, fcntl};
        // --max-output 1K: a head of 512 bytes, then only the ring; the
        // command writes more than BUSY_AFTER, the caller's pipe gets 1 KiB.
        let (source, command, wide) = pipe::output_pipe(PIPE_CAPACITY).unwrap();
        let (dest_read, dest_write) = cloexec_pipe().unwrap();
        let dest: &'static OwnedFd = Box::leak(Box::new(dest_write));
        let (other, _other_command, _) = pipe::output_pipe(PIPE_CAPACITY).unwrap();
        let streams = [
            Stream::new("stdout", source, wide, dest.as_fd(), Shape::Cut(Cut::new(1024).unwrap())),
            Stream::new("stderr", other, wide, dest.as_fd(), Shape::Whole(0)),
        ];
        let mut relay = Relay { streams, scratch: vec![0; READ_SIZE], file: None };
        let size = || fcntl(&dest_read, FcntlArg::F_GETPIPE_SZ).unwrap();
        let small = size();
        assert!(usize::try_from(small).unwrap() < PIPE_CAPACITY, "the system's pipes are already wide");
        while relay.streams[0].taken <= 2 * BUSY_AFTER {
            write_all(&command, 65536);
            assert!(turn(&mut relay), "64 KiB were not taken");
        }
        assert!(relay.streams[0].busy);
        assert_eq!(size(), small, "a pipe that gets only a cut's tail was widened");
    }

    #[test]
    fn a_pipe_already_wider_is_never_narrowed() {
        use nix::fcntl::{FcntlArg, fcntl};
        let (wide_read, wide_write) = cloexec_pipe().unwrap();
        if fcntl(&wide_read, FcntlArg::F_SETPIPE_SZ(4 * PIPE_CAPACITY as libc::c_int)).is_ok() {
            let before = fcntl(&wide_read, FcntlArg::F_GETPIPE_SZ).unwrap();
            assert!(pipe::widen(wide_write.as_fd(), PIPE_CAPACITY));
            assert_eq!(fcntl(&wide_read, FcntlArg::F_GETPIPE_SZ).unwrap(), before);
        }
    }
}

//! One stream of the command's output (stdout or stderr) on its way from
//! its inner pipe to its destination, and to the output file.
//!
//! Bytes nobody needs to look at (a whole stream, and a cut stream's head
//! up to [`PASS_MARGIN`](super::limit::PASS_MARGIN) bytes before its end,
//! see [`Shape::may_pass`]) move kernel to kernel on Linux when the
//! destination is a pipe or a regular file ([`pipe::splice_nowait`]: pipe
//! speed, no copy through pgrun); with the output file too, only to a
//! pipe: [`pipe::tee_nowait`] copies them on to the destination and
//! [`OutputFile::take_from_pipe`] then splices the same bytes into the
//! file, so the file still gets each piece as pgrun takes it. Both only
//! while the destination has room; a full one is polled for POLLOUT while
//! the source waits, as for any write. The bytes near the cut, past the
//! head, and to a terminal, socket or device are read (to the file first,
//! then on their way to the destination) and written.
//!
//! Head bytes are written as they arrive; while pgrun's own stdout cannot
//! take them, they wait in the stream's outbox (at most one read's worth)
//! and the stream's head is not read on, so the command waits, as it
//! would on a direct pipe. Past the head, bytes go into the ring and
//! reading never stops. A whole stream is like a head that never ends: a
//! stalled reader stops the reading of its stream (the output file then
//! waits too, and still gets every byte in order).
//!
//! A write error on the destination stops this stream's relay, not the
//! run: EPIPE (the reader left) quietly, any other error with one line. A
//! pipe destination whose reader left while nothing was owed to it says
//! so by POLLERR ([`Stream::reader_left`]): past the head nothing is
//! written until the stream ends, and the command must not write on for
//! a reader long gone. Either way what the pipe holds is still read for
//! the output file and the counts, then the pipe is closed, so the
//! command gets EPIPE or SIGPIPE on its next write, as it would without
//! pgrun. A read error on the inner pipe ends the stream with one line,
//! and the report says so.

use super::dest::{Dest, Outbox};
use super::file::OutputFile;
use super::limit::StreamStats;
use super::rest::{PIPE_CAPACITY, Rest};
use super::shape::Shape;
use super::{Relayed, StreamError};
use crate::sys::pipe;
use crate::{say, verbose};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Instant;

/// One stream's relay: its pipe, its destination, its shape, what is owed.
pub struct Stream {
    pub(super) name: &'static str,
    /// The inner pipe's read end; `None` once the stream has ended.
    pub(super) source: Option<OwnedFd>,
    /// pgrun's own fd (1 or 2) this stream goes to.
    pub(super) dest: Dest,
    /// A splicing stream found its destination full: poll it for room
    /// instead of the source for bytes.
    pub(super) wants_room: bool,
    /// A write to `dest` failed (EPIPE, or an error said once): nothing
    /// more goes there; what the pipe holds is still read for the output
    /// file and the counts before the stream is closed.
    pub(super) dest_gone: bool,
    /// How many bytes were taken from the source so far.
    pub(super) taken: u64,
    /// When the source rests (see [`super::rest`]).
    pub(super) rest: Rest,
    /// `None` once the stream has ended and its stats are known.
    pub(super) shape: Option<Shape>,
    /// Bytes to write to `dest`, in order.
    pub(super) outbox: Outbox,
    stats: Option<StreamStats>,
    error: Option<StreamError>,
}

impl Stream {
    /// The stream `name` from the inner pipe `source` (holding
    /// [`PIPE_CAPACITY`] if `wide`) to `dest`, shaped by `shape`.
    pub fn new(name: &'static str, source: OwnedFd, wide: bool, dest: BorrowedFd<'static>, shape: Shape) -> Stream {
        Stream {
            name,
            source: Some(source),
            dest: Dest::new(dest),
            wants_room: false,
            dest_gone: false,
            taken: 0,
            rest: Rest::new(wide),
            shape: Some(shape),
            outbox: Outbox::default(),
            stats: None,
            error: None,
        }
    }

    /// What became of the stream so far (final once it has ended).
    pub fn relayed(&self) -> Relayed {
        Relayed { stats: self.stats.unwrap_or_default(), error: self.error }
    }

    /// Once the stream is busy (see [`Rest::turns_busy`]), once: widen
    /// its destination, if a pipe, to hold [`PIPE_CAPACITY`]
    /// ([`pipe::widen`]: best effort, never narrower), so that each splice
    /// or write moves more and the reader downstream is woken less often.
    /// Not past a cut's head: the caller's pipe then gets only the marker
    /// and the tail, at the end, and is left as it was.
    pub fn widen_if_busy(&mut self) {
        if self.rest.turns_busy(self.taken)
            && self.dest.watch_reader
            && !self.shape.as_ref().is_some_and(Shape::past_head)
        {
            pipe::widen(self.dest.fd(), PIPE_CAPACITY);
        }
    }

    /// Whether the source may be read now, rest aside: it has not ended,
    /// its destination has room, and nothing is owed to it that these
    /// bytes would have to wait behind (past the head, they only go to
    /// the ring).
    pub fn may_take(&self) -> bool {
        self.source.is_some()
            && !self.wants_room
            && (self.outbox.is_empty() || self.shape.as_ref().is_some_and(Shape::past_head))
    }

    /// Whether the source rests at `now`.
    pub fn rests_at(&self, now: Instant) -> bool {
        self.source.is_some() && self.rest.at(now)
    }

    /// Bytes came: if that caught up with the writer, the source rests
    /// ([`Rest::after_take`]; `may_rest`: no other source rests).
    pub fn rest_if_caught_up(&mut self, now: Instant, may_rest: bool) {
        let source = self.source.as_ref().map(AsFd::as_fd);
        self.rest.after_take(now, may_rest, || source.and_then(|fd| pipe::bytes_readable(fd).ok()));
    }

    /// What the source holds now, if it can say (and has not ended).
    pub fn held(&self) -> Option<usize> {
        self.source.as_ref().and_then(|fd| pipe::bytes_readable(fd.as_fd()).ok())
    }

    /// The source is readable: if the next bytes need no looking at
    /// ([`Stream::splice_budget`]), move up to that many kernel to kernel
    /// (with an output file, tee'd on and spliced into the file); if the
    /// destination has no room (EAGAIN: the source has bytes, and only
    /// pgrun reads it), wait for it (POLLOUT, see the relay's interest)
    /// before reading on, as for any write; else one read. Returns whether
    /// bytes came.
    pub fn on_readable(&mut self, scratch: &mut [u8], file: &mut Option<OutputFile>) -> bool {
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
    /// destination (they come first); else what the shape lets pass.
    fn splice_budget(&self, len: usize, copied: bool) -> usize {
        if !self.dest.splice || (copied && !self.dest.tee) || !self.outbox.is_empty() {
            return 0;
        }
        self.shape.as_ref().map_or(0, |shape| shape.may_pass(len))
    }

    /// `n` bytes went to the destination kernel to kernel: count them.
    fn passed(&mut self, n: usize) {
        self.taken = self.taken.saturating_add(n as u64);
        self.rest.taken_by(true);
        if let Some(shape) = &mut self.shape {
            shape.passed(n);
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
                self.dest.splice = false;
                None
            }
        }
    }

    /// One tee of up to `len` bytes from a readable source to a
    /// destination pipe, then the same bytes from the source into `file`,
    /// so the file gets them in the order pgrun took them, as from a read.
    /// `None` if the kernel refuses teeing here (then never again), or the
    /// destination's reader left: a read then takes the next bytes into
    /// the file, and its write says so, as without tee.
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
                self.dest.tee = false;
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
                self.rest.taken_by(false);
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
        let error = StreamError::of(true, e);
        say::line(format_args!("cannot read the command's {}: {}; the rest of it is lost", self.name, error.cause()));
        self.error.get_or_insert(error);
        self.end();
        self.flush();
    }

    fn feed(&mut self, bytes: &[u8]) {
        let Some(shape) = &mut self.shape else { return };
        let mut head = Vec::new();
        shape.feed(bytes, &mut head);
        if !head.is_empty() {
            self.outbox.push(head);
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
    pub fn drain(&mut self, scratch: &mut [u8], file: &mut Option<OutputFile>) {
        const REFUSALS: u32 = 3;
        if self.source.is_none() {
            return;
        }
        let counted = self.held();
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
    pub fn end(&mut self) {
        self.source = None;
        if let Some(shape) = self.shape.take() {
            let mut held = Vec::new();
            let (rest, stats) = shape.finish(&mut held);
            self.outbox.push(held);
            self.outbox.push(rest);
            self.stats = Some(stats);
        }
    }

    /// Write what `dest` takes without waiting (see [`Outbox::flush`]); a
    /// write that fails ends the relay of this stream.
    pub fn flush(&mut self) {
        if self.dest_gone {
            self.outbox.clear();
            return;
        }
        if let Err(e) = self.outbox.flush(&self.dest) {
            self.reader_gone(&e);
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
            let error = StreamError::of(false, err);
            say::line(format_args!(
                "cannot write the command's {}: {}; no longer relaying it",
                self.name,
                error.cause()
            ));
            self.error.get_or_insert(error);
        }
        // Nothing more goes to `dest`; the bytes the pipe holds are still
        // read (the output file and the counts get them: the command wrote
        // them) by [`Stream::finish_without_dest`], then the pipe is closed.
        self.dest_gone = true;
        self.dest.splice = false;
        self.dest.tee = false;
        self.outbox.clear();
        if self.source.is_none() {
            self.abandon();
        }
    }

    /// If the destination went away ([`Stream::reader_gone`]): read what
    /// the pipe holds now, for the output file and the counts, then close
    /// it, so the command gets EPIPE or SIGPIPE on its next write. (A write
    /// the command makes between this read and the close still succeeds
    /// and is lost: no pipe can be closed for writers only.)
    pub fn finish_if_dest_gone(&mut self, scratch: &mut [u8], file: &mut Option<OutputFile>) {
        if self.dest_gone && self.source.is_some() {
            self.drain(scratch, file);
            self.abandon();
        }
    }

    /// Nothing was owed to `dest`, a pipe, and it reports an error or a
    /// hangup: its reader left (a pipe's write end says nothing else). End
    /// the stream as on EPIPE, now rather than at a next write that may
    /// never come (past the head, bytes only go to the ring): what the pipe
    /// holds is read first (the output file and the counts get it), then
    /// the pipe is closed, so the command gets EPIPE or SIGPIPE on its next
    /// write. The condition stays set, so the stream is never polled again.
    pub fn reader_left(&mut self, scratch: &mut [u8], file: &mut Option<OutputFile>) {
        self.drain(scratch, file);
        if self.source.is_some() {
            verbose!("the reader of the command's {} left; no longer relaying it", self.name);
        }
        self.abandon();
    }

    /// Stop relaying this stream: drop what is owed and close the pipe.
    pub fn abandon(&mut self) {
        self.outbox.clear();
        self.source = None;
        if let Some(shape) = self.shape.take() {
            self.stats = Some(shape.finish(&mut Vec::new()).1);
        }
    }
}

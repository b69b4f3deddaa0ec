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
//! Each take is what the pipe held at that moment (`FIONREAD`): one
//! splice or tee of all of it, or reads of all of it that go on as one
//! piece; a splice or tee the destination has room for less of ends with
//! a pipe buffer. A pipe keeps a write of at most `PIPE_BUF` bytes in one
//! buffer and lets nobody see part of it, so a take never ends inside
//! one: where stdout and stderr share a destination or the output file,
//! the other stream's bytes come before or after it, never inside (the
//! destination's part is [`Outbox`]'s). A read of 256 KiB from a pipe
//! holding more would have (issue 30: a 3,000-byte line split around a
//! stderr line).
//!
//! Head bytes are written as they arrive; while pgrun's own stdout cannot
//! take them, they wait in the stream's outbox (at most one take: what
//! the pipe held, [`PIPE_CAPACITY`]) and the stream's head is not read
//! on, so the command waits, as it would on a direct pipe. Past the head, bytes go into the ring and
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

/// How [`Stream::read_piece`] knows how much the pipe holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Counted {
    /// It said so, just now: read that much.
    Exactly,
    /// As `Exactly`, the rest of a take whose first bytes were just
    /// spliced to the destination: the piece goes on from them.
    Continuing,
    /// It said so, and the run is over: read that much, and say an EAGAIN
    /// before then as a read error once it has come a few times.
    Drain,
    /// Not known: read until it is empty or a read fills the buffer.
    No,
}

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

    /// The source is readable: take what it holds now, as one piece
    /// that ends where a write of the command ended (see the module doc).
    /// What may pass unseen ([`Stream::splice_budget`]) goes in one splice
    /// (with an output file, one tee on and a splice into the file); if
    /// that was all of it, or the destination had room for less (the
    /// splice then ends with a pipe buffer), that is the take; if the
    /// destination has no room at all (EAGAIN: the source has bytes, and
    /// only pgrun reads it), wait for it (POLLOUT, see the relay's
    /// interest) before reading on, as for any write. The rest (all of it
    /// where nothing may pass; past a splice up to near a cut, the rest,
    /// which goes on from the spliced bytes) is read
    /// ([`Stream::read_piece`]). Returns whether bytes came.
    pub fn take(&mut self, scratch: &mut [u8], file: &mut Option<OutputFile>) -> bool {
        // Nothing counted: the end of the stream (or bytes that came just
        // now), to be read.
        let Some(held) = self.held().filter(|&held| held > 0) else {
            return self.read_piece(scratch.len(), Counted::No, scratch, file);
        };
        let copied = file.as_ref().is_some_and(OutputFile::is_open);
        let budget = self.splice_budget(held, copied);
        if budget > 0 {
            let moved = match file.as_mut().filter(|_| copied) {
                Some(file) => self.tee_once(budget, file, scratch),
                None => self.splice_once(budget),
            };
            match moved {
                // All of it, or what the destination had room for.
                Some(moved) if moved < budget || budget == held => return moved > 0,
                // Up to near a cut: the rest is read, and goes on from
                // there, holding a shared destination until it is there.
                Some(_) => {
                    self.read_piece(held - budget, Counted::Continuing, scratch, file);
                    return true;
                }
                None => {}
            }
        }
        self.read_piece(held, Counted::Exactly, scratch, file)
    }

    /// How many of the next bytes may go kernel to kernel, at most `len`:
    /// none if this stream cannot splice (or, with the output file still
    /// being written, `copied`, cannot tee), still owes bytes to its
    /// destination (they come first), or may not write there now (it
    /// shares it with the other stream, which is part-way through a piece
    /// there; or, in the output file's order, the other owes bytes that
    /// come first); else what the shape lets pass.
    fn splice_budget(&self, len: usize, copied: bool) -> usize {
        if !self.dest.splice || (copied && !self.dest.tee) || !self.outbox.is_empty() || !self.outbox.may_write() {
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

    /// One splice of up to `len` bytes from a readable source: how many
    /// moved; `None` if the kernel refuses splicing here (then never
    /// again: plain reads and writes say what failed and where).
    fn splice_once(&mut self, len: usize) -> Option<usize> {
        let source = self.source.as_ref()?;
        match pipe::splice_nowait(source.as_fd(), self.dest.fd(), len) {
            Ok(0) => {
                self.end();
                self.flush();
                Some(0)
            }
            Ok(n) => {
                self.dest.got_in_file(None);
                self.passed(n);
                Some(n)
            }
            // The source polled readable, so the destination is full
            // (were the source empty after all, POLLOUT comes at once).
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                self.wants_room = true;
                Some(0)
            }
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {
                self.reader_gone(&e);
                Some(0)
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
    /// so the file gets them in the order pgrun took them, as from a read:
    /// how many. `None` if the kernel refuses teeing here (then never
    /// again), or the destination's reader left: a read then takes the
    /// next bytes into the file, and its write says so, as without tee.
    fn tee_once(&mut self, len: usize, file: &mut OutputFile, scratch: &mut [u8]) -> Option<usize> {
        let source = self.source.as_ref()?;
        match pipe::tee_nowait(source.as_fd(), self.dest.fd(), len) {
            Ok(0) => {
                self.end();
                self.flush();
                Some(0)
            }
            Ok(n) => {
                let at = file.end_offset();
                let taken = file.take_from_pipe(source.as_fd(), n, scratch);
                // The same bytes, there from `at` on (if the file took them).
                self.dest.got_in_file(Some(at + n as u64 - 1));
                self.passed(n);
                if let Err(e) = taken {
                    self.read_failed(&e);
                }
                Some(n)
            }
            // The source polled readable, so the destination is full
            // (were the source empty after all, POLLOUT comes at once).
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                self.wants_room = true;
                Some(0)
            }
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => None,
            Err(e) => {
                verbose!("cannot tee the command's {}: {e}; copying it instead", self.name);
                self.dest.tee = false;
                None
            }
        }
    }

    /// Read `len` bytes, or what the pipe holds now if that is less, as
    /// one piece: each read goes to `file` first, and what the shape makes
    /// of them goes to `dest` in one piece once all are read (or the
    /// stream ended, or a read failed). `Counted::Exactly`: the pipe said
    /// it holds `len` (so `len` ends where a write ended); else a read
    /// that leaves the pipe empty ends the piece, and one that fills the
    /// scratch buffer may have ended inside a write: the piece goes on to
    /// what the pipe holds then. Returns whether bytes came.
    ///
    /// Where the pipe said how much it holds, an EAGAIN before that much
    /// came is no proof of "empty" (nothing but pgrun reads this pipe):
    /// `Counted::Drain` retries it a few times, then says it as a read
    /// error, never taken for the stream's end in silence.
    fn read_piece(&mut self, len: usize, counted: Counted, scratch: &mut [u8], file: &mut Option<OutputFile>) -> bool {
        const REFUSALS: u32 = 3;
        let mut piece = Vec::new();
        if !self.shape.as_ref().is_some_and(Shape::past_head) {
            // Mapped, not touched, until bytes come.
            piece.reserve(len.min(PIPE_CAPACITY));
        }
        // Where the piece begins in the output file: it is the file's
        // bytes from there on (a whole stream, or a cut's head, which ends
        // at most early). What the file's order of a hand-off to a
        // detached run goes by (see [`super::handoff`]).
        let at = file.as_ref().filter(|file| file.is_open()).map(OutputFile::end_offset);
        let (mut left, mut counted, mut refused, mut came) = (len, counted, 0, false);
        let ended = loop {
            let Some(source) = &self.source else { break None };
            if left == 0 {
                break None;
            }
            let want = left.min(scratch.len());
            match pipe::read(source.as_fd(), &mut scratch[..want]) {
                Ok(0) => break Some(None),
                Ok(n) => {
                    self.taken = self.taken.saturating_add(n as u64);
                    self.rest.taken_by(false);
                    if let Some(file) = file {
                        file.write(&scratch[..n]);
                    }
                    if let Some(shape) = &mut self.shape {
                        shape.feed(&scratch[..n], &mut piece);
                    }
                    (came, refused, left) = (true, 0, left - n);
                    if counted == Counted::No && n < want {
                        // The pipe is empty: its bytes ended with a write.
                        left = 0;
                    } else if counted == Counted::No
                        && left == 0
                        && let Some(held) = self.held()
                    {
                        // A full read: on to where the pipe's bytes end.
                        (left, counted) = (held, Counted::Exactly);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    refused += 1;
                    if counted != Counted::Drain {
                        break None;
                    }
                    if refused == REFUSALS {
                        break Some(Some(e));
                    }
                }
                Err(e) => break Some(Some(e)),
            }
        };
        match counted {
            Counted::Continuing => self.outbox.push_continuing(piece, at),
            _ => self.outbox.push_from(piece, at),
        }
        match ended {
            None => self.flush(),
            // The end of the stream.
            Some(None) => {
                self.end();
                self.flush();
            }
            Some(Some(e)) => self.read_failed(&e),
        }
        came
    }

    /// A read of the command's output failed: say so, and end the stream
    /// (what it owes is still written).
    fn read_failed(&mut self, e: &std::io::Error) {
        let error = StreamError::of("read", e);
        say::line(format_args!("cannot read the command's {}: {}; the rest of it is lost", self.name, error.cause()));
        self.error.get_or_insert(error);
        self.end();
        self.flush();
    }

    /// Read what the pipe holds right now, and no more, as one piece: a
    /// writer outside the run must not keep pgrun here. What the head
    /// gains is queued (at most SIZE/2 in all), never waited for.
    pub fn drain(&mut self, scratch: &mut [u8], file: &mut Option<OutputFile>) {
        match self.held() {
            Some(held) => self.read_piece(held, Counted::Drain, scratch, file),
            None if self.source.is_some() => self.read_piece(PIPE_CAPACITY, Counted::No, scratch, file),
            None => false,
        };
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
            let error = StreamError::of("write", err);
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

    /// From now on this stream goes to `dest` (pgrun's own fd, pointed
    /// elsewhere by now): nothing still owed to the old destination is
    /// written there, and pgrun's own description of it, if it had one, is
    /// closed.
    pub fn redirect(&mut self, dest: BorrowedFd<'static>) {
        self.outbox.clear();
        self.dest = Dest::new(dest);
        self.wants_room = false;
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

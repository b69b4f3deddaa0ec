//! Both streams of the command's output through pgrun, for
//! `--max-output`, `--output-file` and `--idle-timeout`, as the
//! supervisor's event loop drives them.
//!
//! The relay owns the two inner pipes (the command writes to their write
//! ends, pgrun reads their read ends), each as a [`Stream`], and the
//! [`OutputFile`] they share: every piece pgrun takes from either pipe
//! goes to the file as it takes it, in that order, whatever the streams'
//! readers do. It never blocks: the loop polls the fds the relay names
//! ([`Relay::interest`]) together with the signal fd and calls
//! [`Relay::on_ready`], which says whether bytes were read (what moves the
//! idle deadline; a splice or tee counts as a read).
//!
//! With `--detach-after` ([`Relay::hand_off_on`]) the streams reach the
//! caller's fds in the output file's order, so that the hand-off's N is
//! exact (see [`super::handoff`]): a stream whose owed bytes come later in
//! the file than the other's waits, and is not polled for room meanwhile.
//!
//! At most one source rests at a time (see [`super::rest`]), and bytes on
//! the other wake pgrun, which takes the resting one's first
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
//! idle deadline comes end it ([`Relay::end_rests_that_hold_bytes`]). That
//! rest ([`Relay::next_wake`]) is the relay's only timed wake-up, and only
//! ever follows bytes taken: a command that writes nothing wakes nobody.
//!
//! When the run is over, [`Relay::close`] reads what the pipes hold at that
//! moment and no more (a process outside the run that still holds a write
//! end cannot keep pgrun), and queues the held bytes, the marker and the
//! tail; [`Relay::flush_rest`] then writes them, after pgrun has withdrawn
//! the run's record (see `run::clean_up`), polling for the readers as long
//! as they take. A signal to pgrun then changes nothing: the run is already
//! over, and everything pgrun read is written (SIGKILL ends pgrun, which
//! holds nothing but its output by then).

use super::dest::Outbox;
use super::file::OutputFile;
use super::handoff::{Answer, HandOff, LET_GO_GRACE};
use super::rest::PIPE_CAPACITY;
use super::shape::Shape;
use super::stream::Stream;
use super::{Limit, RelayEnd};
use crate::sys::PollFd;
use crate::sys::pipe;
use crate::sys::wakeup::SignalSource;
use crate::{say, verbose};
use anyhow::{Context, Result};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Instant;

/// One read's worth: large, so a fast writer costs few wake-ups.
const READ_SIZE: usize = 256 * 1024;

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
    pub(super) streams: [Stream; 2],
    pub(super) scratch: Vec<u8>,
    pub(super) file: Option<OutputFile>,
    /// `--detach-after`: the caller's process may ask the relay to let go
    /// of its fds (see [`super::handoff`]).
    pub(super) hand_off: Option<HandOff>,
    /// The caller's process died before it asked the relay to let go.
    caller_left: bool,
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
        let (stdout, stderr) = pipe::own_stdout_stderr();
        let mut relay = Relay {
            streams: [
                Stream::new("stdout", out_read, out_wide, stdout, Shape::for_limit(limit)?),
                Stream::new("stderr", err_read, err_wide, stderr, Shape::for_limit(limit)?),
            ],
            scratch,
            file,
            hand_off: None,
            caller_left: false,
        };
        if one_destination(stdout, stderr) {
            let [out, err] = &mut relay.streams;
            Outbox::share(&mut out.outbox, &mut err.outbox);
            err.dest.same_as(&out.dest);
        }
        if crate::test_hook::active(crate::test_hook::LONG_REST) {
            for s in &mut relay.streams {
                s.rest.long_for_tests();
            }
        }
        Ok((relay, ChildEnds { stdout: out_write, stderr: err_write }))
    }

    /// The command has started: the output file takes its place (see
    /// [`OutputFile::place`]); until now a run that ends leaves no trace
    /// of it.
    pub fn command_started(&mut self) {
        if let Some(file) = &mut self.file {
            file.place();
        }
    }

    /// `--detach-after`: from now on, until it lets go, the relay also
    /// watches for the caller's process asking it to, and writes to the
    /// caller's fds in the output file's order (see [`super::handoff`]).
    pub fn hand_off_on(&mut self, hand_off: HandOff) {
        self.hand_off = Some(hand_off);
        let [out, err] = &mut self.streams;
        Outbox::in_file_order(&mut out.outbox, &mut err.outbox);
    }

    /// The fds to poll and what for, into `set`; returns how many. A
    /// source that rests (see [`Relay::next_wake`]) is not among them.
    pub fn interest(&self, set: &mut [PollFd]) -> usize {
        let mut n = 0;
        if let Some(hand_off) = &self.hand_off {
            set[n] = PollFd::read(hand_off.fd());
            n += 1;
        }
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
            // Owed bytes whose turn has not come (see [`Outbox::may_write`])
            // wait for the other stream's, which is polled.
            if !s.outbox.is_empty() && s.outbox.may_write() {
                set[n] = PollFd::write(s.dest.fd());
                n += 1;
            } else if s.dest.watch_reader && s.source.is_some() {
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
        let resting = self.streams.iter().filter(|s| s.source.is_some()).filter_map(|s| s.rest.until());
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
            if s.rests_at(now) && s.held().is_some_and(|n| n > 0) {
                s.rest.end();
                held = true;
            }
        }
        held
    }

    /// Act on the fds `poll` found ready; true if bytes of the command's
    /// output were read.
    pub fn on_ready(&mut self, set: &[PollFd]) -> bool {
        let mut read = false;
        let asked = |h: &HandOff| set.iter().any(|e| e.ready && !e.write && e.fd == h.fd().as_raw_fd());
        if let Some(hand_off) = self.hand_off.take_if(|h| asked(h)) {
            // Before anything else is read: what the caller got so far
            // is what it gets.
            self.let_go(hand_off);
            return false;
        }
        for entry in set.iter().filter(|e| e.ready) {
            for i in 0..self.streams.len() {
                let s = &mut self.streams[i];
                let at_dest = entry.fd == s.dest.fd().as_raw_fd();
                if entry.errors {
                    if at_dest && s.source.is_some() {
                        s.reader_left(&mut self.scratch, &mut self.file);
                    }
                } else if entry.write && at_dest && s.wants_room {
                    // Room again: read on (on the next turn).
                    s.wants_room = false;
                } else if entry.write && at_dest && !s.outbox.is_empty() {
                    s.flush();
                } else if !entry.write && s.source.as_ref().is_some_and(|fd| fd.as_raw_fd() == entry.fd) {
                    // What a resting stream holds was, most likely,
                    // written before these bytes: it goes first.
                    read |= self.take_from_resting(i, set);
                    read |= self.take(i);
                }
                self.streams[i].finish_if_dest_gone(&mut self.scratch, &mut self.file);
            }
        }
        read
    }

    /// The caller's process let go of the run (`--detach-after`, see
    /// [`super::handoff`]): write what the caller's readers take of what
    /// is owed them within [`LET_GO_GRACE`], learn N and whether the
    /// caller's stderr ends mid-line, point pgrun's fds 1 and 2 at
    /// `/dev/null` and go on to the output file alone; answer both.
    fn let_go(&mut self, hand_off: HandOff) {
        let asked = hand_off.asked();
        self.caller_left = !asked;
        let until = Instant::now() + LET_GO_GRACE;
        loop {
            let mut set = [PollFd::read(hand_off.fd()); 2];
            let n = self.flush_in_turn(&mut set, 0);
            let left = until.saturating_duration_since(Instant::now());
            if n == 0 || left.is_zero() || crate::sys::poll(&mut set[..n], Some(left)).is_err() {
                break;
            }
        }
        let end = self.file.as_ref().map_or(0, OutputFile::end_offset);
        let owed = self.streams.iter().filter_map(|s| s.outbox.owed_from()).map(|at| at.unwrap_or(end)).min();
        let given = owed.unwrap_or(end).min(end);
        // Said while stderr is still the caller's.
        verbose!("letting go of the caller's stdout and stderr at byte {given} of the output file");
        // After every line of pgrun's own to the caller's stderr, this one
        // included: whether the hand-off line must begin with a newline.
        let file = self.file.as_ref();
        let mid_line = self.streams[1].dest.ends_mid_line(|at| file.and_then(|file| file.byte_at(at)));
        if let Err(e) = crate::sys::session::point_stdout_stderr_at_null() {
            say::line(format_args!("cannot point stdout and stderr at /dev/null at the hand-off: {e}"));
        }
        let (stdout, stderr) = pipe::own_stdout_stderr();
        self.streams[0].redirect(stdout);
        self.streams[1].redirect(stderr);
        if asked {
            hand_off.answer(Answer { n: given, mid_line });
        }
    }

    /// Write what the readers take now, and put the destinations still
    /// owed bytes that may be written now into `set` from `n` on; returns
    /// the new count. A stream whose turn came while the other wrote
    /// writes too. A stream owed bytes whose turn has not come (see
    /// [`Outbox::may_write`]) is not among them: the other is, whose owed
    /// bytes come first.
    fn flush_in_turn(&mut self, set: &mut [PollFd], mut n: usize) -> usize {
        let waited = self.streams.each_ref().map(|s| !s.outbox.may_write());
        for s in &mut self.streams {
            s.flush();
        }
        for (s, waited) in self.streams.iter_mut().zip(waited) {
            if waited {
                s.flush();
            }
        }
        for s in &self.streams {
            if !s.outbox.is_empty() && s.outbox.may_write() {
                set[n] = PollFd::write(s.dest.fd());
                n += 1;
            }
        }
        n
    }

    /// Whether the caller's process died before the hand-off (`--detach-after`;
    /// said once): the run was still attached to it, and is to be stopped as
    /// an ordinary run whose pgrun is killed is (see [`super::handoff`]).
    pub fn caller_left(&mut self) -> bool {
        std::mem::take(&mut self.caller_left)
    }

    /// Stream `except`'s source turned readable in `set`: first take
    /// what every other source that rested (not polled in `set`, see
    /// [`Relay::interest`]) holds now, a few takes at most. A rest
    /// must not reorder the streams: where they share a destination
    /// (`2>&1`, a terminal) or go to the output file, bytes the command
    /// wrote to stdout during stdout's rest would otherwise come after
    /// the stderr it wrote next. Returns whether bytes came.
    fn take_from_resting(&mut self, except: usize, set: &[PollFd]) -> bool {
        let mut read = false;
        for i in 0..self.streams.len() {
            let Some(source) = &self.streams[i].source else { continue };
            let fd = source.as_raw_fd();
            if i == except || self.streams[i].rest.until().is_none() || set.iter().any(|e| e.fd == fd && !e.write) {
                continue;
            }
            for _ in 0..PIPE_CAPACITY.div_ceil(READ_SIZE) {
                let s = &self.streams[i];
                if !s.may_take() || s.held().is_none_or(|held| held == 0) {
                    break;
                }
                if !self.take(i) {
                    break;
                }
                read = true;
            }
            self.streams[i].finish_if_dest_gone(&mut self.scratch, &mut self.file);
        }
        read
    }

    /// Stream `i`'s source is readable: take from it
    /// ([`Stream::take`]); if that caught up with the writer, it
    /// rests (see [`super::rest`]), unless another source rests already:
    /// at most one rests at a time, so that bytes the command writes to
    /// the other stream meanwhile wake pgrun, which takes the resting
    /// one's first ([`Relay::take_from_resting`]) and the streams keep
    /// their order. Returns whether bytes came.
    fn take(&mut self, i: usize) -> bool {
        let came = self.streams[i].take(&mut self.scratch, &mut self.file);
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
            streams: [self.streams[0].relayed(), self.streams[1].relayed()],
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
            let first = usize::from(watch_signals);
            let n = self.flush_in_turn(&mut set, first);
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
        let end = self.end_so_far();
        RelayEnd { file_error: self.file.and_then(OutputFile::finish), ..end }
    }
}

/// Whether pgrun's stdout and stderr are one pipe, file or terminal
/// (`2>&1`): the same device and inode (a question failing: no).
fn one_destination(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let id = |fd: BorrowedFd<'_>| {
        let meta = std::fs::File::from(fd.try_clone_to_owned().ok()?).metadata().ok()?;
        Some((meta.dev(), meta.ino()))
    };
    id(a).is_some_and(|a| Some(a) == id(b))
}

#[cfg(all(test, linux_strengths))]
mod tests;

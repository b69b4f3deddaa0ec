//! Where one stream goes: pgrun's own stdout or stderr, shared with its
//! caller, and the bytes owed to it, written without ever blocking.
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
//! Only a write error means the reader is gone (the stream's to act on).
//!
//! Where stdout and stderr share a destination (one pipe, file or
//! terminal: `2>&1`), their [`Outbox`]es share a [`Turn`]: a piece written
//! part-way holds the destination, and the other stream writes nothing
//! there (nor splices) until that piece is whole. Every piece ends where
//! a write of the command ended (the stream takes its pipe's bytes that
//! way, see [`super::stream`]), so a write of at most `PIPE_BUF` bytes
//! reaches the shared destination whole, as on a direct pipe, however
//! many pieces a slow reader makes of pgrun's writes.
//!
//! With `--detach-after` (see [`super::handoff`]) the two outboxes share a
//! stricter turn, the output file's order: each piece remembers where it
//! begins in the file, and only the outbox whose first owed piece comes
//! first there writes (or splices); the other waits, even to a
//! destination of its own. The caller then always has exactly the file's
//! first N bytes, each of its fds its stream's among them, and nothing
//! after N, so that the hand-off's N is exact. A piece part-way written
//! still holds, as at a shared destination, whose writes this keeps whole
//! too.
//!
//! Each destination remembers the last byte it got (shared where both
//! streams go to one), for `--detach-after`'s hand-off line, which must
//! begin a line ([`Dest::ends_mid_line`]).
//!
//! A destination that is a pipe or a regular file can also take bytes
//! kernel to kernel on Linux (`splice`), a pipe a copy of them (`tee`):
//! the [`Dest`] says which, and forgets it for good once the kernel
//! refuses. A pipe is also watched while nothing is owed to it (see
//! `watch_reader`).

use crate::say;
use crate::sys::pipe::{self, WriteKind};
use std::cell::Cell;
use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::rc::Rc;

/// At most this many writes to a pipe, socket or terminal per call of
/// [`Outbox::flush`] (1 MiB in `PIPE_BUF` writes), before signals and the
/// other stream get theirs.
const WRITES_PER_TURN: usize = 256;

/// A stream's destination and how it is written.
pub struct Dest {
    fd: DestFd,
    /// What it got last (shared with the other stream's [`Dest`] where
    /// both are one destination, see [`Dest::same_as`]).
    got: Rc<Cell<Got>>,
    /// How `fd` is written without blocking.
    kind: WriteKind,
    /// `fd` is a pipe or a regular file, on Linux: bytes nobody needs to
    /// look at may be spliced to it ([`pipe::splice_nowait`]). Turned off
    /// for good if the kernel refuses.
    pub splice: bool,
    /// `fd` is a pipe, on Linux: with an output file, bytes may be copied
    /// on to it with [`pipe::tee_nowait`] (then spliced into the file).
    pub tee: bool,
    /// `fd` is a pipe: while there is nothing to write to it, it is still
    /// polled for its reader leaving (POLLERR/POLLHUP, which a pipe's write
    /// end reports once its last reader left and never otherwise). A
    /// terminal, socket or file is not watched so (a terminal's hangup is
    /// no reader leaving): its next write says.
    pub watch_reader: bool,
}

/// The last byte a destination got, as far as pgrun knows it: what tells
/// whether a line of pgrun's written there now begins a line
/// (`--detach-after`'s hand-off line, see [`super::handoff`]).
#[derive(Clone, Copy, Default)]
struct Got {
    last: LastByte,
    /// [`say::lines_on_stderr`] when it got it: a line of pgrun's own
    /// written to fd 2 since came after it.
    lines_said: u64,
}

#[derive(Clone, Copy, Default)]
enum LastByte {
    /// Nothing yet.
    #[default]
    Nothing,
    /// This byte, written by pgrun.
    Byte(u8),
    /// The output file's byte at this offset (the destination got it
    /// kernel to kernel, the file the same bytes).
    InFile(u64),
    /// Bytes went there kernel to kernel, and no file holds them.
    NotKnown,
}

/// pgrun's own fd, or a description of its own of the same pipe or
/// terminal.
enum DestFd {
    /// pgrun's own fd, shared with its caller: its flags are never changed.
    Shared(BorrowedFd<'static>),
    /// A description of that pipe or terminal of pgrun's own, non-blocking.
    Own(OwnedFd),
}

impl Dest {
    /// The destination `fd` (pgrun's own 1 or 2), through a non-blocking
    /// description of pgrun's own where one can be had.
    pub fn new(fd: BorrowedFd<'static>) -> Dest {
        let mut kind = pipe::write_kind(fd);
        let mut dest = DestFd::Shared(fd);
        if kind == WriteKind::Waits
            && let Some(own) = pipe::reopen_pipe_nonblocking(fd).or_else(|| pipe::reopen_terminal_nonblocking(fd))
        {
            (dest, kind) = (DestFd::Own(own), WriteKind::NonBlocking);
        }
        let fd = match &dest {
            DestFd::Shared(fd) => *fd,
            DestFd::Own(own) => own.as_fd(),
        };
        let splice = pipe::can_splice_to(fd);
        let tee = splice && pipe::can_tee_to(fd);
        let watch_reader = pipe::is_pipe(fd);
        Dest { fd: dest, kind, splice, tee, watch_reader, got: Rc::default() }
    }

    /// `self` and `other` are one destination (`2>&1`): what either got
    /// last is what both got last.
    pub fn same_as(&mut self, other: &Dest) {
        self.got = other.got.clone();
    }

    /// The destination got bytes kernel to kernel, the last of which is
    /// the output file's byte at `at` (`None`: no file holds them).
    pub fn got_in_file(&self, at: Option<u64>) {
        self.got(at.map_or(LastByte::NotKnown, LastByte::InFile));
    }

    fn got(&self, last: LastByte) {
        self.got.set(Got { last, lines_said: say::lines_on_stderr() });
    }

    /// Whether the last byte this destination (stderr's: where pgrun's own
    /// lines go) got is not a newline, so that a line written there now
    /// would not begin a line: the
    /// command's last bytes there (or, where both streams go to it, the
    /// other stream's) ended mid-line, and no line of pgrun's own came
    /// after them. `byte_at` reads the output file (`None`: it cannot); a
    /// byte not known counts as mid-line (a blank line is the lesser harm).
    pub fn ends_mid_line(&self, byte_at: impl FnOnce(u64) -> Option<u8>) -> bool {
        let got = self.got.get();
        if say::lines_on_stderr() > got.lines_said {
            return false;
        }
        match got.last {
            LastByte::Nothing => false,
            LastByte::Byte(byte) => byte != b'\n',
            LastByte::InFile(at) => byte_at(at) != Some(b'\n'),
            LastByte::NotKnown => true,
        }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        match &self.fd {
            DestFd::Shared(fd) => *fd,
            DestFd::Own(fd) => fd.as_fd(),
        }
    }

    /// One write of `bytes` that does not wait: everything for a file;
    /// for a pipe or terminal through a shared description, at most
    /// `PIPE_BUF` once a zero-timeout poll says it is writable (a writable
    /// pipe takes `PIPE_BUF` without blocking), else `Ok(None)`; for a
    /// socket what `MSG_DONTWAIT` takes. EAGAIN is `Ok(None)` too.
    fn write_now(&self, bytes: &[u8]) -> std::io::Result<Option<usize>> {
        let fd = self.fd();
        let result = match self.kind {
            WriteKind::Immediate | WriteKind::NonBlocking => pipe::write(fd, bytes),
            WriteKind::Socket => pipe::send_nowait(fd, bytes),
            WriteKind::Waits if crate::sys::writable_now(fd) => {
                pipe::write(fd, &bytes[..bytes.len().min(pipe::PIPE_BUF)])
            }
            WriteKind::Waits => return Ok(None),
        };
        match result {
            Ok(n) => {
                if let Some(&last) = n.checked_sub(1).and_then(|at| bytes.get(at)) {
                    self.got(LastByte::Byte(last));
                }
                Ok(Some(n))
            }
            // The caller's own O_NONBLOCK, or a full socket: wait.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The bytes owed to a destination, in order: pieces, the front one
/// written from `written` on.
#[derive(Default)]
pub struct Outbox {
    pieces: VecDeque<Vec<u8>>,
    /// Where each piece begins in the output file, where it is the file's
    /// bytes as they are (see [`Outbox::owed_from`]); a piece that is not
    /// (a cut's marker and tail) comes after every other in the file's
    /// order.
    starts: VecDeque<Option<u64>>,
    written: usize,
    /// The front piece has bytes at the destination already: `written`
    /// of its own, or (pushed by [`Outbox::push_continuing`]) those
    /// spliced there just before it. A shared destination is held then.
    started: bool,
    /// Shared with the other stream's outbox where both go to one
    /// destination, or must reach theirs in the output file's order.
    turn: Option<Turn>,
}

/// This outbox's side of what it shares with the other stream's.
struct Turn {
    shared: Rc<Shared>,
    /// Which of the two this is (the first, stdout's, wins a tie).
    side: usize,
}

/// What two outboxes share.
struct Shared {
    /// The rule they write by.
    rule: Rule,
    /// Whether one of the two has its front piece part-way written: the
    /// one that has `started` it (there is at most one, since the other
    /// writes nothing meanwhile).
    held: Cell<bool>,
    /// [`Rule::FileOrder`]: where each side's front piece begins in the
    /// output file (`u64::MAX`: not known, after every other), or `None`
    /// where nothing is owed.
    fronts: [Cell<Option<u64>>; 2],
}

#[derive(Clone, Copy)]
enum Rule {
    /// One destination: a piece part-way written holds it.
    TakeTurns,
    /// `--detach-after`: the front piece that comes first in the output
    /// file goes first, wherever each goes; a piece part-way written
    /// still holds (a cut's marker and tail, which the file does not
    /// place, are never torn by a piece that does).
    FileOrder,
}

impl Outbox {
    /// `a` and `b` write to one destination: from now on neither writes
    /// there while the other's front piece is part-way written.
    pub fn share(a: &mut Outbox, b: &mut Outbox) {
        Outbox::bind(a, b, Rule::TakeTurns);
    }

    /// `a` and `b` write to their destinations in the output file's order
    /// (see the module doc), in place of any turn they took before: from
    /// now on only the one whose front piece comes first in the file
    /// writes, and new bytes go on kernel to kernel only while neither
    /// owes anything (they come after all that is owed).
    pub fn in_file_order(a: &mut Outbox, b: &mut Outbox) {
        Outbox::bind(a, b, Rule::FileOrder);
    }

    fn bind(a: &mut Outbox, b: &mut Outbox, rule: Rule) {
        let held = Cell::new(a.started || b.started);
        let shared = Rc::new(Shared { rule, held, fronts: Default::default() });
        a.turn = Some(Turn { shared: shared.clone(), side: 0 });
        b.turn = Some(Turn { shared, side: 1 });
        a.publish_front();
        b.publish_front();
    }

    /// Whether this outbox may write to its destination now: the other
    /// one that shares it is not part-way through a piece; in the output
    /// file's order, also this one's front piece comes first (with nothing
    /// owed: the other owes nothing). Bytes spliced to the destination
    /// wait for this too.
    pub fn may_write(&self) -> bool {
        let Some(turn) = &self.turn else { return true };
        if self.started || turn.shared.held.get() {
            return self.started;
        }
        match turn.shared.rule {
            Rule::TakeTurns => true,
            Rule::FileOrder => {
                let other = turn.shared.fronts[1 - turn.side].get();
                let this = turn.shared.fronts[turn.side].get();
                match (this, other) {
                    (_, None) => true,
                    (None, Some(_)) => false,
                    (Some(this), Some(other)) => (this, turn.side) < (other, 1 - turn.side),
                }
            }
        }
    }

    /// Tell the other outbox, in the output file's order, where this one's
    /// front piece begins now.
    fn publish_front(&self) {
        if let Some(turn) = &self.turn {
            let front = self.pieces.front().map(|_| self.starts.front().copied().flatten().unwrap_or(u64::MAX));
            turn.shared.fronts[turn.side].set(front);
        }
    }

    /// Queue `piece` (nothing if it is empty).
    pub fn push(&mut self, piece: Vec<u8>) {
        self.push_from(piece, None);
    }

    /// Queue `piece`, which is the output file's bytes from offset `at`
    /// on, if known (nothing if it is empty).
    pub fn push_from(&mut self, piece: Vec<u8>, at: Option<u64>) {
        if !piece.is_empty() {
            self.pieces.push_back(piece);
            self.starts.push_back(at);
            self.publish_front();
        }
    }

    /// The offset in the output file of the first byte owed, if anything
    /// is owed (`Some(None)`: owed, offset unknown).
    pub fn owed_from(&self) -> Option<Option<u64>> {
        self.pieces.front()?;
        Some(self.starts.front().copied().flatten().map(|at| at + self.written as u64))
    }

    /// Queue `piece`, which goes on from bytes just spliced to the
    /// destination (the rest of one take, so that part of a write of the
    /// command may be there already): the destination is held from now
    /// until it is written whole. Nothing must be owed before it.
    pub fn push_continuing(&mut self, piece: Vec<u8>, at: Option<u64>) {
        debug_assert!(self.pieces.is_empty(), "bytes spliced past what was owed");
        if !piece.is_empty() && self.pieces.is_empty() {
            self.pieces.push_back(piece);
            self.starts.push_back(at);
            self.set_written(0, true);
            self.publish_front();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Drop everything owed (and give the destination back).
    pub fn clear(&mut self) {
        self.pieces.clear();
        self.starts.clear();
        self.set_written(0, false);
        self.publish_front();
    }

    /// Write what `dest` takes without waiting, at most
    /// [`WRITES_PER_TURN`] writes, and nothing while the other stream
    /// holds a shared destination ([`Outbox::may_write`]); what is left
    /// waits for POLLOUT. An error is the write's: the reader is gone, or
    /// the write failed.
    pub fn flush(&mut self, dest: &Dest) -> std::io::Result<()> {
        if !self.may_write() {
            return Ok(());
        }
        for _ in 0..WRITES_PER_TURN {
            let Some(front) = self.pieces.front() else { return Ok(()) };
            let Some(n) = dest.write_now(&front[self.written..])? else { return Ok(()) };
            if self.written + n == front.len() {
                self.pieces.pop_front();
                self.starts.pop_front();
                self.set_written(0, false);
                self.publish_front();
                // The other's front may come first now.
                if !self.may_write() {
                    return Ok(());
                }
            } else {
                self.set_written(self.written + n, true);
            }
        }
        Ok(())
    }

    /// The front piece is written up to `written`, and has bytes at the
    /// destination if `started`: a shared destination is held while it
    /// does.
    fn set_written(&mut self, written: usize, started: bool) {
        (self.written, self.started) = (written, started);
        if let Some(turn) = &self.turn {
            turn.shared.held.set(started);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::spawn::cloexec_pipe;

    /// A destination pipe of the test's own with room for only `room`
    /// more bytes (a multiple of the page size: the rest is filled).
    fn pipe_with_room(room: usize) -> (OwnedFd, Dest) {
        use nix::fcntl::{FcntlArg, fcntl};
        let (read_end, write_end) = cloexec_pipe().unwrap();
        let capacity = usize::try_from(fcntl(&read_end, FcntlArg::F_GETPIPE_SZ).unwrap()).unwrap();
        assert_eq!(pipe::write(write_end.as_fd(), &vec![b'.'; capacity - room]).unwrap(), capacity - room);
        // The relay borrows its destinations for good (pgrun's own fds).
        let write_end: &'static OwnedFd = Box::leak(Box::new(write_end));
        (read_end, Dest::new(write_end.as_fd()))
    }

    /// Everything the pipe `read_end` holds now.
    fn drain(read_end: &OwnedFd) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = vec![0; 65536];
        while pipe::bytes_readable(read_end.as_fd()).unwrap() > 0 {
            let n = pipe::read(read_end.as_fd(), &mut buf).unwrap();
            got.extend_from_slice(&buf[..n]);
        }
        got
    }

    #[test]
    fn a_piece_part_way_written_holds_a_shared_destination_until_it_is_whole() {
        let (read_end, dest) = pipe_with_room(4096);
        let (mut out, mut err) = (Outbox::default(), Outbox::default());
        Outbox::share(&mut out, &mut err);
        out.push(vec![b'o'; 6000]);
        out.flush(&dest).unwrap();
        assert!(!out.is_empty(), "6000 bytes went into a pipe with room for 4096");
        assert!(out.may_write() && !err.may_write(), "a piece part-way written did not hold the destination");
        err.push(b"e\n".to_vec());
        err.flush(&dest).unwrap();
        assert!(!err.is_empty(), "stderr wrote into stdout's piece");
        // The reader takes everything: stdout's piece ends, then stderr's.
        let mut got = Vec::new();
        while !out.is_empty() || !err.is_empty() {
            got.extend(drain(&read_end));
            err.flush(&dest).unwrap();
            out.flush(&dest).unwrap();
        }
        got.extend(drain(&read_end));
        let ours: Vec<u8> = got.into_iter().filter(|&b| b != b'.').collect();
        assert_eq!(ours, [vec![b'o'; 6000], b"e\n".to_vec()].concat());
        assert!(out.may_write() && err.may_write());
    }

    #[test]
    fn clearing_a_piece_part_way_written_gives_the_destination_back() {
        let (_read_end, dest) = pipe_with_room(4096);
        let (mut out, mut err) = (Outbox::default(), Outbox::default());
        Outbox::share(&mut out, &mut err);
        out.push(vec![b'o'; 6000]);
        out.flush(&dest).unwrap();
        assert!(!err.may_write());
        out.clear();
        assert!(err.may_write(), "a reader gone kept the other stream from writing");
    }

    #[test]
    fn the_rest_of_a_take_after_a_splice_holds_a_shared_destination_until_written() {
        let (_read_end, dest) = pipe_with_room(0);
        let (mut out, mut err) = (Outbox::default(), Outbox::default());
        Outbox::share(&mut out, &mut err);
        out.push_continuing(b"rest of the line\n".to_vec(), None);
        out.flush(&dest).unwrap();
        assert!(!err.may_write(), "the other stream may write inside a write spliced part-way");
        let (mut alone, mut other) = (Outbox::default(), Outbox::default());
        Outbox::share(&mut alone, &mut other);
        alone.push_continuing(Vec::new(), None);
        assert!(other.may_write(), "an empty rest held the destination");
    }

    #[test]
    fn in_the_files_order_a_later_piece_waits_for_an_earlier_one_elsewhere() {
        let (out_read, out_dest) = pipe_with_room(4096);
        let (err_read, err_dest) = pipe_with_room(4096);
        let (mut out, mut err) = (Outbox::default(), Outbox::default());
        Outbox::in_file_order(&mut out, &mut err);
        assert!(out.may_write() && err.may_write(), "nothing owed, and new bytes had to wait");
        out.push_from(vec![b'o'; 6000], Some(0));
        err.push_from(b"e\n".to_vec(), Some(6000));
        out.flush(&out_dest).unwrap();
        err.flush(&err_dest).unwrap();
        assert!(!out.is_empty(), "6000 bytes went into a pipe with room for 4096");
        assert!(!err.may_write(), "a piece later in the file may go before an earlier one");
        assert!(drain(&err_read).iter().all(|&b| b == b'.'), "stderr got bytes past stdout's owed ones");
        // stdout's reader takes the rest: stderr's turn comes.
        while !out.is_empty() {
            drain(&out_read);
            out.flush(&out_dest).unwrap();
        }
        assert!(err.may_write());
        err.flush(&err_dest).unwrap();
        assert!(err.is_empty());
        assert_eq!(drain(&err_read).into_iter().filter(|&b| b != b'.').collect::<Vec<_>>(), b"e\n");
        // Bytes nobody has placed in the file (a cut's tail) come last; a
        // tie goes to stdout's.
        out.push(b"tail".to_vec());
        err.push_from(b"x".to_vec(), Some(7000));
        assert!(!out.may_write() && err.may_write());
        err.clear();
        err.push(b"tail".to_vec());
        assert!(out.may_write() && !err.may_write());
    }

    #[test]
    fn in_the_files_order_a_piece_part_way_written_still_holds() {
        let (_read_end, dest) = pipe_with_room(4096);
        let (mut out, mut err) = (Outbox::default(), Outbox::default());
        Outbox::in_file_order(&mut out, &mut err);
        // A cut's tail, which the file does not place, part-way written;
        // then a piece the file places, which would come first.
        out.push(vec![b't'; 6000]);
        out.flush(&dest).unwrap();
        err.push_from(b"e\n".to_vec(), Some(10));
        assert!(out.may_write() && !err.may_write(), "a piece part-way written was overtaken");
        out.clear();
        assert!(err.may_write());
    }

    #[test]
    fn outboxes_that_do_not_share_never_wait_for_each_other() {
        let (_read_end, dest) = pipe_with_room(4096);
        let (mut out, err) = (Outbox::default(), Outbox::default());
        out.push(vec![b'o'; 6000]);
        out.flush(&dest).unwrap();
        assert!(!out.is_empty() && err.may_write());
    }
}

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
//! A destination that is a pipe or a regular file can also take bytes
//! kernel to kernel on Linux (`splice`), a pipe a copy of them (`tee`):
//! the [`Dest`] says which, and forgets it for good once the kernel
//! refuses. A pipe is also watched while nothing is owed to it (see
//! `watch_reader`).

use crate::sys::pipe::{self, WriteKind};
use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// At most this many writes to a pipe, socket or terminal per call of
/// [`Outbox::flush`] (1 MiB in `PIPE_BUF` writes), before signals and the
/// other stream get theirs.
const WRITES_PER_TURN: usize = 256;

/// A stream's destination and how it is written.
pub struct Dest {
    fd: DestFd,
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
        Dest { fd: dest, kind, splice, tee, watch_reader }
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
            Ok(n) => Ok(Some(n)),
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
    written: usize,
}

impl Outbox {
    /// Queue `piece` (nothing if it is empty).
    pub fn push(&mut self, piece: Vec<u8>) {
        if !piece.is_empty() {
            self.pieces.push_back(piece);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Drop everything owed.
    pub fn clear(&mut self) {
        self.pieces.clear();
        self.written = 0;
    }

    /// Write what `dest` takes without waiting, at most
    /// [`WRITES_PER_TURN`] writes; what is left waits for POLLOUT. An error
    /// is the write's: the reader is gone, or the write failed.
    pub fn flush(&mut self, dest: &Dest) -> std::io::Result<()> {
        for _ in 0..WRITES_PER_TURN {
            let Some(front) = self.pieces.front() else { return Ok(()) };
            let Some(n) = dest.write_now(&front[self.written..])? else { return Ok(()) };
            self.written += n;
            if self.written == front.len() {
                self.pieces.pop_front();
                self.written = 0;
            }
        }
        Ok(())
    }
}

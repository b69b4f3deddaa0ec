//! `--stdin-pipe`: the command's stdin is a pipe whose write end the
//! supervising pgrun holds open, so that the command reads end-of-file
//! only when asked (`pgrun send --eof`), and how `pgrun send` finds it.
//!
//! Nothing is created that another user could open: `send` reaches the
//! pipe through the supervising pgrun's own fd (`/proc/PID/fd/N`, which
//! the kernel opens only for that pgrun's user or root; see
//! [`crate::sys::fd_reach`]). Which fds those are, the pgrun says with a
//! *tag*, an fd whose link reads `pgrun-stdin-pipe open W WINO R RINO`:
//! the pipe's write end W (a pipe of inode WINO) and the write end R of a
//! second pipe, the *requests* pipe (inode RINO), whose read end the
//! supervisor's event loop polls. `send --eof` writes one byte to it; the
//! supervisor then puts up the tag `pgrun-stdin-pipe closed` and closes
//! its write end: once the senders still writing close theirs, the
//! command reads end-of-file. A sender checks that what it opened is a
//! pipe of the inode the tag names, so a number the pgrun reused for
//! another fd is never written to.

use crate::sys::{Pid, PollFd, fd_reach, pipe};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// The beginning of every tag's name.
const TAG: &str = "pgrun-stdin-pipe";

/// The byte `send --eof` writes to the requests pipe.
pub const EOF_REQUEST: u8 = b'E';

/// The supervising pgrun's side of the stdin pipe.
pub struct StdinPipe {
    /// The command's end, until the command has it.
    read_end: Option<OwnedFd>,
    /// The end the pgrun holds open until asked to close it.
    write_end: Option<OwnedFd>,
    /// The requests pipe: the end the event loop polls ...
    requests: OwnedFd,
    /// ... and the end senders open through `/proc` (kept open for them).
    _requests_in: OwnedFd,
    /// The tag that says where the two are (or that the pipe is closed).
    _tag: OwnedFd,
}

impl StdinPipe {
    /// Create the pipe, the requests pipe and the tag.
    pub fn new() -> io::Result<StdinPipe> {
        let (read_end, write_end) = pipe::input_pipe()?;
        let (requests, requests_in) = pipe::private_pipe()?;
        let name = format!(
            "{TAG} open {} {} {} {}",
            write_end.as_raw_fd(),
            inode(write_end.as_fd())?,
            requests_in.as_raw_fd(),
            inode(requests_in.as_fd())?
        );
        let tag = fd_reach::tag(&name)?;
        Ok(StdinPipe {
            read_end: Some(read_end),
            write_end: Some(write_end),
            requests,
            _requests_in: requests_in,
            _tag: tag,
        })
    }

    /// The fd the command gets as its stdin.
    pub fn for_the_child(&self) -> Option<libc::c_int> {
        self.read_end.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// The command has its end (or will never have it): pgrun lets go of it.
    pub fn started(&mut self) {
        self.read_end = None;
    }

    /// What the event loop polls for this pipe, put at the start of `set`:
    /// the requests pipe, while the stdin pipe is open. Returns how many.
    pub fn interest(&self, set: &mut [PollFd]) -> usize {
        match self.write_end {
            Some(_) => {
                set[0] = PollFd::read(self.requests.as_fd());
                1
            }
            None => 0,
        }
    }

    /// After the poll: `set` as [`StdinPipe::interest`] filled it.
    pub fn on_ready(&mut self, set: &[PollFd]) -> io::Result<()> {
        match set.first() {
            Some(requests) if requests.ready => self.on_requests(),
            _ => Ok(()),
        }
    }

    /// The requests pipe polled readable: read what is there, and close
    /// the pipe if a sender asked for it.
    fn on_requests(&mut self) -> io::Result<()> {
        let mut buf = [0u8; 64];
        let mut eof = false;
        loop {
            match pipe::read(self.requests.as_fd(), &mut buf) {
                Ok(0) => break,
                Ok(n) => eof |= buf[..n].contains(&EOF_REQUEST),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if eof && self.write_end.is_some() {
            // The new tag first: a sender that looks meanwhile may still
            // find the old one, and its bytes still come before the end.
            self._tag = fd_reach::tag(&format!("{TAG} closed"))?;
            self.write_end = None;
            crate::verbose!("the command's stdin pipe is closed, as a sender asked");
        }
        Ok(())
    }
}

fn inode(fd: BorrowedFd<'_>) -> io::Result<u64> {
    pipe::fifo_inode(fd)?.ok_or_else(|| io::Error::other("not a pipe"))
}

/// A pipe of the run's, as its tag names it: the holder's fd number and
/// the pipe's inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipeAt {
    pub fd: RawFd,
    pub inode: u64,
}

/// What a live run's pgrun says of its stdin pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// Open: the pipe and the requests pipe.
    Open { input: PipeAt, requests: PipeAt },
    /// Closed (`send --eof`).
    Closed,
    /// The run has none (started without `--stdin-pipe`).
    None,
}

/// What the pgrun `holder` says of its stdin pipe (closed wins over open:
/// see [`StdinPipe::on_requests`]).
pub fn find(holder: Pid) -> io::Result<Found> {
    let tags = fd_reach::tags_of(holder, TAG)?;
    if tags.iter().any(|t| t == &format!("{TAG} closed")) {
        return Ok(Found::Closed);
    }
    Ok(tags.iter().find_map(|t| parse_open(t)).unwrap_or(Found::None))
}

fn parse_open(tag: &str) -> Option<Found> {
    let rest = tag.strip_prefix(TAG)?.strip_prefix(" open ")?;
    let n: Vec<&str> = rest.split(' ').collect();
    let [w, wi, r, ri] = n[..] else { return None };
    Some(Found::Open {
        input: PipeAt { fd: w.parse().ok()?, inode: wi.parse().ok()? },
        requests: PipeAt { fd: r.parse().ok()?, inode: ri.parse().ok()? },
    })
}

/// Open, non-blocking, the pipe the pgrun `holder` holds at `at`, for
/// writing; `Ok(None)` when that fd is no longer that pipe.
pub fn open(holder: Pid, at: PipeAt) -> io::Result<Option<std::fs::File>> {
    let file = match fd_reach::open_for_writing(holder, at.fd) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok((pipe::fifo_inode(file.as_fd())? == Some(at.inode)).then_some(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_tag_names_both_pipes() {
        let found = parse_open("pgrun-stdin-pipe open 7 1234 9 99");
        let input = PipeAt { fd: 7, inode: 1234 };
        assert_eq!(found, Some(Found::Open { input, requests: PipeAt { fd: 9, inode: 99 } }));
        assert_eq!(parse_open("pgrun-stdin-pipe open 7 1234 9"), None);
        assert_eq!(parse_open("pgrun-stdin-pipe closed"), None);
    }
}

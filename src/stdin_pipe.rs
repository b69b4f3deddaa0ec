//! `--stdin-pipe`: the command's stdin is a pipe whose write end the
//! supervising pgrun holds open, so that the command reads end-of-file
//! only when asked (`pgrun send --eof`), and how `pgrun send` finds it.
//!
//! Nothing is created that another user could open. Beside the pipe the
//! pgrun holds a second one, the *requests* pipe, whose read end its
//! event loop polls: `send --eof` writes one byte to it; the supervisor
//! then says the pipe is closed and closes its write end: once the
//! senders still writing close theirs, the command reads end-of-file.
//! How a sender reaches the two depends on the platform:
//!
//! - On Linux, through the supervising pgrun's own fds (`/proc/PID/fd/N`,
//!   which the kernel opens only for that pgrun's user or root; see
//!   [`crate::sys::fd_reach`]); nothing is created in any file system.
//!   Which fds those are, the pgrun says with a *tag*, an fd whose link
//!   reads `pgrun-stdin-pipe open W WINO R RINO`: the pipe's write end W
//!   (a pipe of inode WINO) and the requests pipe's write end R (inode
//!   RINO); closed, it puts up the tag `pgrun-stdin-pipe closed`. A
//!   sender checks that what it opened is a pipe of the inode the tag
//!   names, so a number the pgrun reused for another fd is never written
//!   to.
//! - On the portable path (no `/proc/PID/fd`), the two pipes are FIFOs,
//!   `in` and `requests` (and a lock file, `lock`, that senders hold while
//!   they write a block), in a folder only the run's user can enter
//!   ([`crate::sys::fifo_folder`]: made with `mkdir`, mode 0700, checked
//!   by every sender): `.NAME.pgrun-PID.stdin` beside the pid file NAME,
//!   PID the supervising pgrun's, the pid file's lock holder. A sender
//!   finds it from the pid file alone, as it finds that pgrun. A name
//!   that exists already (another user's, in a shared sticky folder, or
//!   a leftover) is never used: the run fails before its command starts
//!   (125). Closed, the pgrun removes `in` before it closes its write
//!   end. The folder is removed at the run's end (before the pid file is
//!   withdrawn, see `run::finish`), when a run that never started is
//!   dropped, and by the guard after a SIGKILL of pgrun (it is recorded
//!   in [`crate::exit_hooks`] before it is made, as a temporary file is).

use crate::sys::fifo_folder::{self, FifoFolder};
use crate::sys::{Pid, PollFd, fd_reach, pipe};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// The beginning of every tag's name.
const TAG: &str = "pgrun-stdin-pipe";

/// The byte `send --eof` writes to the requests pipe.
pub const EOF_REQUEST: u8 = b'E';

/// The FIFOs of the portable path's folder: the command's stdin, and the
/// requests pipe; and the file whose lock a sender holds while it writes
/// a block (see [`Route::block_lock`]).
pub const INPUT: &str = "in";
pub const REQUESTS: &str = "requests";
pub const LOCK: &str = "lock";
/// All three, as the folder's removal takes them.
pub const ENTRIES: [&str; 3] = [INPUT, REQUESTS, LOCK];

/// The portable path's folder for the run whose pid file is `pidfile` and
/// whose supervising pgrun is `pgrun`: `.NAME.pgrun-PID.stdin` beside the
/// pid file (shortened as every temporary name beside it is, so that it
/// fits wherever NAME fits).
pub fn folder_path(pidfile: &Path, pgrun: Pid) -> PathBuf {
    crate::atomic_file::shared_temp_path(pidfile, &format!(".pgrun-{pgrun}.stdin"))
}

/// The supervising pgrun's side of the stdin pipe.
pub struct StdinPipe {
    /// The command's end, until the command has it.
    read_end: Option<OwnedFd>,
    /// The end the pgrun holds open until asked to close it.
    write_end: Option<OwnedFd>,
    /// The requests pipe: the end the event loop polls ...
    requests: OwnedFd,
    /// ... and a write end, kept open so that the read end never polls as
    /// hung up (on Linux, the end senders open through `/proc`).
    _requests_in: OwnedFd,
    /// Where senders find the two.
    reach: Reach,
}

/// How senders reach the pipes (see the module doc).
enum Reach {
    /// The tag that says where the two are (or that the pipe is closed).
    Tag(OwnedFd),
    /// The folder that holds them, removed when dropped.
    Folder(Folder),
}

/// The portable path's folder, recorded for the guard until it is removed.
struct Folder(FifoFolder);

impl Drop for Folder {
    fn drop(&mut self) {
        match self.0.remove(&ENTRIES) {
            Ok(()) => crate::exit_hooks::temporary_done(self.0.path()),
            Err(e) => {
                let what = crate::say::errno_text(&e);
                crate::say::line(format_args!(
                    "warning: cannot remove the stdin pipe's folder {}: {what}",
                    self.0.path().display()
                ));
            }
        }
    }
}

impl StdinPipe {
    /// Create the pipe, the requests pipe, and what tells senders where
    /// they are: a tag on Linux, a folder beside `pidfile` on the portable
    /// path.
    pub fn new(pidfile: &Path) -> io::Result<StdinPipe> {
        if fd_reach::AVAILABLE { StdinPipe::tagged() } else { StdinPipe::in_folder(pidfile) }
    }

    fn tagged() -> io::Result<StdinPipe> {
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
            reach: Reach::Tag(tag),
        })
    }

    fn in_folder(pidfile: &Path) -> io::Result<StdinPipe> {
        let path = folder_path(pidfile, crate::sys::getpid());
        // Recorded before it exists, so that the guard finds it whenever
        // pgrun dies from here on.
        crate::exit_hooks::temporary_folder_named(&path)?;
        let folder = match FifoFolder::create(&path) {
            Ok(folder) => folder,
            Err(e) => {
                crate::exit_hooks::temporary_done(&path);
                return Err(match e.kind() {
                    io::ErrorKind::AlreadyExists => io::Error::new(
                        e.kind(),
                        format!("{} exists already (a name the run did not make is never used)", path.display()),
                    ),
                    _ => io::Error::new(e.kind(), format!("{}: {e}", path.display())),
                });
            }
        };
        let (dev, ino) = folder.id();
        crate::exit_hooks::temporary_identified(&path, dev, ino);
        let folder = Folder(folder);
        let fifo = |name, read_blocks| {
            folder.0.fifo(name, read_blocks).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
        };
        let (read_end, write_end) = fifo(INPUT, true)?;
        let (requests, requests_in) = fifo(REQUESTS, false)?;
        folder.0.file(LOCK).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Ok(StdinPipe {
            read_end: Some(read_end),
            write_end: Some(write_end),
            requests,
            _requests_in: requests_in,
            reach: Reach::Folder(folder),
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
            // Closed is said first: a sender that looks meanwhile may still
            // find the pipe, and its bytes still come before the end.
            match &mut self.reach {
                Reach::Tag(tag) => *tag = fd_reach::tag(&format!("{TAG} closed"))?,
                Reach::Folder(folder) => folder.0.unlink(INPUT)?,
            }
            self.write_end = None;
            crate::verbose!("the command's stdin pipe is closed, as a sender asked");
        }
        Ok(())
    }
}

fn inode(fd: BorrowedFd<'_>) -> io::Result<u64> {
    pipe::fifo_inode(fd)?.ok_or_else(|| io::Error::other("not a pipe"))
}

/// A pipe of the run's: on Linux, as its tag names it (the holder's fd
/// number and the pipe's inode); on the portable path, a FIFO's name in
/// the run's folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PipeAt {
    Fd { fd: RawFd, inode: u64 },
    Fifo(&'static str),
}

impl std::fmt::Display for PipeAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PipeAt::Fd { fd, .. } => write!(f, "fd {fd}"),
            PipeAt::Fifo(name) => write!(f, "FIFO {name}"),
        }
    }
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

/// A sender's way to the pipes of the run whose supervising pgrun is
/// `holder`.
pub struct Route {
    how: How,
}

enum How {
    /// Through the holder's fds (Linux).
    Fds(Pid),
    /// Through the run's folder, opened and checked (`None`: there is
    /// none); the run's user.
    Folder(Option<OwnedFd>, u32),
}

/// What the pgrun `holder` says of its stdin pipe, read through its fds
/// (Linux: what `status` needs to tell the run's pipe among the stdins of
/// its processes; on the portable path, where no fd can be reached, an
/// `Unsupported` error).
pub fn find(holder: Pid) -> io::Result<Found> {
    Route { how: How::Fds(holder) }.find()
}

impl Route {
    /// The way to the pipes of the run at `pidfile` whose supervising
    /// pgrun is `holder` and whose user is `owner`. On the portable path
    /// the folder is opened and checked now: a folder that is not the
    /// run's user's, of mode 0700, is refused (`PermissionDenied`).
    pub fn reach(pidfile: &Path, holder: Pid, owner: u32) -> io::Result<Route> {
        if fd_reach::AVAILABLE {
            return Ok(Route { how: How::Fds(holder) });
        }
        let dir = match fifo_folder::open_folder(&folder_path(pidfile, holder), owner) {
            Ok(dir) => Some(dir),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        Ok(Route { how: How::Folder(dir, owner) })
    }

    /// What the run's pgrun says of its stdin pipe (closed wins over open:
    /// see `StdinPipe::on_requests`). `NotFound`: the pgrun is gone.
    pub fn find(&self) -> io::Result<Found> {
        match &self.how {
            How::Fds(holder) => {
                let tags = fd_reach::tags_of(*holder, TAG)?;
                if tags.iter().any(|t| t == &format!("{TAG} closed")) {
                    return Ok(Found::Closed);
                }
                Ok(tags.iter().find_map(|t| parse_open(t)).unwrap_or(Found::None))
            }
            How::Folder(None, _) => Ok(Found::None),
            How::Folder(Some(dir), _) => Ok(match fifo_folder::holds(dir.as_fd(), INPUT)? {
                true => Found::Open { input: PipeAt::Fifo(INPUT), requests: PipeAt::Fifo(REQUESTS) },
                false => Found::Closed,
            }),
        }
    }

    /// What a sender locks (an fcntl write lock) while it writes one
    /// block of at most 4096 bytes, so that no other sender's bytes come
    /// within it: the folder's lock file on the portable path, where
    /// `PIPE_BUF` may be 512 (macOS, FreeBSD) and a write of more may be
    /// split; `None` on Linux, where the kernel writes 4096 bytes to a
    /// pipe at once.
    pub fn block_lock(&self) -> io::Result<Option<std::fs::File>> {
        match &self.how {
            How::Folder(Some(dir), owner) => fifo_folder::open_file(dir.as_fd(), LOCK, *owner).map(Some),
            _ => Ok(None),
        }
    }

    /// Open, non-blocking, the pipe at `at`, for writing; `Ok(None)` when
    /// it is no longer there (that fd is no longer that pipe; the FIFO is
    /// gone). A pipe nobody reads is `ENXIO`.
    pub fn open(&self, at: PipeAt) -> io::Result<Option<std::fs::File>> {
        let opened = match (&self.how, at) {
            (How::Fds(holder), PipeAt::Fd { fd, inode }) => match fd_reach::open_for_writing(*holder, fd) {
                Ok(file) => (pipe::fifo_inode(file.as_fd())? == Some(inode)).then_some(file).ok_or(None),
                Err(e) => Err(Some(e)),
            },
            (How::Folder(Some(dir), owner), PipeAt::Fifo(name)) => {
                fifo_folder::open_fifo(dir.as_fd(), name, *owner).map_err(Some)
            }
            _ => Err(None),
        };
        match opened {
            Ok(file) => Ok(Some(file)),
            Err(None) => Ok(None),
            Err(Some(e)) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(Some(e)) => Err(e),
        }
    }
}

fn parse_open(tag: &str) -> Option<Found> {
    let rest = tag.strip_prefix(TAG)?.strip_prefix(" open ")?;
    let n: Vec<&str> = rest.split(' ').collect();
    let [w, wi, r, ri] = n[..] else { return None };
    Some(Found::Open {
        input: PipeAt::Fd { fd: w.parse().ok()?, inode: wi.parse().ok()? },
        requests: PipeAt::Fd { fd: r.parse().ok()?, inode: ri.parse().ok()? },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_tag_names_both_pipes() {
        let found = parse_open("pgrun-stdin-pipe open 7 1234 9 99");
        let input = PipeAt::Fd { fd: 7, inode: 1234 };
        assert_eq!(found, Some(Found::Open { input, requests: PipeAt::Fd { fd: 9, inode: 99 } }));
        assert_eq!(parse_open("pgrun-stdin-pipe open 7 1234 9"), None);
        assert_eq!(parse_open("pgrun-stdin-pipe closed"), None);
    }

    #[test]
    fn the_folder_is_named_beside_the_pid_file_for_its_pgrun() {
        assert_eq!(folder_path(Path::new("/run/x/job.pid"), 42), Path::new("/run/x/.job.pid.pgrun-42.stdin"));
        assert_eq!(folder_path(Path::new("job.pid"), 7), Path::new("./.job.pid.pgrun-7.stdin"));
    }
}

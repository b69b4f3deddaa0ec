//! `pgrun send [--eof] [--file F] [--timeout DUR] PIDFILE [TEXT]`: write
//! to the stdin pipe of the run published at PIDFILE (`--stdin-pipe`).
//!
//! The run is found by its pid file's lock, as `cancel` and `status` find
//! it; the pipe, through the lock holder's own fd on Linux, through the
//! run's folder beside the pid file on the portable path, checked to be
//! the run's user's and of mode 0700 (see [`crate::stdin_pipe`]: either
//! way only the run's user, or root, can open it). The bytes go in blocks
//! of at most 4096 bytes, each filled before it is written, on a
//! non-blocking description of the sender's own, and a full pipe is
//! waited for with `poll`, never in a write. No other sender's bytes come
//! within a block: on Linux a block is one write, which a pipe never
//! interleaves (`PIPE_BUF` is 4096); on the portable path, where
//! `PIPE_BUF` may be 512 (macOS, FreeBSD) and a larger write may go in
//! parts, the sender holds a lock (an fcntl write lock on the folder's
//! `lock` file) while it writes the block, however many writes that
//! takes; waiting for that lock counts as waiting for room.
//! `--timeout` bounds how long the command may read nothing while bytes
//! wait (each byte it reads starts the wait afresh); when it passes, send
//! says how many bytes are in the pipe and exits 124. `--eof` then asks the
//! supervising pgrun, over its requests pipe, to close its write end, and
//! waits until it says so (its tag says closed; its folder no longer holds
//! the pipe), or the run is over.

use crate::backoff::Backoff;
use crate::exit::SendExit;
use crate::pidfile::{self, Liveness, Record, RecordError, lock_error};
use crate::stdin_pipe::{self, EOF_REQUEST, Found};
use crate::sys::lock::{self, Range};
use crate::sys::{self, Pid, PollFd, pipe};
use crate::{say, verbose};
use anyhow::{Context, Result, bail};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What `pgrun send` was asked to do (resolved from its command line by
/// the entry point).
#[derive(Debug, Clone)]
pub struct Options {
    pub pidfile: PathBuf,
    /// TEXT, if given.
    pub text: Option<OsString>,
    /// `--file`: send this file's bytes.
    pub file: Option<PathBuf>,
    /// `--eof`: close the pipe once the bytes are in it.
    pub eof: bool,
    /// `--timeout`: the longest the command may read nothing.
    pub timeout: Option<Duration>,
    pub verbose: bool,
}

/// The most bytes a send writes with no other sender's within them (the
/// contract's 4096).
const BLOCK: usize = 4096;

/// The block lock, held (see [`Sender::write_block`]); let go when
/// dropped.
struct BlockLock<'a>(&'a File);

impl<'a> BlockLock<'a> {
    /// Take the lock on `file`, waiting for it until `until`: `None` if it
    /// was not free by then.
    fn take(file: &'a File, until: Option<Instant>) -> Result<Option<BlockLock<'a>>> {
        let mut backoff = Backoff::up_to(Duration::from_millis(10));
        loop {
            if lock::try_write_lock(file, Range::FirstByte).context("cannot lock the stdin pipe's lock")? {
                return Ok(Some(BlockLock(file)));
            }
            if !backoff.pause_until(until) {
                return Ok(None);
            }
        }
    }
}

impl Drop for BlockLock<'_> {
    fn drop(&mut self) {
        // Should the unlock fail, the lock goes when send exits.
        let _ = lock::unlock(self.0, Range::FirstByte);
    }
}

/// Where the bytes come from.
enum Source {
    Text(Vec<u8>),
    Reader(Box<dyn Read>),
    /// `--eof` alone: no bytes.
    Nothing,
}

/// `pgrun send`: the exit status, having said the one error.
pub fn send(args: &Options) -> SendExit {
    say::set_verbose(args.verbose);
    match Sender::find(args).and_then(|found| found.map_or(Ok(SendExit::NoRun), |s| s.send(args))) {
        Ok(exit) => exit,
        Err(err) => {
            say::line(format_args!("{err:#}"));
            SendExit::Failed
        }
    }
}

struct Sender {
    record: Record,
    holder: Pid,
    /// The way to the run's pipes.
    route: stdin_pipe::Route,
    /// The sender's own description of the pipe, non-blocking.
    input: File,
    /// The lock held while a block is written, where the kernel does not
    /// write a block whole (the portable path).
    lock: Option<File>,
    requests: Option<File>,
}

impl Sender {
    /// The live run at the pid file and its open stdin pipe; `None` (said)
    /// when there is no live run.
    fn find(args: &Options) -> Result<Option<Sender>> {
        let path = &args.pidfile;
        let record = match pidfile::read_record(path, false) {
            Ok(record) => record,
            Err(RecordError::Missing) => {
                say::line(format_args!("no live run at {}: no such file", path.display()));
                return Ok(None);
            }
            Err(e) => bail!("cannot use pid file {}: {e}", path.display()),
        };
        let me = sys::geteuid();
        let owner = record.meta.uid();
        if owner != me && me != 0 {
            bail!("refusing pid file {}: owned by uid {owner}, not {me} (another user's run)", path.display());
        }
        if record.meta.permissions().mode() & 0o002 != 0 {
            bail!("refusing pid file {}: it is world-writable", path.display());
        }
        let holder = match record.liveness().map_err(|e| lock_error(path, e))? {
            Liveness::Live(0) => {
                bail!("the run at {} is in a PID namespace send cannot see into", path.display())
            }
            Liveness::Live(holder) => holder,
            Liveness::Claimed => {
                say::line(format_args!(
                    "no live run at {}: a run is starting there, not yet published",
                    path.display()
                ));
                return Ok(None);
            }
            Liveness::Stale => {
                say::line(format_args!("no live run at {}: the pid file is stale", path.display()));
                return Ok(None);
            }
        };
        // A run marked over (its command's end taken, the pid file not yet
        // withdrawn) reads nothing more: no live run, as cancel sees it.
        if record.run_over(holder).map_err(|e| lock_error(path, e))? {
            return over(path);
        }
        let route = match stdin_pipe::Route::reach(path, holder, owner) {
            Ok(route) => route,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                bail!("refusing the stdin pipe of the run at {} (pgrun {holder}): {e}", path.display())
            }
            Err(e) => bail!("cannot reach the stdin pipe of the run at {} (pgrun {holder}): {e}", path.display()),
        };
        let found = match route.find() {
            Ok(found) => found,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                bail!("cannot reach the run at {} (pgrun {holder}): another user's run: {e}", path.display())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return over(path),
            Err(e) => bail!("cannot look at pgrun {holder}'s stdin pipe (run at {}): {e}", path.display()),
        };
        let (input_at, requests_at) = match found {
            Found::Open { input, requests } => (input, requests),
            Found::Closed => bail!("the stdin pipe of the run at {} is closed (send --eof)", path.display()),
            Found::None => {
                // The portable path's folder goes at the run's end, before
                // its pid file: no folder and no live run is the end.
                if record.liveness().map_err(|e| lock_error(path, e))? != Liveness::Live(holder) {
                    return over(path);
                }
                bail!("the run at {} has no stdin pipe (it was started without --stdin-pipe)", path.display())
            }
        };
        let open = |at| match route.open(at) {
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                bail!("COMMAND of the run at {} no longer reads its stdin (the pipe has no reader)", path.display())
            }
            opened => opened.with_context(|| {
                format!("cannot open the stdin pipe of the run at {} (pgrun {holder}, {at})", path.display())
            }),
        };
        let Some(input) = open(input_at)? else {
            bail!("the stdin pipe of the run at {} is closed (send --eof)", path.display())
        };
        let requests = match args.eof {
            false => None,
            true => match open(requests_at)? {
                Some(requests) => Some(requests),
                None => bail!("the stdin pipe of the run at {} is closed (send --eof)", path.display()),
            },
        };
        // The pgrun opened is still the run's: its lock is still held.
        if record.liveness().map_err(|e| lock_error(path, e))? != Liveness::Live(holder) {
            return over(path);
        }
        verbose!("writing to the stdin pipe of the run at {} (pgrun {holder})", path.display());
        let lock = route.block_lock().with_context(|| {
            format!("cannot open the stdin pipe's lock of the run at {} (pgrun {holder})", path.display())
        })?;
        Ok(Some(Sender { record, holder, route, input, lock, requests }))
    }

    fn send(self, args: &Options) -> Result<SendExit> {
        let mut source = match (&args.text, &args.file) {
            (Some(text), _) => Source::Text(text.as_bytes().to_vec()),
            (None, Some(file)) => Source::Reader(Box::new(
                File::open(file).with_context(|| format!("cannot open --file {}", file.display()))?,
            )),
            (None, None) if args.eof => Source::Nothing,
            (None, None) => Source::Reader(Box::new(io::stdin())),
        };
        let mut written: u64 = 0;
        let mut chunk = vec![0u8; BLOCK];
        let mut offset = 0;
        loop {
            let n = match &mut source {
                Source::Text(bytes) => {
                    let n = (bytes.len() - offset).min(chunk.len());
                    chunk[..n].copy_from_slice(&bytes[offset..offset + n]);
                    offset += n;
                    n
                }
                Source::Reader(reader) => fill(reader, &mut chunk).with_context(|| match &args.file {
                    Some(file) => format!("cannot read --file {}", file.display()),
                    None => "cannot read the bytes to send from stdin".to_owned(),
                })?,
                Source::Nothing => 0,
            };
            if n == 0 {
                break;
            }
            let (done, whole) = self.write_block(&chunk[..n], args)?;
            written += done as u64;
            if !whole {
                say::line(format_args!(
                    "timed out after {} with COMMAND reading nothing: {written} bytes written to the stdin pipe of the run at {}",
                    crate::duration::describe(args.timeout.unwrap_or_default()),
                    args.pidfile.display()
                ));
                return Ok(SendExit::TimedOut);
            }
        }
        verbose!("{written} bytes written");
        if let Some(requests) = &self.requests
            && !self.close_pipe(requests, args)?
        {
            say::line(format_args!(
                "timed out after {}: pgrun {} did not close the stdin pipe of the run at {} ({written} bytes written)",
                crate::duration::describe(args.timeout.unwrap_or_default()),
                self.holder,
                args.pidfile.display()
            ));
            return Ok(SendExit::TimedOut);
        }
        Ok(SendExit::Sent)
    }

    /// Write `block` (at most [`BLOCK`] bytes), no other sender's bytes
    /// within it: in one write where the kernel makes it whole (Linux,
    /// `PIPE_BUF` 4096), else holding the run's block lock (see
    /// [`stdin_pipe::Route::block_lock`]) across the writes it takes.
    /// Returns how many of its bytes are in the pipe, and false once
    /// `--timeout` passed with the command reading nothing (each byte
    /// written starts the wait afresh) or the lock held by another sender
    /// meanwhile.
    fn write_block(&self, block: &[u8], args: &Options) -> Result<(usize, bool)> {
        let deadline = || args.timeout.and_then(|t| Instant::now().checked_add(t));
        let mut until = deadline();
        let _held = match &self.lock {
            None => None,
            Some(lock) => match BlockLock::take(lock, until)? {
                Some(held) => Some(held),
                None => return Ok((0, false)),
            },
        };
        let mut done = 0;
        loop {
            let want = block.len() - done;
            match pipe::write(self.input.as_fd(), &block[done..]) {
                Ok(n) => {
                    done += n;
                    if done == block.len() {
                        return Ok((done, true));
                    }
                    // Only where the lock makes the block whole: a part
                    // went in, the rest waits for room.
                    if self.lock.is_none() {
                        bail!("a write of {want} bytes to the stdin pipe wrote {n}");
                    }
                    if n > 0 {
                        until = deadline();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {
                    bail!(
                        "COMMAND of the run at {} no longer reads its stdin (the pipe has no reader)",
                        args.pidfile.display()
                    )
                }
                Err(e) => bail!("cannot write to the stdin pipe of the run at {}: {e}", args.pidfile.display()),
            }
            let wait = match until {
                None => None,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Ok((done, false)),
                },
            };
            let mut set = [PollFd::write(self.input.as_fd())];
            sys::poll(&mut set, wait).context("cannot wait for room in the stdin pipe")?;
        }
    }

    /// `--eof`: ask the supervising pgrun to close its write end, and wait
    /// until it has (or the run is over); false when `--timeout` passed
    /// first.
    fn close_pipe(&self, requests: &File, args: &Options) -> Result<bool> {
        let path = &args.pidfile;
        match pipe::write(requests.as_fd(), &[EOF_REQUEST]) {
            Ok(_) => {}
            // A full requests pipe holds a request already.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => {
                bail!("cannot ask pgrun {} to close the stdin pipe of the run at {}: {e}", self.holder, path.display())
            }
        }
        let deadline = args.timeout.and_then(|t| Instant::now().checked_add(t));
        let mut backoff = Backoff::up_to(Duration::from_millis(50));
        loop {
            if self.record.liveness().map_err(|e| lock_error(path, e))? != Liveness::Live(self.holder) {
                return Ok(true);
            }
            match self.route.find() {
                Ok(Found::Closed) => return Ok(true),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
                Err(e) => bail!("cannot look at pgrun {}'s stdin pipe (run at {}): {e}", self.holder, path.display()),
            }
            if !backoff.pause_until(deadline) {
                return Ok(false);
            }
        }
    }
}

/// The run ended while send looked at it.
fn over(path: &std::path::Path) -> Result<Option<Sender>> {
    say::line(format_args!("no live run at {}: the run ended", path.display()));
    Ok(None)
}

/// Read into `buf` until it is full or the source ends; how many bytes.
fn fill(reader: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match reader.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

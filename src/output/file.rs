//! `--output-file PATH`: the file that gets every byte of the command's
//! stdout and stderr, in the order pgrun read them.
//!
//! [`OutputFile::open`] gives the path the report path's checks (its folder
//! exists, it is not a symlink or a folder) and creates or truncates it,
//! mode 0644 whatever the umask; it then writes a block and takes it back,
//! so that a full file system is found before the command starts, like a
//! read-only one or a name too long. The relay calls [`OutputFile::write`]
//! with each read, before the bytes go anywhere else: plain writes (a
//! regular file never blocks for long), independent of how fast the
//! streams' own readers read; or, where it copied a pipe's bytes on to
//! their destination with `tee(2)`, [`OutputFile::take_from_pipe`] right
//! after, which splices them from the pipe into the file. A failed write is said once (`pgrun: cannot
//! write output file PATH: ...`) and ends the copy, not the run: the file
//! then holds a prefix of what was read, and the report says why.

use super::StreamError;
use crate::pidfile::check_target;
use crate::say;
use crate::sys::pipe;
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file's mode, whatever the umask.
const MODE: u32 = 0o644;

/// Written and taken back at the start: one block, so a full file system
/// refuses it.
const PROBE: usize = 4096;

/// The open output file, while it is still being written.
pub struct OutputFile {
    path: PathBuf,
    /// `None` once a write failed: nothing more is written.
    file: Option<File>,
    error: Option<StreamError>,
    /// Cleared for good once `splice(2)` into the file is refused.
    splices: bool,
}

impl OutputFile {
    /// Check `path`, create or truncate it (mode 0644), and make sure a
    /// block can be written to it. Every failure here is pgrun's own,
    /// before the command starts.
    pub fn open(path: &Path) -> Result<OutputFile> {
        check_target(path, "output file")?;
        let context = || format!("cannot open output file {}", path.display());
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(MODE)
            // Non-blocking: opening a FIFO must not wait for a reader (it is
            // refused below); a regular file ignores the flag.
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .with_context(context)?;
        let meta = file.metadata().with_context(context)?;
        if !meta.is_file() {
            // A FIFO or a device: neither is "a file that holds the output".
            anyhow::bail!("output file {} is not a regular file", path.display());
        }
        if meta.permissions().mode() & 0o7777 != MODE
            && let Err(e) = file.set_permissions(std::fs::Permissions::from_mode(MODE))
        {
            // Someone else's file that we may write: written, mode kept.
            crate::verbose!("cannot set mode 0644 on output file {}: {e}; keeping its mode", path.display());
        }
        let probe = || -> std::io::Result<()> {
            file.write_all_at(&[0; PROBE], 0)?;
            file.set_len(0)
        };
        probe().with_context(|| format!("cannot write output file {}", path.display()))?;
        Ok(OutputFile { path: path.to_path_buf(), file: Some(file), error: None, splices: true })
    }

    /// Append `bytes` (all of them: a regular file takes a write at once).
    /// The first failure is said and recorded, and ends the copy.
    pub fn write(&mut self, bytes: &[u8]) {
        let Some(file) = &mut self.file else { return };
        if let Err(e) = file.write_all(bytes) {
            self.failed(&e);
        }
    }

    /// A write failed: say so once, record it, and end the copy.
    fn failed(&mut self, e: &std::io::Error) {
        let error = StreamError::of(false, e);
        say::line(format_args!(
            "cannot write output file {}: {}; it holds only what came before",
            self.path.display(),
            error.cause()
        ));
        self.error = Some(error);
        self.file = None;
    }

    /// Whether bytes are still being copied (no write has failed).
    pub fn is_open(&self) -> bool {
        self.file.is_some()
    }

    /// Take exactly `n` bytes from the front of the pipe `source` (which
    /// holds at least `n`: [`pipe::tee_nowait`] just copied them on) and
    /// append them, kernel to kernel where it can ([`pipe::splice_nowait`]),
    /// else through `scratch`. A failed write is said and ends the copy as
    /// in [`OutputFile::write`]; the rest of the `n` bytes is still taken
    /// from the pipe. Only a failed read of the pipe is an error here.
    pub fn take_from_pipe(&mut self, source: BorrowedFd<'_>, mut n: usize, scratch: &mut [u8]) -> std::io::Result<()> {
        while n > 0 {
            if let Some(file) = &self.file
                && self.splices
            {
                match pipe::splice_nowait(source, file.as_fd(), n) {
                    Ok(0) => {}
                    Ok(moved) => {
                        n -= moved.min(n);
                        continue;
                    }
                    // Refused here (a file system without splice): plain
                    // writes from now on.
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)) => {
                        self.splices = false
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    // A write error (a full disk): as in `write`.
                    Err(e) => self.failed(&e),
                }
            }
            let want = n.min(scratch.len());
            let got = pipe::read(source, &mut scratch[..want])?;
            if got == 0 {
                // Cannot happen (the bytes were there); do not spin.
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.write(&scratch[..got]);
            n -= got;
        }
        Ok(())
    }

    /// The write that ended the copy early, if one failed so far.
    pub fn error(&self) -> Option<StreamError> {
        self.error
    }

    /// Close the file; the write that ended the copy early, if one failed.
    pub fn finish(self) -> Option<StreamError> {
        self.error
    }
}

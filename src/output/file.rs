//! `--output-file PATH`: the file that gets every byte of the command's
//! stdout and stderr, in the order pgrun read them.
//!
//! [`OutputFile::open`] gives the path the report path's checks (its folder
//! exists, it is not a symlink or a folder; an existing PATH must be a
//! regular file) and prepares the file under a temporary name beside it
//! (`.NAME.pgrun-PID.tmp`, mode 0644 whatever the umask, see
//! [`TempFile`]); it then writes a block and takes it back, so that a full
//! file system is found before the command starts, like a read-only one or
//! a name too long. Only once the command has started does the file take
//! PATH's place ([`OutputFile::place`]: `rename(2)`, replacing what was
//! there): a run that never starts (125, 126, 127, cancelled before the
//! start) leaves an existing PATH as it was and creates none, and the
//! temporary file goes with it (removed when the [`OutputFile`] is
//! dropped, by the panic hook on a panic, by the guard if pgrun is
//! killed: see [`crate::exit_hooks`]). The file is written from
//! its first byte whatever its name, so nothing read is lost from it; the
//! rename comes before the relay reads anything.
//!
//! The relay calls [`OutputFile::write`] with each read, before the bytes
//! go anywhere else: plain writes (a regular file never blocks for long),
//! independent of how fast the streams' own readers read; or, where it
//! copied a pipe's bytes on to their destination with `tee(2)`,
//! [`OutputFile::take_from_pipe`] right after, which splices them from the
//! pipe into the file. A failed write is said once (`pgrun: cannot write
//! output file PATH: ...`) and ends the copy, not the run: the file then
//! holds a prefix of what was read, and the report says why. A failed
//! rename is said the same way and ends the copy before its first byte:
//! PATH is left as it was.

use super::StreamError;
use crate::atomic_file::{Identity, TempFile};
use crate::pidfile::check_target;
use crate::say;
use crate::sys::pipe;
use anyhow::{Context, Result};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Written and taken back at the start: one block, so a full file system
/// refuses it.
const PROBE: usize = 4096;

/// The output file, while it is still being written.
pub struct OutputFile {
    path: PathBuf,
    /// `None` once the rename into place failed.
    handle: Option<Handle>,
    /// Cleared once a write failed: nothing more is written.
    writing: bool,
    error: Option<StreamError>,
    /// Cleared for good once `splice(2)` into the file is refused.
    splices: bool,
    /// How many bytes the file holds (what was written to it so far).
    len: u64,
}

/// The file under its name of the moment.
enum Handle {
    /// Beside PATH under a temporary name, until the command has started.
    Temp(TempFile),
    /// At PATH.
    Placed(File),
}

impl OutputFile {
    /// Check `path` and prepare the file under a temporary name beside it
    /// (mode 0644), making sure a block can be written to it. Every
    /// failure here is pgrun's own, before the command starts; nothing is
    /// at `path` yet (see [`OutputFile::place`]).
    pub fn open(path: &Path) -> Result<OutputFile> {
        check_target(path, "output file")?;
        if std::fs::symlink_metadata(path).is_ok_and(|meta| !meta.is_file()) {
            // A FIFO or a device: neither is "a file that holds the output".
            anyhow::bail!("output file {} is not a regular file", path.display());
        }
        let temp =
            TempFile::create(path, 0).with_context(|| format!("cannot prepare output file {}", path.display()))?;
        let probe = || -> std::io::Result<()> {
            temp.file().write_all_at(&[0; PROBE], 0)?;
            temp.file().set_len(0)
        };
        probe().with_context(|| format!("cannot write output file {}", path.display()))?;
        let handle = Some(Handle::Temp(temp));
        Ok(OutputFile { path: path.to_path_buf(), handle, writing: true, error: None, splices: true, len: 0 })
    }

    /// The temporary file and what it is, while it has not taken PATH's
    /// place.
    pub fn temp_identity(&self) -> Option<Identity> {
        match &self.handle {
            Some(Handle::Temp(temp)) => temp.identity(),
            _ => None,
        }
    }

    /// The command has started: the file takes PATH's place, replacing
    /// what was there. Nothing has been read yet, so a failure loses
    /// nothing: it is said once and recorded, and ends the copy (the
    /// temporary file is removed; PATH is left as it was).
    pub fn place(&mut self) {
        if !matches!(self.handle, Some(Handle::Temp(_))) {
            return;
        }
        let Some(Handle::Temp(temp)) = self.handle.take() else { return };
        match temp.rename_into_place() {
            Ok(file) => self.handle = Some(Handle::Placed(file)),
            Err(e) => {
                let error = StreamError::of("rename", &e);
                say::line(format_args!(
                    "cannot put output file {} in place: {}; it is not written",
                    self.path.display(),
                    error.cause()
                ));
                self.error = Some(error);
                self.writing = false;
            }
        }
    }

    /// The file, while bytes are still copied to it.
    fn file(&self) -> Option<&File> {
        match &self.handle {
            _ if !self.writing => None,
            Some(Handle::Temp(temp)) => Some(temp.file()),
            Some(Handle::Placed(file)) => Some(file),
            None => None,
        }
    }

    /// Append `bytes` (all of them: a regular file takes a write at once).
    /// The first failure is said and recorded, and ends the copy.
    pub fn write(&mut self, bytes: &[u8]) {
        let Some(mut file) = self.file() else { return };
        match file.write_all(bytes) {
            Ok(()) => self.len += bytes.len() as u64,
            Err(e) => self.failed(&e),
        }
    }

    /// How many bytes the file holds: the offset the next byte goes to.
    pub fn end_offset(&self) -> u64 {
        self.len
    }

    /// A write failed: say so once, record it, and end the copy.
    fn failed(&mut self, e: &std::io::Error) {
        let error = StreamError::of("write", e);
        say::line(format_args!(
            "cannot write output file {}: {}; it holds only what came before",
            self.path.display(),
            error.cause()
        ));
        self.error = Some(error);
        self.writing = false;
    }

    /// The byte at `offset`, if the file holds it and it can be read back
    /// (`--detach-after`'s hand-off asks for the last byte the caller's
    /// stderr got, see [`super::handoff`]).
    pub fn byte_at(&self, offset: u64) -> Option<u8> {
        let file = match &self.handle {
            _ if offset >= self.len => return None,
            Some(Handle::Temp(temp)) => temp.file(),
            Some(Handle::Placed(file)) => file,
            None => return None,
        };
        let mut byte = [0u8];
        matches!(file.read_at(&mut byte, offset), Ok(1)).then_some(byte[0])
    }

    /// Whether bytes are still being copied (no write has failed).
    pub fn is_open(&self) -> bool {
        self.file().is_some()
    }

    /// Take exactly `n` bytes from the front of the pipe `source` (which
    /// holds at least `n`: [`pipe::tee_nowait`] just copied them on) and
    /// append them, kernel to kernel where it can ([`pipe::splice_nowait`]),
    /// else through `scratch`. A failed write is said and ends the copy as
    /// in [`OutputFile::write`]; the rest of the `n` bytes is still taken
    /// from the pipe. Only a failed read of the pipe is an error here.
    pub fn take_from_pipe(&mut self, source: BorrowedFd<'_>, mut n: usize, scratch: &mut [u8]) -> std::io::Result<()> {
        while n > 0 {
            if let Some(file) = self.file()
                && self.splices
            {
                match pipe::splice_nowait(source, file.as_fd(), n) {
                    Ok(0) => {}
                    Ok(moved) => {
                        n -= moved.min(n);
                        self.len += moved as u64;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The names in `dir`.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn the_file_takes_its_place_only_when_placed_and_keeps_what_came_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.log");
        std::fs::write(&path, "old\n").unwrap();
        let mut file = OutputFile::open(&path).unwrap();
        file.write(b"first\n");
        assert_eq!(std::fs::read(&path).unwrap(), b"old\n", "the file was touched before it was placed");
        let temp = file.temp_identity().unwrap();
        assert_eq!(std::fs::read(&temp.path).unwrap(), b"first\n");
        file.place();
        assert!(file.temp_identity().is_none() && !temp.path.exists());
        file.write(b"second\n");
        assert_eq!(std::fs::read(&path).unwrap(), b"first\nsecond\n");
        assert_eq!(file.finish(), None);
        assert_eq!(names(dir.path()), ["out.log"]);
    }

    #[test]
    fn a_file_never_placed_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.log");
        let mut file = OutputFile::open(&path).unwrap();
        file.write(b"never\n");
        assert_eq!(names(dir.path()).len(), 1, "no temporary file");
        drop(file);
        assert!(names(dir.path()).is_empty(), "{:?} left", names(dir.path()));
    }

    #[test]
    fn a_failed_rename_is_recorded_and_ends_the_copy_leaving_the_path_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.log");
        let mut file = OutputFile::open(&path).unwrap();
        // Something else took the name meanwhile: a folder, which a file
        // cannot replace.
        std::fs::create_dir(&path).unwrap();
        file.place();
        let error = file.error().expect("no error recorded");
        assert_eq!(error.to_string(), "cannot rename: Is a directory (EISDIR)");
        assert!(!file.is_open(), "bytes are still copied");
        file.write(b"lost\n");
        assert!(path.is_dir());
        assert_eq!(names(dir.path()), ["out.log"], "the temporary file was left");
    }

    #[test]
    fn a_path_that_is_no_regular_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let err = OutputFile::open(&fifo).err().expect("a FIFO was taken");
        assert!(err.to_string().contains("is not a regular file"), "{err}");
        assert_eq!(names(dir.path()), ["fifo"]);
    }
}

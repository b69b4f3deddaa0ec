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
//! streams' own readers read. A failed write is said once (`pgrun: cannot
//! write output file PATH: ...`) and ends the copy, not the run: the file
//! then holds a prefix of what was read, and the report says why.

use super::relay::StreamError;
use crate::pidfile::check_target;
use crate::say;
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
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
        Ok(OutputFile { path: path.to_path_buf(), file: Some(file), error: None })
    }

    /// Append `bytes` (all of them: a regular file takes a write at once).
    /// The first failure is said and recorded, and ends the copy.
    pub fn write(&mut self, bytes: &[u8]) {
        let Some(file) = &mut self.file else { return };
        if let Err(e) = file.write_all(bytes) {
            let error = StreamError { reading: false, errno: e.raw_os_error().unwrap_or(libc::EIO) };
            say::line(format_args!(
                "cannot write output file {}: {}; it holds only what came before",
                self.path.display(),
                error.to_string().trim_start_matches("cannot write: ")
            ));
            self.error = Some(error);
            self.file = None;
        }
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

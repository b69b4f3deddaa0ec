//! The pid file and the cancel marker of a run, and the write-then-rename
//! temporary file that both the pid file and the report are published with.
//!
//! Claiming happens before the command starts, so every refusal (a live
//! run's file, a symlink, a missing folder) costs nothing but exit 125. The
//! record is published only once the group exists: a temporary file in the
//! same folder, written, locked, then renamed (or, where no file existed,
//! hard-linked, which fails rather than replaces if another run got there
//! first). A reader therefore sees no file or the whole line, never part of
//! it, and the lock travels with the inode it was taken on.

use crate::sys::{Pid, getpid, lock};
use anyhow::{Context, Result, bail};
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Pid files and markers are created with this mode whatever the umask.
const MODE: u32 = 0o644;

/// The folder a path lives in (`.` for a bare file name).
pub fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Fail unless the folder of `path` exists and `path` is not a symlink or a
/// directory. `what` names the file in the message ("pid file", "report").
pub fn check_target(path: &Path, what: &str) -> Result<()> {
    let folder = folder_of(path);
    match fs::metadata(folder) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("{what} folder {} is not a directory", folder.display()),
        Err(e) => bail!("{what} folder {}: {e}", folder.display()),
    }
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => bail!("refusing {what} {}: it is a symlink", path.display()),
        Ok(m) if m.is_dir() => bail!("{what} {} is a directory", path.display()),
        _ => Ok(()),
    }
}

/// A pid file claimed for this run but not yet published.
pub struct Claim {
    path: PathBuf,
    /// The existing (stale) file, write-locked by us so that no other run
    /// can claim it while we start; `None` if there was no file.
    held: Option<File>,
}

/// A published pid file, locked for as long as this value lives.
pub struct Published {
    path: PathBuf,
    _locked: File,
    dev: u64,
    ino: u64,
}

/// Claim `path`: refuse it if a live run holds it or it is not a plain file.
pub fn claim(path: &Path) -> Result<Claim> {
    check_target(path, "pid file")?;
    let held = match open_existing(path) {
        Ok(file) => {
            if !lock::try_write_lock(&file).with_context(|| format!("cannot lock pid file {}", path.display()))? {
                let holder = lock::lock_holder(&file).ok().flatten();
                match holder {
                    Some(pid) => bail!("pid file {} is held by a live run (pgrun pid {pid})", path.display()),
                    None => bail!("pid file {} is held by a live run", path.display()),
                }
            }
            Some(file)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot open pid file {}", path.display())),
    };
    Ok(Claim { path: path.to_path_buf(), held })
}

/// Open an existing pid file without following a symlink.
fn open_existing(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOFOLLOW).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}

impl Claim {
    /// Publish `pgid` atomically and keep the new file locked.
    pub fn publish(self, pgid: Pid) -> Result<Published> {
        let tmp = temp_path(&self.path);
        let result = self.publish_via(&tmp, pgid);
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    fn publish_via(self, tmp: &Path, pgid: Pid) -> Result<Published> {
        let path = &self.path;
        let mut file = create_temp(tmp).with_context(|| format!("cannot create pid file {}", tmp.display()))?;
        file.write_all(format!("{pgid}\n").as_bytes())
            .with_context(|| format!("cannot write pid file {}", tmp.display()))?;
        if !lock::try_write_lock(&file).with_context(|| format!("cannot lock pid file {}", tmp.display()))? {
            bail!("cannot lock pid file {}", tmp.display());
        }
        if self.held.is_some() {
            // We hold the old file's lock, so nobody else can be replacing it.
            fs::rename(tmp, path).with_context(|| format!("cannot publish pid file {}", path.display()))?;
        } else {
            match fs::hard_link(tmp, path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    bail!("pid file {} was created by another run while this one started", path.display())
                }
                Err(e) => return Err(e).with_context(|| format!("cannot publish pid file {}", path.display())),
            }
            let _ = fs::remove_file(tmp);
        }
        let meta = file.metadata().context("cannot stat the pid file")?;
        Ok(Published { path: self.path, _locked: file, dev: meta.dev(), ino: meta.ino() })
    }
}

impl Published {
    /// Remove the pid file if it is still ours; the lock goes with it.
    pub fn remove(self) {
        if let Ok(meta) = fs::symlink_metadata(&self.path)
            && meta.dev() == self.dev
            && meta.ino() == self.ino
        {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Create `tmp` (from [`temp_path`]) for writing, mode 0644 whatever the
/// umask, never through a symlink. A file already there is the leftover of a
/// crashed pgrun that had our pid: ours to replace.
pub fn create_temp(tmp: &Path) -> io::Result<File> {
    let create = || OpenOptions::new().write(true).create_new(true).mode(MODE).custom_flags(libc::O_NOFOLLOW).open(tmp);
    let file = match create() {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => fs::remove_file(tmp).and_then(|()| create()),
        other => other,
    }?;
    file.set_permissions(fs::Permissions::from_mode(MODE))?;
    Ok(file)
}

/// `.NAME.pgrun-PID.tmp` next to `path`: where a file is written before it
/// is renamed into place, so readers never see it half-written.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(".pgrun-{}.tmp", getpid()));
    folder_of(path).join(name)
}

/// The cancel marker for a pid file: `PIDFILE.cancel`.
pub fn default_marker(pidfile: &Path) -> PathBuf {
    let mut s = pidfile.as_os_str().to_owned();
    s.push(".cancel");
    PathBuf::from(s)
}

/// Whether the marker exists (a symlink counts: it is somebody's marker).
pub fn marker_present(marker: &Path) -> bool {
    fs::symlink_metadata(marker).is_ok()
}

/// Remove the marker; whether there was one. Anything at the path counts,
/// even what cannot be removed (a folder): it still says "cancel".
pub fn take_marker(marker: &Path) -> bool {
    fs::remove_file(marker).is_ok() || marker_present(marker)
}

/// Create the marker as an empty file; `Ok(false)` if it was already there.
pub fn create_marker(marker: &Path) -> io::Result<bool> {
    match OpenOptions::new().write(true).create_new(true).mode(MODE).custom_flags(libc::O_NOFOLLOW).open(marker) {
        Ok(file) => {
            let _ = file.set_permissions(fs::Permissions::from_mode(MODE));
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// A pid file as a reader (`cancel`, `status`) finds it.
pub struct Record {
    /// Open without following symlinks; used for `F_GETLK`.
    pub file: File,
    pub pgid: Pid,
    pub meta: fs::Metadata,
}

/// Why a pid file could not be read as a record.
#[derive(Debug)]
pub enum RecordError {
    Missing,
    Symlink,
    NotRegular,
    Unreadable(io::Error),
    /// Its content is not one decimal group id and a newline.
    NotAGroupId(String),
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Missing => write!(f, "no such file"),
            RecordError::Symlink => write!(f, "it is a symlink"),
            RecordError::NotRegular => write!(f, "it is not a regular file"),
            RecordError::Unreadable(e) => write!(f, "{e}"),
            RecordError::NotAGroupId(text) => write!(f, "its content {text:?} is not a process-group id"),
        }
    }
}

/// Open and parse the pid file at `path` without following a symlink.
/// `writable` asks for a read-write fd (needed to take its lock).
pub fn read_record(path: &Path, writable: bool) -> Result<Record, RecordError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(RecordError::Missing),
        Err(e) => return Err(RecordError::Unreadable(e)),
    };
    if meta.file_type().is_symlink() {
        return Err(RecordError::Symlink);
    }
    if !meta.is_file() {
        return Err(RecordError::NotRegular);
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(writable)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => RecordError::Missing,
            _ if e.raw_os_error() == Some(libc::ELOOP) => RecordError::Symlink,
            _ => RecordError::Unreadable(e),
        })?;
    let mut text = String::new();
    let mut limited = io::Read::take(&mut file, 64);
    io::Read::read_to_string(&mut limited, &mut text).map_err(|_| RecordError::NotAGroupId("<not text>".into()))?;
    let meta = file.metadata().map_err(RecordError::Unreadable)?;
    let pgid = parse_group_id(&text).ok_or_else(|| RecordError::NotAGroupId(text.clone()))?;
    Ok(Record { file, pgid, meta })
}

/// Exactly one positive decimal number and a newline.
fn parse_group_id(text: &str) -> Option<Pid> {
    let digits = text.strip_suffix('\n')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.starts_with('0') {
        return None;
    }
    digits.parse().ok()
}

/// Remove a stale record, but only if nobody took it meanwhile: lock it
/// ourselves first, and unlink only if `path` still names the same file.
/// Returns whether it was removed.
pub fn remove_if_stale(path: &Path, record: &Record) -> bool {
    matches!(lock::try_write_lock(&record.file), Ok(true)) && still_names(path, record) && fs::remove_file(path).is_ok()
}

/// Whether `path` still names the file `record` was read from. A run
/// removes its pid file only after its group is gone, so a record whose
/// path has moved on belongs to a run that has ended.
pub fn still_names(path: &Path, record: &Record) -> bool {
    fs::symlink_metadata(path).is_ok_and(|now| now.dev() == record.meta.dev() && now.ino() == record.meta.ino())
}

#[cfg(test)]
mod tests {
    use super::parse_group_id;

    #[test]
    fn group_ids_are_one_decimal_line() {
        assert_eq!(parse_group_id("4242\n"), Some(4242));
        for bad in ["", "\n", "4242", "-1\n", "0\n", "042\n", " 42\n", "42 \n", "42\n\n", "4x\n", "99999999999\n"] {
            assert_eq!(parse_group_id(bad), None, "{bad:?}");
        }
    }
}

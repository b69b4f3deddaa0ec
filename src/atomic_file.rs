//! Files published whole: written under a temporary name in the target's
//! folder (or under none yet, see [`TempFile::unnamed`]), then renamed (or
//! hard-linked) into place, so a reader sees no file or the whole content,
//! never part of it. The pid file, the report, the notes at the marker
//! path and `--output-file` are all published this way.
//!
//! The temporary file is created when a run starts, before the command
//! does, and space is reserved in it then: a read-only or full folder, a
//! name too long for the file system, or no fd left are found before
//! anything runs. The pid file's temporary file also takes a name shared
//! by every run on that pid file ([`shared_temp_path`]), where starting
//! runs meet (see `pidfile`'s claim).
//!
//! No temporary name outlives pgrun, however pgrun ends: each is recorded
//! (in [`crate::exit_hooks`], which the guard shares) before it appears and
//! until it is gone, so the panic hook removes it, and after a SIGKILL the
//! guard does ([`remove_left`]). Before the guard exists only the report's
//! temporary file is made, and on Linux it has no name until it is placed
//! (`O_TMPFILE`); on the portable path a SIGKILL of pgrun before its guard
//! is forked can leave `.REPORT.pgrun-PID.tmp`, and with `--no-guard` any
//! temporary file named at that moment (the run itself is left running
//! then too).

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Published files are created with this mode whatever the umask.
pub const MODE: u32 = 0o644;

/// The folder a path lives in (`.` for a bare file name).
pub fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// `.NAME.pgrun-PID.tmp` next to `target`, or with `salt`,
/// `.NAME.pgrun-PID-SALT.tmp`; shortened (see [`temp_name`]) so that it
/// fits wherever the target's name fits.
fn temp_path(target: &Path, salt: Option<u64>) -> PathBuf {
    let suffix = match salt {
        None => format!(".pgrun-{}.tmp", crate::sys::getpid()),
        Some(salt) => format!(".pgrun-{}-{salt:016x}.tmp", crate::sys::getpid()),
    };
    folder_of(target).join(temp_name(target.file_name().unwrap_or_default(), &suffix))
}

/// `.NAME` + `suffix` next to `target`, the same in every pgrun (no pid,
/// no salt), shortened as [`temp_name`] does: a name all starting runs on
/// one target meet at.
pub fn shared_temp_path(target: &Path, suffix: &str) -> PathBuf {
    folder_of(target).join(temp_name(target.file_name().unwrap_or_default(), suffix))
}

/// Every file system pgrun may meet takes names of this many bytes (most
/// take 255; eCryptfs, the shortest in use, 143).
const SHORT_NAME: usize = 128;

/// `.NAME` + `suffix`, unless that is longer than both `name` itself and
/// [`SHORT_NAME`]: then NAME is cut, and a hash of the whole of it keeps
/// two long names with a common start apart, so that the temporary name is
/// never longer than the longer of the two. A name that fits therefore
/// always has a temporary name that fits too (a 255-byte pid file name
/// included), and the temporary file is still found next to its target.
fn temp_name(name: &OsStr, suffix: &str) -> OsString {
    let bytes = name.as_bytes();
    let limit = bytes.len().max(SHORT_NAME);
    let mut temp = OsString::from(".");
    if 1 + bytes.len() + suffix.len() <= limit {
        temp.push(name);
    } else {
        let hash = format!("~{:016x}", name_hash(bytes));
        let keep = limit.saturating_sub(1 + hash.len() + suffix.len());
        temp.push(OsStr::from_bytes(&bytes[..keep.min(bytes.len())]));
        temp.push(hash);
    }
    temp.push(suffix);
    temp
}

/// A fixed hash of a name (the same in every pgrun, unlike [`random_salt`]).
fn name_hash(bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = std::hash::DefaultHasher::new();
    hasher.write(bytes);
    hasher.finish()
}

/// An unpredictable number, so that nobody can plant a file at every name
/// pgrun might try ([`crate::sys::random_bits`]: no panic if the kernel's
/// random source fails, unlike std's random hash keys).
fn random_salt() -> u64 {
    crate::sys::random_bits()
}

/// How many unpredictable names to try after the plain one is taken.
const SALTED_TRIES: usize = 8;

/// Give something a temporary name for `target` with `make` (which fails
/// with `AlreadyExists` where a name is taken): the plain name first; one
/// already there is the leftover of a crashed pgrun that had our pid, ours
/// to replace; something there that cannot be replaced (in a shared
/// folder, another user can plant anything at a predictable name) makes
/// pgrun try unpredictable names.
fn take_a_name<T>(target: &Path, mut make: impl FnMut(&Path) -> io::Result<T>) -> io::Result<(PathBuf, T)> {
    let mut temp = temp_path(target, None);
    let mut made = match make(&temp) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && fs::remove_file(&temp).is_ok() => make(&temp),
        other => other,
    };
    for _ in 0..SALTED_TRIES {
        match &made {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                temp = temp_path(target, Some(random_salt()));
                made = make(&temp);
            }
            _ => break,
        }
    }
    Ok((temp, made?))
}

/// A file being prepared under a temporary name, or under none yet (see
/// [`TempFile::unnamed`]); its name is removed again if it is dropped
/// before it is placed.
///
/// Every name it takes is recorded in [`crate::exit_hooks`] before it
/// appears, and the record cleared once the name is gone: so pgrun's guard
/// removes whatever name a SIGKILL of pgrun leaves, at any point after the
/// guard is forked.
pub struct TempFile {
    /// Its temporary name, while it has one (`None`: no name yet).
    temp: Option<PathBuf>,
    target: PathBuf,
    file: Option<File>,
}

impl TempFile {
    /// Create the temporary file for `target` under a temporary name (see
    /// [`take_a_name`]), mode 0644 whatever the umask, never through a
    /// symlink, with `reserve` bytes of space already written.
    pub fn create(target: &Path, reserve: usize) -> io::Result<TempFile> {
        let (temp, file) = take_a_name(target, |temp| create_at(temp, target))?;
        TempFile::prepared(target, Some(temp), file, reserve)
    }

    /// As [`TempFile::create`], but with no name at all until it is placed
    /// where the system allows (Linux's `O_TMPFILE`, see
    /// [`crate::sys::tmpfile`]): such a file vanishes with pgrun however
    /// pgrun ends, so it needs no guard. For a file made before pgrun's
    /// guard exists (the report's). Elsewhere, and on a file system
    /// without it, it is named as [`TempFile::create`] names it.
    pub fn unnamed(target: &Path, reserve: usize) -> io::Result<TempFile> {
        // A name too long for the file system is found now, as a named
        // temporary file finds it (its name is never longer: see
        // `temp_name`).
        if let Err(e) = fs::symlink_metadata(target)
            && e.raw_os_error() == Some(libc::ENAMETOOLONG)
        {
            return Err(e);
        }
        match crate::sys::tmpfile::open_unnamed(folder_of(target), MODE)? {
            Some(file) => TempFile::prepared(target, None, file, reserve),
            None => TempFile::create(target, reserve),
        }
    }

    fn prepared(target: &Path, temp: Option<PathBuf>, file: File, reserve: usize) -> io::Result<TempFile> {
        let prepared = TempFile { temp, target: target.to_path_buf(), file: Some(file) };
        let mut file = prepared.file();
        file.set_permissions(fs::Permissions::from_mode(MODE))?;
        // Reserve the space now, so the final write cannot meet a full disk.
        file.write_all(&vec![b' '; reserve])?;
        Ok(prepared)
    }

    /// The open temporary file.
    pub fn file(&self) -> &File {
        self.file.as_ref().expect("a TempFile holds its file until placed")
    }

    /// The file, once in place.
    fn placed(mut self) -> File {
        self.temp = None;
        self.file.take().expect("placed once")
    }

    /// Replace the content with `bytes` (written over the reserved space,
    /// then cut to length).
    pub fn set_content(&self, bytes: &[u8]) -> io::Result<()> {
        let file = self.file();
        file.write_all_at(bytes, 0)?;
        file.set_len(bytes.len() as u64)
    }

    /// The temporary file's name and what it is (device and inode), while
    /// it has a name.
    pub fn identity(&self) -> Option<Identity> {
        use std::os::unix::fs::MetadataExt;
        let meta = self.file().metadata().ok()?;
        Some(Identity { path: self.temp.clone()?, dev: meta.dev(), ino: meta.ino() })
    }

    /// Give the temporary file the name `shared` too, with `link(2)`, and
    /// drop its own name: `Ok(false)` if something is at `shared` already
    /// (then nothing changed). Whatever locks the file holds, it holds from
    /// the moment it appears there.
    pub fn move_to_shared_name(&mut self, shared: &Path) -> io::Result<bool> {
        crate::exit_hooks::temporary_named(shared, Some(dev_ino(self.file())?))?;
        let linked = match &self.temp {
            None => crate::sys::tmpfile::link_unnamed(self.file(), shared),
            Some(temp) => fs::hard_link(temp, shared),
        };
        if let Err(e) = linked {
            crate::exit_hooks::temporary_done(shared);
            return if e.kind() == io::ErrorKind::AlreadyExists { Ok(false) } else { Err(e) };
        }
        if let Some(own) = self.temp.replace(shared.to_path_buf()) {
            remove_name(&own);
            crate::exit_hooks::temporary_done(&own);
        }
        Ok(true)
    }

    /// `rename(2)` into place, replacing whatever is there; the open file is
    /// returned (its locks travel with it). A file with no name yet is
    /// linked into place if nothing is there, else named first.
    pub fn rename_into_place(mut self) -> io::Result<File> {
        if self.temp.is_none() {
            match crate::sys::tmpfile::link_unnamed(self.file(), &self.target) {
                Ok(()) => return Ok(self.placed()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => self.name_it()?,
                Err(e) => return Err(e),
            }
        }
        let temp = self.temp.clone().expect("named by now");
        fs::rename(&temp, &self.target)?;
        crate::exit_hooks::temporary_done(&temp);
        Ok(self.placed())
    }

    /// `link(2)` into place: fails with `AlreadyExists` rather than replace
    /// a file that is there. The temporary name is removed either way.
    pub fn link_into_place(self) -> io::Result<File> {
        match self.temp.clone() {
            None => crate::sys::tmpfile::link_unnamed(self.file(), &self.target)?,
            Some(temp) => {
                fs::hard_link(&temp, &self.target)?;
                remove_name(&temp);
                crate::exit_hooks::temporary_done(&temp);
            }
        }
        Ok(self.placed())
    }

    /// A file with no name yet gets a temporary name (to be renamed over
    /// what is at its target): recorded before it appears.
    fn name_it(&mut self) -> io::Result<()> {
        let id = dev_ino(self.file())?;
        let file = self.file.as_ref().expect("a TempFile holds its file until placed");
        let (temp, ()) = take_a_name(&self.target, |temp| {
            crate::exit_hooks::temporary_named(temp, Some(id))?;
            let linked = crate::sys::tmpfile::link_unnamed(file, temp);
            if linked.is_err() {
                crate::exit_hooks::temporary_done(temp);
            }
            linked
        })?;
        crate::test_hook::pause_at("temp-named", &self.target);
        self.temp = Some(temp);
        Ok(())
    }
}

impl Drop for TempFile {
    /// Remove the temporary name, if it still names this file (a shared
    /// name may have been removed by hand and taken by another pgrun).
    fn drop(&mut self) {
        if let (Some(file), Some(temp)) = (&self.file, &self.temp) {
            if names_file(temp, file) {
                remove_name(temp);
            }
            crate::exit_hooks::temporary_done(temp);
        }
    }
}

/// Create a file at the temporary name `temp` (mode 0644 whatever the
/// umask, never through a symlink), for `target`: the name is recorded
/// before it appears, what the file is once it exists; the record goes if
/// no file was made.
fn create_at(temp: &Path, target: &Path) -> io::Result<File> {
    crate::exit_hooks::temporary_named(temp, None)?;
    // Readable too: `--detach-after`'s hand-off reads a byte of the output
    // file back (as the unnamed file of `sys::tmpfile` is).
    let opened =
        OpenOptions::new().read(true).write(true).create_new(true).mode(MODE).custom_flags(libc::O_NOFOLLOW).open(temp);
    match &opened {
        Ok(file) => {
            if let Ok((dev, ino)) = dev_ino(file) {
                crate::exit_hooks::temporary_identified(temp, dev, ino);
            }
            crate::test_hook::pause_at("temp-named", target);
        }
        Err(_) => crate::exit_hooks::temporary_done(temp),
    }
    opened
}

/// An open file's device and inode.
fn dev_ino(file: &File) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata()?;
    Ok((meta.dev(), meta.ino()))
}

/// Whether `path` names the open `file` (same device and inode).
fn names_file(path: &Path, file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (fs::symlink_metadata(path), file.metadata()) {
        (Ok(at), Ok(ours)) => at.dev() == ours.dev() && at.ino() == ours.ino(),
        _ => false,
    }
}

/// A file by its name and what it is (device and inode).
#[derive(Clone, Debug)]
pub struct Identity {
    pub path: PathBuf,
    pub dev: u64,
    pub ino: u64,
}

/// Remove a temporary name a pgrun left when it died (for its guard, see
/// [`crate::exit_hooks::temporaries_left`]) if it still names the file
/// that pgrun made there: the same device and inode, or, if pgrun died
/// before it learned them, a regular file of this user (a file at a
/// pgrun's own temporary name is that pgrun's to replace, as
/// [`take_a_name`] does), on which no process holds a lock (a starting
/// run's record is locked from before it appears at the starting name).
/// Opened never through a symlink, never blocking on a planted FIFO, and
/// held open with its claim byte write-locked while it is compared and
/// removed, as a starting run removes a dead run's starting name: so the
/// two never both remove it (one might remove the other's new one), and
/// its inode cannot be freed and given to a new file meanwhile. `Ok(false)`
/// if the name is gone or names another file.
pub fn remove_left(named: &crate::exit_hooks::Named) -> io::Result<bool> {
    use crate::sys::lock::{self, Range};
    use std::os::unix::fs::MetadataExt;
    let opened =
        OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(&named.path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        // A symlink, a socket, or a file this user may not write: not one
        // pgrun made.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENXIO | libc::EACCES | libc::EPERM)) => {
            return Ok(false);
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    let ours = match named.id {
        Some((dev, ino)) => meta.dev() == dev && meta.ino() == ino,
        None => meta.uid() == crate::sys::geteuid(),
    };
    if !meta.is_file() || !ours || lock::holder(&file, Range::Record)?.is_some() {
        return Ok(false);
    }
    if !lock::try_write_lock(&file, Range::Claim)? || !names_file(&named.path, &file) {
        return Ok(false);
    }
    match fs::remove_file(&named.path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Remove a temporary name pgrun made; a removal that fails (other than
/// because the name is gone already) is said in one warning line naming
/// it, since nobody else will remove it.
fn remove_name(path: &Path) {
    if let Err(e) = fs::remove_file(path)
        && e.kind() != io::ErrorKind::NotFound
    {
        let what = crate::say::errno_text(&e);
        crate::say::line(format_args!("warning: cannot remove temporary file {}: {what}", path.display()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_fit_wherever_the_name_fits() {
        let salted = format!(".pgrun-{}-{:016x}.tmp", u32::MAX, u64::MAX);
        assert_eq!(temp_name(OsStr::new("job.pid"), ".pgrun-42.tmp"), ".job.pid.pgrun-42.tmp");
        for len in [1, 100, 127, 128, 129, 200, 236, 255] {
            let name = "n".repeat(len);
            for suffix in [".pgrun-4194304.tmp", salted.as_str()] {
                let temp = temp_name(OsStr::new(&name), suffix);
                assert!(temp.len() <= len.max(SHORT_NAME), "{len}: {} bytes", temp.len());
                assert!(temp.as_bytes().ends_with(suffix.as_bytes()));
            }
        }
        let (a, b) = (format!("{}a", "n".repeat(254)), format!("{}b", "n".repeat(254)));
        assert_ne!(temp_name(OsStr::new(&a), ".t"), temp_name(OsStr::new(&b), ".t"), "kept apart by the hash");
    }
}

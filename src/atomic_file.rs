//! Files published whole: written under a temporary name in the target's
//! folder, then renamed (or hard-linked) into place, so a reader sees no
//! file or the whole content, never part of it. The pid file and the report
//! are both published this way.
//!
//! The temporary file is created when a run starts, before the command
//! does, and space is reserved in it then: a read-only or full folder, a
//! name too long for the file system, or no fd left are found before
//! anything runs. The pid file's temporary file also takes a name shared
//! by every run on that pid file ([`shared_temp_path`]), where starting
//! runs meet (see `pidfile`'s claim).

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

/// A file being prepared under a temporary name; removed again if it is
/// dropped before it is placed.
pub struct TempFile {
    temp: PathBuf,
    target: PathBuf,
    file: Option<File>,
}

impl TempFile {
    /// Create the temporary file for `target`, mode 0644 whatever the umask,
    /// never through a symlink, with `reserve` bytes of space already
    /// written. A file already at the plain temporary name is the leftover
    /// of a crashed pgrun that had our pid: ours to replace. Something there
    /// that cannot be replaced (in a shared folder, another user can plant
    /// anything at a predictable name) makes pgrun try unpredictable names.
    pub fn create(target: &Path, reserve: usize) -> io::Result<TempFile> {
        let create = |temp: &Path| {
            OpenOptions::new().write(true).create_new(true).mode(MODE).custom_flags(libc::O_NOFOLLOW).open(temp)
        };
        let mut temp = temp_path(target, None);
        let mut opened = match create(&temp) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && fs::remove_file(&temp).is_ok() => create(&temp),
            other => other,
        };
        for _ in 0..SALTED_TRIES {
            match &opened {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    temp = temp_path(target, Some(random_salt()));
                    opened = create(&temp);
                }
                _ => break,
            }
        }
        let prepared = TempFile { temp, target: target.to_path_buf(), file: Some(opened?) };
        crate::exit_hooks::temporary_created(&prepared.temp);
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

    /// Replace the content with `bytes` (written over the reserved space,
    /// then cut to length).
    pub fn set_content(&self, bytes: &[u8]) -> io::Result<()> {
        let file = self.file();
        file.write_all_at(bytes, 0)?;
        file.set_len(bytes.len() as u64)
    }

    /// The temporary file's current name.
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// The temporary file's name and what it is (device and inode), for
    /// the guard: should pgrun be killed before placing it, the guard
    /// removes it with [`remove_if_still`].
    pub fn identity(&self) -> Option<Identity> {
        use std::os::unix::fs::MetadataExt;
        let meta = self.file().metadata().ok()?;
        Some(Identity { path: self.temp.clone(), dev: meta.dev(), ino: meta.ino() })
    }

    /// Give the temporary file the name `shared` too, with `link(2)`, and
    /// drop its own name: `Ok(false)` if something is at `shared` already
    /// (then nothing changed). Whatever locks the file holds, it holds from
    /// the moment it appears there.
    pub fn move_to_shared_name(&mut self, shared: &Path) -> io::Result<bool> {
        match fs::hard_link(&self.temp, shared) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(e),
        }
        crate::exit_hooks::temporary_created(shared);
        remove_name(&self.temp);
        crate::exit_hooks::temporary_done(&self.temp);
        self.temp = shared.to_path_buf();
        Ok(true)
    }

    /// `rename(2)` into place, replacing whatever is there; the open file is
    /// returned (its locks travel with it).
    pub fn rename_into_place(mut self) -> io::Result<File> {
        fs::rename(&self.temp, &self.target)?;
        crate::exit_hooks::temporary_done(&self.temp);
        Ok(self.file.take().expect("placed once"))
    }

    /// `link(2)` into place: fails with `AlreadyExists` rather than replace
    /// a file that is there. The temporary name is removed either way.
    pub fn link_into_place(mut self) -> io::Result<File> {
        fs::hard_link(&self.temp, &self.target)?;
        remove_name(&self.temp);
        crate::exit_hooks::temporary_done(&self.temp);
        Ok(self.file.take().expect("placed once"))
    }
}

impl Drop for TempFile {
    /// Remove the temporary name, if it still names this file (a shared
    /// name may have been removed by hand and taken by another pgrun).
    fn drop(&mut self) {
        if let Some(file) = &self.file {
            if names_file(&self.temp, file) {
                remove_name(&self.temp);
            }
            crate::exit_hooks::temporary_done(&self.temp);
        }
    }
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

/// Remove `identity`'s name if it still names that very file: opened
/// (never through a symlink, never blocking on a planted FIFO) and held
/// open while it is compared and removed, so its inode cannot be freed and
/// its number given to a new file meanwhile. For the guard, on the
/// temporary file of a pgrun that was killed (its name holds that pgrun's
/// pid, so only a pgrun with the same pid, reused in the instant between
/// the check and the removal, could put another file there). `Ok(false)`
/// if the name is gone or names another file.
pub fn remove_if_still(identity: &Identity) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let file =
        match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(&identity.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ELOOP) => return Ok(false),
            Err(e) => return Err(e),
        };
    let meta = file.metadata()?;
    if meta.dev() != identity.dev || meta.ino() != identity.ino || !names_file(&identity.path, &file) {
        return Ok(false);
    }
    match fs::remove_file(&identity.path) {
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

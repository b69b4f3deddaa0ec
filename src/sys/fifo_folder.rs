//! A folder only its user can enter, holding FIFOs and a lock file: how
//! `--stdin-pipe` reaches its senders on the portable path, which has no
//! `/proc/PID/fd` (Linux reaches the supervising pgrun's own fds instead,
//! see `fd_reach`). Written once for both paths: plain POSIX calls
//! (`mkdir`, `openat`, `mkfifo`, `fchmod`, `unlinkat`, `fstat`, nix's).
//!
//! The supervising pgrun makes the folder with `mkdir(2)`, which fails if
//! the name exists in any form (a folder, a symlink, a file another user
//! put there) and never follows a symlink: a name it did not make is
//! never used. It then opens what it made (`O_DIRECTORY | O_NOFOLLOW`),
//! checks that it is a folder of its own user, sets its mode to exactly
//! 0700 whatever the umask (`fchmod`), and makes its entries, each 0600,
//! opened through that fd. Only that user and root can enter the folder,
//! so only they can open what it holds: the kernel's own check at
//! `open(2)`, made on every sender, is the peer check (a FIFO has no peer
//! to ask).
//!
//! A sender opens the folder the same way and checks before it opens
//! anything inside: a folder (not a symlink), owned by the run's user,
//! of mode 0700 ([`open_folder`]); then opens an entry by name relative
//! to that fd, never through the path again ([`open_fifo`],
//! [`open_file`]), and checks that it is of that user's. So a folder
//! another user put in its place (where the pid file's folder lets others
//! rename entries) is refused, never written to.

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{FchmodatFlags, FileStat, Mode, fchmod, fchmodat, fstat, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, mkfifo, unlinkat};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The folder's mode: only its user.
const FOLDER_MODE: u32 = 0o700;
/// An entry's mode in it.
const ENTRY_MODE: u32 = 0o600;

/// A folder this pgrun made (see the module doc), open.
pub struct FifoFolder {
    path: PathBuf,
    dir: OwnedFd,
    id: (u64, u64),
}

#[allow(clippy::unnecessary_cast)] // st_dev and st_ino are narrower on some targets
fn id_of(st: &FileStat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

fn is(st: &FileStat, kind: libc::mode_t) -> bool {
    st.st_mode & libc::S_IFMT == kind
}

fn refused(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why)
}

/// Open the folder at `path` without following a symlink, close-on-exec.
fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    Ok(openat(nix::fcntl::AT_FDCWD, path, flags, Mode::empty())?)
}

impl FifoFolder {
    /// `mkdir(path)`: a name that exists already (`AlreadyExists`) is
    /// never used; what was made is checked to be this user's folder and
    /// set to mode 0700.
    pub fn create(path: &Path) -> io::Result<FifoFolder> {
        mkdirat(nix::fcntl::AT_FDCWD, path, Mode::from_bits_truncate(FOLDER_MODE as _))?;
        let dir = match open_dir(path) {
            Ok(dir) => dir,
            Err(e) => {
                // What it just made (empty: rmdir takes nothing else).
                let _ = std::fs::remove_dir(path);
                return Err(e);
            }
        };
        let st = fstat(dir.as_fd())?;
        if !is(&st, libc::S_IFDIR) || st.st_uid != super::ids::geteuid() {
            return Err(refused(format!("{} is not the folder pgrun made (replaced meanwhile)", path.display())));
        }
        let folder = FifoFolder { path: path.to_path_buf(), dir, id: id_of(&st) };
        if let Err(e) = fchmod(folder.dir.as_fd(), Mode::from_bits_truncate(FOLDER_MODE as _)) {
            let _ = folder.remove(&[]);
            return Err(e.into());
        }
        Ok(folder)
    }

    /// The folder's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The folder's device and inode.
    pub fn id(&self) -> (u64, u64) {
        self.id
    }

    /// Make the FIFO `name` in the folder (mode 0600) and open it: `(read
    /// end, write end)`, both close-on-exec, the write end non-blocking,
    /// the read end too unless `read_blocks` (a command's stdin). The read
    /// end is opened first (non-blocking, so the open does not wait for a
    /// writer), then the write end (which a reader lets open at once).
    pub fn fifo(&self, name: &str, read_blocks: bool) -> io::Result<(OwnedFd, OwnedFd)> {
        // By path (`mkfifoat` is recent on macOS): a folder put in the
        // path's place meanwhile gets the FIFO, and the opens below,
        // through the folder's fd, then find none.
        mkfifo(&self.path.join(name), Mode::from_bits_truncate(ENTRY_MODE as _))?;
        // Exactly 0600, whatever the umask took away from it (only this
        // user can put a name in the folder: no symlink to follow here).
        fchmodat(self.dir.as_fd(), name, Mode::from_bits_truncate(ENTRY_MODE as _), FchmodatFlags::FollowSymlink)?;
        let read_end = openat(self.dir.as_fd(), name, open_flags(OFlag::O_RDONLY), Mode::empty())?;
        let write_end = openat(self.dir.as_fd(), name, open_flags(OFlag::O_WRONLY), Mode::empty())?;
        if read_blocks {
            super::fd::set_blocking(read_end.as_fd())?;
        }
        Ok((read_end, write_end))
    }

    /// Make the empty regular file `name` in the folder, mode 0600 (the
    /// lock senders take around a block's writes).
    pub fn file(&self, name: &str) -> io::Result<()> {
        let flags = OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(self.dir.as_fd(), name, flags, Mode::from_bits_truncate(ENTRY_MODE as _))?;
        fchmod(fd.as_fd(), Mode::from_bits_truncate(ENTRY_MODE as _))?;
        Ok(())
    }

    /// Remove the FIFO `name` from the folder (gone already: fine).
    pub fn unlink(&self, name: &str) -> io::Result<()> {
        match unlinkat(self.dir.as_fd(), name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Remove the FIFOs `names`, then the folder, if its path still names
    /// it.
    pub fn remove(&self, names: &[&str]) -> io::Result<()> {
        remove(self.dir.as_fd(), &self.path, self.id, names)
    }
}

fn open_flags(access: OFlag) -> OFlag {
    access | OFlag::O_NONBLOCK | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NOCTTY
}

fn remove(dir: BorrowedFd<'_>, path: &Path, id: (u64, u64), names: &[&str]) -> io::Result<()> {
    for name in names {
        match unlinkat(dir, *name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(e.into()),
        }
    }
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if (meta.dev(), meta.ino()) == id => std::fs::remove_dir(path),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The folder at `path` left behind by a pgrun that is gone (for its
/// guard, or its panic hook): remove the FIFOs `names` and the folder, if
/// it is the folder `id` (device and inode), or, when pgrun died before it
/// knew that, a folder of this user's of mode 0700. Returns whether it
/// was removed; a name that is something else is left alone.
pub fn remove_left(path: &Path, id: Option<(u64, u64)>, names: &[&str]) -> io::Result<bool> {
    let dir = match open_dir(path) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        // A symlink (ELOOP; EMLINK on FreeBSD), not a folder, or another
        // user's: not the one pgrun made.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::EMLINK | libc::ENOTDIR | libc::EACCES)) => {
            return Ok(false);
        }
        Err(e) => return Err(e),
    };
    let st = fstat(dir.as_fd())?;
    let ours = match id {
        Some(id) => id_of(&st) == id,
        // As `mkdir` made it, whatever the umask took away: no bits for others.
        None => st.st_uid == super::ids::geteuid() && st.st_mode & 0o077 == 0,
    };
    if !ours {
        return Ok(false);
    }
    remove(dir.as_fd(), path, id_of(&st), names)?;
    Ok(true)
}

/// A sender's look at the folder at `path`: open it (never through a
/// symlink) and check that it is a folder of `owner`'s, of mode 0700
/// (else `PermissionDenied`, saying why). `NotFound` when there is none.
pub fn open_folder(path: &Path, owner: u32) -> io::Result<OwnedFd> {
    let dir = match open_dir(path) {
        Ok(dir) => dir,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::EMLINK | libc::ENOTDIR)) => {
            return Err(refused(format!("{} is not a folder (a symlink, or another kind of file)", path.display())));
        }
        Err(e) => return Err(e),
    };
    let st = fstat(dir.as_fd())?;
    let mode = st.st_mode & 0o7777;
    if !is(&st, libc::S_IFDIR) || st.st_uid != owner || mode != FOLDER_MODE as libc::mode_t {
        return Err(refused(format!(
            "{} is not the run's (owned by uid {}, mode {mode:o}; the run's user is uid {owner}, mode 700)",
            path.display(),
            st.st_uid
        )));
    }
    Ok(dir)
}

/// Open the FIFO `name` in the folder `dir` (opened by [`open_folder`])
/// for writing, non-blocking, close-on-exec: `NotFound` when there is
/// none, `ENXIO` when nobody reads it, `PermissionDenied` when it is not
/// a FIFO of `owner`'s.
pub fn open_fifo(dir: BorrowedFd<'_>, name: &str, owner: u32) -> io::Result<std::fs::File> {
    let fd = openat(dir, name, open_flags(OFlag::O_WRONLY), Mode::empty())?;
    let st = fstat(fd.as_fd())?;
    if !is(&st, libc::S_IFIFO) || st.st_uid != owner {
        return Err(refused(format!("{name} is not a FIFO of uid {owner}'s")));
    }
    Ok(std::fs::File::from(fd))
}

/// Open the regular file `name` in the folder `dir` (opened by
/// [`open_folder`]) for reading and writing, close-on-exec:
/// `PermissionDenied` when it is not a regular file of `owner`'s.
pub fn open_file(dir: BorrowedFd<'_>, name: &str, owner: u32) -> io::Result<std::fs::File> {
    let flags = OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let fd = openat(dir, name, flags, Mode::empty())?;
    let st = fstat(fd.as_fd())?;
    if !is(&st, libc::S_IFREG) || st.st_uid != owner {
        return Err(refused(format!("{name} is not a file of uid {owner}'s")));
    }
    Ok(std::fs::File::from(fd))
}

/// Whether the folder `dir` holds the name `name` (never following it).
pub fn holds(dir: BorrowedFd<'_>, name: &str) -> io::Result<bool> {
    match fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(_) => Ok(true),
        Err(Errno::ENOENT) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

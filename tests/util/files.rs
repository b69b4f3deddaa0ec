//! Files and folders: the scratch folder of a test, a widened pipe, file
//! locks (who holds one, whether one can be taken), reading JSON, opening a
//! folder up to nobody.

use std::fs;
use std::path::{Path, PathBuf};

/// A scratch folder, removed at the end of the test.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        Scratch { dir: tempfile::Builder::new().prefix("pgrun-test-").tempdir().expect("tempdir") }
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
    /// The folder as a string, for shell payloads.
    pub fn sh(&self) -> String {
        self.dir.path().to_str().expect("utf-8 temp path").to_string()
    }
}

/// A pipe for pgrun's stdout, as pgrun leaves it: on Linux pgrun widens a
/// destination pipe to hold 1 MiB (where it may), so a test that fills the
/// pipe widens it first and reads the capacity after (`F_GETPIPE_SZ`).
pub fn widened_pipe() -> (std::io::PipeReader, std::io::PipeWriter) {
    use std::os::fd::AsRawFd;
    let (reader, writer) = std::io::pipe().unwrap();
    // SAFETY: fcntl on a pipe this function made; failure leaves it as it
    // was (pgrun's widening fails alike).
    unsafe { libc::fcntl(reader.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    (reader, writer)
}

/// The pid that holds a lock on `path` (F_GETLK), if any.
pub fn lock_holder(path: &Path) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let file = fs::File::open(path).ok()?;
    // SAFETY: a zeroed flock is valid; F_GETLK fills it in.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: a valid fd and a writable flock.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut lock) };
    assert_eq!(rc, 0, "F_GETLK on {}", path.display());
    (lock.l_type != libc::F_UNLCK as libc::c_short).then_some(lock.l_pid)
}

/// Whether a non-blocking write lock on `path` can be taken right now (the
/// attempt is released at once).
pub fn can_lock(path: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let file = fs::OpenOptions::new().read(true).write(true).open(path).expect("open for locking");
    // SAFETY: as above.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: a valid fd and flock; the lock dies with `file`.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &lock) == 0 }
}

/// Read a JSON file.
pub fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(path).expect("report exists")).expect("valid JSON")
}

/// Make `path` (a folder) usable by nobody: world-readable, or with
/// `writable`, world-writable and sticky like /tmp.
pub fn open_up(path: &Path, writable: bool) {
    use std::os::unix::fs::PermissionsExt;
    let mode = if writable { 0o1777 } else { 0o755 };
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}

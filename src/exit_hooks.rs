//! What must be undone if pgrun ends abruptly, kept at the bottom floor so
//! that the modules that create such things record them here without
//! knowing who undoes them: the group a panic must kill (the run mode
//! records it once the command has started, [`crate::contain`] forgets it
//! once the group is seen empty, since its number may then be reused) and
//! the temporary files pgrun has named and not yet placed or removed
//! (written by [`crate::atomic_file`]; and one folder, the portable
//! path's `--stdin-pipe` folder, made by [`crate::stdin_pipe`]).
//! [`crate::panic_stop`] reads both (a panic); the guard reads the files
//! (a SIGKILL).
//!
//! The files are recorded in memory shared with the guard (made before the
//! guard is forked: [`share_temporaries`]), so that the guard, once pgrun
//! is dead, finds every name pgrun had made and not yet placed or
//! removed, however late pgrun made it: the record comes before the name
//! (see [`temporary_named`]), and is cleared only once the name is gone.
//! pgrun writes it; the guard reads it only once pgrun is gone, so the two
//! never meet. A name longer than the record has room for (4096 bytes,
//! more than any path a system call takes) or a record full (16 names at
//! once; a run has at most four) is refused with an error, never left out
//! silently.
//!
//! They are pgrun's own: a forked guard inherits this module's state, so
//! the group and the files are handed out only to the process that
//! recorded them, except the files to the guard after pgrun's death
//! ([`temporaries_left`]).

use crate::sys::lifetime::SharedPage;
use crate::sys::{self, Pid};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};

/// The group a panic kills; 0 when there is none.
static GROUP: AtomicI32 = AtomicI32::new(0);

/// The process whose temporary files these are: pgrun itself, not a
/// forked guard.
static OWNER: AtomicI32 = AtomicI32::new(0);

/// The record of temporary files (see the module doc), made once.
static TEMPORARY: OnceLock<SharedPage> = OnceLock::new();

/// pgrun's own changes to the record, one at a time.
static WRITING: Mutex<()> = Mutex::new(());

/// Names recorded at once, at most.
const NAMES: usize = 16;
/// A name's slots: its state, device, inode, length, kind, then its bytes.
const STATE: usize = 0;
const DEV: usize = 1;
const INO: usize = 2;
const LEN: usize = 3;
const KIND: usize = 4;
const BYTES: usize = 5;
/// Room for a name's bytes, in slots of 8.
const BYTE_SLOTS: usize = 512;
const NAME_SLOTS: usize = BYTES + BYTE_SLOTS;

/// A name's state: free, recorded (the file not yet known), or recorded
/// with the file's device and inode.
const FREE: u64 = 0;
const NAMED: u64 = 1;
const KNOWN: u64 = 2;

/// A name's kind: a file, or a folder (`--stdin-pipe`'s on the portable
/// path, see [`crate::stdin_pipe`]).
const FILE: u64 = 0;
const FOLDER: u64 = 1;

/// From now on an abrupt end kills group `pgid`.
pub fn watch_group(pgid: Pid) {
    GROUP.store(pgid, Ordering::Relaxed);
}

/// The group is gone: a later panic must not signal its id, which may be
/// reused.
pub fn forget_group() {
    GROUP.store(0, Ordering::Relaxed);
}

/// The group to kill, taken (an abrupt end acts once).
pub fn take_group() -> Option<Pid> {
    Some(GROUP.swap(0, Ordering::Relaxed)).filter(|&pgid| pgid > 1)
}

/// Record this process as the one whose files these are.
pub fn own() {
    OWNER.store(sys::getpid(), Ordering::Relaxed);
}

/// Whether this process is the one that recorded the files (not a forked
/// copy of it).
pub fn is_owner() -> bool {
    OWNER.load(Ordering::Relaxed) == sys::getpid()
}

/// Make the record of temporary files, if it is not made yet: before the
/// guard is forked, so that the guard shares it.
pub fn share_temporaries() -> io::Result<()> {
    record().map(drop)
}

fn record() -> io::Result<&'static SharedPage> {
    if let Some(page) = TEMPORARY.get() {
        return Ok(page);
    }
    let page = SharedPage::with_slots(NAMES * NAME_SLOTS)?;
    Ok(TEMPORARY.get_or_init(|| page))
}

/// A temporary name pgrun made and has not placed or removed yet, as the
/// guard finds it once pgrun is dead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    pub path: PathBuf,
    /// The file's device and inode; `None` if pgrun died between recording
    /// the name and creating the file under it (or learning what it is).
    pub id: Option<(u64, u64)>,
    /// A folder (made with [`temporary_folder_named`]), not a file.
    pub folder: bool,
}

/// `path` is about to become the name of a temporary file: record it
/// first, so that an abrupt end at any point after finds it. `id`: the
/// file's device and inode, when the name is a new link to a file pgrun
/// holds; `None` for a file about to be created under it (see
/// [`temporary_identified`]).
pub fn temporary_named(path: &Path, id: Option<(u64, u64)>) -> io::Result<()> {
    record_name(path, id, FILE)
}

/// `path` is about to become the name of a folder pgrun makes (the
/// portable path's `--stdin-pipe` folder): recorded as
/// [`temporary_named`] records a file, then identified and done the same
/// way.
pub fn temporary_folder_named(path: &Path) -> io::Result<()> {
    record_name(path, None, FOLDER)
}

fn record_name(path: &Path, id: Option<(u64, u64)>, kind: u64) -> io::Result<()> {
    own();
    let page = record()?;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() > BYTE_SLOTS * 8 {
        return Err(io::Error::other("its name is too long to record for the guard"));
    }
    let _writing = lock(&WRITING);
    let free = (0..NAMES).find(|&n| page.slot(n * NAME_SLOTS + STATE).load(Ordering::Acquire) == FREE);
    let Some(n) = free else {
        return Err(io::Error::other(format!("more than {NAMES} temporary files at once")));
    };
    let base = n * NAME_SLOTS;
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        page.slot(base + BYTES + i).store(u64::from_ne_bytes(word), Ordering::Relaxed);
    }
    page.slot(base + LEN).store(bytes.len() as u64, Ordering::Relaxed);
    page.slot(base + KIND).store(kind, Ordering::Relaxed);
    let (dev, ino) = id.unwrap_or_default();
    page.slot(base + DEV).store(dev, Ordering::Relaxed);
    page.slot(base + INO).store(ino, Ordering::Relaxed);
    // Last: until now the slot was free, and its contents nobody's.
    page.slot(base + STATE).store(if id.is_some() { KNOWN } else { NAMED }, Ordering::Release);
    Ok(())
}

/// The file created under the recorded name `path` is `(dev, ino)`.
pub fn temporary_identified(path: &Path, dev: u64, ino: u64) {
    let Some(page) = TEMPORARY.get() else { return };
    let _writing = lock(&WRITING);
    if let Some(base) = find(page, path) {
        page.slot(base + STATE).store(NAMED, Ordering::Release);
        page.slot(base + DEV).store(dev, Ordering::Relaxed);
        page.slot(base + INO).store(ino, Ordering::Relaxed);
        page.slot(base + STATE).store(KNOWN, Ordering::Release);
    }
}

/// The name `path` is gone (placed, removed, or never made): nothing left
/// to undo there.
pub fn temporary_done(path: &Path) {
    let Some(page) = TEMPORARY.get() else { return };
    let _writing = lock(&WRITING);
    if let Some(base) = find(page, path) {
        page.slot(base + STATE).store(FREE, Ordering::Release);
    }
}

/// The slot of the name `path`, if recorded.
fn find(page: &SharedPage, path: &Path) -> Option<usize> {
    (0..NAMES).map(|n| n * NAME_SLOTS).find(|&base| {
        page.slot(base + STATE).load(Ordering::Acquire) != FREE && name_at(page, base).as_deref() == Some(path)
    })
}

/// The name recorded at `base`.
fn name_at(page: &SharedPage, base: usize) -> Option<PathBuf> {
    let len = usize::try_from(page.slot(base + LEN).load(Ordering::Relaxed)).ok()?;
    if len > BYTE_SLOTS * 8 {
        return None;
    }
    let mut bytes = Vec::with_capacity(len.next_multiple_of(8));
    for i in 0..len.div_ceil(8) {
        bytes.extend_from_slice(&page.slot(base + BYTES + i).load(Ordering::Relaxed).to_ne_bytes());
    }
    bytes.truncate(len);
    Some(PathBuf::from(std::ffi::OsString::from(std::ffi::OsStr::from_bytes(&bytes))))
}

/// Every name recorded and not done, with what is known of its file.
fn recorded() -> Vec<Named> {
    let Some(page) = TEMPORARY.get() else { return Vec::new() };
    (0..NAMES)
        .map(|n| n * NAME_SLOTS)
        .filter_map(|base| {
            let state = page.slot(base + STATE).load(Ordering::Acquire);
            let id = (page.slot(base + DEV).load(Ordering::Relaxed), page.slot(base + INO).load(Ordering::Relaxed));
            let path = name_at(page, base)?;
            let folder = page.slot(base + KIND).load(Ordering::Relaxed) == FOLDER;
            match state {
                NAMED => Some(Named { path, id: None, folder }),
                KNOWN => Some(Named { path, id: Some(id), folder }),
                _ => None,
            }
        })
        .collect()
}

/// The temporary names not yet placed, taken (for pgrun's panic hook:
/// pgrun removes them itself); never blocks (an abrupt end may come while
/// the lock is held: then nothing is taken).
pub fn take_temporaries() -> Vec<Named> {
    let _writing = match WRITING.try_lock() {
        Ok(writing) => writing,
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return Vec::new(),
    };
    let taken = recorded();
    if let Some(page) = TEMPORARY.get() {
        for n in 0..NAMES {
            page.slot(n * NAME_SLOTS + STATE).store(FREE, Ordering::Release);
        }
    }
    taken
}

/// The temporary names pgrun had made and not placed or removed when it
/// died: for its guard, which calls this only once pgrun is gone (so
/// nothing writes the record any more).
pub fn temporaries_left() -> Vec<Named> {
    recorded()
}

/// A lock that a panic elsewhere (poisoning) does not take away.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

//! What must be undone if pgrun ends abruptly (a panic), kept at the
//! bottom floor so that the modules that create such things record them
//! here without knowing who undoes them: the group a panic must kill (the
//! run mode records it once the command has started, [`crate::contain`]
//! forgets it once the group is seen empty, since its number may then be
//! reused) and the temporary files not yet placed (written by
//! [`crate::atomic_file`]). [`crate::panic_stop`] reads them.
//!
//! They are pgrun's own: a forked guard inherits this module's state, so
//! the temporary files are handed out only to the process that recorded
//! them.

use crate::sys::{self, Pid};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, Ordering};

/// The group a panic kills; 0 when there is none.
static GROUP: AtomicI32 = AtomicI32::new(0);

/// The process whose temporary files these are: pgrun itself, not a
/// forked guard.
static OWNER: AtomicI32 = AtomicI32::new(0);

/// Temporary files created and not yet placed or removed.
static TEMPORARY: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

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

/// A temporary file was created: an abrupt end removes it.
pub fn temporary_created(path: &Path) {
    own();
    lock(&TEMPORARY).push(path.to_path_buf());
}

/// The temporary file was placed or removed: nothing left to undo.
pub fn temporary_done(path: &Path) {
    lock(&TEMPORARY).retain(|p| p != path);
}

/// The temporary files not yet placed, taken; never blocks (an abrupt end
/// may come while the lock is held: then nothing is taken).
pub fn take_temporaries() -> Vec<PathBuf> {
    match TEMPORARY.try_lock() {
        Ok(mut files) => std::mem::take(&mut *files),
        Err(std::sync::TryLockError::Poisoned(e)) => std::mem::take(&mut *e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => Vec::new(),
    }
}

/// A lock that a panic elsewhere (poisoning) does not take away.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

//! A starting run claims the pid file's path before its command starts:
//! - a live run's file: refused (exit 125);
//! - a stale file: it write-locks the claim byte of that file (never byte 0,
//!   so no reader mistakes it for a live run), then checks that the path
//!   still names the inode it locked and starts over if not (another run
//!   replaced it meanwhile);
//! - no file: nothing there to lock.
//!
//! Either way it then takes the starting name, `.NAME.pgrun-starting.tmp`
//! beside the pid file, the same for every run on that path: its record to
//! be (created, sized, write-locked from byte 0 to the end) is linked there
//! with `link(2)`, which fails if the name is taken, and is locked from the
//! moment it appears. A run that finds the name held waits, as for a
//! claimed stale file: the holder publishes (and the waiter then refuses it
//! as live) or gives up. A name nobody holds was left by a pgrun that died
//! while starting; it is removed under its claim byte, so two runs never
//! both take it for stale. So starters serialise before any command starts,
//! whether or not a file was there, and nothing new ever appears at the pid
//! file's own path: a reader still sees no file or the whole line, and
//! never takes a starting run for a live one. Another user's file at the
//! starting name (or a lock of theirs on it) makes pgrun exit 125 naming
//! it, as another user's lock on the claim byte does.
//!
//! Holding the starting name, the run checks that the path is still as it
//! found it (absent, or its claimed stale file) and starts over if not;
//! no other run of ours can publish meanwhile. It publishes by renaming
//! the starting name over the stale file, or linking it into place (which
//! still fails rather than replace a file some other program put there).
//! Everything that can fail does so before the command starts. A reader
//! that finds a stale file removes it only while holding the same claim
//! byte (see [`super::remove_if_stale`]), so it never removes a file a
//! starting run is about to replace.

use super::record::live_holder;
use super::{check_target, names};
use crate::atomic_file::{self, TempFile};
use crate::backoff::Backoff;
use crate::sys::lock::{self, CLAIM_BYTE, Kind, Range};
use crate::sys::{Pid, geteuid};
use crate::test_hook;
use anyhow::{Context, Result, bail};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The starting name: `.NAME.pgrun-starting.tmp` next to the pid file,
/// the same for every run (see [`atomic_file::shared_temp_path`]).
const STARTING_SUFFIX: &str = ".pgrun-starting.tmp";

/// The longest record: a 32-bit group id in decimal and a newline. The
/// temporary file reserves this much before the command starts.
const RECORD_SPACE: usize = 11;

/// What became of a claim that may have waited for another starting run.
pub enum Claimed {
    Claim(Claim),
    /// A termination signal arrived while waiting (its number).
    Interrupted(i32),
}

/// A pid file claimed for this run but not yet published.
pub struct Claim {
    path: PathBuf,
    /// The stale file, its claim byte write-locked by us, so that no other
    /// run replaces it while we start; `None` if there was no file.
    stale: Option<File>,
    /// The record to be, created and locked already (taken by `publish`).
    temp: Option<TempFile>,
}

impl Drop for Claim {
    /// A run that ends before it publishes (cancelled before the start, a
    /// command not found) removes the stale file it had claimed: nobody
    /// else may replace it meanwhile, and leaving it helps no one.
    fn drop(&mut self) {
        if let Some(stale) = self.stale.take()
            && let Ok(meta) = stale.metadata()
            && names(&self.path, &meta)
        {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// A published pid file, locked for as long as this value lives.
pub struct Published {
    path: PathBuf,
    locked: File,
    dev: u64,
    ino: u64,
}

/// Claim `path` for a run: refuse a live run's file, a symlink, a missing
/// folder, a claim byte or a starting name another user holds; wait (with
/// backoff) while another starting run of ours holds the claim or the
/// starting name, asking `interrupted` for a termination signal between
/// tries. The record's temporary file is prepared on the way (it is what
/// holds the starting name).
pub fn claim(path: &Path, interrupted: &mut dyn FnMut() -> Option<i32>) -> Result<Claimed> {
    check_target(path, "pid file")?;
    let me = geteuid();
    let mut waiting = Waiting { path, backoff: Backoff::default(), said: false, interrupted };
    loop {
        let stale = match claim_stale(path, me, &mut waiting)? {
            Waited::Got(stale) => stale,
            Waited::Interrupted(signal) => return Ok(Claimed::Interrupted(signal)),
        };
        test_hook::pause("claimed");
        let temp = match take_starting_name(path, &mut waiting)? {
            Waited::Got(temp) => temp,
            Waited::Interrupted(signal) => return Ok(Claimed::Interrupted(signal)),
        };
        test_hook::pause("starting");
        // Holding the starting name, no other run of ours can publish here:
        // if the path still is as the claim found it, it stays so.
        let unchanged = match &stale {
            None => match fs::symlink_metadata(path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => true,
                Err(e) => return Err(e).with_context(|| format!("cannot stat pid file {}", path.display())),
                Ok(_) => false,
            },
            Some(file) => file.metadata().is_ok_and(|meta| names(path, &meta)),
        };
        if unchanged {
            return Ok(Claimed::Claim(Claim { path: path.to_path_buf(), stale, temp: Some(temp) }));
        }
        // Another run published, or somebody else changed the path, while
        // we waited for the starting name: start over (and likely refuse).
        // Dropping `temp` gives up the starting name, dropping `stale` the
        // claim byte.
    }
}

/// The outcome of a step that may have to wait for another starting run.
enum Waited<T> {
    Got(T),
    /// A termination signal arrived while waiting (its number).
    Interrupted(i32),
}

/// Waiting for another starting run on the same path: with backoff, saying
/// so once under --verbose, and ending at a termination signal.
struct Waiting<'a> {
    path: &'a Path,
    backoff: Backoff,
    said: bool,
    interrupted: &'a mut dyn FnMut() -> Option<i32>,
}

impl Waiting<'_> {
    /// Pause once; `Some(signal)` if a termination signal arrived instead.
    fn pause(&mut self) -> Option<i32> {
        if let Some(signal) = (self.interrupted)() {
            return Some(signal);
        }
        if !self.said {
            crate::verbose!("another run is starting on pid file {}; waiting", self.path.display());
            self.said = true;
        }
        self.backoff.pause_until(None);
        None
    }
}

/// The existing file at `path`, its claim byte write-locked (`None`: no
/// file): refuse a live run's, wait while another run of ours claims it.
fn claim_stale(path: &Path, me: u32, waiting: &mut Waiting) -> Result<Waited<Option<File>>> {
    loop {
        let file = match open_existing(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Waited::Got(None)),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                bail!("refusing pid file {}: it is a symlink", path.display())
            }
            Err(e) => return Err(e).with_context(|| format!("cannot open pid file {}", path.display())),
        };
        test_hook::pause("claim-opened");
        let meta = file.metadata().with_context(|| format!("cannot stat pid file {}", path.display()))?;
        if let Some(pid) = live_holder(&file, &meta).with_context(|| lock_context(path))? {
            bail!("pid file {} is held by a live run (pgrun pid {})", path.display(), shown_pid(pid))
        }
        if lock::try_write_lock(&file, Range::Claim).with_context(|| lock_context(path))? {
            // Whoever replaced the file between our open and our lock did so
            // holding this same claim: the path no longer names our inode.
            if names(path, &meta) {
                return Ok(Waited::Got(Some(file)));
            }
            continue;
        }
        if let Some(holder) = lock::holder(&file, Range::Claim).with_context(|| lock_context(path))?
            && is_foreign(holder, me)
        {
            bail!(
                "pid file {} is blocked: process {} of another user holds a lock on its byte {CLAIM_BYTE}",
                path.display(),
                shown_pid(holder.pid)
            )
        }
        // Another run of ours is starting on this path: it will publish (and
        // we then refuse) or give up (and we claim). Wait for either.
        if let Some(signal) = waiting.pause() {
            return Ok(Waited::Interrupted(signal));
        }
    }
}

/// The record to be (created, space reserved, write-locked from byte 0 to
/// the end), under the starting name every run on `path` meets at. It
/// appears there locked already; one found there unlocked was left by a
/// pgrun that died while starting, and is removed under its claim byte
/// (so that two runs never both take it for stale and remove each other's).
fn take_starting_name(path: &Path, waiting: &mut Waiting) -> Result<Waited<TempFile>> {
    let starting = atomic_file::shared_temp_path(path, STARTING_SUFFIX);
    let blocked = |why: String| anyhow::anyhow!("pid file {} is blocked: {} {why}", path.display(), starting.display());
    let mut temp =
        TempFile::create(path, RECORD_SPACE).with_context(|| format!("cannot prepare pid file {}", path.display()))?;
    if !lock::try_write_lock(temp.file(), Range::Record)
        .with_context(|| format!("cannot lock the new pid file for {}", path.display()))?
    {
        bail!("cannot lock the new pid file for {}", path.display());
    }
    let me = geteuid();
    loop {
        if temp.move_to_shared_name(&starting).with_context(|| {
            format!("cannot prepare pid file {}: cannot link {}", path.display(), starting.display())
        })? {
            return Ok(Waited::Got(temp));
        }
        let other = match open_existing(&starting) {
            Ok(file) => file,
            // Its starting run published or gave up meanwhile: try again.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(blocked("is a symlink".into())),
            Err(e) => return Err(blocked(format!("cannot be opened: {}", crate::say::errno_text(&e)))),
        };
        let meta = other.metadata().with_context(|| format!("cannot stat {}", starting.display()))?;
        let context = || format!("cannot read the locks of {}", starting.display());
        if lock::try_write_lock(&other, Range::Claim).with_context(context)? {
            if names(&starting, &meta)
                && let Err(e) = fs::remove_file(&starting)
                && e.kind() != io::ErrorKind::NotFound
            {
                return Err(blocked(format!(
                    "is left from a run that died and cannot be removed: {}",
                    crate::say::errno_text(&e)
                )));
            }
            continue;
        }
        if let Some(holder) = lock::holder(&other, Range::Claim).with_context(context)?
            && is_foreign(holder, me)
        {
            return Err(blocked(format!("is locked by process {} of another user", shown_pid(holder.pid))));
        }
        // Another run of ours is starting: it publishes (we then refuse) or
        // gives up (we go on). Wait for either.
        if let Some(signal) = waiting.pause() {
            return Ok(Waited::Interrupted(signal));
        }
    }
}

fn lock_context(path: &Path) -> String {
    format!("cannot read the locks of pid file {}", path.display())
}

fn shown_pid(pid: Pid) -> String {
    if pid > 0 { pid.to_string() } else { "unknown: another PID namespace".to_string() }
}

/// A lock on the claim byte that no starting run of ours could hold: a read
/// lock (starters and cancellers take write locks), or one held by a
/// process of another user.
fn is_foreign(holder: lock::Holder, me: u32) -> bool {
    holder.kind == Kind::Read || crate::sys::proc::effective_uid(holder.pid).is_some_and(|uid| uid != me)
}

/// Open an existing pid file read-write without following a symlink.
fn open_existing(path: &Path) -> io::Result<File> {
    let file =
        OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}

impl Claim {
    /// The record to be (device and inode): the file that becomes the pid
    /// file once published.
    pub fn record_id(&self) -> Option<(u64, u64)> {
        let meta = self.temp.as_ref()?.file().metadata().ok()?;
        Some((meta.dev(), meta.ino()))
    }

    /// Publish `pgid` atomically; the new file is locked already.
    pub fn publish(mut self, pgid: Pid) -> Result<Published> {
        let path = self.path.clone();
        let temp = self.temp.take().expect("published once");
        temp.set_content(format!("{pgid}\n").as_bytes())
            .with_context(|| format!("cannot write pid file {}", path.display()))?;
        let stale = self.stale.take();
        // Replace the stale file only if the path still names it: holding its
        // claim keeps every starting run and canceller away, but not
        // somebody's `rm` (after which another run may have published).
        let replace = stale.as_ref().and_then(|f| f.metadata().ok()).is_some_and(|meta| names(&path, &meta));
        let file = if replace {
            // The claim ends with `stale`, once the new file is in place.
            let placed = temp.rename_into_place();
            drop(stale);
            placed.with_context(|| format!("cannot publish pid file {}", path.display()))?
        } else {
            match temp.link_into_place() {
                Ok(file) => file,
                // Not another run of ours: they wait for the starting name.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    bail!("pid file {} was created by another program while this run started", path.display())
                }
                Err(e) => return Err(e).with_context(|| format!("cannot publish pid file {}", path.display())),
            }
        };
        test_hook::pause("placed");
        let meta = file.metadata().context("cannot stat the pid file")?;
        Ok(Published { path, locked: file, dev: meta.dev(), ino: meta.ino() })
    }
}

impl Published {
    /// The published file's device and inode.
    pub fn id(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }

    /// The run is over: it takes no more cancel requests (see
    /// [`super::hold_ending_note`]). Said by letting go of the lock's byte
    /// 1 alone (byte 0 stays locked: the run is published until
    /// [`Published::remove`]), so that a `cancel` that made its request and
    /// then finds this run over knows that no run takes it (see
    /// [`super::Record::run_over`]). Called before the marker is handled.
    pub fn mark_over(&self) -> io::Result<()> {
        lock::unlock(&self.locked, Range::Open)
    }

    /// Remove the pid file if it is still ours; the lock goes with it. One
    /// that cannot be removed is reported (one warning line): with its lock
    /// gone it is stale, and the next run replaces it.
    pub fn remove(self) {
        if let Ok(meta) = fs::symlink_metadata(&self.path)
            && meta.dev() == self.dev
            && meta.ino() == self.ino
            && let Err(e) = fs::remove_file(&self.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            crate::say::line(format_args!(
                "warning: cannot remove pid file {}: {}",
                self.path.display(),
                crate::say::errno_text(&e)
            ));
        }
    }
}

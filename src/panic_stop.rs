//! What a bug in pgrun does: a panic must not leave the command's group
//! running unsupervised, nor end pgrun with a signal.
//!
//! The release build aborts on panic (`panic = "abort"`), so nothing can be
//! caught or unwound. Instead a panic hook, which runs before the abort (and
//! before any unwinding in a debug build), prints one `pgrun: ` line, sends
//! SIGKILL to the group the run mode recorded here, reaps until the group is
//! gone (bounded: a panic path must end), and `_exit`s with 125.

use crate::backoff::Backoff;
use crate::signame::Signal;
use crate::sys::process::{self, Reaped};
use crate::sys::{self, Pid};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The group the run is supervising; 0 when there is none.
static GROUP: AtomicI32 = AtomicI32::new(0);

/// How long the hook waits for the killed group to be gone.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Install the hook; call once, first thing.
pub fn install() {
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_string());
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        let what = what.replace('\n', " ");
        let pgid = GROUP.swap(0, Ordering::Relaxed);
        if pgid > 1 {
            crate::say::line(format_args!("internal error{at}: {what}; killing process group {pgid}"));
            kill_and_reap(pgid);
        } else {
            crate::say::line(format_args!("internal error{at}: {what}"));
        }
        sys::exit_now(crate::USAGE_ERROR);
    }));
}

/// From now on a panic kills group `pgid`.
pub fn watch(pgid: Pid) {
    GROUP.store(pgid, Ordering::Relaxed);
}

/// The group is gone: a later panic must not signal its id, which may be
/// reused.
pub fn unwatch() {
    GROUP.store(0, Ordering::Relaxed);
}

fn kill_and_reap(pgid: Pid) {
    let until = Instant::now().checked_add(KILL_WAIT);
    let mut backoff = Backoff::default();
    loop {
        let _ = process::signal_group(pgid, Signal::KILL);
        while let Ok(Reaped::Child(..) | Reaped::Stopped(..)) = process::reap_one() {}
        if !process::group_exists(pgid) || !backoff.pause_until(until) {
            return;
        }
    }
}

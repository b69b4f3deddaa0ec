//! The exec-status page: how the command's process tells pgrun, between
//! its fork and its exec, which step failed (and its errno), that its
//! hand-over to the guard failed, and that it reached its exec.
//!
//! A page of memory shared with the child (`mmap(MAP_SHARED |
//! MAP_ANONYMOUS)`), made and written by pgrun before the fork, so that it
//! is there, charged to pgrun, before the child exists. What the child says
//! is a store into it: nothing the child can run out of (a cgroup's memory
//! limit it joined, a fault injected into a syscall) can make it fail. A
//! write to a pipe, which the child used before, needs a page for the
//! pipe's buffer, which a `--memory-max` leaf refuses just as it refuses
//! the exec that failed: the child could say nothing, and its silence read
//! as "the exec worked". The close-on-exec pipe stays, but only to wake
//! pgrun: its end says "the exec is done or the child is gone", and this
//! page says which.
//!
//! The child stores "about to exec" last before its exec. A child gone
//! with neither that nor a failed step stored ended before its exec
//! (killed, or a fault on its own pages): pgrun's failure to create the
//! process. One gone after "about to exec" with no failure stored exec'd,
//! or was killed inside its exec; either way the process was the command's
//! to run, and its status is the command's.

use std::io;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

/// What the child stores, zero until it does.
#[repr(C)]
struct Fields {
    /// The errno of a failed hand-over to the guard (the child goes on).
    hand_over: AtomicI32,
    /// The byte of the step that failed (the child then exits).
    failed: AtomicU32,
    /// That step's errno.
    errno: AtomicI32,
    /// 1 once the child is about to exec.
    exec: AtomicU32,
}

/// The page's length: one page on every system pgrun runs on (mmap rounds
/// a shorter length up to the system's page).
const LEN: usize = 4096;

/// The exec-status page of one spawn, unmapped when dropped (after the
/// child has exec'd or exited: its own copy of the mapping goes with that).
pub(super) struct StatusPage {
    fields: *mut Fields,
}

/// What the child said, read by pgrun once the child has exec'd or is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Said {
    pub hand_over_failed: Option<i32>,
    /// The step byte and errno of the step that failed.
    pub failed: Option<(u8, i32)>,
    pub reached_exec: bool,
}

impl StatusPage {
    /// Map the page and write to it, so that it is resident before the fork.
    pub fn new() -> io::Result<StatusPage> {
        // SAFETY: a fresh anonymous mapping, no address hint, no fd.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let page = StatusPage { fields: ptr.cast() };
        page.fields().exec.store(0, Ordering::Relaxed);
        Ok(page)
    }

    fn fields(&self) -> &Fields {
        // SAFETY: the mapping is LEN bytes, page-aligned and zeroed at first,
        // so its start is a valid `Fields` (atomics of plain integers, which
        // are lock-free and work across processes sharing the page) for as
        // long as the mapping lives, which is as long as `self`.
        unsafe { &*self.fields }
    }

    /// The child, first thing: a store, so that the page is mapped in the
    /// child (a fork does not copy a shared mapping's page tables) before
    /// the child joins a cgroup whose memory limit could refuse the page
    /// table that needs. Async-signal-safe: a store.
    pub fn child_starts(&self) {
        self.fields().exec.store(0, Ordering::Relaxed);
    }

    /// The child could not hand itself to the guard (and goes on). Only
    /// where there is a hand-over (pidfds).
    #[cfg_attr(not(linux_strengths), allow(dead_code))]
    pub fn hand_over_failed(&self, errno: i32) {
        self.fields().hand_over.store(errno, Ordering::Release);
    }

    /// The child's step `step` failed with `errno` (the child then exits).
    pub fn failed(&self, step: u8, errno: i32) {
        let fields = self.fields();
        fields.errno.store(errno, Ordering::Relaxed);
        fields.failed.store(step.into(), Ordering::Release);
    }

    /// The child is about to exec.
    pub fn about_to_exec(&self) {
        self.fields().exec.store(1, Ordering::Release);
    }

    /// What the child said. Only once the exec-status pipe is at its end
    /// (the child exec'd or is gone: it says nothing more).
    pub fn said(&self) -> Said {
        let fields = self.fields();
        let failed = fields.failed.load(Ordering::Acquire);
        let hand_over = fields.hand_over.load(Ordering::Acquire);
        Said {
            hand_over_failed: (hand_over != 0).then_some(hand_over),
            // A step byte is below 256; anything else was never stored.
            failed: u8::try_from(failed)
                .ok()
                .filter(|&step| step != 0)
                .map(|step| (step, fields.errno.load(Ordering::Relaxed))),
            reached_exec: fields.exec.load(Ordering::Acquire) == 1,
        }
    }
}

impl Drop for StatusPage {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.fields.cast(), LEN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_page_says_nothing() {
        let page = StatusPage::new().unwrap();
        assert_eq!(page.said(), Said { hand_over_failed: None, failed: None, reached_exec: false });
    }

    /// The page is shared: what a forked child stores, pgrun reads.
    #[test]
    fn what_a_forked_child_stores_is_said() {
        let page = StatusPage::new().unwrap();
        // SAFETY: the child makes only stores into the page and `_exit`
        // (async-signal-safe, though the test harness has threads).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            page.child_starts();
            page.hand_over_failed(libc::EMFILE);
            page.about_to_exec();
            page.failed(7, libc::ENOMEM);
            // SAFETY: ends the forked child.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: our own child; `status` is writable.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert_eq!(
            page.said(),
            Said { hand_over_failed: Some(libc::EMFILE), failed: Some((7, libc::ENOMEM)), reached_exec: true }
        );
    }
}

//! A child that shares pgrun's memory until its exec, on Linux:
//! `clone(CLONE_VM | CLONE_VFORK)` on a stack of its own, what the C
//! library's `posix_spawn` does. No page tables are copied and no page of
//! pgrun's is written copy-on-write on either side, and pgrun waits (vfork)
//! until the child has exec'd or exited. The spawn takes it where the
//! command's peak resident set is not reported (see [`crate::sys::spawn`]
//! for why a reported peak needs a fork). Its twin in `posix/` has none.

use std::io;

/// Run `entry(arg)` in a child made by `clone(CLONE_VM | CLONE_VFORK |
/// SIGCHLD)` on a fresh stack of `stack_len` bytes (plus a guard page);
/// returns the child's pid once it has exec'd or exited.
///
/// # Safety
/// `entry` runs in a process sharing pgrun's memory while pgrun is
/// suspended: it may make only raw async-signal-safe calls, write no
/// memory of pgrun's but `errno` and memory meant to be shared, never
/// return into pgrun's frames (it execs or `_exit`s), and `arg` must stay
/// valid until this function returns. pgrun installs no signal handler
/// that could run on the child's stack.
pub unsafe fn clone_vfork(
    entry: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
    stack_len: usize,
) -> io::Result<libc::pid_t> {
    let stack = ChildStack::new(stack_len)?;
    // SAFETY: the child runs `entry` on `stack` (its top, page-aligned),
    // under the caller's contract above. CLONE_VFORK suspends pgrun until
    // the child has exec'd or exited, so `stack` is unmapped only after.
    let pid = unsafe { libc::clone(entry, stack.top(), libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD, arg) };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid)
}

/// The stack of a [`clone_vfork`] child: an anonymous mapping with an
/// inaccessible page at its low end (an overflow faults instead of writing
/// over whatever lies below), unmapped when dropped.
struct ChildStack {
    base: *mut libc::c_void,
    len: usize,
}

impl ChildStack {
    const PAGE: usize = 4096;

    fn new(stack_len: usize) -> io::Result<ChildStack> {
        let len = stack_len.next_multiple_of(Self::PAGE) + Self::PAGE;
        // SAFETY: a fresh anonymous mapping, no address hint, no fd.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = ChildStack { base, len };
        // SAFETY: the lowest page of the mapping just made.
        if unsafe { libc::mprotect(base, Self::PAGE, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The stack's top (it grows down): one past the mapping's end, which
    /// is page-aligned.
    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of the mapping.
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once, after the child
        // stopped using it (vfork).
        unsafe { libc::munmap(self.base, self.len) };
    }
}

//! A child that shares pgrun's memory until its exec: none on the
//! portable path (`vfork` cannot be called soundly from Rust, and
//! `clone` is Linux's). The spawn forks. Linux's: `linux/shared_spawn.rs`.

use std::io;

/// None here: says `Unsupported`, and the spawn forks.
///
/// # Safety
/// None needed (nothing runs); the same signature as Linux's.
pub unsafe fn clone_vfork(
    _entry: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    _arg: *mut libc::c_void,
    _stack_len: usize,
) -> io::Result<libc::pid_t> {
    Err(io::ErrorKind::Unsupported.into())
}

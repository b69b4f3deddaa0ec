//! The portable path: the platform [`crate::sys`] compiles on every system
//! but Linux, and on Linux with `posix-fallback` (so that the suite tests
//! it). Each file here has a twin of the same name and items in `linux/`;
//! what each does without is in its own doc.

pub mod fd_reach;
pub mod guard_channel;
pub mod input_wait;
pub mod lifetime;
pub mod pidfd;
pub mod pipe;
pub mod poll;
pub mod proc;
pub mod process;
pub mod random;
pub mod shared_spawn;
pub mod socket;
pub mod tmpfile;
pub mod wakeup;
pub mod watch;

/// Whether pgrun can follow what leaves the command's group here: no (no
/// child subreaper, no `/proc` walk, no pidfds). `--contain tree` and
/// `cgroup` need it; the group is followed by its number.
pub const CAN_CONTAIN: bool = false;

//! Linux's strengths: the platform [`crate::sys`] compiles where
//! `cfg(linux_strengths)` is set (Linux, unless built with
//! `posix-fallback`). Each file here has a twin of the same name and items
//! in `posix/`; what each adds is in its own doc.

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

/// Whether pgrun can follow what leaves the command's group here: be a
/// child subreaper, list its descendants in `/proc` and hold them by
/// pidfds. `--contain tree` and `cgroup` need it.
pub const CAN_CONTAIN: bool = true;

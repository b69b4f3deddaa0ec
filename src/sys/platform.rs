//! The platform this build takes, under one name: `linux/` where
//! `cfg(linux_strengths)` is set, else `posix/` (see [`super`]). The
//! modules of `sys` reach it as `platform::NAME`, whichever it is.

#[cfg(linux_strengths)]
pub use super::linux::{
    CAN_CONTAIN, fd_reach, guard_channel, input_wait, lifetime, pidfd, pipe, poll, proc, process, random, shared_spawn,
    socket, tmpfile, wakeup, watch,
};
#[cfg(not(linux_strengths))]
pub use super::posix::{
    CAN_CONTAIN, fd_reach, guard_channel, input_wait, lifetime, pidfd, pipe, poll, proc, process, random, shared_spawn,
    socket, tmpfile, wakeup, watch,
};

//! The one place where pgrun talks to the kernel.
//!
//! Every `libc`/`nix` call pgrun makes lives below this module, behind a
//! small safe function with the syscall's name in its doc line; the rest of
//! the crate never sees a raw pointer or an `unsafe` block. Submodules group
//! the calls by what they serve: [`spawn`] (creating the command's process
//! and its steps before exec), [`process`] (signalling groups, reaping),
//! [`signals`] (the platform's signal numbers and names), [`sigmask`]
//! (signal sets and masks), [`wakeup`] (turning signals into a
//! pollable fd), `poll` (waiting on fds), [`lock`] (fcntl record locks),
//! [`terminal`] (the foreground process group of the controlling
//! terminal), [`pipe`] (the pipes and reads and writes of `--max-output`),
//! `fd` (one fd's kind and flags, the standard fds kept open), [`proc`]
//! (reading `/proc`), [`proc_io`] (what a process holds: its sockets,
//! its stdin, the TCP listeners it sees), [`input_wait`] (whether it sits
//! in a call that waits for its stdin: `/proc/PID/syscall` on Linux),
//! [`cgroup`] (the cgroup v2 files of `--contain
//! cgroup`), [`pidfd`] (a hold on one process that pid reuse cannot
//! redirect), [`lifetime`] (the guard's fork, the page it shares with
//! pgrun, the parent-death signal, `_exit`), [`guard_channel`] (the socket
//! that ties the guard to pgrun and carries the pidfds handed to it),
//! [`watch`] (changes to files as events: `inotify` on Linux, none on the
//! portable path), [`session`] (what `--detach` needs: a new session, the
//! standard fds pointed elsewhere), [`rlimit`] (resource limits for
//! `--rlimit`), [`socket`] (a Unix socket connected within a deadline: the
//! D-Bus client's), [`fifo_folder`] (a folder only its user can enter,
//! holding FIFOs: how the portable path's `--stdin-pipe` reaches its
//! senders), `ids` (the caller's pid, group and uid), `random` (bits
//! for names nobody else picks) and [`tmpfile`] (a file with no name until
//! it is placed: `O_TMPFILE` on Linux).
//!
//! The calls go through nix's safe wrappers wherever the nix features this
//! crate enables (`fs`, `inotify`, `process`, `signal`, `user`) express
//! them. Raw libc remains where they do not: any signal number (nix's `Signal` names no
//! real-time signal, and its `waitpid` fails *after* reaping a child one of
//! them ended), calls on raw fds the facade takes as plain integers (an fd
//! that may be closed is no `BorrowedFd`), the forked child before exec
//! (nix's `execvp` allocates), pidfds, glibc's reserved signals; calls nix
//! 0.32 does not wrap (`_exit`, `getrandom`, `ioctl(FIONREAD)`); and calls
//! of nix features left out (`poll`; the `socket` calls of the guard's tie
//! and `send`; `pread`; `mmap`). Each module's doc names its own.
//!
//! # The facade, and the platform behind it
//!
//! This file is the table of contents: the modules, and the names the rest
//! of the crate uses (`sys::getpid`, `sys::poll`, `sys::pidfd`...), one
//! signature each whatever the build. Behind it pgrun takes one of two
//! paths, chosen here and only here: `cfg(linux_strengths)` (set by
//! `build.rs` on Linux, unless the `posix-fallback` feature asks for the
//! portable path, so that the suite tests that path on Linux too) compiles
//! the folder `linux/`, else `posix/`, and `platform.rs` gives the one
//! compiled the name `platform`.
//!
//! `linux/` holds Linux's strengths: the signalfd, pidfds and the guard's
//! hand-over, the child subreaper, `ppoll`, `splice` and `tee`, `/proc`'s
//! answers, `close_range`, `getrandom`, the parent-death signal, `inotify`.
//! `posix/` holds the portable path: the self-pipe, `poll`, and no pidfd,
//! no subreaper, no `/proc`, no file-change events. The two folders hold files of the same names,
//! and each file the same items with the same signatures: a function
//! exists on a path or it does not, and it never has two bodies chosen by
//! `cfg`. What a path lacks it says in its answer (`None`, `false`,
//! `Unsupported`, [`watch::Changes::fd`]'s `None`, or [`pidfd::Pidfd`], a
//! type no value of which can exist on the portable path), so that the code above reads as one program. The
//! few items only Linux's own code calls (the hand-over between fork and
//! exec, a pidfd received) exist in `linux/` alone.
//!
//! The modules beside the two folders are written once, for both paths.
//! They reach the platform as `platform::NAME::item`: `pipe` names the
//! platform's `splice_nowait` beside its own calls, `proc` asks
//! `platform::proc::ASKS_PROC` whether to read a census. A module that is
//! the platform's whole (`pidfd`, `wakeup`, `guard_channel`, `watch`) is named
//! `sys::NAME` below. Nothing here imports this file (they import the file
//! that defines what they use), so the facade stands on top of `sys`. No
//! user of `sys` learns which path was taken, except from the facts handed
//! to it as constants ([`CAN_CONTAIN`], [`pidfd::Pidfd::SUPPORTED`],
//! [`guard_channel::HANDS_OVER`], [`process::RUN_PGRUN_IS_SUBREAPER`]).
//!
//! The target (the kernel and C library pgrun is built for, whichever path
//! it takes) is the other switch, and a matter of a few facts, stated
//! where they belong with `cfg(target_os)` on the item, as the nix crate
//! writes them: the signal table ([`signals`]), the C library's reserved
//! signals and resource type ([`sigmask`], [`rlimit`]), the guard's name
//! ([`lifetime::set_name`], `prctl` on Linux). The portable path on Linux
//! keeps them: they are Linux's, not strengths to do without.
//!
//! A port to another system starts at `posix/`, which builds for it as it
//! is (CI type-checks macOS and FreeBSD) and passes the suite on Linux
//! (`--features posix-fallback`): the port checks the target's facts above,
//! then, where the system has better means than POSIX (macOS's `kqueue`
//! for a process's exit, say), gives them a folder of its own beside
//! `linux/` and `posix/`, with the same files and signatures, chosen by
//! `cfg` on the lines below and in `platform.rs`.

pub mod cgroup;
mod fd;
pub mod fifo_folder;
mod ids;
pub mod lifetime;
pub mod lock;
pub mod pipe;
mod poll;
pub mod proc;
pub mod proc_io;
pub mod process;
mod random;
pub mod rlimit;
pub mod session;
pub mod sigmask;
pub mod signals;
pub mod socket;
pub mod spawn;
pub mod terminal;

// The platform: one of the two folders is compiled, and `platform` names it.
#[cfg(linux_strengths)]
mod linux;
#[cfg(not(linux_strengths))]
mod posix;

mod platform;

pub use fd::reserve_standard_fds;
pub use ids::{Pid, geteuid, getpgid, getpgrp, getpid, getppid};
pub use lifetime::exit_now;
pub use platform::{CAN_CONTAIN, fd_reach, guard_channel, input_wait, pidfd, tmpfile, wakeup, watch};
pub use poll::{POLL_MAX, PollFd, poll, wait_readable, writable_now};
pub use random::random_bits;
pub use signals::{Signal, max_signal, realtime_range};

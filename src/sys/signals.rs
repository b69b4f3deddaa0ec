//! The platform's signal numbers: which exist, what they are called, and
//! the real-time range. These differ between systems, so they are here, in
//! `sys`; parsing SIG arguments and naming signals is
//! [`crate::signame`]'s, on top of these tables.

/// A signal number that is known to be valid on this platform (named and
/// parsed in [`crate::signame`]). The functions here that send signals take
/// this, never a bare integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Signal(pub i32);

impl Signal {
    /// Signal 0: no signal is sent, only whether the target exists (and may
    /// be signalled) is checked.
    pub const PROBE: Signal = Signal(0);
}

/// The signals every POSIX system has, each under the name a signal is
/// given in messages and reports (without `SIG`); this system's own come
/// after them in [`names`].
const POSIX_NAMES: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("CHLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("IO", libc::SIGIO),
    ("SYS", libc::SIGSYS),
];

/// Other names accepted for a signal every POSIX system has, never used
/// to name one.
const POSIX_ALIASES: &[(&str, i32)] = &[("IOT", libc::SIGIOT)];

/// What this system adds to POSIX's signals, one table per system: its
/// own signals, their aliases, and its real-time range `(RTMIN, RTMAX)`.
#[cfg(any(target_os = "linux", target_os = "android"))]
mod this_system {
    pub const NAMES: &[(&str, i32)] = &[("STKFLT", libc::SIGSTKFLT), ("PWR", libc::SIGPWR)];
    pub const ALIASES: &[(&str, i32)] = &[("POLL", libc::SIGPOLL)];
    pub fn realtime_range() -> Option<(i32, i32)> {
        Some((libc::SIGRTMIN(), libc::SIGRTMAX()))
    }
}

/// FreeBSD's (its range is signal.h's; the libc crate does not export it).
#[cfg(target_os = "freebsd")]
mod this_system {
    pub const NAMES: &[(&str, i32)] = &[("EMT", libc::SIGEMT), ("INFO", libc::SIGINFO)];
    pub const ALIASES: &[(&str, i32)] = &[];
    pub fn realtime_range() -> Option<(i32, i32)> {
        Some((65, 126))
    }
}

/// NetBSD's (its range is signal.h's; the libc crate does not export it).
#[cfg(target_os = "netbsd")]
mod this_system {
    pub const NAMES: &[(&str, i32)] = &[("EMT", libc::SIGEMT), ("INFO", libc::SIGINFO)];
    pub const ALIASES: &[(&str, i32)] = &[];
    pub fn realtime_range() -> Option<(i32, i32)> {
        Some((33, 63))
    }
}

/// macOS's and OpenBSD's: no real-time signals.
#[cfg(any(target_os = "macos", target_os = "openbsd"))]
mod this_system {
    pub const NAMES: &[(&str, i32)] = &[("EMT", libc::SIGEMT), ("INFO", libc::SIGINFO)];
    pub const ALIASES: &[(&str, i32)] = &[];
    pub fn realtime_range() -> Option<(i32, i32)> {
        None
    }
}

/// Any other system: POSIX's signals alone.
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "macos",
    target_os = "openbsd"
)))]
mod this_system {
    pub const NAMES: &[(&str, i32)] = &[];
    pub const ALIASES: &[(&str, i32)] = &[];
    pub fn realtime_range() -> Option<(i32, i32)> {
        None
    }
}

/// Every signal of this system with its name: POSIX's, then its own.
pub fn names() -> impl Iterator<Item = &'static (&'static str, i32)> + Clone {
    POSIX_NAMES.iter().chain(this_system::NAMES)
}

/// Other names accepted for a signal of [`names`], never used to name one.
pub fn aliases() -> impl Iterator<Item = &'static (&'static str, i32)> + Clone {
    POSIX_ALIASES.iter().chain(this_system::ALIASES)
}

/// The real-time range `(RTMIN, RTMAX)`, if the platform has one.
pub fn realtime_range() -> Option<(i32, i32)> {
    this_system::realtime_range()
}

/// The largest valid signal number.
pub fn max_signal() -> i32 {
    realtime_range().map(|(_, max)| max).unwrap_or(libc::SIGUSR2.max(libc::SIGSYS).max(31))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn realtime_range_is_the_c_librarys() {
        assert_eq!(realtime_range(), Some((libc::SIGRTMIN(), libc::SIGRTMAX())));
    }

    #[test]
    fn every_name_is_a_valid_signal_and_named_once() {
        for (name, n) in names().chain(aliases()) {
            assert!((1..=max_signal()).contains(n), "{name} is {n}");
        }
        for (i, (name, n)) in names().enumerate() {
            assert!(!names().take(i).any(|(_, m)| m == n), "{name} names {n} twice");
        }
    }
}

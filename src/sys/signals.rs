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

/// The classic signals every POSIX system has, plus this platform's
/// extras, each under the name a signal is given in messages and reports
/// (without `SIG`).
pub const NAMES: &[(&str, i32)] = &[
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
    #[cfg(any(target_os = "linux", target_os = "android"))]
    ("STKFLT", libc::SIGSTKFLT),
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
    #[cfg(any(target_os = "linux", target_os = "android"))]
    ("PWR", libc::SIGPWR),
    ("SYS", libc::SIGSYS),
    #[cfg(any(target_os = "macos", target_os = "freebsd", target_os = "netbsd", target_os = "openbsd"))]
    ("EMT", libc::SIGEMT),
    #[cfg(any(target_os = "macos", target_os = "freebsd", target_os = "netbsd", target_os = "openbsd"))]
    ("INFO", libc::SIGINFO),
];

/// Other names accepted for a signal of [`NAMES`], never used to name one.
pub const ALIASES: &[(&str, i32)] = &[
    ("IOT", libc::SIGIOT),
    #[cfg(any(target_os = "linux", target_os = "android"))]
    ("POLL", libc::SIGPOLL),
];

/// The real-time range `(RTMIN, RTMAX)`, if the platform has one.
pub fn realtime_range() -> Option<(i32, i32)> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    return Some((libc::SIGRTMIN(), libc::SIGRTMAX()));
    // The BSDs' signal.h; the libc crate does not export these.
    #[cfg(target_os = "freebsd")]
    return Some((65, 126));
    #[cfg(target_os = "netbsd")]
    return Some((33, 63));
    #[allow(unreachable_code)]
    None
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
        for (name, n) in NAMES.iter().chain(ALIASES) {
            assert!((1..=max_signal()).contains(n), "{name} is {n}");
        }
        for (i, (name, n)) in NAMES.iter().enumerate() {
            assert!(!NAMES[..i].iter().any(|(_, m)| m == n), "{name} names {n} twice");
        }
    }
}

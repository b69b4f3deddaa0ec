//! Which faults to inject: the syscalls a recorded run made (per process,
//! from `strace -f -o`), the plausible errnos of each syscall family, and
//! the sample of (errno, call number) the default sweep takes.

use std::collections::BTreeMap;

/// The errnos a syscall can plausibly fail with, by family. A syscall not
/// listed gets `OTHER`.
pub fn errnos(syscall: &str) -> &'static [&'static str] {
    match syscall {
        "read" | "readv" | "pread64" | "preadv" | "preadv2" => &["EINTR", "EIO", "EAGAIN", "EBADF"],
        "write" | "writev" | "pwrite64" | "pwritev" | "sendfile" | "splice" | "tee" | "vmsplice" => {
            &["EINTR", "EIO", "ENOSPC", "EAGAIN", "EPIPE", "EBADF"]
        }
        "open" | "openat" | "openat2" | "creat" => &["EINTR", "EACCES", "EMFILE", "ENFILE", "ENOSPC", "EROFS", "EIO"],
        "close" | "close_range" => &["EINTR", "EIO", "EBADF"],
        "unlink" | "unlinkat" | "rename" | "renameat" | "renameat2" | "rmdir" | "mkdir" | "mkdirat" | "link"
        | "linkat" | "symlink" | "symlinkat" | "fchmod" | "fchmodat" | "chmod" | "fchown" | "fchownat"
        | "ftruncate" | "fsync" | "fdatasync" => &["EIO", "EROFS", "EACCES", "EPERM", "EBUSY", "ENOSPC"],
        "kill" | "tgkill" | "tkill" | "pidfd_send_signal" | "rt_sigqueueinfo" => &["ESRCH", "EPERM", "EINVAL"],
        "wait4" | "waitid" => &["EINTR", "ECHILD"],
        "clone" | "clone3" | "fork" | "vfork" => &["EAGAIN", "ENOMEM", "EPERM", "ENOSYS"],
        "execve" | "execveat" => &["ENOENT", "EACCES", "ENOMEM", "E2BIG", "ETXTBSY"],
        "pipe" | "pipe2" | "dup" | "dup2" | "dup3" | "eventfd2" | "signalfd4" | "socketpair" | "epoll_create1"
        | "inotify_init1" | "timerfd_create" | "memfd_create" => &["EMFILE", "ENFILE", "ENOMEM", "EBADF"],
        "pidfd_open" | "pidfd_getfd" => &["ESRCH", "EMFILE", "ENOMEM", "EINVAL"],
        "fcntl" => &["EINTR", "EAGAIN", "EACCES", "EBADF", "ENOLCK", "EDEADLK"],
        "flock" => &["EINTR", "EWOULDBLOCK", "ENOLCK"],
        "poll" | "ppoll" | "epoll_wait" | "epoll_pwait" | "epoll_pwait2" | "select" | "pselect6" => {
            &["EINTR", "ENOMEM", "EBADF"]
        }
        "epoll_ctl" | "inotify_add_watch" | "timerfd_settime" => &["ENOMEM", "ENOSPC", "EBADF", "EPERM"],
        "rt_sigprocmask" | "rt_sigaction" | "sigaltstack" | "rt_sigtimedwait" | "rt_sigpending" => {
            &["EINVAL", "EFAULT", "EINTR"]
        }
        "getrandom" => &["EAGAIN", "EINTR", "ENOSYS"],
        "prctl" => &["EINVAL", "EPERM"],
        "setpgid" | "setsid" | "getpgid" | "getsid" => &["EPERM", "ESRCH", "EACCES", "EINVAL"],
        "ioctl" => &["ENOTTY", "EIO", "EINTR", "EPERM"],
        "newfstatat" | "fstat" | "stat" | "lstat" | "statx" | "statfs" | "fstatfs" | "readlink" | "readlinkat"
        | "getdents64" | "access" | "faccessat" | "faccessat2" | "lseek" | "getcwd" => {
            &["EACCES", "ENOENT", "EIO", "ENOMEM", "EOVERFLOW"]
        }
        "nanosleep" | "clock_nanosleep" => &["EINTR"],
        "prlimit64" | "setrlimit" | "getrlimit" => &["EPERM", "EINVAL"],
        "getrusage" | "sysinfo" | "uname" | "times" => &["EFAULT", "EINVAL"],
        "sched_getaffinity" => &["EINVAL", "EFAULT"],
        "socket" | "connect" | "bind" => &["EACCES", "EMFILE", "ENOMEM"],
        _ => OTHER,
    }
}

const OTHER: &[&str] = &["EIO", "ENOMEM", "EPERM", "EINTR"];

/// The syscalls one recorded run made, with the largest number of calls
/// any one process made (strace's `when=N` counts per process).
pub type Profile = BTreeMap<String, u32>;

/// Parse `strace -f -o FILE` output into a profile.
pub fn profile(trace: &str) -> Profile {
    let mut per_process: BTreeMap<(String, String), u32> = BTreeMap::new();
    for line in trace.lines() {
        let Some((pid, rest)) = line.split_once(' ') else { continue };
        let rest = rest.trim_start();
        if rest.starts_with("+++") || rest.starts_with("---") || rest.starts_with("<...") {
            // Exits, signals, and the second half of a call already counted.
            continue;
        }
        let Some(open) = rest.find('(') else { continue };
        let name = &rest[..open];
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            continue;
        }
        *per_process.entry((pid.to_string(), name.to_string())).or_default() += 1;
    }
    let mut out = Profile::new();
    for ((_, name), n) in per_process {
        let e = out.entry(name).or_default();
        *e = (*e).max(n);
    }
    out
}

/// A small deterministic generator (splitmix64): the default sweep's
/// sample depends on the seed only.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

pub fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// The (errno, when) pairs for `syscall` in a scenario: with `full`, all
/// errnos and `when` 1..=full_when (as far as the run made that many
/// calls). Else a sample fixed by the seed: `per_syscall` errnos, each with
/// `when` 1 and 2, and one more errno at one later call (3..=full_when), so
/// that a syscall pgrun makes many times is not tried at its first calls
/// only.
pub fn cases_for(
    scenario: &str,
    syscall: &str,
    calls: u32,
    full: bool,
    full_when: u32,
    per_syscall: usize,
    seed: u64,
) -> Vec<(&'static str, u32)> {
    let all = errnos(syscall);
    if full {
        let whens = 1..=calls.min(full_when);
        return all.iter().flat_map(|e| whens.clone().map(move |w| (*e, w))).collect();
    }
    let key = seed ^ hash(scenario) ^ hash(syscall).rotate_left(17);
    let mut order: Vec<(u64, &'static str)> = all.iter().map(|e| (mix(key ^ hash(e)), *e)).collect();
    order.sort();
    let mut out: Vec<(&'static str, u32)> =
        order.iter().take(per_syscall).flat_map(|(_, e)| (1..=calls.min(2)).map(move |w| (*e, w))).collect();
    let last = calls.min(full_when);
    if last >= 3 {
        let pick = mix(key ^ 0x5eed);
        let errno = order[(pick % order.len() as u64) as usize].1;
        let when = 3 + ((pick >> 32) % u64::from(last - 2)) as u32;
        out.push((errno, when));
    }
    out
}

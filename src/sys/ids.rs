//! The numbers the kernel gives processes, and the caller's own: its pid,
//! its parent, its group, another process's group, its effective uid.

/// A process or process-group id, as the kernel numbers them.
pub type Pid = libc::pid_t;

/// `getpid(2)`.
pub fn getpid() -> Pid {
    nix::unistd::getpid().as_raw()
}

/// `getppid(2)`.
pub fn getppid() -> Pid {
    nix::unistd::getppid().as_raw()
}

/// `getpgrp(2)`: the caller's process group.
pub fn getpgrp() -> Pid {
    nix::unistd::getpgrp().as_raw()
}

/// `getpgid(2)` of another process; `None` if it does not exist.
pub fn getpgid(pid: Pid) -> Option<Pid> {
    nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid))).ok().map(nix::unistd::Pid::as_raw)
}

/// `geteuid(2)`.
pub fn geteuid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

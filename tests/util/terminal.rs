//! Pseudo-terminals: a pty whose fds are close-on-exec, and a command
//! started with a controlling terminal.

use std::fs;
use std::process::Command;

/// A pseudo-terminal: its master and its slave.
pub struct Pty {
    pub master: std::os::fd::OwnedFd,
    pub slave: std::os::fd::OwnedFd,
}

/// A pseudo-terminal whose two fds are close-on-exec from the start
/// (openpty(3) makes them inheritable): the tests run in parallel, and any
/// process another test spawned meanwhile would hold them (a terminal that
/// then never hangs up; one fd too many for a test that counts them). A
/// Command given the slave as stdin, stdout or stderr still gets its copy.
pub fn openpty_cloexec(size: Option<&nix::pty::Winsize>) -> Pty {
    use nix::fcntl::OFlag;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let master = nix::pty::posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC).expect("posix_openpt");
    nix::pty::grantpt(&master).expect("grantpt");
    nix::pty::unlockpt(&master).expect("unlockpt");
    let name = nix::pty::ptsname_r(&master).expect("ptsname_r");
    // std opens with O_CLOEXEC.
    let slave =
        fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOCTTY).open(name).expect("open the slave");
    if let Some(size) = size {
        // SAFETY: TIOCSWINSZ reads one winsize from a valid pointer.
        assert_eq!(unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCSWINSZ, size) }, 0, "TIOCSWINSZ");
    }
    Pty { master: master.into(), slave: slave.into() }
}

/// Start `cmd` in a session of its own whose controlling terminal is its
/// stdin (a pty slave given as stdin), as a login shell's.
pub fn with_controlling_terminal(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

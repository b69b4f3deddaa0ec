//! What Linux adds to reading `/proc`: pgrun asks it what the kernel's
//! calls cannot tell ([`ASKS_PROC`]), and lists folders with
//! `getdents64(2)` rather than std's reader, whose directory handle panics
//! when `closedir` fails. (The reading itself: [`crate::sys::proc`].)

use std::io;

/// Whether pgrun asks `/proc` what the kernel's calls cannot tell: how many
/// processes a group has and how many of them are zombies, whom a process
/// runs as, whether a process is still pgrun's child after waitid said no.
pub const ASKS_PROC: bool = true;

/// The names in folder `path` (without `.` and `..`), read with
/// `getdents64(2)` on an fd pgrun owns. Closing it goes through
/// `OwnedFd`, which ignores close's result: the folder was opened
/// read-only, so there is nothing a failed close could lose, and Linux
/// releases the fd whatever close says.
pub fn list_folder(path: impl AsRef<std::path::Path>) -> io::Result<Vec<std::ffi::OsString>> {
    let path = path.as_ref();
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let flags = nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC;
    let dir = nix::fcntl::open(path, flags, nix::sys::stat::Mode::empty())?;
    let mut names = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        // SAFETY: getdents64 writes at most `buf.len()` bytes into `buf`,
        // a writable buffer, from a folder fd that `dir` keeps open.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, dir.as_raw_fd(), buf.as_mut_ptr(), buf.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            return Ok(names);
        }
        // Records of `struct linux_dirent64`: d_ino (8 bytes), d_off (8),
        // d_reclen (2), d_type (1), then the NUL-terminated name.
        let mut at = 0;
        let end = n as usize;
        while at + 19 <= end {
            let reclen = usize::from(u16::from_ne_bytes([buf[at + 16], buf[at + 17]]));
            if reclen < 19 || at + reclen > end {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a bad folder record in {}", path.display()),
                ));
            }
            let name = &buf[at + 19..at + reclen];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            if name != b"." && name != b".." {
                names.push(std::ffi::OsStr::from_bytes(name).to_os_string());
            }
            at += reclen;
        }
    }
}

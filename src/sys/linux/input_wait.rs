//! Whether a process sits waiting for its stdin (fd 0) to bring something
//! to read: what `blocked_on_input` is made of (see
//! [`crate::activity`]). Linux's: read from `/proc/PID/syscall` (the call
//! the process's main thread is blocked in, and its arguments), and where
//! the call names its fds in the process's memory, that memory
//! (`process_vm_readv(2)`), or for an epoll instance its
//! `/proc/PID/fdinfo/EPFD`. Both need ptrace access to the process, which
//! its own user normally has.
//!
//! The calls that count, with the process asleep in them (state `S`):
//! `read(2)` of fd 0 (a shell's `read`, `cat`, Python's `input()`);
//! `poll`/`ppoll` with fd 0 among the pollfds it waits to read (at most
//! [`POLL_FDS_READ`] of them are read); `select`/`pselect6` with fd 0 in
//! the read set (an editor: vim waits in `pselect6`); `epoll_wait`,
//! `epoll_pwait`, `epoll_pwait2` on an epoll instance that watches fd 0
//! for input. Another fd open on the same file as fd 0 counts as well
//! (Node's libuv opens the terminal again, and its epoll watches that
//! fd): the file's device and inode are compared, for at most
//! [`OTHER_FDS_COMPARED`] fds of a `poll` or `select`. Their numbers are libc's `SYS_*` for the
//! target; where a target has no plain `poll`, `select` or `epoll_wait`
//! (aarch64), its C library waits in the others.
//!
//! The answer is advisory: the call is read again after its fds have been
//! looked at, and a process that left it meanwhile, or whose memory or
//! files cannot be read, is not waiting for its stdin (`Ok(false)` where
//! the process left the call; an error where something could not be
//! read, which callers take as "cannot tell"). Only the main thread is
//! looked at; a 32-bit process on a 64-bit kernel (whose call numbers
//! are another table's) is not told apart.

use crate::sys::ids::Pid;
use std::io;
use std::os::unix::fs::MetadataExt;

/// Whether this platform can tell: yes.
pub const AVAILABLE: bool = true;

/// The most pollfds of one `poll`/`ppoll` read from the process's memory
/// (8 bytes each); fd 0 further along is not seen.
pub const POLL_FDS_READ: usize = 256;

/// Whether process `pid` (its main thread) sleeps in a call that waits
/// for its fd 0 to be readable: see the module doc. `Ok(false)` if it
/// runs, is stopped, waits for anything else, or left the call while it
/// was looked at. An error where `/proc/PID/...` or its memory cannot be
/// read (`NotFound`: it is gone; `PermissionDenied`: no ptrace access).
pub fn waits_on_stdin(pid: Pid) -> io::Result<bool> {
    if !sleeps(pid)? {
        return Ok(false);
    }
    let path = format!("/proc/{pid}/syscall");
    let line = std::fs::read_to_string(&path)?;
    let Some(call) = parse_syscall_line(&line) else { return Ok(false) };
    let waits = match wait_kind(call.number) {
        None => return Ok(false),
        // An int: its low 32 bits.
        Some(Kind::Read) => reads_stdin_file(pid, &[call.args[0] as u32 as i32])?,
        Some(Kind::Poll) => poll_waits_on_stdin(pid, call.args[0], call.args[1])?,
        Some(Kind::Select) => select_waits_on_stdin(pid, call.args[0], call.args[1])?,
        Some(Kind::Epoll) => epoll_waits_on_stdin(pid, call.args[0])?,
    };
    // The same call, still asleep in it: a process that woke meanwhile
    // may have left the call the line names, and its memory with it.
    Ok(waits && std::fs::read_to_string(&path)? == line && sleeps(pid)?)
}

/// Whether `/proc/PID/stat` says `pid` sleeps (`S`).
fn sleeps(pid: Pid) -> io::Result<bool> {
    let stat = std::fs::read(format!("/proc/{pid}/stat"))?;
    Ok(state_of(&stat) == Some(b'S'))
}

/// The state letter of a `/proc/PID/stat` line (after the command's name,
/// which may hold anything, `)` included).
fn state_of(stat: &[u8]) -> Option<u8> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    stat.get(close + 2).copied()
}

/// A line of `/proc/PID/syscall`: the call's number and its six arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Call {
    number: i64,
    args: [u64; 6],
}

/// `NR ARG1 .. ARG6 SP PC` (`running`, or `-1 SP PC` outside any call:
/// `None`).
fn parse_syscall_line(line: &str) -> Option<Call> {
    let mut fields = line.split_ascii_whitespace();
    let number: i64 = fields.next()?.parse().ok()?;
    if number < 0 {
        return None;
    }
    let mut args = [0u64; 6];
    for arg in &mut args {
        *arg = u64::from_str_radix(fields.next()?.strip_prefix("0x")?, 16).ok()?;
    }
    Some(Call { number, args })
}

/// How a call names the fds it waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `read(FD, ...)`.
    Read,
    /// `poll(FDS, NFDS, ...)`, `ppoll(FDS, NFDS, ...)`.
    Poll,
    /// `select(NFDS, READFDS, ...)`, `pselect6(NFDS, READFDS, ...)`.
    Select,
    /// `epoll_wait(EPFD, ...)` and its `pwait`s.
    Epoll,
}

/// The calls of this target that can wait for fd 0, by number.
#[allow(clippy::unnecessary_cast)] // c_long: 32 bits on some targets
fn wait_kind(number: i64) -> Option<Kind> {
    let generic = [
        (libc::SYS_read as i64, Kind::Read),
        (libc::SYS_ppoll as i64, Kind::Poll),
        (libc::SYS_pselect6 as i64, Kind::Select),
        (libc::SYS_epoll_pwait as i64, Kind::Epoll),
        (libc::SYS_epoll_pwait2 as i64, Kind::Epoll),
    ];
    generic.into_iter().chain(legacy_calls()).find(|&(n, _)| n == number).map(|(_, kind)| kind)
}

/// The older calls x86_64 has beside the generic ones (aarch64 has none).
#[cfg(target_arch = "x86_64")]
fn legacy_calls() -> [(i64, Kind); 3] {
    [(libc::SYS_poll, Kind::Poll), (libc::SYS_select, Kind::Select), (libc::SYS_epoll_wait, Kind::Epoll)]
}
#[cfg(not(target_arch = "x86_64"))]
fn legacy_calls() -> [(i64, Kind); 0] {
    []
}

/// `struct pollfd`: `int fd; short events; short revents;`.
const POLLFD_SIZE: usize = 8;

/// The most fds other than 0 a call waits to read whose files are
/// compared with fd 0's (a `stat` each).
const OTHER_FDS_COMPARED: usize = 16;

/// Whether the pollfds at `address` (`count` of them) of process `pid`
/// ask for input from its stdin's file.
fn poll_waits_on_stdin(pid: Pid, address: u64, count: u64) -> io::Result<bool> {
    let count = usize::try_from(count).unwrap_or(usize::MAX).min(POLL_FDS_READ);
    if count == 0 {
        return Ok(false);
    }
    let mut buf = vec![0u8; count * POLLFD_SIZE];
    read_memory(pid, address, &mut buf)?;
    reads_stdin_file(pid, &pollfds_for_input(&buf))
}

/// The fds of `pollfds` (their bytes, native order) asked for input
/// (`POLLIN` or `POLLRDNORM`).
fn pollfds_for_input(pollfds: &[u8]) -> Vec<i32> {
    let input = libc::POLLIN | libc::POLLRDNORM;
    pollfds
        .chunks_exact(POLLFD_SIZE)
        .filter(|p| i16::from_ne_bytes([p[4], p[5]]) & input != 0)
        .map(|p| i32::from_ne_bytes([p[0], p[1], p[2], p[3]]))
        .filter(|&fd| fd >= 0)
        .collect()
}

/// Whether the read set at `address` of a `select` on `nfds` fds in
/// process `pid` holds its stdin's file (fds past `FD_SETSIZE`, 1024,
/// are not looked at).
fn select_waits_on_stdin(pid: Pid, nfds: u64, address: u64) -> io::Result<bool> {
    // nfds is an int: its low 32 bits.
    let nfds = (nfds as u32 as i32).min(libc::FD_SETSIZE as i32);
    if nfds < 1 || address == 0 {
        return Ok(false);
    }
    // Whole words, as the kernel reads them.
    let word = std::mem::size_of::<libc::c_ulong>();
    let mut set = vec![0u8; (nfds as usize).div_ceil(word * 8) * word];
    read_memory(pid, address, &mut set)?;
    let fds: Vec<i32> = fds_in_set(&set).into_iter().filter(|&fd| fd < nfds).collect();
    reads_stdin_file(pid, &fds)
}

/// The fds an `fd_set` (its bytes: native words, fd N at bit N % BITS of
/// word N / BITS) holds.
fn fds_in_set(set: &[u8]) -> Vec<i32> {
    let word = std::mem::size_of::<libc::c_ulong>();
    let bits = word * 8;
    let mut fds = Vec::new();
    for (w, bytes) in set.chunks_exact(word).enumerate() {
        let value = libc::c_ulong::from_ne_bytes(bytes.try_into().expect("a whole word"));
        fds.extend((0..bits).filter(|b| value >> b & 1 == 1).map(|b| (w * bits + b) as i32));
    }
    fds
}

/// Whether one of `fds` (those process `pid` waits to read) is its fd 0,
/// or another fd open on the same file (a terminal the program opened
/// again, as Node's libuv does). An fd closed meanwhile is passed over.
fn reads_stdin_file(pid: Pid, fds: &[i32]) -> io::Result<bool> {
    if fds.contains(&0) {
        return Ok(true);
    }
    let mut stdin = None;
    for &fd in fds.iter().take(OTHER_FDS_COMPARED) {
        let file = match file_of(pid, fd) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let stdin = match stdin {
            Some(stdin) => stdin,
            None => *stdin.insert(file_of(pid, 0)?),
        };
        if file == stdin {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A file, as `stat(2)` names it: its device (the kernel's own encoding,
/// `MAJOR << 20 | MINOR`, as `/proc/PID/fdinfo` prints it) and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

/// The file process `pid` has open as its fd `fd`.
fn file_of(pid: Pid, fd: i32) -> io::Result<FileId> {
    let meta = std::fs::metadata(format!("/proc/{pid}/fd/{fd}"))?;
    let dev = meta.dev();
    let (major, minor) = (u64::from(libc::major(dev)), u64::from(libc::minor(dev)));
    Ok(FileId { dev: major << 20 | minor, ino: meta.ino() })
}

/// Whether the epoll instance that process `pid` holds as fd `epfd`
/// watches its stdin's file for input (see [`epoll_watches_for_input`]).
fn epoll_waits_on_stdin(pid: Pid, epfd: u64) -> io::Result<bool> {
    // An int: its low 32 bits.
    let epfd = epfd as u32 as i32;
    if epfd < 0 {
        return Ok(false);
    }
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{epfd}"))?;
    Ok(epoll_watches_for_input(&info, file_of(pid, 0)?))
}

/// Whether an epoll fd's `fdinfo` text has the file `stdin` watched for
/// input, through fd 0 or another fd: a line `tfd: FD events: 19 data: ...
/// ino:INODE sdev:DEV` (events, inode and device in hex) whose events hold
/// `EPOLLIN` (or `EPOLLRDNORM`) and whose file is `stdin`.
fn epoll_watches_for_input(info: &str, stdin: FileId) -> bool {
    let input = (libc::EPOLLIN | libc::EPOLLRDNORM) as u32;
    info.lines().filter_map(|l| l.strip_prefix("tfd:")).any(|rest| {
        let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
        let value = |name: &str| fields.iter().position(|&f| f == name).and_then(|i| fields.get(i + 1));
        let hex = |prefix: &str| fields.iter().find_map(|f| u64::from_str_radix(f.strip_prefix(prefix)?, 16).ok());
        let events = value("events:").and_then(|e| u32::from_str_radix(e, 16).ok());
        let file = hex("ino:").zip(hex("sdev:")).map(|(ino, dev)| FileId { dev, ino });
        events.is_some_and(|e| e & input != 0) && file == Some(stdin)
    })
}

/// Read `buf.len()` bytes at `address` of process `pid`
/// (`process_vm_readv(2)`); a short read is an error.
fn read_memory(pid: Pid, address: u64, buf: &mut [u8]) -> io::Result<()> {
    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let remote = libc::iovec { iov_base: address as usize as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: `local` describes `buf`, ours and writable for its length;
    // `remote` is an address in the other process, which the kernel
    // checks (and reads with the access rights ptrace would have): our
    // memory is touched only through `local`.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    match usize::try_from(n) {
        Ok(n) if n == buf.len() => Ok(()),
        Ok(n) => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("read {n} of {} bytes of process {pid}'s memory", buf.len()),
        )),
        Err(_) => Err(io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_lines_are_read() {
        let line = "0 0x0 0x7ffd 0x1 0x0 0x0 0x0 0x7ffd 0x7f\n";
        assert_eq!(parse_syscall_line(line), Some(Call { number: 0, args: [0, 0x7ffd, 1, 0, 0, 0] }));
        let select = "270 0x1 0x56408ce54600 0x56408ce54580 0x56408ce54500 0x0 0x0 0x7ffdd5d1f0c0 0x7ff39ea299ec";
        assert_eq!(parse_syscall_line(select).map(|c| (c.number, c.args[1])), Some((270, 0x56408ce54600)));
        assert_eq!(parse_syscall_line("running"), None);
        assert_eq!(parse_syscall_line("-1 0x7ffd 0x7f"), None);
        assert_eq!(parse_syscall_line("7 0x1 0x2"), None);
    }

    #[test]
    fn a_stat_line_gives_its_state() {
        assert_eq!(state_of(b"42 (a) b) S 1 42 42"), Some(b'S'));
        assert_eq!(state_of(b"42 (cat) R 1"), Some(b'R'));
        assert_eq!(state_of(b"42 (cat"), None);
    }

    #[test]
    fn pollfds_give_the_fds_asked_for_input() {
        let pollfd = |fd: i32, events: i16| [fd.to_ne_bytes().as_slice(), &events.to_ne_bytes(), &[0, 0]].concat();
        let fds =
            [pollfd(3, libc::POLLIN), pollfd(0, libc::POLLOUT), pollfd(-1, libc::POLLIN), pollfd(7, libc::POLLRDNORM)];
        assert_eq!(pollfds_for_input(&fds.concat()), vec![3, 7]);
        assert_eq!(pollfds_for_input(&pollfd(0, libc::POLLIN)[..4]), Vec::<i32>::new());
    }

    #[test]
    fn an_fd_set_gives_its_fds() {
        let word = std::mem::size_of::<libc::c_ulong>();
        let mut set = vec![0u8; 2 * word];
        set[..word].copy_from_slice(&(1 as libc::c_ulong | 1 << 3).to_ne_bytes());
        set[word..].copy_from_slice(&(1 as libc::c_ulong).to_ne_bytes());
        assert_eq!(fds_in_set(&set), vec![0, 3, word as i32 * 8]);
    }

    #[test]
    fn an_epoll_counts_the_stdins_file_watched_for_input() {
        let info = "pos:\t0\nflags:\t02\nmnt_id:\t16\nino:\t1057\n\
                    tfd:        3 events:       19 data:                3  pos:0 ino:4d2 sdev:d\n\
                    tfd:       17 events:       19 data:               11  pos:0 ino:3 sdev:1a\n";
        assert!(epoll_watches_for_input(info, FileId { dev: 0x1a, ino: 3 }));
        assert!(!epoll_watches_for_input(info, FileId { dev: 0x1b, ino: 3 }));
        assert!(!epoll_watches_for_input(info, FileId { dev: 0x1a, ino: 4 }));
        let out_only = "tfd:        0 events:        4 data:                0  pos:0 ino:3 sdev:1a\n";
        assert!(!epoll_watches_for_input(out_only, FileId { dev: 0x1a, ino: 3 }));
    }

    #[test]
    #[allow(clippy::unnecessary_cast)] // c_long: 32 bits on some targets
    fn every_call_that_can_wait_for_stdin_is_known() {
        assert_eq!(wait_kind(libc::SYS_read as i64), Some(Kind::Read));
        assert_eq!(wait_kind(libc::SYS_ppoll as i64), Some(Kind::Poll));
        assert_eq!(wait_kind(libc::SYS_pselect6 as i64), Some(Kind::Select));
        assert_eq!(wait_kind(libc::SYS_epoll_pwait as i64), Some(Kind::Epoll));
        assert_eq!(wait_kind(libc::SYS_nanosleep as i64), None);
        assert_eq!(wait_kind(libc::SYS_write as i64), None);
    }
}

//! Reading from Linux's `/proc` what a process holds: the sockets among
//! its fds (`/proc/PID/fd`) and what its stdin is, and the TCP sockets
//! that listen in its network namespace (`/proc/PID/net/tcp` and `tcp6`).
//! (The call it is blocked in is `input_wait`'s, Linux's own.)
//!
//! These are the facts `pgrun status` (`listening`, `blocked_on_input`)
//! and `pgrun wait --ready` are made of. Nothing here signals anything. A
//! process may end between two reads: what is gone reads as
//! `ErrorKind::NotFound`, what is not ours to read (another user's
//! process) as its own error,
//! never as "nothing there". The portable path asks `/proc` none of this
//! (`ASKS_PROC` is false there): every reader says `Unsupported`.

use super::ids::Pid;
use super::platform::proc::ASKS_PROC;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

/// Whether these readers answer on this path (they read `/proc`).
pub const AVAILABLE: bool = ASKS_PROC;

/// The error of a reader the portable path does not have.
fn unsupported() -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, "not available on this system (no /proc to read)")
}

/// What `pid`'s fd table (`/proc/PID/fd`) holds that pgrun asks about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FdTable {
    /// The inodes of its sockets (`socket:[INODE]` links).
    pub sockets: Vec<u64>,
    /// What its fd 0 is open on (`None`: closed).
    pub stdin: Option<PathBuf>,
}

/// `pid`'s fd table, each fd's link read once. An fd closed during the
/// reading is passed over.
pub fn fd_table(pid: Pid) -> io::Result<FdTable> {
    if !ASKS_PROC {
        return Err(unsupported());
    }
    let folder = format!("/proc/{pid}/fd");
    let mut table = FdTable::default();
    for name in super::proc::list_folder(&folder)? {
        let link = match std::fs::read_link(format!("{folder}/{}", name.to_string_lossy())) {
            Ok(link) => link,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if let Some(inode) = socket_inode(&link.to_string_lossy()) {
            table.sockets.push(inode);
        }
        if name == "0" {
            table.stdin = Some(link);
        }
    }
    Ok(table)
}

/// The inode of a `socket:[INODE]` fd link.
fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

/// A TCP socket in state LISTEN, as `/proc/PID/net/tcp{,6}` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpListener {
    pub inode: u64,
    pub address: IpAddr,
    pub port: u16,
}

/// The network namespace `pid` lives in (the device and inode of
/// `/proc/PID/ns/net`), so that its sockets are looked up once per
/// namespace.
pub fn net_namespace(pid: Pid) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    if !ASKS_PROC {
        return Err(unsupported());
    }
    let meta = std::fs::metadata(format!("/proc/{pid}/ns/net"))?;
    Ok((meta.dev(), meta.ino()))
}

/// The TCP sockets listening in the network namespace of `pid`, IPv4 and
/// IPv6 (a kernel without IPv6 has no `tcp6`: none of those).
pub fn tcp_listeners(pid: Pid) -> io::Result<Vec<TcpListener>> {
    if !ASKS_PROC {
        return Err(unsupported());
    }
    let mut found = Vec::new();
    for (file, v6) in [("tcp", false), ("tcp6", true)] {
        let path = format!("/proc/{pid}/net/{file}");
        let text = match read_in_big_reads(&path) {
            Ok(text) => text,
            Err(e)
                if v6 && e.kind() == io::ErrorKind::NotFound && std::fs::metadata(format!("/proc/{pid}")).is_ok() =>
            {
                continue;
            }
            Err(e) => return Err(io::Error::new(e.kind(), format!("cannot read {path}: {e}"))),
        };
        found.extend(text.lines().skip(1).filter_map(|line| parse_tcp_line(line, v6)));
    }
    Ok(found)
}

/// The text of `path`, read a chunk of 64 KiB at a time. Each `read(2)`
/// of `/proc/PID/net/tcp` walks the kernel's whole TCP hash table (about
/// 0.8 ms a read on this project's machine, whatever the sockets), and
/// `std::fs::read_to_string` reads a file that says it has size 0 (as
/// `/proc`'s do) in reads of 32 bytes and up: 5 reads of a small table
/// where two do (its lines, then the end).
fn read_in_big_reads(path: &str) -> io::Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut chunk = vec![0u8; 1 << 16];
    let mut text = Vec::new();
    loop {
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(text).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{path} is not UTF-8")))
}

/// State `0A` of `/proc/net/tcp`: TCP_LISTEN.
const TCP_LISTEN: &str = "0A";

/// One line of `/proc/net/tcp` (`v6`: of `tcp6`), if it is a listening
/// socket: `sl local_address rem_address st tx:rx tr:when retrnsmt uid
/// timeout inode ...`. An address is the kernel's words (32 bits each,
/// in network order as they lie in memory) printed as native hex numbers.
pub fn parse_tcp_line(line: &str, v6: bool) -> Option<TcpListener> {
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    if fields.len() < 10 || fields[3] != TCP_LISTEN {
        return None;
    }
    let (address, port) = fields[1].split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words = |hex: &str| -> Option<Vec<[u8; 4]>> {
        if !hex.is_ascii() || !hex.len().is_multiple_of(8) {
            return None;
        }
        (0..hex.len() / 8).map(|i| u32::from_str_radix(&hex[i * 8..i * 8 + 8], 16).ok().map(u32::to_ne_bytes)).collect()
    };
    let words = words(address)?;
    let address = match (v6, words.as_slice()) {
        (false, [w]) => IpAddr::V4(Ipv4Addr::from(*w)),
        (true, [a, b, c, d]) => {
            let mut bytes = [0u8; 16];
            for (i, w) in [a, b, c, d].into_iter().enumerate() {
                bytes[i * 4..i * 4 + 4].copy_from_slice(w);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    let inode = fields[9].parse().ok()?;
    Some(TcpListener { inode, address, port })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_lines_are_read() {
        let v4 = "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 12345 1 0000000000000000 100 0 0 10 0";
        let found = parse_tcp_line(v4, false).unwrap();
        let localhost = u32::from_ne_bytes([127, 0, 0, 1]);
        // The kernel prints the word as it lies in memory, read natively.
        let v4 = v4.replace("0100007F", &format!("{localhost:08X}"));
        let found_native = parse_tcp_line(&v4, false).unwrap();
        assert_eq!(found_native.address, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!((found.port, found.inode), (8080, 12345));
        let connected =
            "   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 999 1";
        assert_eq!(parse_tcp_line(connected, false), None);
        let one = u32::from_ne_bytes([0, 0, 0, 1]);
        let v6 = format!(
            "   0: 000000000000000000000000{one:08X}:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 777 1"
        );
        let found = parse_tcp_line(&v6, true).unwrap();
        assert_eq!((found.address, found.port, found.inode), (IpAddr::V6(Ipv6Addr::LOCALHOST), 80, 777));
        assert_eq!(parse_tcp_line("  sl  local_address rem_address   st", false), None);
    }

    #[test]
    fn socket_links_are_read() {
        assert_eq!(socket_inode("socket:[4242]"), Some(4242));
        assert_eq!(socket_inode("pipe:[4242]"), None);
        assert_eq!(socket_inode("/dev/pts/3"), None);
    }
}

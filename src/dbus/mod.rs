//! A minimal D-Bus client: what pgrun needs to ask the user's systemd for a
//! scope, and nothing more. It connects to a bus over a Unix socket,
//! authenticates as its own uid (`EXTERNAL`), says `Hello`, adds match
//! rules, makes method calls and waits, each with a deadline, for the
//! reply or for a signal. One connection, blocking, no threads: a few
//! hundred lines instead of a D-Bus crate and its runtime in a 2 MB binary
//! that starts in about 2 ms. The bytes on the wire are [`wire`]'s.

pub mod wire;

use crate::sys::{self, socket::SocketName};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Instant;
pub use wire::{Arg, Kind, Message, Value};

/// Why a call on the bus did not give its answer.
#[derive(Debug)]
pub enum BusError {
    /// The bus itself: the socket, the handshake, a malformed message, the
    /// deadline.
    Io(io::Error),
    /// The other side answered with an error: its name and message.
    Refused { name: String, message: String },
}

impl std::fmt::Display for BusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BusError::Io(e) => write!(f, "{e}"),
            BusError::Refused { name, message } if message.is_empty() => write!(f, "{name}"),
            BusError::Refused { name, message } => write!(f, "{message} ({name})"),
        }
    }
}

impl From<io::Error> for BusError {
    fn from(e: io::Error) -> Self {
        BusError::Io(e)
    }
}

/// Where the user's session bus is: `$DBUS_SESSION_BUS_ADDRESS` (its first
/// `unix:path=` or `unix:abstract=` address), else `$XDG_RUNTIME_DIR/bus`
/// if that exists. `None` when neither names one; the reason is said.
pub fn session_bus_address() -> Result<Address, String> {
    if let Some(text) = std::env::var_os("DBUS_SESSION_BUS_ADDRESS") {
        let text = text.to_string_lossy();
        return Address::parse(&text).ok_or_else(|| format!("DBUS_SESSION_BUS_ADDRESS={text} names no Unix socket"));
    }
    let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR") else {
        return Err("no DBUS_SESSION_BUS_ADDRESS, and no XDG_RUNTIME_DIR".into());
    };
    let path = PathBuf::from(dir).join("bus");
    match std::fs::symlink_metadata(&path) {
        Ok(_) => Ok(Address::Path(path)),
        Err(e) => Err(format!("no DBUS_SESSION_BUS_ADDRESS, and {}: {e}", path.display())),
    }
}

/// A bus's Unix socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    Path(PathBuf),
    /// A name in Linux's abstract socket namespace.
    Abstract(Vec<u8>),
}

impl Address {
    /// The first address of `text` (`;`-separated) pgrun can connect to:
    /// `unix:path=P` or `unix:abstract=N`, values %-escaped.
    pub fn parse(text: &str) -> Option<Address> {
        text.split(';').find_map(|one| {
            let params = one.strip_prefix("unix:")?;
            params.split(',').find_map(|kv| {
                let (key, value) = kv.split_once('=')?;
                let value = unescape(value)?;
                match key {
                    "path" => Some(Address::Path(PathBuf::from(<std::ffi::OsString as OsStringExt>::from_vec(value)))),
                    "abstract" => Some(Address::Abstract(value)),
                    _ => None,
                }
            })
        })
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Path(p) => write!(f, "{}", p.display()),
            Address::Abstract(name) => write!(f, "@{}", String::from_utf8_lossy(name)),
        }
    }
}

/// A D-Bus address value's `%XX` escapes undone.
fn unescape(value: &str) -> Option<Vec<u8>> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// A connection to a bus, authenticated and said `Hello` to.
pub struct Connection {
    stream: UnixStream,
    serial: u32,
    deadline: Instant,
    /// Messages read while waiting for something else (a signal that came
    /// before the reply it follows), kept for the next wait.
    held: Vec<Message>,
}

/// The largest message pgrun reads off the bus: the specification allows
/// [`wire::MAX_MESSAGE`], but what pgrun is sent (replies to its few calls,
/// the signals it matches) is small.
const READ_LIMIT: usize = 1 << 20;

const BUS: &str = "org.freedesktop.DBus";
const BUS_PATH: &str = "/org/freedesktop/DBus";

impl Connection {
    /// Connect to `address` as user `uid`; everything this connection does
    /// ends by `deadline` (an error past it).
    pub fn open(address: &Address, uid: u32, deadline: Instant) -> Result<Connection, BusError> {
        let name = match address {
            Address::Path(path) => SocketName::Path(path),
            Address::Abstract(name) => SocketName::Abstract(name),
        };
        let stream = sys::socket::unix_connect(name, deadline)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot connect: {e}")))?;
        let mut conn = Connection { stream, serial: 0, deadline, held: Vec::new() };
        conn.authenticate(uid)?;
        conn.call(BUS, BUS_PATH, BUS, "Hello", &[])?;
        Ok(conn)
    }

    /// `EXTERNAL` authentication: the bus checks the socket's credentials
    /// against the uid said (in hex of its decimal digits).
    fn authenticate(&mut self, uid: u32) -> Result<(), BusError> {
        let hex: String = uid.to_string().bytes().map(|b| format!("{b:02x}")).collect();
        self.write_all(format!("\0AUTH EXTERNAL {hex}\r\n").as_bytes())?;
        let line = self.read_line()?;
        if !line.starts_with("OK ") {
            return Err(io::Error::other(format!("the bus refused to authenticate uid {uid}: {line:?}")).into());
        }
        self.write_all(b"BEGIN\r\n")?;
        Ok(())
    }

    /// Call `member` and wait for its reply's body.
    pub fn call(
        &mut self,
        destination: &str,
        path: &str,
        interface: &str,
        member: &str,
        args: &[Arg],
    ) -> Result<Vec<Value>, BusError> {
        self.serial += 1;
        let serial = self.serial;
        let bytes = wire::method_call(destination, path, interface, member, serial, args);
        self.write_all(&bytes)?;
        let reply = self
            .wait_for(|m| m.reply_serial == Some(serial) && matches!(m.kind, Some(Kind::MethodReturn | Kind::Error)))?;
        if reply.kind == Some(Kind::Error) {
            let message = reply.body.first().and_then(Value::as_str).unwrap_or_default().to_string();
            // `wire::parse` refuses an error reply without its name.
            let name = reply.error_name.unwrap_or_else(|| "an error without a name".into());
            return Err(BusError::Refused { name, message });
        }
        Ok(reply.body)
    }

    /// Ask the bus to route signals matching `rule` to this connection.
    pub fn add_match(&mut self, rule: &str) -> Result<(), BusError> {
        self.call(BUS, BUS_PATH, BUS, "AddMatch", &[Arg::str(rule)]).map(drop)
    }

    /// Wait for a signal `member` for which `wanted` says yes (held ones
    /// first); others are dropped.
    pub fn wait_signal(&mut self, member: &str, wanted: impl Fn(&Message) -> bool) -> Result<Message, BusError> {
        self.wait_for(|m| m.kind == Some(Kind::Signal) && m.member.as_deref() == Some(member) && wanted(m))
            .map_err(BusError::Io)
    }

    /// The next message for which `wanted` says yes: a held one, else read
    /// off the socket (others read meanwhile are held).
    fn wait_for(&mut self, wanted: impl Fn(&Message) -> bool) -> io::Result<Message> {
        if let Some(at) = self.held.iter().position(&wanted) {
            return Ok(self.held.remove(at));
        }
        loop {
            let msg = self.read_message()?;
            if wanted(&msg) {
                return Ok(msg);
            }
            if msg.kind == Some(Kind::Signal) && self.held.len() < 64 {
                self.held.push(msg);
            }
        }
    }

    fn read_message(&mut self) -> io::Result<Message> {
        let mut fixed = [0u8; 16];
        self.read_exact(&mut fixed)?;
        let len = wire::message_len(&fixed).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        if len > READ_LIMIT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a message of {len} bytes on the bus, more than the {READ_LIMIT} pgrun reads"),
            ));
        }
        let mut bytes = fixed.to_vec();
        bytes.resize(len, 0);
        self.read_exact(&mut bytes[16..])?;
        wire::parse(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
    }

    /// Time left before the deadline, as a socket timeout (never zero,
    /// which would mean "none"); an error once it passed.
    fn time_left(&self) -> io::Result<std::time::Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "no answer on the bus in time"));
        }
        Ok(left)
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.set_write_timeout(Some(self.time_left()?))?;
        self.stream.write_all(bytes).map_err(timed_out)
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        let mut got = 0;
        while got < buf.len() {
            self.stream.set_read_timeout(Some(self.time_left()?))?;
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the bus closed the connection")),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(timed_out(e)),
            }
        }
        Ok(())
    }

    /// One line of the handshake, without its CRLF (at most 512 bytes).
    fn read_line(&mut self) -> io::Result<String> {
        let mut line = Vec::new();
        while !line.ends_with(b"\r\n") {
            if line.len() > 512 {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "an overlong line in the bus's handshake"));
            }
            let mut byte = [0u8; 1];
            self.read_exact(&mut byte)?;
            line.push(byte[0]);
        }
        line.truncate(line.len() - 2);
        Ok(String::from_utf8_lossy(&line).into_owned())
    }
}

/// A socket timeout (EAGAIN/EWOULDBLOCK) said as the deadline it is.
fn timed_out(e: io::Error) -> io::Error {
    if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) {
        io::Error::new(io::ErrorKind::TimedOut, "no answer on the bus in time")
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_as_the_specification_says() {
        assert_eq!(Address::parse("unix:path=/run/user/1000/bus"), Some(Address::Path("/run/user/1000/bus".into())));
        assert_eq!(
            Address::parse("tcp:host=x,port=1;unix:abstract=/tmp/dbus-X%2cy,guid=ab"),
            Some(Address::Abstract(b"/tmp/dbus-X,y".to_vec()))
        );
        assert_eq!(Address::parse("unix:path=/a%20b,guid=1"), Some(Address::Path("/a b".into())));
        assert_eq!(Address::parse("tcp:host=localhost,port=1"), None);
        assert_eq!(Address::parse("unix:path=/bad%2"), None);
    }

    /// A private bus of the system's `dbus-daemon`, killed when dropped.
    struct PrivateBus {
        daemon: std::process::Child,
        address: Address,
        _dir: tempdir::Dir,
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    impl PrivateBus {
        fn start() -> PrivateBus {
            let dir = std::env::temp_dir().join(format!("pgrun-dbus-test-{}-{}", std::process::id(), line!()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir(&dir).unwrap();
            let socket = dir.join("bus");
            let daemon = std::process::Command::new("dbus-daemon")
                .args(["--session", "--nofork", "--nopidfile"])
                .arg(format!("--address=unix:path={}", socket.display()))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("dbus-daemon (Debian's package dbus-daemon; .ci/run installs it)");
            let bus = PrivateBus { daemon, address: Address::Path(socket.clone()), _dir: tempdir::Dir(dir) };
            let deadline = Instant::now() + std::time::Duration::from_secs(30);
            while UnixStream::connect(&socket).is_err() {
                assert!(Instant::now() < deadline, "dbus-daemon did not listen at {}", socket.display());
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            bus
        }
    }

    impl Drop for PrivateBus {
        fn drop(&mut self) {
            let _ = self.daemon.kill();
            let _ = self.daemon.wait();
        }
    }

    fn uid() -> u32 {
        crate::sys::geteuid()
    }

    fn soon() -> Instant {
        Instant::now() + std::time::Duration::from_secs(30)
    }

    /// Against a real bus: the handshake and `Hello`, a call and its
    /// reply, an error reply said as the refusal it is, and a signal that
    /// a match rule routes here.
    #[test]
    fn a_real_bus_answers_calls_refusals_and_signals() {
        let bus = PrivateBus::start();
        let mut conn = Connection::open(&bus.address, uid(), soon()).unwrap();
        let names = conn.call(BUS, BUS_PATH, BUS, "ListNames", &[]).unwrap();
        let Some(Value::Array(names)) = names.first() else { panic!("{names:?}") };
        assert!(names.iter().any(|n| n.as_str() == Some(BUS)), "{names:?}");
        match conn.call(BUS, BUS_PATH, BUS, "NoSuchMethod", &[]) {
            Err(BusError::Refused { name, .. }) => assert_eq!(name, "org.freedesktop.DBus.Error.UnknownMethod"),
            other => panic!("{:?}", other.map_err(|e| e.to_string())),
        }
        conn.add_match("type='signal',interface='org.freedesktop.DBus',member='NameOwnerChanged'").unwrap();
        let other = Connection::open(&bus.address, uid(), soon()).unwrap();
        drop(other);
        let signal = conn.wait_signal("NameOwnerChanged", |m| m.body.len() == 3).unwrap();
        assert!(signal.body[0].as_str().is_some_and(|n| n.starts_with(':')), "{:?}", signal.body);
    }

    /// A socket that never answers ends in the deadline's error, not a hang.
    #[test]
    fn a_silent_bus_ends_at_the_deadline() {
        let dir = std::env::temp_dir().join(format!("pgrun-dbus-silent-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let _dir = tempdir::Dir(dir.clone());
        let listener = std::os::unix::net::UnixListener::bind(dir.join("bus")).unwrap();
        let deadline = Instant::now() + std::time::Duration::from_millis(200);
        let err = Connection::open(&Address::Path(dir.join("bus")), uid(), deadline).err().expect("no answer");
        assert!(matches!(&err, BusError::Io(e) if e.kind() == io::ErrorKind::TimedOut), "{err}");
        drop(listener);
    }

    /// A bus that answers a call with an error reply without its error
    /// name: the call fails, saying so, rather than read it as a refusal
    /// with no name (or as an answer).
    #[test]
    fn an_error_reply_without_its_name_fails_the_call_saying_so() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let bus = std::thread::spawn(move || {
            let mut theirs = theirs;
            let nameless = wire::message(Kind::Error, 5, &[(wire::REPLY_SERIAL, Arg::U32(1))], &[Arg::str("boom")]);
            theirs.write_all(&nameless).unwrap();
            // Held open until the client is done reading.
            let mut rest = Vec::new();
            let _ = theirs.read_to_end(&mut rest);
        });
        let mut conn = Connection { stream: ours, serial: 0, deadline: soon(), held: Vec::new() };
        let err = conn.call(BUS, BUS_PATH, BUS, "Anything", &[]).expect_err("an error reply is no answer");
        assert!(
            matches!(&err, BusError::Io(e) if e.kind() == io::ErrorKind::InvalidData
                && e.to_string().contains("an error reply without an error name")),
            "{err}"
        );
        drop(conn);
        bus.join().unwrap();
    }
}

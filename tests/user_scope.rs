//! `--contain cgroup` and `auto` where pgrun's own cgroup gives no leaf:
//! pgrun asks the user's systemd for a scope, and where it cannot help,
//! `auto` falls back to `tree` (saying why with `-v`) and `cgroup` is 125
//! naming both reasons, before anything runs. The test hook
//! `own-cgroup-refused` makes pgrun's own cgroup give no leaf; the scope
//! itself is tested for real in the user-systemd VM
//! (tests/vm-user-systemd.sh).

use crate::util::*;
use std::process::{Child, Command, Stdio};

/// pgrun with its own cgroup refused, and the session bus given by `bus`
/// (`None`: no bus named at all).
fn refused(bus: Option<&str>, args: &[&str]) -> Command {
    let mut cmd = pgrun(args);
    cmd.env("PGRUN_TEST_HOOK", "own-cgroup-refused").env_remove("DBUS_SESSION_BUS_ADDRESS");
    cmd.env_remove("XDG_RUNTIME_DIR");
    if let Some(address) = bus {
        cmd.env("DBUS_SESSION_BUS_ADDRESS", address);
    }
    cmd
}

fn the_one_line(err: &str) -> &str {
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected: {err}");
    lines[0]
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path has no cgroup mode")]
fn no_bus_auto_falls_back_to_tree_and_says_why() {
    let scratch = Scratch::new();
    let report = scratch.path("r.json");
    let out = run(&mut refused(None, &["-v", "--contain", "auto", "--report", report.to_str().unwrap(), "--", "true"]));
    assert_status(&out, 0, "auto without a bus");
    let err = stderr_of(&out);
    assert!(
        err.lines().any(|l| l.contains("--contain auto: no cgroup")
            && l.contains("test hook: pgrun's own cgroup gives no leaf")
            && l.contains("no session bus")
            && l.ends_with("using tree")),
        "{err}"
    );
    let report = std::fs::read_to_string(&report).unwrap();
    assert!(report.contains(r#""contain":"tree""#), "{report}");
}

#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path has no cgroup mode")]
fn no_bus_cgroup_is_125_naming_both_reasons_and_nothing_runs() {
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    for args in [&["--contain", "cgroup"][..], &["--pids-max", "10"][..]] {
        let mut all = args.to_vec();
        all.extend(["--", "touch", witness.to_str().unwrap()]);
        let out = run(&mut refused(None, &all));
        assert_status(&out, 125, &format!("{args:?} without a bus"));
        let err = stderr_of(&out);
        let line = the_one_line(&err);
        assert!(line.starts_with("pgrun: "), "{line}");
        assert!(
            line.contains("test hook: pgrun's own cgroup gives no leaf")
                && line.contains("no session bus: no DBUS_SESSION_BUS_ADDRESS, and no XDG_RUNTIME_DIR"),
            "{line}"
        );
        assert!(!witness.exists(), "the command ran");
    }
}

/// `$XDG_RUNTIME_DIR/bus` is where the bus is looked for without
/// `DBUS_SESSION_BUS_ADDRESS`: a folder without one is named.
#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path has no cgroup mode")]
fn the_runtime_dirs_bus_is_looked_for() {
    let scratch = Scratch::new();
    let out = run(refused(None, &["--contain", "cgroup", "--", "true"]).env("XDG_RUNTIME_DIR", scratch.path("")));
    assert_status(&out, 125, "no bus in XDG_RUNTIME_DIR");
    let err = stderr_of(&out);
    let bus = scratch.path("bus");
    assert!(the_one_line(&err).contains(&format!("no DBUS_SESSION_BUS_ADDRESS, and {}", bus.display())), "{err}");
}

/// A private bus of the system's dbus-daemon: no systemd on it, and no
/// service it could start on demand.
struct PrivateBus {
    daemon: Child,
    address: String,
    _scratch: Scratch,
}

impl PrivateBus {
    fn start() -> PrivateBus {
        let scratch = Scratch::new();
        let socket = scratch.path("bus");
        let config = scratch.path("bus.conf");
        std::fs::write(
            &config,
            format!(
                "<busconfig><type>session</type><listen>unix:path={}</listen>\
                 <policy context=\"default\"><allow send_destination=\"*\"/><allow receive_sender=\"*\"/><allow own=\"*\"/></policy></busconfig>",
                socket.display()
            ),
        )
        .unwrap();
        let daemon = Command::new("dbus-daemon")
            .args(["--nofork", "--nopidfile"])
            .arg(format!("--config-file={}", config.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("this test needs dbus-daemon on PATH (Debian: dbus-daemon)");
        let bus = PrivateBus { daemon, address: format!("unix:path={}", socket.display()), _scratch: scratch };
        eventually("dbus-daemon to listen", || std::os::unix::net::UnixStream::connect(&socket).is_ok());
        bus
    }
}

impl Drop for PrivateBus {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

/// A bus with no user manager on it: the refusal is the bus's own
/// answer, named.
#[test]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path has no cgroup mode")]
fn a_bus_without_a_user_manager_is_named_as_such() {
    let bus = PrivateBus::start();
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    let out = run(&mut refused(Some(&bus.address), &["--contain", "cgroup", "--", "touch", witness.to_str().unwrap()]));
    assert_status(&out, 125, "a bus without systemd");
    let err = stderr_of(&out);
    let line = the_one_line(&err);
    assert!(
        line.contains("the user's systemd refused scope pgrun-")
            && line.contains("org.freedesktop.DBus.Error.ServiceUnknown"),
        "{line}"
    );
    assert!(!witness.exists(), "the command ran");
    let out = run(&mut refused(Some(&bus.address), &["-v", "--contain", "auto", "--", "true"]));
    assert_status(&out, 0, "auto on a bus without systemd");
    assert!(stderr_of(&out).contains("ServiceUnknown"), "{}", stderr_of(&out));
}

#[cfg(target_os = "linux")]
/// A Unix socket that listens with a queue of one connection (backlog 0)
/// and never accepts: the queue is filled by connections of its own, so
/// that the next connect(2) finds it full (a blocking one would wait
/// until a place frees, which never happens).
#[cfg(target_os = "linux")]
struct FullQueue {
    _listener: std::os::unix::net::UnixListener,
    _queued: Vec<std::os::fd::OwnedFd>,
}

#[cfg(target_os = "linux")]
impl FullQueue {
    fn listen(listener: std::os::unix::net::UnixListener, address: &libc::sockaddr_un, len: libc::socklen_t) -> Self {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        // SAFETY: listen on a listening socket we own only changes its backlog.
        assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0, "listen");
        let mut queued = Vec::new();
        loop {
            assert!(queued.len() < 64, "the listen queue never filled");
            // SAFETY: plain integers; the fd is owned at once.
            let fd =
                unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
            assert!(fd >= 0, "socket");
            // SAFETY: a new socket, ours alone.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: a valid address of `len` bytes.
            let rc = unsafe { libc::connect(fd.as_raw_fd(), (address as *const libc::sockaddr_un).cast(), len) };
            if rc != 0 {
                let err = std::io::Error::last_os_error();
                assert_eq!(err.raw_os_error(), Some(libc::EAGAIN), "connect to fill the queue: {err}");
                return FullQueue { _listener: listener, _queued: queued };
            }
            queued.push(fd);
        }
    }
}

/// `address` as a sockaddr_un: a path, or (`abstract`) a name in Linux's
/// abstract namespace.
#[cfg(target_os = "linux")]
fn sockaddr(name: &[u8], abstract_name: bool) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    address.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let start = usize::from(abstract_name);
    for (i, &b) in name.iter().enumerate() {
        address.sun_path[start + i] = b as libc::c_char;
    }
    let len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + start + name.len() + usize::from(!abstract_name);
    (address, len as libc::socklen_t)
}

/// A bus whose listen queue is full: pgrun's connect does not wait for a
/// place past its patience (shortened by the test hook
/// `short-bus-patience`), it gives 125 saying the bus did not answer in
/// time; for a socket named by a path and one in the abstract namespace.
#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(feature = "posix-fallback", ignore = "the portable path has no cgroup mode")]
fn a_bus_whose_queue_is_full_ends_at_the_deadline() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    use std::time::{Duration, Instant};
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    let path = scratch.path("bus");
    let abstract_name = format!("pgrun-test-full-bus-{}", std::process::id());
    let by_path = UnixListener::bind(&path).unwrap();
    let by_name = UnixListener::bind_addr(&SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap()).unwrap();
    let (a, a_len) = sockaddr(path.as_os_str().as_bytes(), false);
    let (b, b_len) = sockaddr(abstract_name.as_bytes(), true);
    let _full = [FullQueue::listen(by_path, &a, a_len), FullQueue::listen(by_name, &b, b_len)];
    for address in [format!("unix:path={}", path.display()), format!("unix:abstract={abstract_name}")] {
        let started = Instant::now();
        let mut cmd = refused(Some(&address), &["--contain", "cgroup", "--", "touch", witness.to_str().unwrap()]);
        cmd.env("PGRUN_TEST_HOOK", "own-cgroup-refused,short-bus-patience");
        let out = run(&mut cmd);
        let took = started.elapsed();
        assert_status(&out, 125, &format!("a full queue at {address}"));
        let err = stderr_of(&out);
        let line = the_one_line(&err);
        assert!(
            line.contains("the user's systemd on the session bus") && line.contains("listen queue stayed full"),
            "{line}"
        );
        assert!(took < Duration::from_secs(10), "{address}: pgrun took {took:?} with a bus patience of 500 ms");
        assert!(!witness.exists(), "the command ran");
    }
}

/// pgrun's own cgroup is writable but offers no memory controller: that is
/// said, as it is (125), and the user's systemd is not asked for a scope
/// (it is asked only where pgrun may not make a cgroup); the leaf made to
/// find that out is removed again. pgrun runs in a cgroup made for the
/// test below one that enables nothing for its children.
#[test]
fn a_writable_cgroup_lacking_a_controller_is_125_without_asking_the_user_manager() {
    if cfg!(feature = "posix-fallback") || !require(Capability::Cgroup2) {
        return;
    }
    let (_, own) = cgroup2_folders().unwrap();
    let outer = own.join(format!("pgrun-user-scope-test-{}", std::process::id()));
    let inner = outer.join("inner");
    std::fs::create_dir(&outer).unwrap();
    std::fs::create_dir(&inner).unwrap();
    let scratch = Scratch::new();
    let witness = scratch.path("ran");
    let script = format!(
        "echo $$ > '{}/cgroup.procs' || exit 99; exec '{}' -v --memory-max 64M -- touch '{}'",
        inner.display(),
        pgrun_path(),
        witness.display()
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script]).stdin(Stdio::null()).env_remove("DBUS_SESSION_BUS_ADDRESS").env_remove("XDG_RUNTIME_DIR");
    let out = run(&mut cmd);
    let leftovers: Vec<_> = std::fs::read_dir(&inner).unwrap().flatten().filter(|e| e.path().is_dir()).collect();
    let _ = std::fs::remove_dir(&inner);
    let _ = std::fs::remove_dir(&outer);
    assert_status(&out, 125, "--memory-max in a cgroup without the memory controller");
    let err = stderr_of(&out);
    assert!(err.contains("needs the memory controller") && err.contains("does not offer"), "{err}");
    assert!(!err.contains("user's systemd") && !err.contains("session bus"), "the user manager was asked: {err}");
    assert!(leftovers.is_empty(), "cgroups left in {}: {leftovers:?}", inner.display());
    assert!(!witness.exists(), "the command ran");
}

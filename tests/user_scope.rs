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

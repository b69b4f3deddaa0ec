//! `pgrun wait --ready listen[:PORT]` and what `pgrun status --json` says
//! a run listens on (`listening`): only the run's own processes count,
//! never a socket held outside the run, even on the same port. Linux
//! only: the portable path says it cannot tell (and leaves out
//! `blocked_on_input`, whose tests are in `input_wait`).
// The portable path runs only the test that says so.
#![cfg_attr(feature = "posix-fallback", allow(dead_code, unused_imports))]

use crate::util::*;
use std::fs;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};

/// A listener for a payload: binds ADDRESS:PORT (0: any port), writes the
/// port it got to PORTFILE, waits for GATE, listens, then waits for STOP
/// and exits 0.
const LISTENER: &str = r#"
import os, socket, sys, time
address, port, portfile, gate, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
s = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET)
if ":" in address:
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
s.bind((address, port))
with open(portfile + ".tmp", "w") as f:
    f.write("%d\n" % s.getsockname()[1])
os.rename(portfile + ".tmp", portfile)
while not os.path.exists(gate):
    time.sleep(0.02)
s.listen()
while not os.path.exists(stop):
    time.sleep(0.02)
"#;

/// Start a run whose payload is [`LISTENER`] on `address`:`port`; its
/// index, and the port it bound (read once it has bound it).
fn start_listener(guard: &mut Guard, scratch: &Scratch, address: &str, port: u16) -> (usize, u16) {
    fs::write(scratch.path("listener.py"), LISTENER).unwrap();
    let dir = scratch.sh();
    let payload = format!("exec {} {dir}/listener.py {address} {port} {dir}/port {dir}/gate {dir}/stop", python3());
    let (index, _) = start_published(guard, &scratch.path("job.pid"), &[], &payload);
    let port: u16 = wait_line(&scratch.path("port")).parse().unwrap();
    (index, port)
}

/// Spawn `pgrun wait -v --ready ARG PIDFILE EXTRA...` and return once it
/// waits on the live run.
fn spawn_ready_wait(guard: &mut Guard, pidfile: &Path, arg: &str, extra: &[&str]) -> usize {
    let mut all = vec!["wait", "-v", "--ready", arg, pidfile.to_str().unwrap()];
    all.extend_from_slice(extra);
    let index = guard.spawn(pgrun(&all).stdout(Stdio::piped()).stderr(Stdio::piped()));
    read_stderr_until(guard, index, "waiting until a process of the run");
    index
}

fn ready_wait(pidfile: &Path, arg: &str, extra: &[&str]) -> std::process::Output {
    let mut all = vec!["wait", "--ready", arg, pidfile.to_str().unwrap()];
    all.extend_from_slice(extra);
    run(pgrun(&all).stdout(Stdio::piped()).stderr(Stdio::piped()))
}

fn status_json(pidfile: &Path) -> serde_json::Value {
    let out = run(pgrun(["status", "--json", pidfile.to_str().unwrap()]).stdout(Stdio::piped()));
    serde_json::from_slice(&out.stdout).expect("status --json is JSON")
}

/// The `listening` entries of `status --json`, as (port, address, pid).
fn listening(pidfile: &Path) -> Vec<(u64, String, i64)> {
    let v = status_json(pidfile);
    v["listening"]
        .as_array()
        .unwrap_or_else(|| panic!("no listening list in {v}"))
        .iter()
        .map(|l| (l["port"].as_u64().unwrap(), l["address"].as_str().unwrap().to_string(), l["pid"].as_i64().unwrap()))
        .collect()
}

/// The run's only process (the payload execs python): pgrun's descendant
/// that is not its guard.
fn payload_pid(guard: &mut Guard, index: usize) -> i64 {
    let pgrun_pid = guard.child(index).id() as i32;
    let is_guard = |p: i32| fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "pgrun-guard");
    let below: Vec<i32> = descendants(pgrun_pid).into_iter().filter(|&p| !is_guard(p)).collect();
    assert_eq!(below.len(), 1, "{below:?}");
    i64::from(below[0])
}

#[cfg(not(feature = "posix-fallback"))]
#[test]
fn ready_for_any_port_once_a_process_of_the_run_listens_never_for_a_listener_outside() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    // A listener outside the run, held by this test for the whole test.
    let outside = TcpListener::bind("127.0.0.1:0").unwrap();
    let (index, port) = start_listener(&mut guard, &scratch, "127.0.0.1", 0);
    // Bound, not listening yet; the outside listener does not count.
    let out = ready_wait(&pidfile, "listen", &["--timeout", "0.5s"]);
    assert_status(&out, 124, "wait --ready listen, with only an outside listener");
    assert_eq!(listening(&pidfile), vec![]);
    let waiter = spawn_ready_wait(&mut guard, &pidfile, "listen", &[]);
    assert!(guard.child(waiter).try_wait().unwrap().is_none(), "wait --ready returned before any listen()");
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(guard.wait(waiter), 0, "wait --ready listen");
    let pid = payload_pid(&mut guard, index);
    assert_eq!(listening(&pidfile), vec![(u64::from(port), "127.0.0.1".to_string(), pid)]);
    // ls --json gives the same object.
    let out = run(pgrun(["ls", "--json", scratch.dir().to_str().unwrap()]).stdout(Stdio::piped()));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("ls --json is JSON");
    let entry = &listed[0]["listening"][0];
    assert_eq!(
        (entry["port"].as_u64(), entry["address"].as_str(), entry["pid"].as_i64()),
        (Some(u64::from(port)), Some("127.0.0.1"), Some(pid)),
        "{listed}"
    );
    // Ready at once when it already listens.
    assert_status(&ready_wait(&pidfile, &format!("listen:{port}"), &["--timeout", "30s"]), 0, "already listening");
    drop(outside);
    fs::write(scratch.path("stop"), "").unwrap();
    assert_eq!(guard.wait(index), 0);
}

/// The test listens on 127.0.0.1:P; the run binds [::1]:P and listens once
/// told: `--ready listen:P` waits for the run's socket, not the test's.
#[cfg(not(feature = "posix-fallback"))]
#[test]
fn ready_for_a_port_counts_the_runs_ipv6_socket_not_an_outside_one_on_that_port() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("skipped: no IPv6 loopback here");
        return;
    }
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let outside = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = outside.local_addr().unwrap().port();
    let (index, bound) = start_listener(&mut guard, &scratch, "::1", port);
    assert_eq!(bound, port);
    let arg = format!("listen:{port}");
    let out = ready_wait(&pidfile, &arg, &["--timeout", "0.5s"]);
    assert_status(&out, 124, "wait --ready on a port only an outside process listens on");
    assert!(stderr_of(&out).contains(&format!("listens on TCP port {port} after --timeout")), "{}", stderr_of(&out));
    let waiter = spawn_ready_wait(&mut guard, &pidfile, &arg, &[]);
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(guard.wait(waiter), 0, "wait --ready {arg}");
    let pid = payload_pid(&mut guard, index);
    assert_eq!(listening(&pidfile), vec![(u64::from(port), "::1".to_string(), pid)]);
    // Another port is still not ready.
    let other = if port == 65535 { port - 1 } else { port + 1 };
    let out = ready_wait(&pidfile, &format!("listen:{other}"), &["--timeout", "0.2s"]);
    assert_status(&out, 124, "wait --ready on a port nobody listens on");
    drop(outside);
    fs::write(scratch.path("stop"), "").unwrap();
    assert_eq!(guard.wait(index), 0);
}

#[cfg(not(feature = "posix-fallback"))]
#[test]
fn ready_is_1_when_the_run_ends_first() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let payload = format!("while [ ! -e {dir}/gate ]; do sleep 0.02; done");
    let (index, _) = start_published(&mut guard, &pidfile, &[], &payload);
    let waiter = spawn_ready_wait(&mut guard, &pidfile, "listen", &["--timeout", "20s"]);
    fs::write(scratch.path("gate"), "").unwrap();
    assert_eq!(guard.wait(waiter), 1, "wait --ready, the run over first");
    assert_eq!(guard.wait(index), 0);
    // With no run at all: 1 too.
    let out = ready_wait(&pidfile, "listen", &["--wait-start", "0"]);
    assert_status(&out, 1, "wait --ready with no run");
}

#[test]
fn ready_rejects_what_is_not_listen_or_a_port() {
    for bad in ["connect", "listen:", "listen:0", "listen:65536", "listen:http"] {
        let out = run(pgrun(["wait", "--ready", bad, "x.pid"]).stderr(Stdio::piped()));
        assert_status(&out, 125, bad);
    }
}

/// The portable path has no /proc to read: 125, and a line that says so.
#[cfg(feature = "posix-fallback")]
#[test]
fn ready_is_not_available_on_the_portable_path() {
    let scratch = Scratch::new();
    let out = ready_wait(&scratch.path("job.pid"), "listen", &[]);
    assert_status(&out, 125, "wait --ready on the portable path");
    assert!(stderr_of(&out).contains("not available"), "{}", stderr_of(&out));
    // status --json leaves the two fields out.
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    let dir = scratch.sh();
    let (index, _) =
        start_published(&mut guard, &pidfile, &[], &format!("while [ ! -e {dir}/stop ]; do sleep 0.02; done"));
    let v = status_json(&pidfile);
    assert_eq!(v["state"], "running", "{v}");
    assert!(v.get("listening").is_none() && v.get("blocked_on_input").is_none(), "{v}");
    fs::write(scratch.path("stop"), "").unwrap();
    assert_eq!(guard.wait(index), 0);
}

/// A command of the run that bears the guard's name (`pgrun-guard`, a copy
/// of python under that name) is still the run's: its socket makes the run
/// ready and is listed, and status counts it; only the child of pgrun that
/// runs pgrun's own executable under that name is its guard.
#[cfg(not(feature = "posix-fallback"))]
#[test]
fn a_command_named_like_the_guard_is_still_the_runs() {
    let scratch = Scratch::new();
    let mut guard = Guard::new();
    let pidfile = scratch.path("job.pid");
    fs::write(scratch.path("listener.py"), LISTENER).unwrap();
    let real = run(Command::new(python3())
        .args(["-c", "import os, sys; print(os.path.realpath(sys.executable))"])
        .stdout(Stdio::piped()));
    let named = scratch.path("pgrun-guard");
    fs::copy(String::from_utf8(real.stdout).unwrap().trim(), &named).unwrap();
    fs::write(scratch.path("gate"), "").unwrap();
    let dir = scratch.sh();
    let payload = format!("exec {} {dir}/listener.py 127.0.0.1 0 {dir}/port {dir}/gate {dir}/stop", named.display());
    let (index, _) = start_published(&mut guard, &pidfile, &[], &payload);
    let port: u64 = wait_line(&scratch.path("port")).parse().unwrap();
    assert_status(&ready_wait(&pidfile, &format!("listen:{port}"), &["--timeout", "30s"]), 0, "wait --ready");
    let v = status_json(&pidfile);
    assert_eq!(v["processes"].as_u64(), Some(1), "{v}");
    assert_eq!(v["listening"][0]["port"].as_u64(), Some(port), "{v}");
    fs::write(scratch.path("stop"), "").unwrap();
    assert_eq!(guard.wait(index), 0);
}

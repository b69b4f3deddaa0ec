//! What a machine may not offer (a cgroup2 hierarchy, ...): the
//! capabilities a test requires and how a missing one fails it or, when
//! declared, skips it.

use super::*;
use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Something a test needs that a machine may not offer. The suite never
/// counts a test that could not run as passed: when the capability is
/// missing, the test fails, saying what is missing, unless whoever runs the
/// suite declares the skip with `PGRUN_TEST_SKIP_<NAME>=<reason>`; then it
/// prints `skipped: ...` and returns. On a machine that has the capability
/// the variable changes nothing: the test runs.
#[derive(Clone, Copy, Debug)]
pub enum Capability {
    /// `unshare --pid --fork --mount-proc` works (root, or user namespaces).
    PidNamespaces,
    /// Running as root with util-linux's setpriv, so a test can act as the
    /// unprivileged user nobody.
    UnprivilegedUser,
    /// `unshare --mount` works and mounts inside it (tmpfs, read-only bind
    /// mounts) are allowed: root.
    MountNamespaces,
    /// A cgroup2 hierarchy is mounted and a cgroup can be created under the
    /// suite's own (root, or a delegated subtree): `--contain cgroup`.
    Cgroup2,
}

impl Capability {
    fn env(self) -> &'static str {
        match self {
            Capability::PidNamespaces => "PGRUN_TEST_SKIP_PIDNS",
            Capability::UnprivilegedUser => "PGRUN_TEST_SKIP_NOBODY",
            Capability::MountNamespaces => "PGRUN_TEST_SKIP_MOUNTNS",
            Capability::Cgroup2 => "PGRUN_TEST_SKIP_CGROUP2",
        }
    }

    /// `Ok` if this machine has it, else why not.
    fn probe(self) -> Result<(), String> {
        let (what, mut cmd) = match self {
            Capability::Cgroup2 => return cgroup2_probe(),
            Capability::PidNamespaces => {
                let mut cmd = Command::new("unshare");
                cmd.args(["--pid", "--fork", "--mount-proc", "true"]);
                ("unshare --pid --fork --mount-proc", cmd)
            }
            Capability::UnprivilegedUser => {
                // SAFETY: geteuid has no preconditions.
                if unsafe { libc::geteuid() } != 0 {
                    return Err("the suite does not run as root, so it cannot become nobody".into());
                }
                ("setpriv --reuid=65534", as_nobody("true", &[]))
            }
            Capability::MountNamespaces => {
                let mut cmd = Command::new("unshare");
                cmd.args([
                    "--mount",
                    "--",
                    "sh",
                    "-c",
                    "d=$(mktemp -d) && mount -t tmpfs tmpfs \"$d\" && umount \"$d\"; rmdir \"$d\"",
                ]);
                ("unshare --mount with a tmpfs mount", cmd)
            }
        };
        match cmd.stdin(Stdio::null()).output() {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(format!("{what} failed: {}", String::from_utf8_lossy(&out.stderr).trim())),
            Err(e) => Err(format!("{what} cannot start: {e}")),
        }
    }
}

/// The cgroup2 mount point and the folder of the suite's own cgroup in it.
pub fn cgroup2_folders() -> Result<(PathBuf, PathBuf), String> {
    let info = fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    let (root, point) = info
        .lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let fields: Vec<&str> = left.split(' ').collect();
            (right.split(' ').next() == Some("cgroup2")).then(|| (fields[3].to_string(), fields[4].to_string()))
        })
        .ok_or("no cgroup2 file system is mounted")?;
    let own = fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    let own = own.lines().find_map(|l| l.strip_prefix("0::")).ok_or("no cgroup v2 line in /proc/self/cgroup")?;
    let rel = own.strip_prefix(root.trim_end_matches('/')).ok_or("the own cgroup is outside the mount")?;
    let point = PathBuf::from(point);
    Ok((point.clone(), point.join(rel.trim_start_matches('/'))))
}

/// A cgroup can be created (and removed) under the suite's own.
pub(super) fn cgroup2_probe() -> Result<(), String> {
    let (_, own) = cgroup2_folders()?;
    static PROBES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = own.join(format!("pgrun-test-probe-{}-{n}", std::process::id()));
    fs::create_dir(&probe).map_err(|e| format!("cannot create a cgroup at {}: {e}", probe.display()))?;
    let _ = fs::remove_dir(&probe);
    Ok(())
}

/// Whether the test may go on: true if the machine has `capability`; false
/// (after printing `skipped: ...`) if it lacks it and the skip is declared;
/// otherwise the test fails here, naming the variable that declares a skip.
pub fn require(capability: Capability) -> bool {
    let Err(why) = capability.probe() else { return true };
    let var = capability.env();
    match std::env::var(var) {
        Ok(reason) if !reason.trim().is_empty() => {
            eprintln!("skipped: {capability:?} is not available ({why}); skip declared by {var}={reason}");
            false
        }
        _ => panic!(
            "{capability:?} is not available here: {why}. This test cannot run; set {var}=<reason> to skip it knowingly"
        ),
    }
}

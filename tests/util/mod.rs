//! Helpers shared by the integration tests: running the built binary,
//! polling for files with a deadline, telling whether a process is dead, and
//! cleaning up every process a test started (and only those).
//!
//! One file a job: `command` (building and running commands), `capability`
//! (what a machine may lack), `files` (scratch folders, pipes, locks),
//! `polling`, `procfs` (what /proc says of a process), `guard` (cleaning
//! up), `runs` (pgrun runs in the background, pauses), `payloads` (the
//! canary, fifo siblings, the endless writer), `terminal` (ptys) and
//! `tracing` (strace and ptrace). Every test module takes them all with
//! `use crate::util::*`; this file holds the suite's constants and the
//! paths of what it runs.

#![allow(dead_code)]

use std::process::{Command, Stdio};
use std::time::Duration;

mod capability;
mod command;
mod files;
mod guard;
mod payloads;
mod polling;
mod procfs;
mod runs;
mod terminal;
mod tracing;

// Each target takes what it uses: the long one (tests/long.rs) uses only
// some of the parts.
#[allow(unused_imports)]
pub use {
    capability::*, command::*, files::*, guard::*, payloads::*, polling::*, procfs::*, runs::*, terminal::*, tracing::*,
};

/// Generous: the suite runs in parallel on a busy 2-core machine.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// `--timeout` values for a test whose run must time out while its command
/// is still busy (say, mid-stream): the first is short, and each next one is
/// for a retry when the command had not got far enough by then (a busy host
/// is slower, so the test takes longer instead of failing).
pub const SHORT_TIMEOUTS: [&str; 6] = ["0.25", "0.5", "1", "2", "4", "8"];

/// Whether this is the long target (tests/long.rs, `cargo test --features
/// long-tests --test long`), which compiles the loops, the fuzz test and
/// the properties at full size; every other target runs them quick.
pub fn full_size() -> bool {
    env!("CARGO_CRATE_NAME") == "long"
}

/// How many rounds a repeated or randomised test makes (stress loops, the
/// fuzz test's cases, the properties' cases): `quick` in the default suite,
/// `full` in the long target (see [`full_size`]).
pub fn rounds(quick: usize, full: usize) -> usize {
    if full_size() { full } else { quick }
}

/// The binary under test.
pub fn pgrun_path() -> &'static str {
    env!("CARGO_BIN_EXE_pgrun")
}

/// The python3 the tests run: the interpreter behind `python3` on PATH
/// (its `sys.executable`), found once. A launcher in front of it (a pyenv
/// shim is a bash script that runs `pyenv exec`, about twice python's own
/// start-up) then runs once per suite, not for each of the ~80 python3
/// processes it starts. The path is shell-safe (else `python3` itself), so
/// payloads written for `sh -c` use it as it is.
pub fn python3() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output();
        let found = match out {
            Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
            _ => String::new(),
        };
        let safe = |b: u8| b.is_ascii_alphanumeric() || b"/._-+".contains(&b);
        if found.starts_with('/') && found.bytes().all(safe) { found } else { "python3".to_string() }
    })
}

//! Whether a process waits for its stdin: not on the portable path, which
//! has no `/proc/PID/syscall` to read (Linux's: `linux/input_wait.rs`).
//! Every call says `Unsupported`; `blocked_on_input` is then left out.

use crate::sys::ids::Pid;
use std::io;

/// Whether this platform can tell: no.
pub const AVAILABLE: bool = false;

/// No `/proc` here: `Unsupported`.
pub fn waits_on_stdin(pid: Pid) -> io::Result<bool> {
    let _ = pid;
    Err(io::Error::new(io::ErrorKind::Unsupported, "not available on this platform (no /proc to read)"))
}

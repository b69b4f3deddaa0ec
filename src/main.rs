//! The `pgrun` binary: a C `main`, so that pgrun starts with the signal
//! dispositions its caller gave it.
//!
//! Rust's own `main` shim sets SIGPIPE to "ignore" before any user code
//! runs, which would both hide what the caller set and hand "ignored" on to
//! the command. With `#![no_main]` nothing is changed behind pgrun's back:
//! it blocks SIGPIPE instead, and the command inherits the caller's
//! disposition and mask exactly.
#![no_main]

use std::ffi::{CStr, OsString, c_char, c_int};
use std::os::unix::ffi::OsStringExt;

#[unsafe(no_mangle)]
extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    let args: Vec<OsString> = (0..argc.max(0) as usize)
        .map(|i| {
            // SAFETY: the C runtime passes `argc` valid, NUL-terminated
            // strings in `argv`, alive for the whole program.
            let arg = unsafe { CStr::from_ptr(*argv.add(i)) };
            OsString::from_vec(arg.to_bytes().to_vec())
        })
        .collect();
    // A panic never comes back here: pgrun's panic hook stops the run and
    // exits 125 (see `panic_stop`).
    c_int::from(pgrun::entry::main(args))
}

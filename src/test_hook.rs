//! Test-only ways to make pgrun misbehave on purpose, so that the suite can
//! prove what happens then (a panic in the supervise loop, a SIGCHLD left
//! ignored). They are named in the environment variable `PGRUN_TEST_HOOK`
//! (comma-separated) and honoured only in debug builds, the ones `cargo test`
//! runs; a release build compiles them out.

/// Make the supervise loop panic when it reads SIGUSR1.
pub const PANIC_ON_USR1: &str = "panic-on-usr1";
/// Leave a SIGCHLD ignored by the caller ignored in pgrun itself.
pub const KEEP_SIGCHLD_IGNORED: &str = "keep-sigchld-ignored";

/// Whether the hook `name` is asked for.
pub fn active(name: &str) -> bool {
    #[cfg(debug_assertions)]
    {
        std::env::var_os("PGRUN_TEST_HOOK")
            .is_some_and(|hooks| hooks.as_encoded_bytes().split(|&b| b == b',').any(|h| h == name.as_bytes()))
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = name;
        false
    }
}

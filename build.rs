//! Chooses between pgrun's Linux-only strengths (signalfd, child subreaper,
//! pidfd, /proc) and the portable POSIX paths used everywhere else.
//!
//! `cfg(linux_strengths)` is set on Linux unless the `posix-fallback`
//! feature asks for the portable paths, which lets the test suite exercise
//! them on a Linux machine too.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(linux_strengths)");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let fallback = std::env::var_os("CARGO_FEATURE_POSIX_FALLBACK").is_some();
    if linux && !fallback {
        println!("cargo::rustc-cfg=linux_strengths");
    }
}

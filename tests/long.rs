//! The long tests, opt-in: the command-line fuzz test, the parsers'
//! properties and the loops of tests/stress.rs at full size (thousands of
//! cases, hundreds of rounds). The default suite (`cargo test`) runs the
//! same code quick (`util::rounds`); CI (`.ci/run`) runs this target too:
//! `cargo test --features long-tests --test long`.

mod util;

mod fuzz;
mod load;
mod properties;
mod stress;

//! The long tests, opt-in: the command-line fuzz test, the parsers'
//! properties and the start/cancel stress loops at full size (thousands of
//! cases, hundreds of rounds; about half a minute alone on two cores). The
//! default suite (`cargo test`) runs the same code quick; CI (`.ci/run`)
//! runs this target too: `cargo test --features long-tests --test long`.

/// See `util::rounds`: the full sizes.
const FULL_SIZE: bool = true;

mod util;

mod fuzz;
mod properties;
mod stress;

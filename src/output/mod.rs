//! `--max-output SIZE` and `--output-file PATH`: the command's stdout and
//! stderr each go through a pipe that pgrun reads, so that each comes out
//! bounded (head, a marker line, tail), cut on UTF-8 character boundaries,
//! in bounded memory, or whole; and every byte of both goes to PATH in the
//! order pgrun read it; with nothing pgrun read ever lost.
//! `--idle-timeout` uses the same relay, unbounded unless `--max-output` is
//! given too, to see output go by.
//!
//! [`utf8`] knows where a cut may fall, [`limit`] is the pure cut of one
//! stream, [`file`] the output file, and [`relay`] moves the bytes: it owns
//! the pipes and is driven by the supervisor's event loop. (SIZE itself is
//! parsed by [`crate::size`], as every size is.)

pub mod file;
pub mod limit;
pub mod relay;
pub mod utf8;

pub use limit::StreamStats;
pub use relay::{Limit, RelayEnd, Relayed, StreamError};

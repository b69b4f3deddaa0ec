//! Integration tests of the built `pgrun` binary, one module per area.

mod util;

mod exit_status;
mod inheritance;
mod stopping;
